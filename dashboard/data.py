"""Cached computations behind the views - every number comes from `costmodel`.

Cache keys are plain values: the profile's JSON text, a `ScenarioSpec` (a frozen dataclass of scalars) and
numbers, never Profile or Scenario objects. All functions are pure and callable outside Streamlit (tests).
"""

from __future__ import annotations

import gc
import hashlib
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from costmodel import (
    BASELINE,
    STRATEGIES,
    InputError,
    Profile,
    bundled_profiles,
    collective_time_us,
    parse_profile,
)
from costmodel.answers import per_call
from costmodel.answers.recommend import Recommendation
from costmodel.answers.step_sweep_frame import (
    WHOLE_STEP_ANSWER,
    StepSweep,
    focus_saving_rows,
    step_sweep,
)
from costmodel.evidence.interval_table import IntervalTable, cached_interval_table
from costmodel.evidence.intervals import Interval, StrategyUncertainty, propagate
from costmodel.io.measurements import COLLECTIVE_OPS, read_measurements
from costmodel.model.drafter import DraftArch
from costmodel.model.fabrics import profile_on_fabric
from costmodel.model.points import predict_points
from costmodel.profiles.store import DATA_DIR, PROFILE_DIR, tp_placement_problem

from . import REPO_ROOT
from .state import BATCH_STEPS, IMPLS, OWN_FABRIC, ScenarioSpec
from .uploads import read_measurement_csv

FOCUS = "local_argmax_pairs"  # the strategy the verdict and heatmaps compare with the baseline
FUSED_STRATEGIES = ("local_argmax_pairs", "packed_allreduce_max")  # the strategies with fused Triton kernels
CROSSOVER_RANGE = (1.0, 65536.0)
INTERVAL_LEVEL = 0.9
SWEEP_POINTS = 65
HEAT_VOCABS = (16000, 32000, 64000, 128256, 151936, 202048, 262208)
HEAT_TPS = (1, 2, 4, 8, 16)


class ProfileText(str):
    """A profile's JSON text that st.cache_data keys by its SHA-256, computed once per text (`profile_text`)
    instead of hashing the whole text (1.5 MB for the H200 profile, ~4 ms) at every cached call of a rerun."""

    @property
    def digest(self) -> str:
        found = self.__dict__.get("_digest")
        if found is None:
            found = self.__dict__["_digest"] = hashlib.sha256(self.encode()).hexdigest()
        return found


_FROZEN: list[bool] = []


def freeze_long_lived() -> None:
    """Once per process, after the first render: move every tracked object (the parsed bundled profile, its 100
    bootstrap replicates and their stacked ensemble, the caches) to the interpreter's permanent generation
    (`gc.freeze`). Full (generation 2) collections otherwise rescan those ~160,000-300,000 objects and paused a
    rerun for 100-160 ms every few edits (timed with gc.callbacks over scripts/bench_dashboard.py). Objects created
    later are collected as usual. No `gc.collect()` first: at this point it found ~50 unreachable objects and cost
    0.1-0.25 s of the first render (measured in an AppTest run), so the few it would free stay frozen instead."""
    if not _FROZEN:
        gc.freeze()
        _FROZEN.append(True)


# cache keys: a ProfileText by its digest; a ScenarioSpec / DraftArch (frozen dataclasses of plain values) by its repr,
# which names every field (st.cache_data's default hashing of a dataclass took ~0.2 ms per argument per call)
_CACHE = {"show_spinner": False, "max_entries": 256,
          "hash_funcs": {ProfileText: lambda t: t.digest, ScenarioSpec: repr, DraftArch: repr}}


@lru_cache(maxsize=32)
def _keyed_text(text: str) -> ProfileText:
    return text if isinstance(text, ProfileText) else ProfileText(text)


@lru_cache(maxsize=32)
def bundled_profile_text(name: str) -> ProfileText:
    """JSON text of a profile shipped in data/profiles/."""
    return ProfileText((PROFILE_DIR / f"{name}.json").read_text())


