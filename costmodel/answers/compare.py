"""The same scenario on two (or more) profiles side by side: per strategy the time per draft call, the saving
versus full_all_gather and the crossover batch (`crossover.crossover`). Used by `python -m costmodel compare` and the
dashboard's compare view; no pricing of its own: each profile prices the scenario as `predict` does.

Where an engine runs the step (`whole_step.applies`), each profile's answer is the WHOLE draft step as `predict`
prices it (`whole_step.whole_step_answer`, issue 17): `whole_draft_step_us` (us per decode step) and the answer's
saving and crossover under predict's names (`saving_per_decode_step_us`, `crossover_batch`, ...), the logits path
alone per draft call next to them (`total_us`, `logits_path_saving_per_call_us`, `logits_path_crossover_batch`), and
`quantity` says which is the answer (predict's JSON wording); `compare_wide` shows the whole step where every
profile has it.

Profiles are grouped by vendor and GPU family (`family_vendor`, `gpu_family`, from `costmodel.profiles.families`) for
listings and pickers.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import pandas as pd

from ..io import safe_io
from ..io.errors import InputError
from ..model.components import BASELINE
from ..model.crossover import crossover
from ..model.drafter import DraftArch
from ..model.predict import predict
from ..model.scenario import Scenario
from ..profiles.families import FAMILIES, VENDORS, family_vendor, gpu_family
from ..profiles.parse import MAX_PROFILE_BYTES
from ..profiles.store import PROFILE_DIR, bundled_profiles, check_tp_placement
from ..profiles.types import Profile
from .provenance import provenance_cell
from .whole_step import PER_CALL, QUANTITY, priced_or_why, whole_step_answer


@lru_cache(maxsize=64)
def bundled_family(name: str) -> str:
    """GPU family of a bundled profile from its provenance.gpu, without validating the whole profile (a label; the
    profile is loaded - and validated - when it is used). A file this package ships, read with the C `json.loads`
    (~3x faster than the strict `safe_io.loads_json`, whose checks guard what users give; every profile load still
    runs them): the dashboard labels all 15 bundled profiles on its first render."""
    text = safe_io.read_bytes(PROFILE_DIR / f"{name}.json", limit_bytes=MAX_PROFILE_BYTES, what="profile")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{name}: not valid JSON ({exc})") from None
    prov = data.get("provenance") if isinstance(data, dict) else None
    gpu = prov.get("gpu") if isinstance(prov, dict) else None
    return gpu_family(gpu) if isinstance(gpu, str) else "other"


def profiles_by_family(names: list[str] | None = None) -> list[tuple[str, str]]:
    """(family, profile name) of the bundled profiles (or bundled `names`), grouped by vendor (VENDORS: NVIDIA, AMD,
    other, CPU), then ordered by FAMILIES and name."""
    names = bundled_profiles() if names is None else names
    rows = [(bundled_family(n), n) for n in names]
    return sorted(rows, key=lambda r: (VENDORS.index(family_vendor(r[0])), FAMILIES.index(r[0]), r[1]))


def compare_table(scenario: Scenario, profiles: list[Profile], *, max_batch: float = 65536.0,
                  arch: DraftArch | None = None, kv_len: int = 2048, forward_us: float | None = None) -> pd.DataFrame:
    """Long table, one row per (profile, strategy), for a single scenario: total_us (the logits path alone, per draft
    call), the answer's saving_per_draft_call_us and saving_per_decode_step_us (vs full_all_gather), crossover_batch
    (first sign change of the saving in 1..max_batch, NaN: none) and crossover (the same in words, `Crossover.text`:
    "wins at every batch in range" / "never wins in range" / the roots) - the whole draft step's where it is the
    answer (`_whole_step`: an engine, TP > 1, `arch` given; then also whole_draft_step_us, its time per decode
    step), else per draft call (x calls per decode step) -; the logits path's own saving per call and crossover
    (logits_path_saving_per_call_us, logits_path_crossover_batch: one name per quantity, as predict and sweep);
    the drafter's draft_kv_len and draft_forward_us (`kv_len`, `forward_us`: NaN where not the answer / not given),
    quantity (the answer's, as predict's JSON) and why_not_whole_draft_step; provenance
    (`answers.provenance.provenance_cell`: where each component of the profile's numbers comes from);
    `profile` labelled by `column_labels`. A TP size a profile's nodes cannot hold is an InputError naming the
    fix."""
    rows = []
    labels = column_labels([p.name for p in profiles])
    for prof, label in zip(profiles, labels, strict=True):
        check_tp_placement(prof, int(scenario.tp), int(scenario.nodes))
        pred = predict(scenario, prof)
        cell = provenance_cell(prof, scenario)
        ws, why = _whole_step(scenario, prof, arch, kv_len=kv_len, forward_us=forward_us, max_batch=max_batch)
        for name, result in pred.strategies.items():
            saving = float(pred.saving_us(name))
            cross = None if name == BASELINE else crossover(scenario, name, prof, batch_range=(1.0, max_batch))
            cross_batch = float("nan") if cross is None or cross.batch is None else cross.batch
            cross_words = "-" if cross is None else cross.text
            row = {"profile": label, "kind": prof.provenance.kind, "gpu": prof.provenance.gpu,
                   "family": gpu_family(prof.provenance.gpu), "strategy": name, "total_us": float(result.total_us),
                   "saving_per_draft_call_us": saving,
                   "saving_per_decode_step_us": float(pred.saving_per_decode_step_us(name)),
                   "crossover_batch": cross_batch, "crossover": cross_words,
                   "logits_path_saving_per_call_us": saving, "logits_path_crossover_batch": cross_batch,
                   "whole_draft_step_us": float("nan")}
            if ws:  # the whole draft step is the answer: its saving and crossover under the answer's names
                w = ws["strategies"][name]
                row.update(whole_draft_step_us=w["whole_draft_step_us"],
                           saving_per_draft_call_us=w["saving_per_draft_call_us"],
                           saving_per_decode_step_us=w["saving_per_decode_step_us"],
                           crossover_batch=_nan_if_none(w.get("crossover_batch")),
                           crossover=(w.get("crossover") or {}).get("text", "-"))
            rows.append({**row, "draft_kv_len": float(kv_len) if ws else float("nan"),
                         "draft_forward_us": _nan_if_none(forward_us if ws else None),
                         "quantity": QUANTITY if ws else PER_CALL, "why_not_whole_draft_step": why,
                         "provenance": cell})
    return pd.DataFrame(rows)


def _nan_if_none(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def _whole_step(sc: Scenario, profile: Profile, arch: DraftArch | None, **kw: Any) -> tuple[dict | None, str]:
    """(predict's `whole_step_answer` without intervals, "") where the whole draft step is the answer, else (None,
    why the per-call answer stands: `applies`' reason, no `arch`, or the error pricing it)."""
    return priced_or_why(sc, profile, arch, kw.get("forward_us"),
                         lambda: whole_step_answer(sc, profile, arch, intervals=False, **kw))


def whole_step_is_the_answer(table: pd.DataFrame) -> bool:
    """True where every compared profile's answer is the whole draft step (`compare_table`'s quantity column)."""
    return bool(len(table)) and bool((table["quantity"] == QUANTITY).all())


def column_labels(names: list[str]) -> list[str]:
    """One label per compared profile, in the order given: its name, or `name (#i)` (1-based position) when two
    profiles share a name (a profile compared with itself, or two files with the same `name`)."""
    return [n if names.count(n) == 1 else f"{n} (#{i + 1})" for i, n in enumerate(names)]


def compare_wide(table: pd.DataFrame) -> pd.DataFrame:
    """`compare_table` with one row per strategy and one column per (quantity, profile), profiles in the order they
    were given (the first argument first): the whole draft step's columns where it is every profile's answer
    (`whole_step_is_the_answer`), else the per-call ones."""
    order = list(dict.fromkeys(table["profile"]))
    values = (["whole_draft_step_us", "saving_per_decode_step_us", "crossover_batch"] if whole_step_is_the_answer(table)
              else ["total_us", "saving_per_draft_call_us", "crossover_batch"])
    wide = table.pivot(index="strategy", columns="profile", values=values)
    wide = wide.reindex(columns=[(v, p) for v in values for p in order])
    wide.columns = [f"{a}[{b}]" for a, b in wide.columns]
    return wide.reindex(list(dict.fromkeys(table["strategy"]))).reset_index()
