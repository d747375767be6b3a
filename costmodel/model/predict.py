"""Evaluate every strategy for a (vectorized) scenario: totals, savings, crossovers, impact.

saving_us(strategy)                 = T_full_all_gather - T_strategy          (per draft call)
saving_per_decode_step_us(strategy) = saving_us * calls_per_decode_step       (K serial, 1 parallel)
crossover batch: a root of B -> saving_us(B) on [batch_min, batch_max], found by
scanning a log grid for sign changes and refining each by Brent's method (`_brentq_steps`: the steps of
scipy.optimize.brentq, without importing scipy - the same iterates and roots).
impact: ITL_after = ITL - saving_per_decode_step; TPOT ~ ITL / acceptance length.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..io.errors import InputError
from ..profiles.store import default_profile
from ..profiles.types import Profile
from .components import BASELINE, STRATEGIES, Component
from .exact import zero_plus_is_v
from .kernels import stacked_members
from .scenario import SCENARIO_FIELDS, Scenario
from .strategies import build_components, validity

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class StrategyResult:
    name: str
    components_us: dict[str, np.ndarray]
    total_us: np.ndarray
    wire_bytes_per_rank: np.ndarray
    valid: np.ndarray
    extrapolated: np.ndarray
    calls: dict[str, tuple] = field(default_factory=dict)


@dataclass(frozen=True)
class Prediction:
    """Result object of `predict` (all arrays have the scenario's broadcast shape)."""

    scenario: Scenario
    profile: Profile
    strategies: dict[str, StrategyResult]

    def total_us(self, name: str) -> np.ndarray:
        return self.strategies[name].total_us

    def saving_us(self, name: str, baseline: str = BASELINE) -> np.ndarray:
        """Per draft call: T_baseline - T_name (positive = name is faster)."""
        return self.strategies[baseline].total_us - self.strategies[name].total_us

    def saving_per_decode_step_us(self, name: str, baseline: str = BASELINE) -> np.ndarray:
        return self.saving_us(name, baseline) * self.scenario.calls_per_decode_step

    def saving_pct(self, name: str, baseline: str = BASELINE) -> np.ndarray:
        return 100.0 * self.saving_us(name, baseline) / self.strategies[baseline].total_us

    def best(self) -> np.ndarray:
        """Name of the fastest valid strategy per scenario."""
        names = list(self.strategies)
        best_t = best_i = None
        for i, n in enumerate(names):  # running argmin: no (strategies x scenarios) stack
            r = self.strategies[n]
            t = r.total_us if bool(np.all(r.valid)) else np.where(r.valid, r.total_us, np.inf)
            if best_t is None:
                best_t, best_i = np.array(t, dtype=float), np.zeros(np.shape(t), dtype=np.int8)
                continue
            better = np.less(t, best_t)  # strict: ties keep the earlier strategy, like argmin
            np.minimum(best_t, t, out=best_t)
            np.copyto(best_i, np.int8(i), where=better)
        return np.asarray(names, dtype=object)[best_i]  # object: 1M names share 5 strings

    def to_frame(self) -> pd.DataFrame:
        """Tidy table: one row per scenario x strategy, components as `<name>_us` columns."""
        import pandas as pd  # only here: pricing never builds a frame (the CLI's predict path loads no pandas)

        sc = self.scenario
        n = sc.size
        base = {f: np.broadcast_to(getattr(sc, f) if getattr(sc, f) is not None else np.nan, sc.shape).reshape(-1)
                for f in SCENARIO_FIELDS}
        base.update(padded_draft_vocab=np.broadcast_to(sc.padded_draft_vocab, sc.shape).reshape(-1),
                    shard=np.broadcast_to(sc.shard, sc.shape).reshape(-1),
                    rows_per_call=np.broadcast_to(sc.rows, sc.shape).reshape(-1),
                    calls_per_decode_step=np.broadcast_to(sc.calls_per_decode_step, sc.shape).reshape(-1))
        frames = []
        all_components = sorted({c for r in self.strategies.values() for c in r.components_us})
        for name, r in self.strategies.items():
            cols = dict(base)
            cols["strategy"] = np.full(n, name)
            for comp in all_components:
                value = r.components_us.get(comp)
                cols[f"{comp}_us"] = np.zeros(n) if value is None else np.broadcast_to(value, sc.shape).reshape(-1)
            cols["total_us"] = np.broadcast_to(r.total_us, sc.shape).reshape(-1)
            cols["saving_us"] = np.broadcast_to(self.saving_us(name), sc.shape).reshape(-1)
            cols["saving_per_decode_step_us"] = np.broadcast_to(self.saving_per_decode_step_us(name),
                                                                sc.shape).reshape(-1)
            cols["wire_bytes_per_rank"] = np.broadcast_to(r.wire_bytes_per_rank, sc.shape).reshape(-1)
            cols["valid"] = np.broadcast_to(r.valid, sc.shape).reshape(-1)
            cols["extrapolated"] = np.broadcast_to(r.extrapolated, sc.shape).reshape(-1)
            frames.append(pd.DataFrame(cols))
        out = pd.concat(frames, ignore_index=True)
        out.insert(0, "profile", self.profile.name)
        return out


def _broadcast(x: np.ndarray, shape: tuple) -> np.ndarray:
    """np.broadcast_to, skipped for an array that has the shape already (both read-only uses)."""
    return x if x.shape == shape else np.broadcast_to(x, shape)


def _summarize(name: str, components: dict[str, Component], scenario: Scenario, shape: tuple) -> StrategyResult:
    """Totals of the components, broadcast to `shape` (the scenario's; (members, n) for a stacked ensemble)."""
    times = {k: _broadcast(np.asarray(c.time_us, dtype=float), shape) for k, c in components.items()}

    def add(values, dtype=float):
        """((0 + v1) + v2) + ... (| for flags) over `shape`, skipping scalar zeros (no full-size pass for them).
        0.0 + v1 is v1 itself where that changes no bit (`exact.zero_plus_is_v`; False | v1 is v1 for flags): a
        one-term sum is that array (shared read-only, as the components'), a longer one starts from v1 + v2."""
        out, own = None, False
        for v in values:
            v = np.asarray(v, dtype=dtype)
            if not (v.ndim or v):
                continue
            if out is None:
                if v.shape == shape and v.flags.c_contiguous and (dtype is not float or zero_plus_is_v(v)):
                    out = v  # not ours: the next term makes a new array
                elif v.shape == shape:
                    out, own = 0.0 + v, True
                else:
                    out = np.zeros(shape, dtype=dtype) + v if dtype is float else np.zeros(shape, dtype=dtype) | v
                    own = True
            elif own and isinstance(out, np.ndarray) and out.ndim and \
                    np.broadcast_shapes(out.shape, v.shape) == out.shape:
                (np.add if dtype is float else np.bitwise_or)(out, v, out=out)
            else:
                out, own = (out + v if dtype is float else out | v), True
        return np.zeros(shape, dtype=dtype) if out is None else out

    total = _total_us(components, shape, add)
    wire = add(c.wire_bytes_per_rank for c in components.values())
    extrap = add((c.extrapolated for c in components.values()), bool)
    calls = {k: c.calls for k, c in components.items()}
    return StrategyResult(name, times, total, wire, _broadcast(validity(name, scenario), shape), extrap, calls)


def _total_us(components: dict[str, Component], shape: tuple, add) -> np.ndarray:
    """Sum of the components' GPU times in their order. When the last component is `host_exposed`, the sum of
    the others is its call's `gpu_us` (strategies._host_exposed adds them in the same order from +0.0, and adding
    a scalar +0.0 to a sum started at +0.0 changes no bit), so total = gpu_us + exposed, without re-adding them."""
    last = next(reversed(components), None)
    if last != "host_exposed" or not components[last].calls:
        return add(c.time_us for c in components.values())
    exposed = components[last]
    gpu = exposed.calls[0].args.get("gpu_us")
    if gpu is None:
        return add(c.time_us for c in components.values())
    return add((gpu, exposed.time_us))


def predict(scenario: Scenario, profile: Profile | None = None,
            strategies: tuple[str, ...] = STRATEGIES, *, factors: dict[str, float] | None = None) -> Prediction:
    """Price every strategy for `scenario` (vectorized) under `profile` (default profile if None).

    factors: per-op multipliers of GPU time (model-discrepancy draws; see strategies.build_components).
    """
    profile = profile or default_profile()
    if BASELINE not in strategies:
        strategies = (BASELINE, *strategies)
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise InputError(f"strategy: unknown {unknown[0]!r} (known: {', '.join(STRATEGIES)})")
    comps = build_components(scenario, profile, strategies, factors)
    members = stacked_members(profile)  # costmodel.model.members: (1, n) scenario x (M, 1) parameters -> (M, n)
    shape = np.broadcast_shapes(scenario.shape, (len(members), 1)) if members else scenario.shape
    return Prediction(scenario, profile, {n: _summarize(n, c, scenario, shape) for n, c in comps.items()})


# -- crossover ------------------------------------------------------------------
@dataclass(frozen=True)
class Crossover:
    """Where `strategy` and the baseline swap places as the batch grows.

    batch: the first root (float) in the range, or None ("no crossover in range").
    direction: "wins_above" (faster for batches above the root) or "wins_below".
    roots: every root found, ascending. wins_everywhere / loses_everywhere when none.
    """

    strategy: str
    batch: float | None
    direction: str | None
    roots: tuple[float, ...] = ()
    batch_range: tuple[float, float] = (1.0, 65536.0)
    status: str = "crossover"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "crossover_batch": self.batch, "direction": self.direction,
                "roots": list(self.roots), "batch_range": list(self.batch_range), "status": self.status,
                "text": self.text}

    @property
    def text(self) -> str:
        """The words every output uses (`crossover_words`)."""
        return crossover_words(self.status, self.roots, self.direction, self.extra.get("tp"))