@lru_cache(maxsize=16)
def parsed_profile(text: str) -> Profile:
    """Validated profile as its text builds it, without the sidebar's fabric (immutable, so sharing one object
    between reruns is safe)."""
    return parse_profile(text, source="profile")


def text_fabric(text: str) -> str | None:
    """The fabric `fabric_text` keyed this text for, or None (the profile's own)."""
    return getattr(text, "__dict__", {}).get("fabric")


@lru_cache(maxsize=32)
def fabric_text(text: ProfileText, fabric: str | None) -> ProfileText:
    """The profile text keyed apart for the sidebar's fabric (None / state.OWN_FABRIC: the text itself): the same
    JSON, a digest (st.cache_data's key) and a `fabric` that `profile_from_text` re-prices it with."""
    if fabric is None or fabric == OWN_FABRIC:
        return text
    out = ProfileText(str(text))
    out.__dict__["_digest"] = f"{text.digest}|fabric={fabric}"
    out.__dict__["fabric"] = fabric
    return out


_FABRIC_PROFILES: dict[tuple[int, str], tuple[Profile, Profile]] = {}


def profile_from_text(text: str) -> Profile:
    """Validated profile, priced over the fabric its text was keyed for (`fabric_text`; costmodel.model.fabrics)."""
    profile, fabric = parsed_profile(text), text_fabric(text)
    if fabric is None:
        return profile
    hit = _FABRIC_PROFILES.get((id(profile), fabric))
    if hit is None or hit[0] is not profile:
        if len(_FABRIC_PROFILES) >= 16:
            _FABRIC_PROFILES.pop(next(iter(_FABRIC_PROFILES)))
        hit = _FABRIC_PROFILES[(id(profile), fabric)] = (profile, profile_on_fabric(profile, fabric))
    return hit[1]


# -- verdict and breakdown at one batch ---------------------------------------------------------------
def per_draft_call(spec: ScenarioSpec) -> ScenarioSpec:
    """The spec without its hidden size (except for vLLM, whose head start is the lm_head GEMM of that hidden size:
    it moves the crossover, issue 18) and, when drafting is serial, with K = 1: a draft call then prices B rows
    whatever K is, so the per-draft-call saving - and its crossover batch - do not depend on K, and K or
    hidden-size edits reuse the cache."""
    if spec.engine != "vllm":
        spec = spec.with_(hidden=None)  # prices only vLLM's head start (costmodel.model.strategies.lm_head_us)
    return spec.with_(num_spec_tokens=1) if spec.drafting == "serial" else spec


ALTERNATIVES = tuple(name for name in STRATEGIES if name != BASELINE)


def crossover_frame(profile_text: str, spec: ScenarioSpec) -> pd.DataFrame:
    """costmodel.crossover of every strategy against the baseline over batch 1..65536 (batch-independent)."""
    return _crossover_frame(profile_text, per_draft_call(spec), ALTERNATIVES)  # as _impl_crossover_frame: one key


@st.cache_data(**_CACHE)
def _crossover_frame(profile_text: str, spec: ScenarioSpec, names: tuple[str, ...] = ALTERNATIVES) -> pd.DataFrame:
    """costmodel.answers.per_call.crossover_frame (each strategy's crossover, the grid priced once for all)."""
    return per_call.crossover_frame(spec.scenario(1), profile_from_text(profile_text), names, CROSSOVER_RANGE)


@st.cache_data(**_CACHE)
def _saving_interval_at(profile_text: str, spec: ScenarioSpec, batch: float) -> StrategyUncertainty | None:
    return propagate(spec.scenario(float(batch)), profile_from_text(profile_text), level=INTERVAL_LEVEL,
                     with_crossover=False, strategies=(FOCUS,)).get(FOCUS)


TABLE_BATCHES = np.union1d(np.arange(1, 1025), BATCH_STEPS).astype(float)  # exact intervals kept for these
_TABLES: dict[tuple[str, ScenarioSpec], IntervalTable] = {}


