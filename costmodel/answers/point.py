"""A single scenario's answer as one JSON-ready dict (what `predict --json` prints and every face reads):

* `prediction_dict`: every strategy per draft call (`costmodel.model.predict`) and its crossover;
* `add_intervals`: each strategy's 90% interval and verdict (`costmodel.evidence.intervals.propagate`);
* `add_decode_step`: the decode step's draft + verification groups and the best (strategy, collective) pair;
* `apply_whole_step`: where an engine runs the step, the whole draft step (`whole_step.whole_step_answer`) becomes
  the answer - its savings, crossover, interval and verdict replace the per-call ones; the logits path's own
  saving stays under "per_call" as `logits_path_*` (one name per quantity, issue 35);
* `add_impact`: the impact on ITL / TPOT / throughput of the answer's saving (`impact.impact_change`), once.

`costmodel.answers.answer.price` composes them; the CLI and the dashboard render the result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.collective_impls import IMPL_OPS, provenance
from ..model.components import BASELINE, DESCRIPTIONS
from ..model.crossover import crossover
from ..model.engines import PLANS, host_costs, with_overrides
from ..model.kernels import kernel_context
from ..model.predict import Prediction
from ..model.recipes import describe as describe_recipe
from ..model.serving import SERVING_CALL_US, SERVING_SOURCE
from ..model.sources import sources_dict
from ..model.verification import best_pair, decode_step, matrix_rows, verification_dict
from .engine_config import engine_cannot
from .impact import impact_change
from .table_quirks import scenario_quirks

FLAG_STRATEGY = "local_argmax_pairs"  # the strategy vLLM's use_local_argmax_reduction selects (the headline)


def prediction_dict(pred: Prediction, *, max_batch: float = 65536.0, crossovers: bool = True) -> dict[str, Any]:
    """The `predict --json` object for a single scenario; with `crossovers` each strategy's crossover batch (left
    out where the whole draft step is the answer: its crossovers are the answer's)."""
    sc, prof = pred.scenario, pred.profile
    strategies = {}
    for name, r in pred.strategies.items():
        entry: dict[str, Any] = {
            "description": DESCRIPTIONS[name],
            "recipe": describe_recipe(str(sc.engine), name),
            "total_us": float(r.total_us),
            "components": {k: float(v) for k, v in r.components_us.items()},
            "wire_bytes_per_rank": float(r.wire_bytes_per_rank),
            "valid": bool(r.valid),
            "extrapolated": bool(r.extrapolated),
            "saving_per_draft_call_us": float(pred.saving_us(name)),
            "saving_per_decode_step_us": float(pred.saving_per_decode_step_us(name)),
            "saving_pct": float(pred.saving_pct(name)),
        }
        cannot = engine_cannot(str(sc.engine), name, str(sc.collective), int(sc.top_k))
        if cannot:
            entry["engine_cannot"] = cannot
        if name != BASELINE and crossovers:
            cross = crossover(sc, name, prof, batch_range=(1.0, max_batch))
            entry["crossover_batch"] = cross.batch
            entry["crossover"] = cross.to_dict()
        else:
            entry["crossover_batch"] = None
        strategies[name] = entry
    return {
        "profile": {"name": prof.name, "title": prof.title, "kind": prof.provenance.kind,
                    "source": prof.provenance.source, "gpu": prof.provenance.gpu},
        "kernel_context": kernel_context(prof, sc),
        "scenario": sc.describe(),
        "engine": engine_dict(pred),
        "baseline": BASELINE,
        "best": str(pred.best()),
        "crossover_batch": strategies[FLAG_STRATEGY]["crossover_batch"],
        "strategies": strategies,
        **_collective_provenance(pred),
        **sources_dict(prof, sc),
        "table_quirks": scenario_quirks(prof, sc),
    }


def _collective_provenance(pred: Prediction) -> dict[str, Any]:
    """{"collective_provenance": {op: "measured" | "derived"}} for a oneshot / multimem scenario: whether the
    profile's measured curve or the derived parameters price it (costmodel.model.collective_impls.provenance)."""
    sc = pred.scenario.item(0)
    impl = str(sc.collective)
    if impl == "nccl":
        return {}
    return {"collective_provenance": {op: provenance(pred.profile, impl, op, int(sc.tp), int(sc.nodes))
                                      for op in IMPL_OPS}}


