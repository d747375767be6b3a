"""Prediction intervals of measurement rows (`point_intervals`): the central `level` of each row's replicate x
discrepancy draws (the method: `costmodel.evidence.intervals`; used by `predict-points` and `validate`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.points import numeric_column, predict_points
from ..profiles.types import Profile
from .discrepancy import INTER, Discrepancy, discrepancy
from .ensemble import _z_draws
from .residuals import replicate_us


def point_intervals(frame: pd.DataFrame, profile: Profile, *, level: float = 0.9,
                    predicted_us: np.ndarray | None = None, disc: Discrepancy | None = None,
                    floor_us: np.ndarray | None = None,
                    priced: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) central `level` prediction interval of every measurement row (see the module doc).

    Draws: log(max(floor, predicted * t_replicate / t_point)) + sigma_op z over replicates x
    discrepancy quantiles; predicted_us defaults to the profile's point prediction; floor_us (e.g.
    a host floor, NaN = none) bounds every member's prediction from below before the discrepancy.
    priced: (t_point (n,), t_replicate (R, n) - `residuals.replicate_us`) of the rows, when the caller has
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