def _interval_table(profile_text: str, spec: ScenarioSpec) -> IntervalTable:
    """costmodel.evidence.interval_table of FOCUS at TABLE_BATCHES (and its crossover), one pass over the ensemble per
    scenario; kept in a small dict (not st.cache_data: its pickled copy of the member arrays costs per hit)."""
    key = (profile_text, spec)
    table = _TABLES.get(key)
    if table is None:
        table = cached_interval_table(spec.scenario(1.0), profile_from_text(profile_text), FOCUS, TABLE_BATCHES,
                                      profile_key=profile_text, level=INTERVAL_LEVEL, batch_range=CROSSOVER_RANGE)
        if len(_TABLES) >= 32:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = table
    return table


def saving_interval(profile_text: str, spec: ScenarioSpec, batch: float) -> StrategyUncertainty | None:
    """90% interval of the FOCUS saving (per draft and per decode step) and of its crossover batch.

    Exactly costmodel.evidence.intervals.propagate's interval (5th..95th percentile over the profile's ensemble). The
    first call for a scenario prices the ensemble once over the 257-point crossover grid of batch 1..65536 and
    every batch of TABLE_BATCHES (costmodel.evidence.interval_table: 1..1,024 and the powers of two; kept on disk by
    `cached_interval_table`, so a later process finds it), so a later batch edit there is a lookup; any other
    batch re-prices that one batch (propagate). Kept per draft call (`per_draft_call`); with serial
    drafting the decode-step interval is the draft-call interval times K (each member's saving scales by K > 0).
    """
    step_spec = per_draft_call(spec)
    table = _interval_table(profile_text, step_spec)
    at_batch = table.at(float(batch))
    if at_batch is None:
        at_batch = _saving_interval_at(profile_text, step_spec, float(batch))
    if at_batch is None:
        return None
    if spec.drafting == "serial":  # K calls per decode step
        k, draft = spec.num_spec_tokens, at_batch.saving_us
        at_batch = replace(at_batch, saving_per_decode_step_us=Interval(draft.low * k, draft.high * k, draft.level))
    return replace(at_batch, crossover_batch=table.crossover, crossover_found_fraction=table.crossover_found_fraction)


@st.cache_data(**_CACHE)
def _impl_crossover_frame(profile_text: str, spec: ScenarioSpec, shown_impl: str) -> pd.DataFrame:
    profile = profile_from_text(profile_text)
    rows: dict[str, dict[str, object]] = {name: {"strategy": name} for name in FUSED_STRATEGIES}
    for impl in IMPLS:
        # the sidebar's impl: the verdict's crossover frame (cached); the other: only the strategies shown here
        names = ALTERNATIVES if impl == shown_impl else FUSED_STRATEGIES
        try:
            table = _crossover_frame(profile_text, spec.with_(impl=impl), names).set_index("strategy")
            found = {name: (table.loc[name, "crossover_batch"], table.loc[name, "status"]) for name in rows}
        except InputError:  # one strategy's error: each priced alone, the error as its status
            found = per_call.crossover_each(spec.with_(impl=impl).scenario(1), profile, tuple(rows), CROSSOVER_RANGE)
        for name, (batch, status) in found.items():
            rows[name] |= {f"crossover_batch_{impl}": np.nan if batch is None or batch != batch else float(batch),
                           f"status_{impl}": status}
    frame = pd.DataFrame(list(rows.values()))
    frame["shift_pct"] = 100.0 * (frame["crossover_batch_fused"] / frame["crossover_batch_torch"] - 1.0)
    return frame


def impl_crossover_frame(profile_text: str, spec: ScenarioSpec) -> pd.DataFrame:
    """costmodel.crossover vs the baseline of FUSED_STRATEGIES with impl=torch and impl=fused, side by side.

    shift_pct = 100 (fused / torch - 1). The sidebar's impl reuses the verdict's crossover frame; the other impl
    prices only FUSED_STRATEGIES.
    """
    step_spec = per_draft_call(spec)
    return _impl_crossover_frame(profile_text, step_spec.with_(impl=IMPLS[0]), step_spec.impl)


