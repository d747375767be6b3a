"""Prediction intervals from an ensemble: each saving and crossover batch, each measurement row.

Intervals: the central `level` (default 90%) of the pooled replicate x discrepancy distribution -
of each saving and crossover batch (`propagate`; of each measurement row: `costmodel.evidence.point_intervals`,
which needs the frames, so the predict path here loads no pandas).
A verdict is "uncertain" when the saving's interval straddles zero, "identical" when every member's saving is exactly
zero (TP 1).

Each interval is the [(1 - level) / 2, (1 + level) / 2] quantile pair of the member values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..io.errors import InputError
from ..model.components import BASELINE, STRATEGIES
from ..model.crossover import grid_roots
from ..model.draft_step import parse_placement
from ..model.drafter import DraftArch
from ..model.members import draft_step_members, predict_members
from ..model.scenario import Scenario
from ..profiles.types import Profile
from .ensemble import ensemble


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
    verdict: str  # "faster" | "slower" | "uncertain" | "identical" (saving_verdict)

    @classmethod
    def from_dict(cls, strategy: str, d: dict[str, Any]) -> StrategyUncertainty:
        """The inverse of `to_dict` (an answer's JSON interval back as the object the dashboard's tiles read)."""
        def interval(x: dict[str, float] | None) -> Interval | None:
            return None if x is None else Interval(float(x["low"]), float(x["high"]), float(x["level"]))

        return cls(strategy, interval(d["saving_per_draft_call_us"]), interval(d["saving_per_decode_step_us"]),
                   interval(d.get("crossover_batch")), float(d["crossover_found_fraction"]), str(d["verdict"]))

    def to_dict(self) -> dict[str, Any]:
        return {"saving_per_draft_call_us": self.saving_us.to_dict(),
                "saving_per_decode_step_us": self.saving_per_decode_step_us.to_dict(),
                "crossover_batch": None if self.crossover_batch is None else self.crossover_batch.to_dict(),
                "crossover_found_fraction": self.crossover_found_fraction, "verdict": self.verdict}


def saving_verdict(values: np.ndarray, interval: Interval) -> str:
    """"faster" when the interval of the members' savings `values` is above 0, "slower" below, "identical" when every
    member's saving is exactly 0 (TP 1: nothing to gather, every strategy is the same path), else "uncertain"."""
    if not np.any(np.asarray(values) != 0.0):
        return "identical"
    return "faster" if interval.low > 0 else "slower" if interval.high < 0 else "uncertain"


def first_roots(grid: np.ndarray, rows: np.ndarray) -> list[float]:
    """The first crossover (`grid_roots` on the log batch grid) of each member's saving row that has one."""
    return [found[0] for found in (grid_roots(grid, row) for row in rows) if found]


def _interval(values: np.ndarray, level: float) -> Interval:
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return Interval(float(lo), float(hi), level)


def propagate(scenario: Scenario, profile: Profile, *, level: float = 0.9, with_crossover: bool = True,
              strategies: tuple[str, ...] = STRATEGIES[1:], batch_range: tuple[float, float] = (1.0, 65536.0),
              grid_points: int = 257, with_discrepancy: bool = True) -> dict[str, StrategyUncertainty]:
    """Prediction intervals of every strategy's saving (and crossover): replicates x per-op discrepancy.

    Each ensemble member (a bootstrap replicate, or the point profile PRIOR_MEMBERS times when it has
    none) gets independent per-op discrepancy factors (module doc; with_discrepancy=False: parameter
    uncertainty only). Each member is priced once over a
    log batch grid (plus the scenario's batch); its first crossover is located by linear
    interpolation in log batch (`grid_roots`), within one grid step (4.4%) of brentq.
    """
    if scenario.size != 1:
        raise InputError("uncertainty needs a single scenario")
    reps, factors, _ = ensemble(profile, nodes=int(scenario.nodes), with_discrepancy=with_discrepancy)
    lo, hi = batch_range
    grid = np.geomspace(lo, hi, grid_points) if with_crossover else np.empty(0)
    batches = np.append(grid, np.broadcast_to(scenario.batch, (1,)))  # last = the scenario's own batch
    swept = scenario.item(0).with_(batch=batches)
    priced = predict_members(swept, reps, (BASELINE, *strategies), factors)
    savings, decode = {}, {}
    roots: dict[str, list[float]] = {s: [] for s in strategies}
    for s in strategies:
        values = priced.saving_us(s)  # (members, batches)
        savings[s], decode[s] = values[:, -1], priced.saving_per_decode_step_us(s)[:, -1]
        if with_crossover:
            roots[s] = first_roots(grid, values[:, :-1])
    out = {}
    for s in strategies:
        saving = _interval(np.asarray(savings[s]), level)
        verdict = saving_verdict(savings[s], saving)
        found = len(roots[s]) / len(reps)
        out[s] = StrategyUncertainty(s, saving, _interval(np.asarray(decode[s]), level),
                                     _interval(np.asarray(roots[s]), level) if roots[s] else None, found, verdict)
    return out


