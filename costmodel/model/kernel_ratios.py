"""A measured kernel table's correction of the GPU kernel model, and stacked ensembles' member grids.

Inside a measured table of an op's anchor the model is multiplied by the table's measured/model ratio,
interpolated bilinearly in (log rows, log cols)::

    g[i, j]  = log(median_us[i, j] / model_us(rows_i, cols_j))                   (`log_ratio_grid`)
    ratio    = exp((1 - u) ((1 - v) g[i, j] + v g[i, j1]) + u ((1 - v) g[i1, j] + v g[i1, j1]))

with (i, u), (j, v) the lower node and upper weight of log rows / log cols on the table's axes
(`bilinear_weights`): exact at every measured point. A stacked ensemble (costmodel.model.members) carries
one grid per member (`member_ratio_grids`, (members, rows x cols)). `table_geometry` caches which points fall
inside a table and their weights (the same for every member pricing one scenario).
"""

from __future__ import annotations

import numpy as np

from ..io.schema_names import DTYPES
from ..profiles.kernel_params import GpuKernelModel
from ..profiles.types import KernelTable, Profile
from . import dedup
from .gpu_kernels import model_time_us

# ops that never touch the logits, so their measured tables apply to every logits dtype
DTYPE_FREE_OPS = ("pair_reduce", "key_unpack", "d2t_lookup")
_RATIO_CACHE_SIZE = 4096  # (model, table) pairs: 16 ensembles of 100 members x a few tables each
_RATIO_CACHE = dedup.ContentCache(_RATIO_CACHE_SIZE)  # {(id(model), id(table)): (table, model, grid)}, oldest out first


# -- stacked ensembles (costmodel.model.members): M members' parameters as (M, 1) arrays, the points as (1, n) ---------
STACK_KEY = "_stacked_members"  # in a stacked profile's `raw`: the member profiles, in order


def stacked_members(profile: Profile) -> tuple[Profile, ...] | None:
    """The member profiles of a stacked profile (None for an ordinary one)."""
    raw = profile.raw
    return raw.get(STACK_KEY) if isinstance(raw, dict) else None


def member_ratio_grids(profile: Profile, table: KernelTable) -> np.ndarray:
    """(M, rows x cols): `_ratio_grid`'s log(measured / model) grid of `table` under each member's kernel model,
    priced once with the stacked model's (M, 1) parameters (cached on the stacked profile's own raw dict)."""
    members = stacked_members(profile)
    cache = profile.raw.setdefault("_ratio_grids", {})
    hit = cache.get(id(table))
    if hit is not None and hit[0] is table:
        return hit[1]
    grids = np.broadcast_to(_logratio_grid(profile.kernel_model, table, flat=True), (len(members), len(table.rows)
                                                                                       * len(table.cols)))
    cache[id(table)] = (table, grids)
    return grids


def bilinear_rows(grids: np.ndarray, weights: tuple) -> np.ndarray:
    """`_bilinear` of every row of `grids` (one flat grid per ensemble member), in the same order of operations:
    (members, points)."""
    (k00, k01, k10, k11), (nu, u, nv, v) = weights
    return nu * (nv * grids[:, k00] + v * grids[:, k01]) + u * (nv * grids[:, k10] + v * grids[:, k11])


def _logratio_grid(model: GpuKernelModel, table: KernelTable, flat: bool = False) -> np.ndarray:
    """log(measured / model) at the table's (rows, cols) nodes: (rows, cols), or (1, rows x cols) with flat=True
    - then a stacked model's (members, 1) parameters give (members, rows x cols), one grid per member."""
    rows, cols = np.meshgrid(np.asarray(table.rows), np.asarray(table.cols), indexing="ij")
    if flat:
        rows, cols = rows.reshape(1, -1), cols.reshape(1, -1)
    e = DTYPES[table.dtype] if table.op.removesuffix("_fused") not in DTYPE_FREE_OPS else 4
    base = model_time_us(model, table.op, rows=rows, cols=cols if table.cols != (1.0,) else 0 * cols,
                         world_size=table.world_size, elem_bytes=e, dtype=table.dtype, eager=table.mode == "eager")
    median = np.asarray(table.median_us)
    return np.log((median.reshape(1, -1) if flat else median) / base)