# -- sweeps -------------------------------------------------------------------------------------------
def batch_grid(batch_min: float, batch_max: float, points: int = SWEEP_POINTS) -> np.ndarray:
    """Log-spaced whole batches from batch_min to batch_max (plus every power of two between)."""
    lo, hi = float(batch_min), float(max(batch_max, batch_min * 2))
    pow2 = np.asarray(BATCH_STEPS, dtype=float)
    grid = np.concatenate([np.geomspace(lo, hi, points), pow2[(pow2 >= lo) & (pow2 <= hi)]])
    return np.unique(np.round(grid))  # a batch is a count of sequences: no 1.14 in the sweep CSV (issue 18)


@st.cache_data(**_CACHE)
def sweep_frame(profile_text: str, spec: ScenarioSpec, batch_min: int, batch_max: int) -> pd.DataFrame:
    """costmodel.answers.per_call.sweep_frame over `batch_grid` (tidy, one row per batch x strategy)."""
    return per_call.sweep_frame(spec.scenario(1.0), profile_from_text(profile_text), batch_grid(batch_min, batch_max))


@st.cache_data(**_CACHE)
def _step_sweep(profile_text: str, spec: ScenarioSpec, batch_min: int, batch_max: int, arch: DraftArch) -> StepSweep:
    """costmodel.answers.step_sweep_frame.step_sweep over `batch_grid`: the whole draft step where it applies."""
    return step_sweep(spec.scenario(1.0), profile_from_text(profile_text), arch, batch_grid(batch_min, batch_max))


def sweep_answer(profile_text: str, spec: ScenarioSpec, batch_min: int, batch_max: int, arch: DraftArch
                 ) -> tuple[pd.DataFrame, StepSweep]:
    """(table, step) of the batch-sweep chart and its CSV: where an engine runs the step (`step.why` == "") the
    whole draft step per decode step of every strategy over the batch range (`step.frame`: costmodel.answers.
    step_sweep_frame, priced with `arch`, the verdict's draft), else the per-call `per_call.sweep_table` with
    `answer` = "per draft call" and `why_not_whole_draft_step` (the CLI sweep's columns; empty under engine
    none, where the per-call answer is the one asked for)."""
    step = _step_sweep(profile_text, spec, batch_min, batch_max, arch)
    if step.whole_step:
        return step.frame, step
    table = per_call.sweep_table(sweep_frame(profile_text, spec, batch_min, batch_max))
    why = "" if spec.engine == "none" else step.why
    return table.assign(why_not_whole_draft_step=why), step


def heat_batches(batch_min: int, batch_max: int) -> tuple[int, ...]:
    """Powers of two in the chart range (the heatmap's batch axis)."""
    return tuple(b for b in BATCH_STEPS if batch_min <= b <= max(batch_max, batch_min))


def heat_vocabs(spec: ScenarioSpec) -> tuple[int, ...]:
    """Draft vocabularies up to the target vocab (typical sizes, the target and the current draft vocab)."""
    values = {v for v in HEAT_VOCABS if v <= spec.vocab} | {spec.vocab, spec.draft_vocab}
    return tuple(sorted(values))


def heat_tps(spec: ScenarioSpec, profile: Profile | None = None) -> tuple[int, ...]:
    """TP sizes 1..16 (and the current one) that the current node count divides and - given the profile - that
    its nodes can hold (`tp_placement_problem`: the CLI refuses TP 16 on one 8-GPU node, so the heatmap does not
    price it)."""
    sizes = {p for p in (*HEAT_TPS, spec.tp) if p % spec.nodes == 0}
    if profile is not None:
        sizes = {p for p in sizes if tp_placement_problem(profile, p, spec.nodes) is None}
    return tuple(sorted(sizes))