# -- the whole draft step (issue 17) ---------------------------------------------------------------------------------
DRAFT_STEP_GRID_POINTS = 65  # log-spaced batches for the members' crossovers: one grid step = 19% in batch


def propagate_draft_step(scenario: Scenario, profile: Profile, arch: DraftArch, *, level: float = 0.9,
                         with_crossover: bool = True, strategies: tuple[str, ...] = STRATEGIES[1:],
                         batch_range: tuple[float, float] = (1.0, 65536.0),
                         grid_points: int = DRAFT_STEP_GRID_POINTS, with_discrepancy: bool = True,
                         kv_len: int = 2048, forward_us: float | None = None, placement: str = "target"
                         ) -> dict[str, StrategyUncertainty]:
    """`propagate` of the WHOLE draft step (`costmodel.model.draft_step`: the decode step's K draft calls - drafter
    forward, lm_head, logits path - pipelined as the engine composes them) at one placement.

    The members are `propagate`'s (`ensemble`: bootstrap replicates x per-op discrepancy, the "host" factor
    scaling every host time of the chain and the "serving" factor the serving term); member m prices
    draft_step(scenario over the batch grid + its own batch, members[m], factors=factors[m]) - every member in
    one stacked evaluation where the stack applies (`costmodel.model.members.draft_step_members`). Per strategy s:
        saving_per_decode_step_us = T_step(baseline) - T_step(s)        (the whole draft step, us per decode step)
        saving_us                 = that / calls_per_decode_step         (the mean per draft call)
    and the first crossover of each member's saving on the log grid (`grid_roots`, linear in log batch).
    Verdict as `propagate`'s, on the whole-step saving. Not drawn: the drafter's GEMM and attention times (the
    lm_head GEMM model, a point fit in every bundled profile's replicates), so the interval covers the logits
    path, the host, the serving term and the drafter's all-reduces."""
    if scenario.size != 1:
        raise InputError("uncertainty needs a single scenario")
    reps, factors, _ = ensemble(profile, nodes=int(scenario.nodes), with_discrepancy=with_discrepancy)
    lo, hi = batch_range
    grid = np.geomspace(lo, hi, grid_points) if with_crossover else np.empty(0)
    swept = scenario.item(0).with_(batch=np.append(grid, np.broadcast_to(scenario.batch, (1,))))
    pl = parse_placement(placement, int(scenario.tp))
    calls = float(np.max(scenario.calls_per_decode_step))
    # row m = draft_step(swept, reps[m], factors=factors[m]): every member in one stacked evaluation
    priced = draft_step_members(swept, reps, pl, arch, (BASELINE, *strategies), factors, kv_len=kv_len,
                                forward_us=forward_us)
    out = {}
    for s in strategies:
        values = priced.saving_us(s)  # (members, batches)
        roots = first_roots(grid, values[:, :-1]) if with_crossover else []
        decode = _interval(values[:, -1], level)
        verdict = saving_verdict(values[:, -1], decode)
        out[s] = StrategyUncertainty(s, _interval(values[:, -1] / calls, level), decode,
                                     _interval(np.asarray(roots), level) if roots else None,
                                     len(roots) / len(reps), verdict)
    return out