def ratio_grid(model: GpuKernelModel, table: KernelTable) -> tuple:
    """(log rows axis, log cols axis, log(measured / model) grid) of a table; cached per (model, table)."""
    key = (id(model), id(table))
    hit = _RATIO_CACHE.get(key)
    if hit is not None and hit[0] is table and hit[1] is model:
        return hit[2]
    out = (np.log(np.asarray(table.rows)), np.log(np.asarray(table.cols)), _logratio_grid(model, table))
    _RATIO_CACHE.put(key, (table, model, out))  # both kept alive, so their ids stay theirs while cached
    return out


def axis_weights(axis: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower index, weight of the upper node) of linear interpolation on a sorted axis (x inside it)."""
    if len(axis) == 1:
        return np.zeros(x.shape, dtype=np.int64), np.zeros(x.shape)
    i = np.clip(np.searchsorted(axis, x, side="right") - 1, 0, len(axis) - 2)
    return i, np.clip((x - axis[i]) / (axis[i + 1] - axis[i]), 0.0, 1.0)


def bilinear_weights(lr: np.ndarray, lc: np.ndarray, r: np.ndarray, c: np.ndarray) -> tuple:
    """The grid nodes (flat indices into a C-ordered (len(lr), len(lc)) grid: [i, j], [i, j+1], [i+1, j],
    [i+1, j+1]) and weights (1 - u, u, 1 - v, v) of (log r, log c) on the axes (lr, lc)."""
    i, u = axis_weights(lr, np.log(r))
    j, v = axis_weights(lc, np.log(np.maximum(c, 1e-12)))
    i1, j1, n = np.minimum(i + 1, len(lr) - 1), np.minimum(j + 1, len(lc) - 1), len(lc)
    return (i * n + j, i * n + j1, i1 * n + j, i1 * n + j1), (1 - u, u, 1 - v, v)


def bilinear(g: np.ndarray, weights: tuple) -> np.ndarray:
    """(1 - u) ((1 - v) g[i, j] + v g[i, j1]) + u ((1 - v) g[i1, j] + v g[i1, j1]) (this order of operations)."""
    (k00, k01, k10, k11), (nu, u, nv, v) = weights
    flat = np.ravel(g)
    return nu * (nv * flat.take(k00) + v * flat.take(k01)) + u * (nv * flat.take(k10) + v * flat.take(k11))


# per (points, table axes): (points inside the table, points outside, bilinear weights) - the same for every
# ensemble member pricing one scenario (only the ratio grid and the model part differ)
GEOMETRY = dedup.ContentCache(256)


def table_geometry(table: KernelTable, tkey: int, key: np.ndarray, flat_r: np.ndarray,
                    flat_c: np.ndarray, points_key: tuple | None) -> tuple | None:
    """(flat indices inside `table`'s range, flat indices outside it, bilinear weights of the inside ones) of the
    points whose (dtype, mode, world size) key is `tkey`; None when there are none. Cached by content."""
    ckey = None if points_key is None else (points_key, tkey, table.rows, table.cols)
    hit = None if ckey is None else GEOMETRY.get(ckey)
    if hit is not None:
        return hit[0]
    sel = np.flatnonzero(key == tkey)
    out = None
    if sel.size:
        rm, cm = flat_r[sel], flat_c[sel]
        inside = (rm >= table.rows[0]) & (rm <= table.rows[-1])
        if len(table.cols) > 1:
            inside &= (cm >= table.cols[0]) & (cm <= table.cols[-1])
        lr, lc = np.log(np.asarray(table.rows)), np.log(np.asarray(table.cols))  # as _ratio_grid's axes
        out = (sel[inside], sel[~inside], bilinear_weights(lr, lc, rm[inside], cm[inside]))
    if ckey is not None:
        GEOMETRY.put(ckey, (out,))
    return out
