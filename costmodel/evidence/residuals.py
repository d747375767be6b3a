"""Residual pools from frames (pandas): each replicate's prediction of measurement rows (`replicate_us`), its log
variance (`param_log_variance`), the pool of a `validate` table (`residual_pool`) and of every bundled reference row
(`reference_pool`, which `discrepancy.bundled_pool` caches on disk). The method: `costmodel.evidence.discrepancy`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..io.errors import InputError
from ..io.schema_names import COLLECTIVE_OPS
from ..model import dedup
from ..model.points import floor_priced, numeric_column, point_groups, price_points
from ..profiles.replicates import replicate_profiles
from ..profiles.store import load_profile
from ..profiles.types import Profile
from .pool import INTER, ResidualPool, fit_report_sigmas, machine_key
from .reference import load_reference, reference_files, reference_set
from .validate import validate

_PARAM_VAR_CACHE: dict[tuple, np.ndarray] = {}


def replicate_us(frame: pd.DataFrame, profile: Profile) -> np.ndarray:
    """(R, n): each of the profile's R bootstrap replicates' predicted_us of every row (R = 0 without replicates).
    A row's prediction depends on that row alone, so a caller may price a table once and slice it per subset."""
    reps = replicate_profiles(profile)
    if not reps or not len(frame):
        return np.empty((0, len(frame)))
    groups = point_groups(frame)  # the rows' arrays, extracted once for every replicate
    with dedup.memo():  # the replicates price the same array objects: their collective group plans are shared
        return np.stack([price_points(groups, len(frame), rep)[0] for rep in reps])


def param_log_variance(frame: pd.DataFrame, profile: Profile, replicates: np.ndarray | None = None) -> np.ndarray:
    """Per row, the variance over the profile's replicates of log(predicted_us) (0 without replicates).
    replicates: the rows' `replicate_us`, when the caller has them already."""
    key = (id(profile), id(frame), len(frame))
    hit = _PARAM_VAR_CACHE.get(key) if replicates is None else None
    if hit is not None:
        return hit
    rep = replicate_us(frame, profile) if replicates is None else replicates
    if not rep.shape[0] or not len(frame):
        out = np.zeros(len(frame))
    else:
        out = np.nan_to_num(np.var(np.log(rep), axis=0), nan=0.0, posinf=0.0)
    if len(_PARAM_VAR_CACHE) > 32:
        _PARAM_VAR_CACHE.clear()
    _PARAM_VAR_CACHE[key] = out
    return out


def residual_pool(table: pd.DataFrame, replicates: dict[str, np.ndarray] | None = None) -> ResidualPool:
    """The pool of a `validate` table (column `ref_set`, else `validate.reference_set`): rows of a collective
    op whose profile did not fit it (no fit-report sigma for the op: its parameters are derived), held out
    (`used_in_profile` false) and not priced by their table's own host floor (there predicted = the floor,
    the table's own median below 64 KiB per rank: no evidence about the model). replicates: per profile name,
    the (R, len(table)) `replicate_us` of the table's rows (only that profile's columns are read), when the
    caller has them already."""
    if not len(table):
        return ResidualPool(*(np.empty(0, dtype=object),) * 3, np.empty(0), np.empty(0))
    sets = table["ref_set"].astype(str) if "ref_set" in table.columns else reference_set(table)
    ops = table["op"].astype(str).to_numpy()
    nodes = numeric_column(table, "nodes", 1.0)
    keys = np.where(np.isin(ops, COLLECTIVE_OPS) & (nodes > 1), np.char.add(ops.astype(str), INTER), ops)
    pred = table["predicted_us"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_res = np.log(pred / table["median_us"].to_numpy(float))
    keep = (np.isin(ops, COLLECTIVE_OPS) & ~table["used_in_profile"].astype(bool).to_numpy() & np.isfinite(log_res)
            & ~floor_priced(table))
    names = table["profile_used"].astype(str).to_numpy() if "profile_used" in table.columns else \
        table["profile"].astype(str).to_numpy()
    pv = np.zeros(len(table))
    for name in np.unique(names[keep]):
        prof = load_profile(name)
        fitted = fit_report_sigmas(prof)
        mine = keep & (names == name)
        mine &= ~np.isin(keys, list(fitted))  # fitted ops keep their fit report's sigma
        keep &= ~((names == name) & ~mine)
        if mine.any():
            given = None if replicates is None or name not in replicates else replicates[name][:, mine]
            pv[mine] = param_log_variance(table[mine], prof, given)
    machines = np.array([machine_key(s, r) for s, r in zip(table["source"].astype(str) if "source" in table.columns
                                                          else [""] * len(table), sets, strict=True)], dtype=object)
    return ResidualPool(keys[keep].astype(object), sets.to_numpy(dtype=object)[keep], machines[keep], log_res[keep],
                        pv[keep])


def reference_pool() -> ResidualPool:
    """`residual_pool` of `validate` over every bundled reference file (data/reference/; an empty pool when they
    cannot be read)."""
    try:
        return residual_pool(validate(load_reference(reference_files())))
    except InputError:
        return residual_pool(pd.DataFrame())
