"""Kernel model for the non-communication steps of each strategy.

GPU profiles with a `kernels.model` (costmodel.gpu_kernels: ATen's reduce launch configuration, element
rates, launch floors, achieved copy rates; fitted on measured H200 tables or derived from them) price every
op that model knows (`MODEL_OPS`). Inside the range of a measured table of the op's anchor (`ANCHOR_OPS`,
e.g. local_argmax -> the probe's local_pack) the model is multiplied by the table's measured/model ratio,
interpolated in (log rows, log cols) - exact at every measured point, the model's shape between them;
outside every table the model alone prices the point (flagged `extrapolated`), never a log-log
extrapolation.

Profiles without a model (CPU calibrations) and the fused Triton ops use the roofline per op
(profile `kernels.ops[op]`)::

    T = launches * k + fixed_us + bytes(op) / bw_gbps * 1e-3      (us)
    k = graph_kernel_us (CUDA-graph replay) or eager_launch_us (eager)

`bytes(op)` counts the bytes the op reads and writes (see `kernel_bytes`).
When such a profile carries a measured table for (op, dtype, mode, world_size) - any dtype
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
from .gpu_kernels import MODEL_OPS, GpuKernelModel, lm_head_gemm_us, model_time_us
from .profile import KernelTable, Profile
from .schema import DTYPES

ID_BYTES = 8  # int64 ids / packed 64-bit keys
# ops that never touch the logits, so their measured tables apply to every logits dtype
DTYPE_FREE_OPS = ("pair_reduce", "key_unpack", "d2t_lookup")
PAIR_BYTES = 8  # (fp32 value, fp32 id)


def kernel_bytes(op: str, rows, cols, world_size=1, elem_bytes=2, draft_cols=0) -> np.ndarray:
    """Bytes read + written by one call of `op` (R = rows, s = cols, p = world_size, e = elem_bytes).

    local_argmax / key_pack   R*s*e + 2*R*8           (read the shard; write values+ids; also local_max/pack)
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
    if base in ("local_argmax", "key_pack", "local_max", "local_pack"):
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


# op -> the measured op whose table corrects it (the rest of the op, if any, is priced by the model alone)
ANCHOR_OPS: dict[str, str] = {"local_max": "local_max", "local_pack": "local_pack", "local_argmax": "local_pack",
                              "key_pack": "local_max", "argmax": "argmax", "relayout_argmax": "relayout_argmax",
                              "pair_reduce": "pair_reduce"}
_RATIO_CACHE: dict[tuple[int, int], tuple[KernelTable, RegularGridInterpolator]] = {}


def _ratio_interpolator(model: GpuKernelModel, table: KernelTable) -> RegularGridInterpolator:
    """log(measured / model) on the table's grid, interpolated in (log rows, log cols); cached per table."""
    key = (id(model), id(table))
    hit = _RATIO_CACHE.get(key)
    if hit is not None and hit[0] is table:
        return hit[1]
    rows, cols = np.meshgrid(np.asarray(table.rows), np.asarray(table.cols), indexing="ij")
    e = DTYPES[table.dtype] if table.op.removesuffix("_fused") not in DTYPE_FREE_OPS else 4
    base = model_time_us(model, table.op, rows=rows, cols=cols if table.cols != (1.0,) else 0 * cols,
                         world_size=table.world_size, elem_bytes=e, dtype=table.dtype, eager=table.mode == "eager")
    ratio = KernelTable(table.op, table.dtype, table.mode, table.world_size, table.rows, table.cols,
                        tuple(tuple(float(v) for v in row) for row in np.asarray(table.median_us) / base))
    interp = _interpolator(ratio)
    if len(_RATIO_CACHE) > 256:
        _RATIO_CACHE.clear()
    _RATIO_CACHE[key] = (table, interp)
    return interp


def _model_estimate(profile: Profile, op: str, r, c, p, d, e, eager, padded, draft_cols) -> KernelEstimate:
    """The mechanistic model, times the measured/model ratio of the anchor op's table where one covers the point."""
    model = profile.kernel_model
    kw = {"world_size": p, "elem_bytes": e, "dtype": d, "eager": eager, "draft_cols": draft_cols}
    time = np.broadcast_to(model_time_us(model, op, rows=r, cols=c, padded=padded, **kw), r.shape).astype(float)
    extrapolated = np.zeros(r.shape, dtype=bool)
    anchor = ANCHOR_OPS.get(op)
    tables = [t for t in profile.kernel_tables if t.op == anchor] if anchor else []
    if not tables:
        return KernelEstimate(time, extrapolated)
    part = np.broadcast_to(model_time_us(model, anchor, rows=r, cols=c, **kw), r.shape) if anchor != op else time.copy()
    for table in tables:
        same_dtype = True if anchor in DTYPE_FREE_OPS else d == table.dtype
        mask = same_dtype & (eager == (table.mode == "eager")) & (p == table.world_size)
        if not mask.any():
            continue
        rm, cm = r[mask], c[mask]
        inside = (rm >= table.rows[0]) & (rm <= table.rows[-1])
        points = [np.log(np.maximum(rm, 1e-12))]
        if len(table.cols) > 1:
            inside &= (cm >= table.cols[0]) & (cm <= table.cols[-1])
            points.append(np.log(np.maximum(cm, 1e-12)))
        ratio = np.exp(_ratio_interpolator(model, table)(np.stack(points, axis=-1))).reshape(rm.shape)
        time[mask] = np.where(inside, time[mask] + part[mask] * (ratio - 1.0), time[mask])
        extrapolated[mask] = ~inside
    return KernelEstimate(time, extrapolated)


def kernel_time_us(profile: Profile, op: str, *, rows, cols, world_size=1, dtype="bf16", elem_bytes=2,
                   mode="graph", draft_cols=0, padded=False) -> KernelEstimate:
    """Time of one kernel op.

    With a GPU kernel model in the profile (`kernels.model`, costmodel.gpu_kernels) and an op it prices:
    the model, corrected inside a measured table's range by the table's measured/model ratio (exact at every
    measured point); outside every table the model alone (flagged `extrapolated` where a table exists).
    Otherwise (CPU profiles, fused ops): a measured table where one covers the point, else the roofline.
    `padded` (model only) adds the padding mask and rank offset launches to local_argmax / key_pack.
    """
    r, c, p, d, eager = np.broadcast_arrays(
        np.asarray(rows, dtype=float), np.asarray(cols, dtype=float), np.asarray(world_size, dtype=np.int64),
        np.asarray(dtype).astype(str), eager_mask(mode))
    if profile.kernel_model is not None and op in MODEL_OPS:
        e = np.broadcast_to(np.asarray(elem_bytes, dtype=float), r.shape)
        return _model_estimate(profile, op, r, c, p, d, e, eager, padded, draft_cols)
    time = roofline_us(profile, op, rows, cols, world_size, elem_bytes, mode, draft_cols)
    extrapolated = np.zeros(time.shape, dtype=bool)
    tables = [t for t in profile.kernel_tables if t.op == op]
    if not tables:
        return KernelEstimate(time, extrapolated)
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


def lm_head_time_us(profile: Profile, rows, hidden, shard) -> np.ndarray | None:
    """The draft step's lm_head GEMM [rows, hidden] x [hidden, shard] per call (us), from the profile's
    `kernels.lm_head` model (costmodel.gpu_kernels.LmHeadModel); None when the profile has none.

    Context only: every strategy runs the same GEMM, so it never changes a saving or a crossover.
    """
    if profile.lm_head is None or hidden is None:
        return None
    return lm_head_gemm_us(profile.lm_head, rows, hidden, shard)