def crossover_words(status: str, roots=(), direction: str | None = None, tp: int | None = None) -> str:
    """What a crossover says, in the same words in the CLI, JSON, CSV and dashboard (issue 18):

    identical                 "identical at TP 1 (nothing to gather)" (any other p: "identical at every batch in range")
    wins_everywhere           "wins at every batch in range"
    loses_everywhere          "never wins in range"
    crossover, one root       "35.5 (wins above)"
    crossover, several roots  "sign changes at 3.1, 40.2, 977 (wins above 3.1)" - every root, ascending
    """
    if status == "identical":
        return "identical at TP 1 (nothing to gather)" if tp == 1 else "identical at every batch in range"
    if status == "wins_everywhere":
        return "wins at every batch in range"
    if status == "loses_everywhere" or not roots:
        return "never wins in range"
    side = "above" if direction == "wins_above" else "below"
    if len(roots) == 1:
        return f"{roots[0]:.1f} (wins {side})"
    return f"sign changes at {', '.join(f'{r:.4g}' for r in roots)} (wins {side} {roots[0]:.4g})"


def _without_roots(strategy: str, values: np.ndarray, batch_range: tuple[float, float], tp: int) -> Crossover:
    """The Crossover of a saving with no sign change on the grid: identical (every value 0: nothing to gather at
    TP 1), wins everywhere or never wins."""
    if not np.any(values):
        return Crossover(strategy, None, None, (), batch_range, "identical", {"tp": tp})
    return Crossover(strategy, None, None, (), batch_range, "wins_everywhere" if values[0] > 0 else "loses_everywhere")