def _saving_row(profile_text: str, spec: ScenarioSpec, batches: tuple[int, ...],
                arch: DraftArch | None = None) -> pd.DataFrame:
    """One heatmap row: with `arch` (the verdict answers with the whole draft step) the whole step's FOCUS saving
    per decode step (costmodel.answers.step_sweep_frame.focus_saving_rows) - InputError where the whole step is
    not the answer there (TP 1, a TP the draft's heads do not divide: the row is skipped and named, so one colour
    scale never mixes two quantities) -, else the per-call saving (costmodel.answers.per_call.focus_rows, x calls
    per decode step). `answer` says which."""
    profile = profile_from_text(profile_text)
    b = np.asarray(batches, dtype=float)
    if arch is not None:
        step = step_sweep(spec.scenario(b), profile, arch, b)
        if not step.whole_step:
            raise InputError(f"not priced as the whole draft step ({step.why})")
        return focus_saving_rows(step.frame, FOCUS).assign(batch=np.asarray(batches, dtype=int),
                                                           answer=WHOLE_STEP_ANSWER)
    return per_call.focus_rows(spec.scenario(1.0), profile, b, FOCUS)


@st.cache_data(**_CACHE)
def heat_vocab_row(profile_text: str, spec: ScenarioSpec, draft_vocab: int, batches: tuple[int, ...],
                   arch: DraftArch | None = None) -> pd.DataFrame:
    """FOCUS saving vs the baseline over the batches at one draft vocab (d2t on when below the target vocab);
    `arch` (its lm_head vocabulary set to `draft_vocab` here): the whole draft step's (`_saving_row`)."""
    row_spec = spec.with_(draft_vocab=int(draft_vocab), d2t=bool(spec.d2t or draft_vocab != spec.vocab))
    row_arch = None if arch is None else replace(arch, vocab=int(draft_vocab))
    frame = _saving_row(profile_text, row_spec, batches, row_arch)
    frame.insert(1, "draft_vocab", int(draft_vocab))
    return frame


@st.cache_data(**_CACHE)
def heat_tp_row(profile_text: str, spec: ScenarioSpec, tp: int, batches: tuple[int, ...],
                arch: DraftArch | None = None) -> pd.DataFrame:
    """FOCUS saving vs the baseline over the batches at one TP size; `arch`: the whole draft step's
    (`_saving_row`)."""
    frame = _saving_row(profile_text, spec.with_(tp=int(tp)), batches, arch)
    frame.insert(1, "tp", int(tp))
    return frame


# -- recommendation for a workload ---------------------------------------------------------------------
EXAMPLE_DIR = DATA_DIR / "examples"


def example_workloads(directory: Path = EXAMPLE_DIR) -> dict[str, str]:
    """{file name: text} of the example workloads shipped in data/examples/."""
    if not directory.is_dir():
        return {}
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.iterdir())
            if p.suffix.lower() in (".csv", ".json", ".txt")}


def example_benches(directory: Path = EXAMPLE_DIR) -> dict[str, str]:
    """{file name: text} of the example `vllm bench serve --save-result` runs in data/examples/ (the Serving A/B
    tab's examples): the JSON files."""
    return {name: text for name, text in example_workloads(directory).items() if name.lower().endswith(".json")}


def recommendation_table(rec: Recommendation) -> pd.DataFrame:
    """One row per strategy of a Recommendation (the CSV of the panel; positive saving = faster)."""
    rows = []
    for name, o in rec.strategies.items():
        im = o.impact
        rows.append({"strategy": name, "expected_saving_per_decode_step_us": o.expected_saving_per_decode_step_us,
                     "saving_low_us": np.nan if o.interval_us is None else o.interval_us[0],
                     "saving_high_us": np.nan if o.interval_us is None else o.interval_us[1],
                     "saving_pct": o.saving_pct, "win_share_pct": 100.0 * o.win_share,
                     "beats_baseline_share_pct": 100.0 * o.beats_baseline_share, "verdict": o.verdict,
                     "shipped_as": o.shipped_as or "no engine ships it",
                     "itl_reduction_pct": np.nan if im is None else im.itl_reduction_pct,
                     "output_throughput_gain_pct": np.nan if im is None else im.output_throughput_gain_pct})
    return pd.DataFrame(rows)


