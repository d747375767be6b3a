"""The whole draft step as the answer (issue 17): what `predict`'s headline, intervals and crossovers and
`recommend` rank where an engine runs the step.

Where `--engine` names an engine, the quantity a user acts on is the decode step's K draft calls as that engine
composes them (`costmodel.model.draft_step` at the target placement: each call's drafter forward, lm_head GEMM
and logits path, pipelined without a host sync where the engine has none, so host launches the forward hides
cost nothing). Per strategy s (us per decode step; positive = s is faster):

    T_step(s)       = draft_step(...).total_us[s]
    saving(s)       = T_step(full_all_gather) - T_step(s);  saving per call = saving(s) / calls_per_decode_step
    crossover(s)    = the batches in 1..max_batch where saving(s) changes sign: a log grid of GRID_POINTS
                      batches, each bracket refined by Brent's method on draft_step at one batch
                      (`costmodel.model.predict.grid_roots`)
    fastest         = the valid strategy with the smallest T_step
    interval        = `costmodel.evidence.intervals.propagate_draft_step` (the project's ensemble members)

`--engine none` keeps the per-draft-call answer (`costmodel.model.predict`): there the user prices the logits
path as a synchronized microbenchmark in one --mode, and the whole draft step is context (the placement table).
`applies` says where the whole step is the answer: an engine, TP > 1, and a drafter forward the profile can price
(an lm_head GEMM model, or the user's --forward-us); elsewhere the per-call answer stands and says why.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..evidence.ensemble import ensemble
from ..evidence.intervals import propagate_draft_step
from ..model.components import BASELINE, STRATEGIES
from ..model.draft_step import DraftStep, draft_step, parse_placement
from ..model.drafter import DraftArch
from ..model.members import draft_step_members
from ..model.predict import Crossover, grid_roots
from ..model.scenario import Scenario
from ..profiles.types import Profile

GRID_POINTS = 97  # log-spaced batches in 1..max_batch (one step = 12% at 65536)
QUANTITY = ("whole draft step: the decode step's K draft calls (drafter forward + lm_head + logits path) pipelined "
            "as the engine composes them, us per decode step")
PER_CALL = "per draft call: the logits path alone (lm_head GEMM as head start), us per draft call"


def applies(scenario: Scenario, profile: Profile, forward_us: float | None = None) -> str:
    """"" where the whole draft step is the answer, else the one-line reason the per-call answer stands."""
    if str(np.asarray(scenario.engine).item(0)) == "none":
        return "engine none: the logits path alone, as one --mode prices it (the whole draft step is context)"
    if int(np.max(scenario.tp)) == 1:
        return "TP 1: nothing to gather, every strategy is the same draft step"
    if profile.lm_head is None and forward_us is None:
        return "the profile has no lm_head GEMM model to price the drafter forward (give --forward-us)"
    return ""


def _step(sc: Scenario, profile: Profile, arch: DraftArch, kv_len: int, forward_us: float | None,
          strategies: tuple[str, ...] = STRATEGIES) -> DraftStep:
    return draft_step(sc, profile, parse_placement("target", int(np.max(sc.tp))), arch, kv_len=kv_len,
                      forward_us=forward_us, strategies=strategies)


def _crossover(name: str, grid: np.ndarray, values: np.ndarray, saving, hi: float) -> Crossover:
    """The Crossover (the CLI's words, `crossover_words`) of one strategy's whole-step saving on the grid."""
    batch_range = (float(grid[0]), float(grid[-1]))
    roots = grid_roots(grid, values, saving)
    if not roots:
        if not np.any(values):
            return Crossover(name, None, None, (), batch_range, "identical")
        return Crossover(name, None, None, (), batch_range, "wins_everywhere" if values[0] > 0 else "loses_everywhere")
    after = saving(min(roots[0] * 1.01 + 0.01, hi))
    return Crossover(name, roots[0], "wins_above" if after > 0 else "wins_below", tuple(roots), batch_range)


def whole_step_answer(scenario: Scenario, profile: Profile, arch: DraftArch, *, kv_len: int = 2048,
                      forward_us: float | None = None, max_batch: float = 65536.0, intervals: bool = True,
                      level: float = 0.9) -> dict[str, Any]:
    """The whole-draft-step answer of a single scenario (module doc) as a JSON-ready dict."""
    sc = scenario.item(0)
    b0 = float(sc.batch)
    point = _step(sc, profile, arch, kv_len, forward_us)
    grid = np.geomspace(1.0, max_batch, GRID_POINTS)
    swept = _step(sc.with_(batch=grid), profile, arch, kv_len, forward_us)
    base_grid = np.asarray(swept.total_us[BASELINE], dtype=float)
    calls = point.calls
    best = str(np.asarray(point.best(), dtype=object).item(0))
    unc = propagate_draft_step(sc, profile, arch, level=level, batch_range=(1.0, max_batch), kv_len=kv_len,
                               forward_us=forward_us) if intervals else {}
    base = float(np.asarray(point.total_us[BASELINE]).item(0))
    out: dict[str, Any] = {}
    for name, total in point.total_us.items():
        t = float(np.asarray(total).item(0))
        entry: dict[str, Any] = {"total_us": t, "saving_us": base - t, "saving_per_call_us": (base - t) / calls,
                                 "valid": bool(np.asarray(point.valid.get(name, True)).item(0))}
        if name != BASELINE:
            def saving(b: float, name: str = name) -> float:
                one = _step(sc.with_(batch=float(b)), profile, arch, kv_len, forward_us, (BASELINE, name))
                return float(np.asarray(one.total_us[BASELINE]).item(0) - np.asarray(one.total_us[name]).item(0))

            cross = _crossover(name, grid, base_grid - np.asarray(swept.total_us[name], dtype=float), saving,
                               max_batch)
            entry.update(crossover=cross.to_dict(), crossover_batch=cross.batch)
            if name in unc:
                entry.update(interval=unc[name].to_dict(), verdict=unc[name].verdict)
            else:
                entry["verdict"] = "faster" if base - t > 0 else "slower" if base - t < 0 else "equal"
            if not entry["valid"]:
                entry["verdict"] = "invalid"
        out[name] = entry
    members = (f"{len(profile.bootstrap)} bootstrap replicates" if profile.bootstrap
               else "the point profile (no replicates)")
    return {"quantity": QUANTITY, "placement": "target", "calls": calls, "batch": b0, "best": best,
            "forward_source": point.forward_source, "strategies": out,
            **({"intervals": f"{level:.0%} prediction interval: {members} x per-op model discrepancy x host and "
                             "serving-term spreads (costmodel.evidence.intervals.propagate_draft_step)"}
               if intervals else {})}


def whole_step_totals(sc: Scenario, profile: Profile, arch: DraftArch, *, kv_len: int = 2048,
                      forward_us: float | None = None, factors: dict[str, float] | None = None
                      ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """({strategy: T_step over sc's batches}, {strategy: valid}, calls) at the target placement (recommend)."""
    step = draft_step(sc, profile, parse_placement("target", int(np.max(sc.tp))), arch, kv_len=kv_len,
                      forward_us=forward_us, factors=factors)
    shape = np.shape(sc.batch)
    return ({n: np.broadcast_to(np.asarray(t, dtype=float), shape) for n, t in step.total_us.items()},
            {n: np.broadcast_to(np.asarray(step.valid.get(n, True)), shape) for n in step.total_us}, step.calls)


def whole_step_member_savings(sc: Scenario, profile: Profile, arch: DraftArch, weight: np.ndarray, *,
                              with_discrepancy: bool = True, kv_len: int = 2048, forward_us: float | None = None
                              ) -> dict[str, np.ndarray]:
    """{strategy: E_w[saving of the whole draft step] under each ensemble member} (`ensemble`, as
    `propagate_draft_step`): recommend's interval of the expected saving per decode step."""
    reps, factors, _ = ensemble(profile, nodes=int(np.asarray(sc.nodes).flat[0]), with_discrepancy=with_discrepancy)
    w = np.asarray(weight, dtype=float).reshape(-1)
    # row m = whole_step_totals(sc, reps[m], factors=factors[m]): every member in one stacked evaluation
    priced = draft_step_members(sc, reps, parse_placement("target", int(np.max(sc.tp))), arch, STRATEGIES, factors,
                                kv_len=kv_len, forward_us=forward_us)
    return {name: np.asarray([float(w @ row.reshape(-1)) for row in priced.saving_us(name)])
            for name in priced.total_us if name != BASELINE}


def verdict_rows(ws: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A `whole_step_answer` as the dashboard verdict's two tables (one row per strategy): the point rows
    (strategy, batch, fastest, valid, saving_us = the mean per draft call, saving_pct of the baseline's whole step,
    saving_per_decode_step_us = the whole step's) and the crossover rows (strategy, crossover_batch, status,
    direction, text - `Crossover.to_dict`). The dashboard is a view: it shows these, it prices nothing."""
    base = ws["strategies"][BASELINE]["total_us"]
    point, cross = [], []
    for name, s in ws["strategies"].items():
        point.append({"strategy": name, "batch": ws["batch"], "fastest": name == ws["best"], "valid": s["valid"],
                      "saving_us": s["saving_per_call_us"], "saving_pct": 100.0 * s["saving_us"] / base,
                      "saving_per_decode_step_us": s["saving_us"], "total_us": s["total_us"]})
        c = s.get("crossover") or {"crossover_batch": None, "status": "baseline", "direction": None, "text": "-"}
        cross.append({"strategy": name, "crossover_batch": c["crossover_batch"], "status": c["status"],
                      "direction": c["direction"], "text": c["text"]})
    return point, cross


def verdict_inputs(sc: Scenario, profile: Profile, arch: DraftArch, focus: str
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any]:
    """(point rows, crossover rows, `focus`'s StrategyUncertainty) of the whole draft step for the dashboard's
    verdict (`verdict_rows`; the interval: `propagate_draft_step` of `focus` alone)."""
    point, cross = verdict_rows(whole_step_answer(sc, profile, arch, intervals=False))
    return point, cross, propagate_draft_step(sc, profile, arch, strategies=(focus,)).get(focus)
