"""Sweeps: the cartesian product of model fields x scenario values, priced in one vectorized call.

`sweep_table` builds an Arrow table straight from the `predict` arrays (one row per scenario x
strategy, strategy-major like `Prediction.to_frame`, the scenario columns - profile, vocab, draft
vocab, d2t, TP, nodes, batch, dtype, K, drafting, mode, impl, engine, ... - on every row so a file
stands alone); `write_sweep` writes it as CSV (pyarrow's multi-threaded writer) or Parquet.
Building pandas frames and `DataFrame.to_csv` took ~13 s for 196,608 scenarios x 5 strategies;
see `scripts/bench_sweep.py`.

Impossible combinations inside a grid - a TP size that does not divide the padded draft vocab
(vLLM refuses it), or nodes that do not divide the TP size - are not an error for a sweep: their
rows are kept with `valid = false`, empty times and `invalid_reason` saying why. Any other bad
value (batch < 1, an unknown dtype, ...) is still a one-line error.

Where an engine runs the step, the answer of a row is the WHOLE draft step as `predict` prices it
(`costmodel.answers.sweep_step`, issue 17): `whole_draft_step_us` (us per decode step), `saving_per_decode_step_us`
(versus full_all_gather, us per decode step: the answer, as `predict --json` names it) and
`saving_per_draft_call_us` (its mean per draft call), with `answer` = "whole draft step" and `mode` = "engine"
(the engine's plan sets each component's execution); `total_us`, the `<component>_us` columns
and `logits_path_saving_per_call_us` stay the
logits path alone, per draft call. Under engine none (or where the whole step does not apply:
`why_not_whole_draft_step`) `whole_draft_step_us` is empty, `answer` = "per draft call" and the savings are the
logits path's (x calls per decode step). A Parquet file carries
predict's full wording of both quantities in its schema metadata (`quantity`, `per_call`).

Text cells go through `safe_io.safe_cell` (a profile named "=cmd" is written as "'=cmd"). The `provenance`
column says where each row's numbers come from (`answers.provenance.provenance_cell`, one text per distinct TP /
nodes / engine / mode of the grid; empty on invalid rows).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..io.errors import InputError
from ..io.outputs import atomic_path
from ..io.safe_io import safe_cell
from ..model.components import STRATEGIES
from ..model.drafter import DraftArch
from ..model.engines import host_costs
from ..model.predict import predict
from ..model.scenario import SCENARIO_FIELDS, Scenario, padded_vocab
from ..profiles.store import tp_placement_problem
from ..profiles.types import Profile
from .provenance import provenance_cell
from .sweep_step import ANSWERS, step_columns
from .whole_step import PER_CALL, QUANTITY

FORMATS = ("csv", "parquet")


def _grid_arrays(models: list[dict[str, Any]], grid: dict[str, list]
                 ) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, list]]]:
    """Flat columns of the product, and for each column its (codes, distinct values) - text columns
    become dictionary arrays from these without sorting or hashing 200k strings."""
    axes = [np.arange(len(models))] + [np.arange(len(v)) for v in grid.values()]
    codes = [m.reshape(-1) for m in np.meshgrid(*axes, indexing="ij")]
    idx = codes[0]
    cats: dict[str, tuple[np.ndarray, list]] = {}

    def model_values(key: str, default: Any) -> list:
        return [default if m.get(key) is None else m[key] for m in models]

    hidden = model_values("hidden", 0)
    keys = ["vocab", "draft_vocab", "d2t"] + (["hidden"] if all(h > 0 for h in hidden) else [])
    keys += [k for k in dict.fromkeys(k for m in models for k in m) if k not in keys and k != "hidden"]
    for key in keys:
        default = {"vocab": 0, "draft_vocab": 0, "d2t": False}.get(key, _default(key))
        cats[key] = (idx, model_values(key, default))
    for (key, values), code in zip(grid.items(), codes[1:], strict=True):
        cats[key] = (code, list(values))
    cols = {key: np.asarray(values)[code] for key, (code, values) in cats.items()}
    return cols, cats


def _invalid_reason(cols: dict[str, np.ndarray], profile: Profile | None = None) -> tuple[np.ndarray, list[str]]:
    """Codes into [''] + reasons: 0 where the scenario is possible, else why not (TP vs padded vocab,
    nodes vs TP, TP per node above the profile's GPUs per node: profile.tp_placement_problem)."""
    n = len(cols["vocab"])
    tp = np.broadcast_to(cols.get("tp", 8), n)
    nodes = np.broadcast_to(cols.get("nodes", 1), n)
    v_pad = padded_vocab(cols["draft_vocab"])
    codes = np.zeros(n, dtype=np.int32)
    reasons = [""]
    bad_tp = v_pad % tp != 0
    for p, v in sorted({(int(a), int(b)) for a, b in zip(tp[bad_tp], v_pad[bad_tp])}):
        codes[bad_tp & (tp == p) & (v_pad == v)] = len(reasons)
        reasons.append(f"TP size {p} does not divide the padded draft vocab {v}")
    bad_nodes = (tp % nodes != 0) & (codes == 0)
    if bad_nodes.any():
        codes[bad_nodes] = len(reasons)
        reasons.append("nodes must divide the TP size")
    per_node = None if profile is None else profile.provenance.gpus_per_node
    if per_node is not None:
        over = (-(-tp // np.maximum(nodes, 1)) > per_node) & (codes == 0)
        for p, nn in sorted({(int(a), int(b)) for a, b in zip(tp[over], nodes[over])}):
            codes[over & (tp == p) & (nodes == nn)] = len(reasons)
            reasons.append(tp_placement_problem(profile, p, nn))
    return codes, reasons


SOURCE_KEYS = ("tp", "nodes", "engine", "mode")  # what decides which curve / plan prices a row (model.sources)


def _provenance_codes(cols: dict[str, np.ndarray], cats: dict[str, tuple[np.ndarray, list]], ok: np.ndarray,
                      profile: Profile) -> tuple[np.ndarray, list[str]]:
    """(code per row, texts): `provenance_cell` of each distinct SOURCE_KEYS combination among the valid rows,
    computed once per combination from the grid's integer codes; code 0 = "" (invalid rows)."""
    n = len(ok)
    combined = np.zeros(n, dtype=np.int64)
    for key in SOURCE_KEYS:
        if key in cats:
            code, values = cats[key]
            combined = combined * max(len(values), 1) + np.asarray(code, dtype=np.int64)
    texts = [""]
    out = np.zeros(n, dtype=np.int32)
    if not ok.any():
        return out, texts
    uniq, first, inverse = np.unique(np.where(ok, combined, -1), return_index=True, return_inverse=True)
    for j, (u, i) in enumerate(zip(uniq, first, strict=True)):
        if u < 0:
            continue
        texts.append(provenance_cell(profile, Scenario(**{k: v[i:i + 1] for k, v in cols.items()})))
        out[inverse.reshape(-1) == j] = len(texts) - 1
    return out, texts


_HOST_FIELDS = {"host_op_us": "torch_op_us", "host_collective_us": "c10d_call_us"}  # Scenario -> HostCosts


def _default(name: str) -> Any:
    return next(f.default for f in fields(Scenario) if f.name == name)


def _text_column(codes: np.ndarray, values: list, n_strategies: int) -> pa.Array:
    """A text column repeated for every strategy block, as a dictionary array (formula-safe cells)."""
    uniq = list(dict.fromkeys(str(v) for v in values))
    remap = np.asarray([uniq.index(str(v)) for v in values], dtype=np.int32)
    block = pa.DictionaryArray.from_arrays(pa.array(remap[np.asarray(codes)]), pa.array([safe_cell(u) for u in uniq]))
    return pa.chunked_array([block] * n_strategies)


def _column(values: np.ndarray, n_strategies: int, mask: np.ndarray | None = None) -> pa.ChunkedArray:
    """A numeric / boolean scenario column repeated for every strategy block (nulls where `mask`); the
    blocks share one buffer (a chunked array), nothing is copied per strategy."""
    block = pa.array(np.ascontiguousarray(values), mask=mask)
    return pa.chunked_array([block] * n_strategies)


def _groups(cats: dict[str, tuple[np.ndarray, list]], grid: dict[str, list]) -> np.ndarray:
    """One integer per row, equal where the model and every swept value but the batch are (`step_columns`'s
    groups; at most the grid's size, so no overflow)."""
    group = np.asarray(cats["vocab"][0], dtype=np.int64)  # the model's index
    for key in grid:
        if key != "batch":
            code, values = cats[key]
            group = group * max(len(values), 1) + np.asarray(code, dtype=np.int64)
    return group


def sweep_table(models: list[dict[str, Any]], grid: dict[str, list], profile: Profile,
                strategies: tuple[str, ...] = STRATEGIES, archs: list[DraftArch | None] | None = None, *,
                kv_len: int = 2048, forward_us: float | None = None) -> pa.Table:
    """Every model x grid combination x strategy as one Arrow table (see the module docstring). archs: each
    model's draft architecture (lm_head vocabulary = its draft vocab), what prices the whole draft step under an
    engine; None: the per-call answer stands on every row. kv_len / forward_us: the drafter's KV length and
    measured forward per draft call (`step_columns`), written as `draft_kv_len` / `draft_forward_us` on the rows
    whose answer is the whole step (empty elsewhere; `draft_forward_us` empty where derived, not given)."""
    cols, cats = _grid_arrays(models, grid)
    n = len(cols["vocab"])
    reason_codes, reasons = _invalid_reason(cols, profile)
    ok = reason_codes == 0
    every = bool(ok.all())
    scenario = None
    if ok.any():
        scenario = Scenario(**(cols if every else {k: v[ok] for k, v in cols.items()}))
    pred = predict(scenario, profile, strategies) if scenario is not None else None
    names = list(pred.strategies) if pred is not None else list(strategies)
    s_count = len(names)
    mask = None if every else ~ok

    def full(values: Any, fill: Any = np.nan, dtype: Any = float) -> np.ndarray:
        """Per-valid-scenario values scattered into all n rows (fill elsewhere)."""
        if every:
            return np.broadcast_to(np.asarray(values, dtype=dtype), (n,))
        out = np.full(n, fill, dtype=dtype)
        if scenario is not None:
            out[ok] = np.broadcast_to(np.asarray(values, dtype=dtype), scenario.shape)
        return out

    table: dict[str, pa.Array | pa.ChunkedArray] = {
        "profile": _text_column(np.zeros(n, dtype=np.int32), [profile.name], s_count)}
    for f in SCENARIO_FIELDS:
        if f in cats:
            code, values = cats[f]
        else:  # not swept: one value for every row (the scenario's, else the dataclass default)
            value = getattr(scenario, f) if scenario is not None else _default(f)
            if value is None and f in _HOST_FIELDS:  # not given: the host costs that priced the rows
                value = getattr(host_costs(profile), _HOST_FIELDS[f])
            if value is None:
                table[f] = pa.nulls(n * s_count, pa.float64())
                continue
            code, values = np.zeros(n, dtype=np.int32), [np.asarray(value).reshape(-1)[0].item()]
        if isinstance(values[0], str):
            table[f] = _text_column(code, values, s_count)
        else:
            arr = np.asarray(values, dtype=float if f == "batch" else None)
            table[f] = _column(arr[code], s_count)
    derived = (("padded_draft_vocab", "padded_draft_vocab", np.int64), ("shard", "shard", np.int64),
               ("rows_per_call", "rows", float), ("calls_per_decode_step", "calls_per_decode_step", np.int64))
    for key, attr, dtype in derived:
        values = getattr(scenario, attr) if scenario is not None else 0
        table[key] = _column(full(values, 0, dtype), s_count, mask)
    strategy_names = pa.array(names)
    table["strategy"] = pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array(np.full(n, i, dtype=np.int32)),
                                                                          strategy_names) for i in range(s_count)])

    def stacked(get: Any, dtype: Any = float, fill: Any = np.nan, nulls: bool = True) -> pa.ChunkedArray:
        """One chunk per strategy block (zero-copy from the predict arrays where they are contiguous)."""
        return pa.chunked_array([pa.array(np.ascontiguousarray(full(get(s), fill, dtype)),
                                          mask=mask if nulls else None) for s in names])

    def step_stacked(get: Any) -> pa.ChunkedArray:
        """`stacked` with NaN (the per-call answer stands: no whole step) as null."""
        return pa.chunked_array([pa.array(v, mask=np.isnan(v)) for v in (full(get(s)) for s in names)])

    if pred is not None:
        components = sorted({c for r in pred.strategies.values() for c in r.components_us})
        for comp in components:
            table[f"{comp}_us"] = stacked(lambda s, c=comp: pred.strategies[s].components_us.get(c, 0.0))
        table["total_us"] = stacked(lambda s: pred.strategies[s].total_us)
        steps = step_columns(scenario, _groups(cats, grid)[ok], cats["vocab"][0][ok], profile, archs, names,
                             kv_len=kv_len, forward_us=forward_us)
        whole = steps.answer == 1
        calls = np.asarray(scenario.calls_per_decode_step, dtype=float)

        def answer_saving(s: str, per_decode: bool) -> np.ndarray:
            """The row's answer: the whole draft step's saving where it is the answer, else the per-call one."""
            per_call = np.asarray(pred.saving_us(s), dtype=float)
            step = np.asarray(steps.saving_us(s), dtype=float)
            return full(np.where(whole, step if per_decode else step / calls,
                                 per_call * (calls if per_decode else 1.0)))

        table["saving_per_draft_call_us"] = pa.chunked_array(
            [pa.array(answer_saving(s, False), mask=mask) for s in names])
        table["saving_per_decode_step_us"] = pa.chunked_array(
            [pa.array(answer_saving(s, True), mask=mask) for s in names])
        table["logits_path_saving_per_call_us"] = stacked(lambda s: pred.saving_us(s))
        table["whole_draft_step_us"] = step_stacked(lambda s: steps.step_us[s])
        for key, value in (("draft_kv_len", kv_len), ("draft_forward_us", forward_us)):
            table[key] = step_stacked(lambda s, v=value: np.where(whole, np.nan if v is None else float(v), np.nan))
        answer = full(steps.answer + 1, 0, np.int32)
        why_codes, whys = steps.why
        why = full(why_codes, 0, np.int32)
        table["wire_bytes_per_rank"] = stacked(lambda s: pred.strategies[s].wire_bytes_per_rank)
        table["valid"] = stacked(lambda s: pred.strategies[s].valid, bool, False, nulls=False)
        table["extrapolated"] = stacked(lambda s: pred.strategies[s].extrapolated, bool, False, nulls=False)
    else:
        for key in ("total_us", "saving_per_draft_call_us", "saving_per_decode_step_us",
                    "logits_path_saving_per_call_us", "whole_draft_step_us", "draft_kv_len", "draft_forward_us",
                    "wire_bytes_per_rank"):
            table[key] = pa.nulls(n * s_count, pa.float64())
        answer, why, whys = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int32), [""]
        table["valid"] = pa.array(np.zeros(n * s_count, dtype=bool))
        table["extrapolated"] = pa.array(np.zeros(n * s_count, dtype=bool))
    table["answer"] = _text_column(answer, ["", *ANSWERS], s_count)
    if "engine" in table and "mode" in table:  # an engine's plan sets each component's execution: no one mode
        engine_rows = pc.not_equal(pc.cast(table["engine"], pa.string()), "none")
        table["mode"] = pc.if_else(engine_rows, "engine", pc.cast(table["mode"], pa.string()))
    table["why_not_whole_draft_step"] = _text_column(why, whys, s_count)
    table["invalid_reason"] = _text_column(reason_codes, reasons, s_count)
    table["provenance"] = _text_column(*_provenance_codes(cols, cats, ok, profile), s_count)
    return pa.table(table).replace_schema_metadata({"quantity": QUANTITY, "per_call": PER_CALL})


