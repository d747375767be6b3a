"""The 90% intervals of one strategy's saving at MANY batches from one pass over the ensemble.

`costmodel.evidence.intervals.propagate` prices every ensemble member (bootstrap replicate x per-op discrepancy
factors) over a log batch grid plus ONE batch, and its cost is almost all per member, not per batch (a
member priced at 1 or at 4,096 batches costs about the same). `interval_table` prices the same members,
with the same factors, over propagate's crossover grid plus a whole array of batches, so an interactive
batch edit afterwards is a table lookup. For every batch b of the array it returns exactly what
`propagate(scenario.with_(batch=b), ...)` returns for the strategy (the tests check equality):

    saving interval at b     = central `level` of {saving_m(b)} over members m (5th..95th percentile)
    decode-step interval     = the same of {saving_per_decode_step_m(b)}
    crossover interval       = the same of the members' first grid root (`predict.grid_roots`)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..io.errors import InputError
from ..model.components import BASELINE
from ..model.members import predict_members
from ..model.predict import grid_roots
from ..model.scenario import Scenario
from ..profiles.types import Profile
from .ensemble import ensemble
from .intervals import Interval, StrategyUncertainty, _interval


@dataclass(frozen=True)
class IntervalTable:
    """Per-batch saving intervals of one strategy and its (batch-independent) crossover interval."""

    strategy: str
    batches: np.ndarray          # ascending, unique
    members_saving_us: np.ndarray        # (members, batches): saving per draft step of each member
    members_decode_us: np.ndarray        # (members, batches): saving per decode step of each member
    crossover: Interval | None
    crossover_found_fraction: float
    level: float

    def at(self, batch: float) -> StrategyUncertainty | None:
        """What propagate gives at `batch` (None when `batch` is not in the table)."""
        i = int(np.searchsorted(self.batches, batch))
        if i >= self.batches.size or self.batches[i] != batch:
            return None
        saving = _interval(self.members_saving_us[:, i], self.level)
        verdict = "faster" if saving.low > 0 else "slower" if saving.high < 0 else "uncertain"
        return StrategyUncertainty(self.strategy, saving, _interval(self.members_decode_us[:, i], self.level),
                                   self.crossover, self.crossover_found_fraction, verdict)


def interval_table(scenario: Scenario, profile: Profile, strategy: str, batches: np.ndarray, *,
                   level: float = 0.9, batch_range: tuple[float, float] = (1.0, 65536.0),
                   grid_points: int = 257) -> IntervalTable:
    """One pass over propagate's ensemble (its members and discrepancy factors) at `batches` and its grid."""
    if scenario.size != 1:
        raise InputError("interval_table needs a single scenario (its batch is replaced by `batches`)")
    reps, factors, _ = ensemble(profile, nodes=int(scenario.nodes))  # propagate's members and factors
    grid = np.geomspace(batch_range[0], batch_range[1], grid_points)
    batches = np.unique(np.asarray(batches, dtype=float))
    swept = scenario.item(0).with_(batch=np.concatenate([grid, batches]))
    priced = predict_members(swept, reps, (BASELINE, strategy), factors)  # row m = predict(swept, reps[m], ...)
    values = np.asarray(priced.saving_us(strategy), dtype=float)
    savings, decode = values[:, grid.size:], np.asarray(priced.saving_per_decode_step_us(strategy))[:, grid.size:]
    roots = []
    for row in values[:, :grid.size]:
        found = grid_roots(grid, row)
        if found:
            roots.append(found[0])
    cross = _interval(np.asarray(roots), level) if roots else None
    return IntervalTable(strategy, batches, np.asarray(savings), np.asarray(decode), cross,
                         len(roots) / len(reps), level)
