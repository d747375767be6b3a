"""Uncertainty end to end: push a profile's bootstrap parameter sets through the strategy model.

A profile may carry `bootstrap`: a list of replicate parameter sets, each an
object with `collectives` (a full curve list) and/or `kernels` (a partial
kernels object merged over the profile's). Each replicate is a complete
profile; pricing the scenario under every replicate gives a distribution of
each saving and of the crossover batch, summarized by a central interval
(default 90%: the 5th and 95th percentiles). A verdict is "uncertain" when
the saving's interval straddles zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InputError
from .predict import grid_roots, predict
from .profile import Profile, profile_from_dict
from .scenario import Scenario
from .strategies import BASELINE, STRATEGIES

_CACHE: dict[int, tuple[Profile, tuple[Profile, ...]]] = {}


def replicate_profiles(profile: Profile) -> list[Profile]:
    """One Profile per bootstrap replicate (empty when the profile has none); cached per profile object."""
    hit = _CACHE.get(id(profile))
    if hit is None or hit[0] is not profile:
        if len(_CACHE) >= 16:
            _CACHE.pop(next(iter(_CACHE)))
        hit = _CACHE[id(profile)] = (profile, _replicates(profile))
    return list(hit[1])


def _replicates(profile: Profile) -> tuple[Profile, ...]:
    out = []
    for i, rep in enumerate(profile.bootstrap):
        if not isinstance(rep, dict):
            raise InputError(f"profile {profile.name}: bootstrap[{i}] must be an object")
        data = {k: v for k, v in profile.raw.items() if k != "bootstrap"}  # profile_from_dict never mutates
        if "collectives" in rep:
            data["collectives"] = rep["collectives"]
        if "kernels" in rep:
            data["kernels"] = {**data["kernels"], **rep["kernels"]}
        out.append(profile_from_dict(data, source=f"{profile.name}.bootstrap[{i}]"))
    return tuple(out)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    level: float

    def straddles_zero(self) -> bool:
        return self.low < 0 < self.high

    def to_dict(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high, "level": self.level}


@dataclass(frozen=True)
class StrategyUncertainty:
    strategy: str
    saving_us: Interval
    saving_per_decode_step_us: Interval
    crossover_batch: Interval | None
    crossover_found_fraction: float  # share of replicates with a crossover in range
    verdict: str  # "faster" | "slower" | "uncertain"

    def to_dict(self) -> dict[str, Any]:
        return {"saving_per_draft_step_us": self.saving_us.to_dict(),
                "saving_per_decode_step_us": self.saving_per_decode_step_us.to_dict(),
                "crossover_batch": None if self.crossover_batch is None else self.crossover_batch.to_dict(),
                "crossover_found_fraction": self.crossover_found_fraction, "verdict": self.verdict}


def _interval(values: np.ndarray, level: float) -> Interval:
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return Interval(float(lo), float(hi), level)


def propagate(scenario: Scenario, profile: Profile, *, level: float = 0.9, with_crossover: bool = True,
              strategies: tuple[str, ...] = STRATEGIES[1:], batch_range: tuple[float, float] = (1.0, 65536.0),
              grid_points: int = 257) -> dict[str, StrategyUncertainty]:
    """Intervals of every strategy's saving (and crossover) over the profile's bootstrap replicates.

    Returns {} when the profile has no bootstrap data. Each replicate is priced once over a
    log batch grid (plus the scenario's batch); its first crossover is located by linear
    interpolation in log batch (`grid_roots`), within one grid step (4.4%) of brentq.
    """
    if scenario.size != 1:
        raise InputError("uncertainty needs a single scenario")
    reps = replicate_profiles(profile)
    if not reps:
        return {}
    lo, hi = batch_range
    grid = np.geomspace(lo, hi, grid_points) if with_crossover else np.empty(0)
    batches = np.append(grid, np.broadcast_to(scenario.batch, (1,)))  # last = the scenario's own batch
    swept = scenario.item(0).with_(batch=batches)
    savings = {s: [] for s in strategies}
    decode = {s: [] for s in strategies}
    roots: dict[str, list[float]] = {s: [] for s in strategies}
    for rep in reps:
        pred = predict(swept, rep, (BASELINE, *strategies))
        for s in strategies:
            values = pred.saving_us(s)
            savings[s].append(float(values[-1]))
            decode[s].append(float(pred.saving_per_decode_step_us(s)[-1]))
            if with_crossover:
                found = grid_roots(grid, values[:-1])
                if found:
                    roots[s].append(found[0])
    out = {}
    for s in strategies:
        saving = _interval(np.asarray(savings[s]), level)
        if saving.low > 0:
            verdict = "faster"
        elif saving.high < 0:
            verdict = "slower"
        else:
            verdict = "uncertain"
        found = len(roots[s]) / len(reps)
        out[s] = StrategyUncertainty(s, saving, _interval(np.asarray(decode[s]), level),
                                     _interval(np.asarray(roots[s]), level) if roots[s] else None, found, verdict)
    return out
