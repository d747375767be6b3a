"""Prediction intervals from an ensemble: each saving and crossover batch, each measurement row.

Intervals: the central `level` (default 90%) of the pooled replicate x discrepancy distribution -
of each saving and crossover batch (`propagate`) or of each measurement row (`point_intervals`).
A verdict is "uncertain" when the saving's interval straddles zero.

Each interval is the [(1 - level) / 2, (1 + level) / 2] quantile pair of the member values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..io.errors import InputError
from ..model.components import BASELINE, STRATEGIES
from ..model.members import predict_members
from ..model.points import numeric_column, predict_points
from ..model.predict import grid_roots
from ..model.scenario import Scenario
from ..profiles.types import Profile
from .discrepancy import INTER, Discrepancy, discrepancy, replicate_us
from .ensemble import _z_draws, ensemble


def point_intervals(frame: pd.DataFrame, profile: Profile, *, level: float = 0.9,
                    predicted_us: np.ndarray | None = None, disc: Discrepancy | None = None,
                    floor_us: np.ndarray | None = None,
                    priced: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) central `level` prediction interval of every measurement row (see the module doc).

    Draws: log(max(floor, predicted * t_replicate / t_point)) + sigma_op z over replicates x
    discrepancy quantiles; predicted_us defaults to the profile's point prediction; floor_us (e.g.
    a host floor, NaN = none) bounds every member's prediction from below before the discrepancy.
    priced: (t_point (n,), t_replicate (R, n) - `discrepancy.replicate_us`) of the rows, when the caller has
    them already (each row's prediction depends on that row alone).
    """
    if priced is None:
        priced = predict_points(frame, profile)["predicted_us"].to_numpy(float), replicate_us(frame, profile)
    point, replicates = priced
    base = point if predicted_us is None else np.asarray(predicted_us, dtype=float)
    disc = disc or discrepancy(profile)
    nodes = numeric_column(frame, "nodes", 1.0)
    ops = frame["op"].astype(str).to_numpy()
    combos, inverse = np.unique(np.char.add(ops, np.where(nodes > 1, INTER, "")), return_inverse=True)
    sig = np.array([disc.sigma(c.removesuffix(INTER), 2 if c.endswith(INTER) else 1) for c in combos])[inverse]
    shifts = [np.log(rep / point) for rep in replicates] or [np.zeros(len(frame))]
    rel = np.nan_to_num(np.stack(shifts), nan=0.0, posinf=0.0, neginf=0.0)  # (R, n)
    z = _z_draws()
    tail = (1 - level) / 2 * 100
    lo = np.empty(len(frame))
    hi = np.empty(len(frame))
    chunk = max(1, 2_000_000 // (rel.shape[0] * len(z)))
    for start in range(0, len(frame), chunk):
        sl = slice(start, start + chunk)
        member = base[sl][None, :] * np.exp(rel[:, sl])  # (R, n): each ensemble member's prediction
        if floor_us is not None:  # e.g. a host floor: part of the prediction the discrepancy then applies to
            member = np.fmax(member, np.asarray(floor_us, dtype=float)[None, sl])
        draws = np.log(member)[:, None, :] + sig[None, None, sl] * z[None, :, None]
        draws = np.exp(draws.reshape(-1, draws.shape[-1]))
        lo[sl], hi[sl] = np.percentile(draws, [tail, 100 - tail], axis=0)
    return lo, hi


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
            for row in values[:, :-1]:
                found = grid_roots(grid, row)
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