def engine_dict(pred: Prediction) -> dict[str, Any]:
    """How the step was executed: the engine's plan (with its source) or one mode for every component."""
    sc = pred.scenario.item(0)
    hc = with_overrides(host_costs(pred.profile), sc.host_op_us, sc.host_collective_us)
    name = str(sc.engine)
    out: dict[str, Any] = {"name": name, "host_torch_op_us": float(hc.torch_op_us),
                           "host_c10d_call_us": float(hc.c10d_call_us), "host_source": hc.source,
                           "serving_term_us_per_collective_call": (SERVING_CALL_US if name != "none"
                                                                   and bool(sc.serving_term) else 0.0),
                           "serving_term_source": SERVING_SOURCE}
    if name == "none":
        out.update(execution=f"--mode {sc.mode} for every component", source="user (--mode)")
    else:
        plan = PLANS[name]
        captured = ("every component in a CUDA graph" if plan.is_captured("*")
                    else "every component launched by the host")
        out.update(execution=f"{captured}; host syncs: {', '.join(sorted(plan.sync_after)) or 'none'}"
                   + ("; head start: the lm_head GEMM" if plan.head_start else ""),
                   source=plan.source, notes=list(plan.notes), engine_default_strategy=plan.default_strategy)
    return out


def add_decode_step(result: dict[str, Any], pred: Prediction, *, verify: bool, greedy_fraction: float,
                    target_dtype: str | None, max_batch: float, crossovers: bool) -> list[dict[str, Any]]:
    """`decode_step` (draft + verification groups per strategy), `verification`, `best_pair`, `matrix`; returns
    the matrix rows (`verification.matrix_rows`, with crossovers when asked: `predict --matrix-csv` writes them)."""
    sc = pred.scenario
    step = decode_step(sc, pred.profile, verify=verify, greedy_fraction=greedy_fraction, target_dtype=target_dtype)
    result["decode_step"] = {"strategies": {
        n: {"draft_us": float(step.draft_us(n)), "verify_us": float(step.verify_us(n)),
            "decode_step_us": float(step.total_us(n)), "saving_us": float(step.saving_us(n)),
            "valid": bool(step.valid(n))} for n in pred.strategies}}
    result["verification"] = verification_dict(step)
    rows = matrix_rows(sc, pred.profile, verify=verify, greedy_fraction=greedy_fraction, target_dtype=target_dtype,
                       max_batch=max_batch, crossovers=crossovers)
    result["best_pair"] = engine_best_pair(rows, str(sc.item(0).engine), int(sc.item(0).top_k))
    bp_impl, bp_sc = str(result["best_pair"]["collective"]), pred.scenario.item(0)
    if bp_impl != "nccl":  # measured where the profile has the implementation's curves (collective_impls.provenance)
        result["best_pair"]["collective_provenance"] = {
            op: provenance(pred.profile, bp_impl, op, int(bp_sc.tp), int(bp_sc.nodes)) for op in IMPL_OPS}
    result["matrix"] = [{k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()}
                        for row in rows]
    return rows


def add_intervals(result: dict[str, Any], pred: Prediction, *, max_batch: float) -> None:
    """Attach 90% bootstrap intervals (when the profile has replicates) and the verdict per strategy."""
    from ..evidence.intervals import propagate  # scipy / pandas: only with intervals (answer.py's module doc)

    unc = propagate(pred.scenario, pred.profile, batch_range=(1.0, max_batch))
    members = (f"{len(pred.profile.bootstrap)} bootstrap replicates" if pred.profile.bootstrap
               else "the point profile (no replicates)")
    result["intervals"] = f"90% prediction interval: {members} x per-op model discrepancy"
    for name, entry in result["strategies"].items():
        if name in unc:
            entry["interval"] = unc[name].to_dict()
            entry["verdict"] = unc[name].verdict
        elif name != BASELINE:
            s = entry["saving_per_draft_call_us"]
            entry["verdict"] = "faster" if s > 0 else "slower" if s < 0 else "equal"
        if name != BASELINE and not entry["valid"]:  # not exact here (fp32 ids, or packed keys at top-k > 1)
            entry["verdict"] = "invalid"


PER_CALL_KEYS = ("interval", "verdict", "crossover", "crossover_batch", "saving_per_decode_step_us")