# -- calibration --------------------------------------------------------------------------------------
def measurement_files(profile: Profile, root: Path = REPO_ROOT) -> tuple[list[Path], list[str]]:
    """CSV files listed in provenance.files that exist inside `root` (others are reported, never read)."""
    found, notes = [], []
    root = root.resolve()
    for entry in profile.provenance.files:
        path = (root / str(entry)).resolve()
        if path.suffix.lower() != ".csv":
            continue
        if not path.is_relative_to(root):
            notes.append(f"{entry}: outside the repository, not read")
        elif not path.is_file():
            notes.append(f"{entry}: not in this checkout")
        else:
            found.append(path)
    return found, notes


@st.cache_data(**_CACHE)
def measured_points(profile_text: str, measurements_csv: str | None, root: str = str(REPO_ROOT)
                    ) -> tuple[pd.DataFrame, list[str]]:
    """Measured collective points (upload and provenance.files) next to the profile's prediction.

    costmodel.model.points.predict_points prices them (world size > 1: at p = 1 the model prices no collective);
    rel_error_pct = 100 (predicted - measured) / measured,
    the convention of costmodel.evidence.validate.
    """
    profile = profile_from_text(profile_text)
    sources, notes = [], []
    if measurements_csv:
        sources.append(("upload", lambda: read_measurement_csv(measurements_csv, "upload")))
    paths, file_notes = measurement_files(profile, Path(root))
    notes += file_notes
    sources += [(str(path.relative_to(Path(root).resolve())), lambda path=path: read_measurements(path))
                for path in paths]
    frames = []
    for label, read in sources:
        try:
            frame = read()
            rows = frame[frame["op"].isin(COLLECTIVE_OPS)]
            single = rows["world_size"] == 1
            if single.any():  # the model prices no collective at p = 1 (engines skip it): nothing to compare
                notes.append(f"{label}: {int(single.sum())} collective rows at world size 1 not plotted - the model "
                             "prices no collective at p = 1 (engines skip it); their time is host overhead")
            frames.append(predict_points(rows[~single], profile).assign(file=label))
        except InputError as exc:
            notes.append(str(exc))
    columns = ["file", "op", "world_size", "nodes", "mode", "dtype", "bytes_per_rank", "measured_median_us",
               "predicted_us", "rel_error_pct"]
    if not frames:
        return pd.DataFrame(columns=columns), notes
    out = pd.concat(frames, ignore_index=True).rename(columns={"median_us": "measured_median_us"})
    out["rel_error_pct"] = 100.0 * (out["predicted_us"] - out["measured_median_us"]) / out["measured_median_us"]
    return out[columns].sort_values(["op", "mode", "world_size", "bytes_per_rank"], ignore_index=True), notes


@st.cache_data(**_CACHE)
def fitted_curves(profile_text: str, points: pd.DataFrame, num: int = 60) -> pd.DataFrame:
    """The profile's collective_time_us over each measured group's byte range (the fitted curve)."""
    profile = profile_from_text(profile_text)
    parts = []
    for (op, ws, nodes, mode), group in points.groupby(["op", "world_size", "nodes", "mode"], sort=True):
        sizes = np.geomspace(group["bytes_per_rank"].min(), max(group["bytes_per_rank"].max(), 2.0), num)
        parts.append(pd.DataFrame({
            "op": op, "world_size": ws, "nodes": nodes, "mode": mode, "bytes_per_rank": sizes,
            "predicted_us": collective_time_us(profile, str(op), sizes, int(ws), int(nodes), str(mode)),
        }))
    if not parts:
        return pd.DataFrame(columns=["op", "world_size", "nodes", "mode", "bytes_per_rank", "predicted_us"])
    return pd.concat(parts, ignore_index=True)


# -- one evaluation of the sidebar inputs -----------------------------------------------------------------
def profile_text(name: str, uploaded: dict[str, str]) -> ProfileText:
    """JSON text of a bundled profile or of one uploaded in this session (one ProfileText object per text)."""
    if name in uploaded:
        return _keyed_text(uploaded[name])
    if name in bundled_profiles():
        return bundled_profile_text(name)
    raise InputError(f"profile {name!r}: not a bundled profile and not uploaded in this session")