def grid_roots(grid: np.ndarray, values: np.ndarray, refine: Callable[[float], float] | None = None,
               xtol: float = 1e-3) -> list[float]:
    """Sign changes of `values` on an ascending batch grid (plus exact zeros), ascending.

    Each bracketing pair is refined by Brent's method (`brentq`) on `refine` (the function behind `values`) when given,
    else located by linear interpolation in log batch. A saving that is exactly 0 everywhere (TP 1: the strategies
    are the same path) has no crossover: [].
    """
    if not np.any(np.asarray(values) != 0.0):
        return []
    sign = np.sign(values)
    roots = {float(grid[i]) for i in np.flatnonzero(np.asarray(values) == 0.0)}  # exact zeros
    for i in np.flatnonzero(sign[:-1] * sign[1:] < 0):
        if refine is not None:
            roots.add(float(brentq(refine, float(grid[i]), float(grid[i + 1]), xtol)))
        else:
            t = values[i] / (values[i] - values[i + 1])
            roots.add(float(np.exp(np.log(grid[i]) + t * (np.log(grid[i + 1]) - np.log(grid[i])))))
    return sorted(roots)


def crossover(scenario: Scenario, strategy: str, profile: Profile | None = None, *, baseline: str = BASELINE,
              batch_range: tuple[float, float] = (1.0, 65536.0), grid_points: int = 257,
              xtol: float = 1e-3, refine: bool = True) -> Crossover:
    """Batch sizes where saving_us(strategy vs baseline) changes sign, for a single scenario.

    The other fields of `scenario` stay fixed; the batch is swept over `batch_range` on a
    log grid; each sign change is refined by brentq (or, with refine=False, by linear
    interpolation of the saving in log batch - cheaper, for bootstrap replicates).
    """
    profile = profile or default_profile()
    base, (lo, hi) = _single_scenario(scenario, batch_range)

    def saving(batch: Any) -> np.ndarray:
        pred = predict(base.with_(batch=batch), profile, (baseline, strategy))
        return pred.saving_us(strategy, baseline)

    grid = np.geomspace(lo, hi, grid_points)
    values = saving(grid)
    if not np.any(values) or int(base.tp) == 1:
        return _without_roots(strategy, values * (int(base.tp) != 1), (lo, hi), int(base.tp))
    return _crossover_on_grid(strategy, grid, values, saving, (lo, hi), xtol, refine)



