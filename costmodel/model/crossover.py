"""The crossover batch: where a strategy and the baseline swap places as the batch grows.

crossover batch: a root of B -> saving_us(B) on [batch_min, batch_max], found by scanning a log grid for sign
changes (plus exact zeros) and refining each by Brent's method (`brent.brentq_steps`: the steps of
scipy.optimize.brentq, the same iterates and roots). `crossovers` prices the grid once for every strategy and
refines all brackets in lockstep. The words every output uses are `crossover_words`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..io.errors import InputError
from ..profiles.store import default_profile
from ..profiles.types import Profile
from .brent import brentq, brentq_steps
from .components import BASELINE
from .predict import predict
from .scenario import Scenario


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
                solvers.append((name, brentq_steps(float(grid[i]), float(grid[i + 1]), xtol)))
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
