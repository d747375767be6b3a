"""Kernel model for the non-communication steps of each strategy.

Roofline per op (profile `kernels.ops[op]`)::

    T = launches * k + fixed_us + bytes(op) / bw_gbps * 1e-3      (us)
    k = graph_kernel_us (CUDA-graph replay) or eager_launch_us (eager)

`bytes(op)` counts the bytes the op reads and writes (see `kernel_bytes`).
When the profile carries a measured table for (op, dtype, mode, world_size) - any dtype
for the ops in DTYPE_FREE_OPS, which never read logits -
the time is interpolated bilinearly in (log rows, log cols, log time); points
outside the table fall back to the roofline and are flagged `extrapolated`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.interpolate import RegularGridInterpolator

from .collectives import eager_mask
from .errors import InputError
from .profile import KernelTable, Profile

ID_BYTES = 8  # int64 ids / packed 64-bit keys
# ops that never touch the logits, so their measured tables apply to every logits dtype
DTYPE_FREE_OPS = ("pair_reduce", "key_unpack", "d2t_lookup")
PAIR_BYTES = 8  # (fp32 value, fp32 id)


def kernel_bytes(op: str, rows, cols, world_size=1, elem_bytes=2, draft_cols=0) -> np.ndarray:
    """Bytes read + written by one call of `op` (R = rows, s = cols, p = world_size, e = elem_bytes).

    local_argmax / key_pack   R*s*e + 2*R*8           (read the shard; write values+ids)
    relayout_copy             2*R*p*s*e               (read and write every gathered logit)
    argmax                    R*s*e + R*8             (cols = the argmaxed width)
    relayout_argmax           3*R*p*s*e + R*8
    chunked_argmax            R*p*s*e + 2*R*p*8       (argmax per chunk + reduce over p)
    pair_reduce               R*p*8 + 2*R*8
    key_unpack / d2t_lookup   2*R*8
    d2t_scatter               R*s*e + 2*R*Vd*e + Vd*8 (fill [R, V_target]; scatter Vd columns)
    """
    base = op.removesuffix("_fused")
    r = np.asarray(rows, dtype=float)
    s = np.asarray(cols, dtype=float)
    p = np.asarray(world_size, dtype=float)
    e = np.asarray(elem_bytes, dtype=float)
    if base in ("local_argmax", "key_pack"):
        return r * s * e + 2 * r * ID_BYTES
    if base == "relayout_copy":
        return 2 * r * p * s * e
    if base == "argmax":
        return r * s * e + r * ID_BYTES
    if base == "relayout_argmax":
        return 3 * r * p * s * e + r * ID_BYTES
    if base == "chunked_argmax":
        return r * p * s * e + 2 * r * p * ID_BYTES
    if base == "pair_reduce":
        return r * p * PAIR_BYTES + 2 * r * ID_BYTES
    if base in ("key_unpack", "d2t_lookup"):
        return 2 * r * ID_BYTES + 0 * s
    if base == "d2t_scatter":
        vd = np.asarray(draft_cols, dtype=float)
        return r * s * e + 2 * r * vd * e + vd * ID_BYTES
    raise InputError(f"unknown kernel op {op!r}")


@dataclass(frozen=True)
class KernelEstimate:
    time_us: np.ndarray
    extrapolated: np.ndarray  # True where a measured table exists but the point lies outside it


def roofline_us(profile: Profile, op: str, rows, cols, world_size=1, elem_bytes=2, mode="graph",
                draft_cols=0) -> np.ndarray:
    """launches * per-kernel cost + fixed + bytes / bw (see module doc)."""
    spec = profile.kernel_ops.get(op)
    if spec is None:
        raise InputError(f"profile {profile.name}: no kernel parameters for op {op!r}")
    per_kernel = np.where(eager_mask(mode), profile.eager_launch_us, profile.graph_kernel_us)
    nbytes = kernel_bytes(op, rows, cols, world_size, elem_bytes, draft_cols)
    return spec.launches * per_kernel + spec.fixed_us + nbytes / spec.bw_gbps * 1e-3


def _interpolator(table: KernelTable) -> RegularGridInterpolator:
    grid = np.log(np.asarray(table.median_us, dtype=float))
    axes = [np.log(np.asarray(table.rows))]
    if len(table.cols) > 1:
        axes.append(np.log(np.asarray(table.cols)))
    else:
        grid = grid[:, 0]
    if len(axes[0]) == 1:  # a single row: constant in rows
        axes[0] = np.array([axes[0][0] - 1e-9, axes[0][0] + 1e-9])
        grid = np.stack([grid[0], grid[0]])
    return RegularGridInterpolator(axes, grid, method="linear", bounds_error=False, fill_value=None)


def table_us(table: KernelTable, rows, cols) -> tuple[np.ndarray, np.ndarray]:
    """(interpolated time, outside-the-table flag) for points (rows, cols)."""
    r, c = np.broadcast_arrays(np.asarray(rows, dtype=float), np.asarray(cols, dtype=float))
    inside = (r >= table.rows[0]) & (r <= table.rows[-1])
    points = [np.log(np.maximum(r, 1e-12))]
    if len(table.cols) > 1:
        inside &= (c >= table.cols[0]) & (c <= table.cols[-1])
        points.append(np.log(np.maximum(c, 1e-12)))
    values = np.exp(_interpolator(table)(np.stack(points, axis=-1)))
    return values.reshape(r.shape), ~inside


def kernel_time_us(profile: Profile, op: str, *, rows, cols, world_size=1, dtype="bf16", elem_bytes=2,
                   mode="graph", draft_cols=0) -> KernelEstimate:
    """Time of one kernel op, from a measured table where one covers the point, else the roofline."""
    time = roofline_us(profile, op, rows, cols, world_size, elem_bytes, mode, draft_cols)
    extrapolated = np.zeros(time.shape, dtype=bool)
    tables = [t for t in profile.kernel_tables if t.op == op]
    if not tables:
        return KernelEstimate(time, extrapolated)
    r, c, p, d, eager = np.broadcast_arrays(
        np.asarray(rows, dtype=float), np.asarray(cols, dtype=float), np.asarray(world_size, dtype=np.int64),
        np.asarray(dtype).astype(str), eager_mask(mode))
    time = np.broadcast_to(time, r.shape).copy()
    extrapolated = np.broadcast_to(extrapolated, r.shape).copy()
    for table in tables:
        same_dtype = True if op.removesuffix("_fused") in DTYPE_FREE_OPS else d == table.dtype
        mask = same_dtype & (eager == (table.mode == "eager")) & (p == table.world_size)
        if not mask.any():
            continue
        values, outside = table_us(table, r[mask], c[mask])
        time[mask] = np.where(outside, time[mask], values)
        extrapolated[mask] = outside
    return KernelEstimate(time, extrapolated)