def _single_scenario(scenario: Scenario, batch_range: tuple[float, float]) -> tuple[Scenario, tuple[float, float]]:
    """The one scenario a crossover search sweeps, and its checked batch range (InputError otherwise)."""
    if scenario.size != 1:
        raise InputError("crossover needs a single scenario (not an array)")
    lo, hi = batch_range
    if not 1 <= lo < hi:
        raise InputError(f"batch range: need 1 <= low < high, got {lo}..{hi}")
    return scenario.item(0), (lo, hi)


def _crossover_on_grid(strategy: str, grid: np.ndarray, values: np.ndarray, saving: Callable[[Any], np.ndarray],
                       batch_range: tuple[float, float], xtol: float, refine: bool) -> Crossover:
    """`crossover` from the saving already priced on the grid (`saving` prices any other batch)."""
    lo, hi = batch_range
    roots = grid_roots(grid, values, (lambda b: float(saving(b))) if refine else None, xtol)
    if not roots:
        status = "wins_everywhere" if values[0] > 0 else "loses_everywhere"
        return Crossover(strategy, None, None, (), (lo, hi), status)
    first = roots[0]
    after = float(saving(min(first * 1.01 + 0.01, hi)))
    direction = "wins_above" if after > 0 else "wins_below"
    return Crossover(strategy, first, direction, tuple(roots), (lo, hi), "crossover")


def crossovers(scenario: Scenario, strategies: tuple[str, ...], profile: Profile | None = None, *,
               baseline: str = BASELINE, batch_range: tuple[float, float] = (1.0, 65536.0), grid_points: int = 257,
               xtol: float = 1e-3, refine: bool = True) -> dict[str, Crossover]:
    """`crossover` of each strategy, the log grid priced ONCE for all of them (one predict call); each sign
    change is then refined by brentq on that strategy alone, exactly as `crossover` does (same numbers)."""
    profile = profile or default_profile()
    base, (lo, hi) = _single_scenario(scenario, batch_range)
    grid = np.geomspace(lo, hi, grid_points)
    on_grid = predict(base.with_(batch=grid), profile, (baseline, *strategies))
    values = {name: on_grid.saving_us(name, baseline) for name in strategies}

    def savings(points: list[tuple[str, float]]) -> list[float]:  # every pending (strategy, batch): one call
        # only the strategies still asked for (each strategy's total is priced on its own: the same numbers)
        asked = tuple(dict.fromkeys(name for name, _ in points if name != baseline))
        pred = predict(base.with_(batch=np.array([b for _, b in points])), profile, (baseline, *asked))
        return [float(pred.saving_us(name, baseline)[i]) for i, (name, _) in enumerate(points)]

    roots: dict[str, set[float]] = {}
    solvers: list[tuple[str, Any]] = []
    if int(base.tp) == 1:  # nothing to gather: every strategy is the baseline's one argmax
        values = {name: np.zeros_like(v) for name, v in values.items()}
    for name in strategies:
        v = values[name]
        if not np.any(v):
            continue
        roots[name] = {float(g) for g, x in zip(grid, v) if x == 0.0}
        for i in np.flatnonzero(np.sign(v[:-1]) * np.sign(v[1:]) < 0):
            if refine:
                solvers.append((name, _brentq_steps(float(grid[i]), float(grid[i + 1]), xtol)))
            else:
                t = v[i] / (v[i] - v[i + 1])
                roots[name].add(float(np.exp(np.log(grid[i]) + t * (np.log(grid[i + 1]) - np.log(grid[i])))))
    pending = [next(gen) for _, gen in solvers]  # lockstep: the brentq of every bracket at once
    while solvers:
        found = savings([(name, x) for (name, _), x in zip(solvers, pending, strict=True)])
        still, asked = [], []
        for (name, gen), f in zip(solvers, found):
            try:
                asked.append(gen.send(f))
                still.append((name, gen))
            except StopIteration as done:
                roots[name].add(float(done.value))
        solvers, pending = still, asked
    out: dict[str, Crossover] = {}
    firsts = [(name, min(min(r) * 1.01 + 0.01, hi)) for name, r in roots.items() if r]
    after = dict(zip((name for name, _ in firsts), savings(firsts) if firsts else []))
    for name in strategies:
        found_roots = sorted(roots.get(name, ()))
        if not found_roots:
            out[name] = _without_roots(name, values[name], (lo, hi), int(base.tp))
            continue
        direction = "wins_above" if after[name] > 0 else "wins_below"
        out[name] = Crossover(name, found_roots[0], direction, tuple(found_roots), (lo, hi), "crossover")
    return out


