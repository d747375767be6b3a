"""The whole draft step as the answer (issue 17): what `predict`'s headline, intervals and crossovers and
`recommend` rank where an engine runs the step.

Where `--engine` names an engine, the quantity a user acts on is the decode step's K draft calls as that engine
composes them (`costmodel.model.draft_step` at the target placement: each call's drafter forward, lm_head GEMM
and logits path, pipelined without a host sync where the engine has none, so host launches the forward hides
cost nothing). Per strategy s (us per decode step; positive = s is faster):

    T_step(s)       = draft_step(...).total_us[s]
    saving(s)       = T_step(full_all_gather) - T_step(s);  saving per call = saving(s) / calls_per_decode_step
    crossover(s)    = the batches in 1..max_batch where saving(s) changes sign: a log grid of GRID_POINTS
                      batches, each bracket refined by Brent's method on draft_step (every strategy's
                      brackets in lockstep: `_lockstep_roots`, the roots of `costmodel.model.crossover.grid_roots`;
                      each step prices the baseline and the strategies with a bracket still open)
    fastest         = the valid strategy with the smallest T_step
    interval        = `costmodel.evidence.intervals.propagate_draft_step` (the project's ensemble members)

`--engine none` keeps the per-draft-call answer (`costmodel.model.predict`): there the user prices the logits
path as a synchronized microbenchmark in one --mode, and the whole draft step is context (the placement table).
`applies` says where the whole step is the answer: an engine, TP > 1, and a drafter forward the profile can price
(an lm_head GEMM model, or the user's --forward-us); elsewhere the per-call answer stands and says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..evidence.ensemble import ensemble
from ..evidence.intervals import propagate_draft_step
from ..io.errors import InputError
from ..model.brent import brentq_steps
from ..model.components import BASELINE, STRATEGIES
from ..model.crossover import Crossover
from ..model.draft_step import DraftStep, draft_step, parse_placement
from ..model.drafter import DraftArch
from ..model.members import draft_step_members
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
        return "TP 1: nothing to gather, every strategy is the same draft call"
    if profile.lm_head is None and forward_us is None:
        return "the profile has no lm_head GEMM model to price the drafter forward (give --forward-us)"
    return ""


NO_ARCH = "no draft architecture given to price the drafter forward"
UNPRICEABLE = "the whole draft step cannot be priced: "  # + the InputError (e.g. a TP not dividing the draft's heads)


def applies_with(scenario: Scenario, profile: Profile, arch: DraftArch | None, forward_us: float | None = None) -> str:
    """`applies`, and NO_ARCH where it applies but no draft architecture is given (sweep / compare)."""
    why = applies(scenario, profile, forward_us)
    return NO_ARCH if not why and arch is None else why


def priced_or_why(scenario: Scenario, profile: Profile, arch: DraftArch | None, forward_us: float | None,
                  price: Callable[[], Any]) -> tuple[Any, str]:
    """(price(), "") where the whole draft step is the answer (`applies_with` says "") and prices, else (None, why
    the per-call answer stands: `applies_with`'s reason, or UNPRICEABLE + the InputError pricing raised) - what
    compare, the sweep's step columns and the dashboard's step sweep each need."""
    why = applies_with(scenario, profile, arch, forward_us)
    if why:
        return None, why
    try:
        return price(), ""
    except InputError as exc:
        return None, f"{UNPRICEABLE}{exc}"


def _step(sc: Scenario, profile: Profile, arch: DraftArch, kv_len: int, forward_us: float | None,
          strategies: tuple[str, ...] = STRATEGIES) -> DraftStep:
    """Every strategy's (or `strategies`') whole draft step at the target placement."""
    return draft_step(sc, profile, parse_placement("target", int(np.max(sc.tp))), arch, kv_len=kv_len,
                      forward_us=forward_us, strategies=strategies)


SavingsAt = Callable[[np.ndarray, tuple[str, ...]], dict[str, np.ndarray]]


def _lockstep_roots(grid: np.ndarray, values: dict[str, np.ndarray], savings_at: SavingsAt, xtol: float = 1e-3
                    ) -> dict[str, list[float]]:
    """{strategy: grid_roots(grid, values[strategy], refine)} for every strategy at once: the same exact zeros and
    the same Brent iterates (`brent.brentq_steps`, xtol as grid_roots'), every bracket of every strategy advanced
    in lockstep - one `savings_at(batches, names)` (one draft_step over a vector of batches, element-wise in the
    batch, of the strategies `names` whose brackets are still open) per Brent step instead of one draft_step per
    evaluation."""
    roots: dict[str, set[float]] = {}
    active: list[tuple[str, Any, float]] = []
    for name, v in values.items():
        v = np.asarray(v, dtype=float)
        if not np.any(v != 0.0):  # zero everywhere: no crossover (grid_roots)
            roots[name] = set()
            continue
        roots[name] = {float(grid[i]) for i in np.flatnonzero(v == 0.0)}
        sign = np.sign(v)
        for i in np.flatnonzero(sign[:-1] * sign[1:] < 0):
            gen = brentq_steps(float(grid[i]), float(grid[i + 1]), xtol)
            active.append((name, gen, next(gen)))
    while active:
        priced = savings_at(np.array([x for _, _, x in active]), tuple(dict.fromkeys(n for n, _, _ in active)))
        moving = []
        for k, (name, gen, _) in enumerate(active):
            try:
                moving.append((name, gen, gen.send(float(priced[name][k]))))
            except StopIteration as done:
                roots[name].add(float(done.value))
        active = moving
    return {name: sorted(r) for name, r in roots.items()}


def _crossovers(grid: np.ndarray, values: dict[str, np.ndarray], savings_at: SavingsAt, hi: float
                ) -> dict[str, Crossover]:
    """The Crossover (the CLI's words, `crossover_words`) of each strategy's whole-step saving on the grid; the
    direction from the saving just above the first root (every strategy with a root in one `savings_at`)."""
    batch_range = (float(grid[0]), float(grid[-1]))
    roots = _lockstep_roots(grid, values, savings_at)
    found = [name for name in values if roots[name]]
    after = savings_at(np.array([min(roots[n][0] * 1.01 + 0.01, hi) for n in found]), tuple(found)) if found else {}
    out = {}
    for name, v in values.items():
        if name in found:
            wins = float(after[name][found.index(name)]) > 0
            out[name] = Crossover(name, roots[name][0], "wins_above" if wins else "wins_below", tuple(roots[name]),
                                  batch_range)
        elif not np.any(v):
            out[name] = Crossover(name, None, None, (), batch_range, "identical")
        else:
            out[name] = Crossover(name, None, None, (), batch_range,
                                  "wins_everywhere" if v[0] > 0 else "loses_everywhere")
    return out


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

    def savings_at(batches: np.ndarray, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        """{strategy: T_step(baseline) - T_step(strategy)} of `names` at each of `batches` (one draft_step of the
        baseline and `names` only: each strategy's T_step is its own, whichever others are priced with it)."""
        wanted = tuple(n for n in STRATEGIES if n == BASELINE or n in names)
        at = whole_step_totals(sc.with_(batch=np.asarray(batches, dtype=float)), profile, arch, kv_len=kv_len,
                               forward_us=forward_us, strategies=wanted)[0]
        return {n: at[BASELINE] - at[n] for n in names}

    crosses = _crossovers(grid, {n: base_grid - np.asarray(t, dtype=float) for n, t in swept.total_us.items()
                                 if n != BASELINE}, savings_at, max_batch)
    out: dict[str, Any] = {}
    for name, total in point.total_us.items():
        t = float(np.asarray(total).item(0))
        entry: dict[str, Any] = {"whole_draft_step_us": t, "saving_per_decode_step_us": base - t,
                                 "saving_per_draft_call_us": (base - t) / calls,
                                 "valid": bool(np.asarray(point.valid.get(name, True)).item(0))}
        if name != BASELINE:
            cross = crosses[name]
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
                      forward_us: float | None = None, strategies: tuple[str, ...] = STRATEGIES
                      ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """({strategy: T_step over sc's batches}, {strategy: valid}, calls) at the target placement, of every strategy
    or `strategies` (recommend, and `whole_step_answer`'s crossover refinements)."""
    step = _step(sc, profile, arch, kv_len, forward_us, strategies)
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
    # row m = draft_step(sc, reps[m], factors=factors[m]) at the target: every member in one stacked evaluation
    priced = draft_step_members(sc, reps, parse_placement("target", int(np.max(sc.tp))), arch, STRATEGIES, factors,
                                kv_len=kv_len, forward_us=forward_us)
    return {name: np.asarray([float(w @ row.reshape(-1)) for row in priced.saving_us(name)])
            for name in priced.total_us if name != BASELINE}


def verdict_rows(ws: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A `whole_step_answer` as the dashboard verdict's two tables (one row per strategy): the point rows
    (strategy, batch, fastest, valid, saving_per_draft_call_us = the mean per draft call, saving_pct of the
    baseline's whole step, saving_per_decode_step_us = the whole step's, whole_draft_step_us) and the crossover rows
    (strategy, crossover_batch, status, direction, text - `Crossover.to_dict`). The dashboard is a view: it shows
    these, it prices nothing."""
    base = ws["strategies"][BASELINE]["whole_draft_step_us"]
    point, cross = [], []
    for name, s in ws["strategies"].items():
        point.append({"strategy": name, "batch": ws["batch"], "fastest": name == ws["best"], "valid": s["valid"],
                      "saving_per_draft_call_us": s["saving_per_draft_call_us"],
                      "saving_pct": 100.0 * s["saving_per_decode_step_us"] / base,
                      "saving_per_decode_step_us": s["saving_per_decode_step_us"],
                      "whole_draft_step_us": s["whole_draft_step_us"]})
        c = s.get("crossover") or {"crossover_batch": None, "status": "baseline", "direction": None, "text": "-"}
        cross.append({"strategy": name, "crossover_batch": c["crossover_batch"], "status": c["status"],
                      "direction": c["direction"], "text": c["text"]})
    return point, cross