def apply_whole_step(result: dict[str, Any], ws: dict[str, Any]) -> None:
    """Make the whole draft step (`costmodel.answers.whole_step`) the answer of a `prediction_dict`: per strategy,
    the per-call fields of PER_CALL_KEYS move under "per_call" and the whole step's take their place (saving per
    decode step, crossover, interval, verdict); "best" and "crossover_batch" become the whole step's."""
    result["whole_draft_step"] = ws
    result["answer"] = {"quantity": ws["quantity"], "per_call_best": result["best"]}
    result["best"] = ws["best"]
    base_step_us = ws["strategies"][BASELINE]["whole_draft_step_us"]
    for name, entry in result["strategies"].items():
        w = ws["strategies"][name]
        entry["per_call"] = {k: entry.pop(k) for k in PER_CALL_KEYS if k in entry}
        if entry["per_call"].get("crossover_batch", 0) is None:  # not priced per call (the answer's is below)
            del entry["per_call"]["crossover_batch"]
        entry["per_call"]["logits_path_saving_per_call_us"] = entry.pop("saving_per_draft_call_us")
        entry["per_call"]["logits_path_saving_pct"] = entry.pop("saving_pct")
        if "saving_per_decode_step_us" in entry["per_call"]:  # the logits path x calls: its own name
            entry["per_call"]["logits_path_saving_per_decode_step_us"] = entry["per_call"].pop(
                "saving_per_decode_step_us")
        # of the baseline's whole draft step
        entry["saving_pct"] = 100.0 * w["saving_per_decode_step_us"] / base_step_us
        entry["saving_per_draft_call_us"] = w["saving_per_draft_call_us"]  # the whole step's, per draft call (mean)
        entry["saving_per_decode_step_us"] = w["saving_per_decode_step_us"]
        entry["whole_draft_step_us"] = w["whole_draft_step_us"]
        for key in ("crossover", "crossover_batch", "interval", "verdict"):
            if key in w:
                entry[key] = w[key]
        if name == BASELINE:
            entry["crossover_batch"] = None  # as under engine none: no crossover against itself
    result["crossover_batch"] = result["strategies"][FLAG_STRATEGY].get("crossover_batch")


def add_impact(result: dict[str, Any], itl_ms: float, acceptance_length: float) -> None:
    """Each strategy's impact on ITL / TPOT / output throughput (`impact.impact_change`), once, from the answer's
    saving per decode step and its 90% interval (the whole draft step's where it is the answer: call it after
    `add_intervals` / `apply_whole_step`), so every strategy has one ITL."""
    for name, entry in result["strategies"].items():
        iv = (entry.get("interval") or {}).get("saving_per_decode_step_us")
        entry["impact"] = impact_change(float(entry["saving_per_decode_step_us"]), itl_ms, acceptance_length, name,
                                        None if iv is None else (iv["low"], iv["high"])).to_dict()


def impact_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The impact on ITL / TPOT / output throughput of every alternative strategy, one row each, as a point answer
    holds it (`prediction_dict` with a baseline ITL and acceptance length; the whole draft step's where it is the
    answer: `apply_whole_step`); [] without an ITL. NaN where a strategy has no interval."""
    rows = []
    for name, s in result["strategies"].items():
        im = s.get("impact")
        if name == BASELINE or im is None:
            continue
        band = (s.get("interval") or {}).get("saving_per_decode_step_us") or {}
        gain = im.get("output_throughput_gain_pct_interval") or {}
        rows.append({"strategy": name, "saving_per_decode_step_us": float(s["saving_per_decode_step_us"]),
                     "saving_low_us": float(band.get("low", np.nan)), "saving_high_us": float(band.get("high", np.nan)),
                     "itl_before_ms": im["itl_before_ms"], "itl_after_ms": im["itl_after_ms"],
                     "itl_reduction_pct": im["itl_reduction_pct"], "tpot_before_ms": im["tpot_before_ms"],
                     "tpot_after_ms": im["tpot_after_ms"],
                     "output_throughput_gain_pct": im["output_throughput_gain_pct"],
                     "output_throughput_gain_low_pct": float(gain.get("low", np.nan)),
                     "output_throughput_gain_high_pct": float(gain.get("high", np.nan))})
    return rows


def engine_best_pair(rows, engine: str, top_k: int = 1) -> dict[str, Any]:
    """`verification.best_pair` of a matrix (its rows or its frame), with `engine_cannot` where the engine cannot
    run that pair (`engine_config.engine_cannot`): predict's, recommend's and the dashboard's best pair."""
    pair = best_pair(rows)
    cannot = engine_cannot(engine, str(pair["strategy"]), str(pair["collective"]), top_k)
    if cannot:
        pair["engine_cannot"] = cannot
    return pair