_BRENTQ_RTOL = 4 * np.finfo(float).eps  # scipy.optimize.brentq's default rtol
_BRENTQ_MAXITER = 100  # and maxiter


def _brentq_steps(xa: float, xb: float, xtol: float, rtol: float = _BRENTQ_RTOL, maxiter: int = _BRENTQ_MAXITER):
    """scipy.optimize.brentq (Brent 1973, the steps of scipy's brentq.c) as a generator: yields each x to price,
    is sent f(x), returns the root - so many brackets advance in lockstep, one vectorized call per step, with
    the same iterates (and root) as brentq on the same f."""
    xpre, xcur = xa, xb
    xblk = fblk = spre = scur = 0.0
    fpre = yield xpre
    fcur = yield xcur
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise InputError("crossover: f(a) and f(b) must have different signs")
    for _ in range(maxiter):
        if fpre != 0 and fcur != 0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:  # interpolate
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:  # extrapolate (inverse quadratic)
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):  # good short step
                spre, scur = scur, stry
            else:  # bisect
                spre = scur = sbis
        else:  # bisect
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        xcur += scur if abs(scur) > delta else (delta if sbis > 0 else -delta)
        fcur = yield xcur
    raise InputError("crossover: brentq did not converge")


def brentq(f: Callable[[float], float], a: float, b: float, xtol: float = 2e-12) -> float:
    """The root of f in [a, b] (f(a), f(b) of opposite signs) by `_brentq_steps`: scipy.optimize.brentq(f, a, b,
    xtol=xtol)'s root to the last bit, with the same evaluations (tests/evidence/test_interval_table.py)."""
    gen = _brentq_steps(a, b, xtol)
    x = next(gen)
    while True:
        try:
            x = gen.send(f(x))
        except StopIteration as done:
            return done.value


# -- ITL / TPOT impact ---------------------------------------------------------------
@dataclass(frozen=True)
class Impact:
    """Decode-step latency before/after switching from the baseline to `strategy`."""

    strategy: str
    itl_before_ms: float
    itl_after_ms: float
    tpot_before_ms: float
    tpot_after_ms: float
    speedup_pct: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def impact(saving_per_decode_step_us: float, itl_ms: float, acceptance_length: float, strategy: str = "") -> Impact:
    """ITL_after = ITL - saving/1000; TPOT = ITL / acceptance length; speedup = 1 - after/before."""
    if not np.isfinite(itl_ms) or itl_ms <= 0:
        raise InputError(f"itl-ms: must be a positive number, got {itl_ms}")
    if not np.isfinite(acceptance_length) or acceptance_length < 1:
        raise InputError(f"acceptance-length: must be >= 1 (tokens per decode step), got {acceptance_length}")
    after = itl_ms - saving_per_decode_step_us / 1000.0
    if after <= 0:
        raise InputError(f"itl-ms: {itl_ms} ms is smaller than the modelled saving; check the baseline ITL")
    return Impact(strategy, itl_ms, after, itl_ms / acceptance_length, after / acceptance_length,
                  100.0 * (itl_ms - after) / itl_ms)