def write_sweep(table: pa.Table, out: str | Path | None, fmt: str = "csv", inputs: Iterable[Any] = ()) -> None:
    """CSV (header + one row per line) or Parquet to `out`; None or '-' writes to stdout. A file is written
    atomically and never over one of `inputs` (`costmodel.io.outputs.atomic_path`)."""
    if fmt not in FORMATS:
        raise ValueError(fmt)
    to_stdout = out in (None, "-")
    binary = getattr(sys.stdout, "buffer", None) if to_stdout else None
    if fmt == "parquet":
        import pyarrow.parquet as pq

        if to_stdout:
            if binary is None:
                raise InputError("--format parquet: stdout is not binary; pass --out FILE")
            buf = io.BytesIO()
            pq.write_table(table, buf)
            binary.write(buf.getvalue())
            binary.flush()
        else:
            with atomic_path(out, inputs, what="--out") as tmp:
                pq.write_table(table, str(tmp))
        return
    import pyarrow.csv as pcsv

    options = pcsv.WriteOptions(include_header=True, quoting_style="needed")
    if not to_stdout:
        with atomic_path(out, inputs, what="--out") as tmp:
            pcsv.write_csv(table, str(tmp), write_options=options)
        return
    sys.stdout.flush()
    if binary is not None:
        pcsv.write_csv(table, binary, write_options=options)
        binary.flush()
    else:  # a text-only stdout (an embedding, a test harness)
        buf = io.BytesIO()
        pcsv.write_csv(table, buf, write_options=options)
        sys.stdout.write(buf.getvalue().decode("utf-8"))
