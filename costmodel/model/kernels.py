"""Kernel model for the non-communication steps of each strategy.

GPU profiles with a `kernels.model` (costmodel.model.gpu_kernels: ATen's reduce launch configuration, element
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
the time is interpolated bilinearly in (log rows, log cols, log time) (`kernel_tables.table_us`); points
outside the table fall back to the roofline and are flagged `extrapolated`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..io.errors import InputError
from ..profiles.types import Profile
from . import dedup, gpu_kernels
from .collectives import eager_mask
from .dedup import memo
from .gpu_kernels import DTYPE_ORDER, MODEL_OPS, eager_time_us, lm_head_gemm_us, split_graph_us
from .kernel_ratios import (
    DTYPE_FREE_OPS,
    bilinear,
    bilinear_rows,
    member_ratio_grids,
    ratio_grid,
    stacked_members,
    table_geometry,
)
from .kernel_tables import table_us

kernel_memo = memo  # `with kernel_memo():` around a strategy sweep reuses identical reductions (gpu_kernels.memo)

ID_BYTES = 8  # int64 ids / packed 64-bit keys
PAIR_BYTES = 8  # (fp32 value, fp32 id)


def kernel_bytes(op: str, rows, cols, world_size=1, elem_bytes=2, draft_cols=0, k=1) -> np.ndarray:
    """Bytes read + written by one call of `op` (R = rows, s = cols, p = world_size, e = elem_bytes).

    local_argmax / key_pack   R*s*e + 2*R*8           (read the shard; write values+ids; also local_max/pack)
    relayout_copy             2*R*p*s*e               (read and write every gathered logit)
    argmax                    R*s*e + R*8             (cols = the argmaxed width)
    relayout_argmax           3*R*p*s*e + R*8
    chunked_argmax            R*p*s*e + 2*R*p*8       (argmax per chunk + reduce over p)
    pair_reduce               R*p*8 + 2*R*8
    key_unpack / d2t_lookup   2*R*8
    d2t_scatter               R*s*e + 2*R*Vd*e + Vd*8 (fill [R, V_target]; scatter Vd columns)
    local_topk                R*s*e + R*k*8           (read the shard; write k (value, id) pairs)
    topk_merge                R*s*8 + R*k*8           (s = p*k candidate pairs in, k winners out)
    """
    base = op.removesuffix("_fused")
    r = np.asarray(rows, dtype=float)
    s = np.asarray(cols, dtype=float)
    p = np.asarray(world_size, dtype=float)
    e = np.asarray(elem_bytes, dtype=float)
    if base in ("local_argmax", "key_pack", "local_max", "local_pack", "local_argmax_masked"):
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
    if base == "local_topk":  # read the shard, write k (fp32 value, fp32 id) pairs per row
        return r * s * e + r * np.asarray(k, dtype=float) * PAIR_BYTES
    if base == "topk_merge":  # read the cols = p*k candidate pairs, write the k winners
        return r * s * PAIR_BYTES + r * np.asarray(k, dtype=float) * PAIR_BYTES
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


# op -> the measured op whose table corrects it (the rest of the op, if any, is priced by the model alone)
ANCHOR_OPS: dict[str, str] = {"local_max": "local_max", "local_pack": "local_pack", "local_argmax": "local_pack",
                              "key_pack": "local_max", "argmax": "argmax", "relayout_argmax": "relayout_argmax",
                              "pair_reduce": "pair_reduce"}
_CODE_CACHE: dict[int, tuple[weakref.ref, np.ndarray]] = {}
_P_STRIDE = 1 << 20  # point key = (dtype code * 2 + eager) * _P_STRIDE + world_size


def _dtype_codes(dtype) -> np.ndarray:
    """Integer codes into gpu_kernels.DTYPE_ORDER (unknown names -> bf16); cached per array object."""
    if isinstance(dtype, np.ndarray) and dtype.dtype.kind in "iu":  # already codes
        return dtype
    if isinstance(dtype, np.ndarray) and dtype.size > 1:
        hit = _CODE_CACHE.get(id(dtype))
        if hit is not None and hit[0]() is dtype:
            return hit[1]
        codes = (dtype == "fp16").astype(np.int64) + 2 * (dtype == "fp32")
        if len(_CODE_CACHE) > 64:
            _CODE_CACHE.clear()
        _CODE_CACHE[id(dtype)] = (weakref.ref(dtype), codes)
        return codes
    name = str(np.asarray(dtype).reshape(-1)[0]) if np.size(dtype) else "bf16"
    return np.asarray(DTYPE_ORDER.index(name) if name in DTYPE_ORDER else 0)


def _broadcast(x, shape: tuple) -> np.ndarray:
    """np.broadcast_to, skipped for a value that has the shape already (read-only use either way)."""
    if isinstance(x, np.ndarray):
        return x if x.shape == shape else np.broadcast_to(x, shape)
    return np.asarray(x) if not shape else np.broadcast_to(x, shape)  # a scalar: a 0-d array


def _model_estimate(profile: Profile, op: str, *, rows, cols, world_size, dtype, elem_bytes, mode, padded,
                    draft_cols) -> KernelEstimate:
    """The mechanistic model; inside a measured table of the op's anchor, its anchor part times the table's
    interpolated measured/model ratio."""
    model = profile.kernel_model
    eager = eager_mask(mode)
    codes = _dtype_codes(dtype)
    shape = np.broadcast_shapes(np.shape(rows), np.shape(cols), np.shape(world_size), np.shape(codes),
                                np.shape(eager), np.shape(elem_bytes))
    r = _broadcast(np.asarray(rows, dtype=float), shape)
    c = _broadcast(np.asarray(cols, dtype=float), shape)
    p = _broadcast(np.asarray(world_size, dtype=np.int64), shape)
    kw = {"rows": rows, "cols": cols, "world_size": world_size, "elem_bytes": elem_bytes, "dtype": codes,
          "padded": padded, "draft_cols": draft_cols}  # the caller's objects (gpu_kernels.memo)
    anchor = ANCHOR_OPS.get(op, op)
    part, rest = split_graph_us(model, op, anchor, **kw)
    members = stacked_members(profile)
    # a stacked ensemble (members.py): the points are (1, n), the members' parameters (M, 1), the times (M, n)
    full = (len(members), shape[-1]) if members else shape
    if members and (len(shape) != 2 or shape[0] != 1):
        raise InputError("a stacked ensemble prices (1, points) scenarios only (costmodel.model.members)")
    time = _broadcast(part + rest, full)
    part = _broadcast(part, full)
    if np.any(eager):
        time = np.where(eager, eager_time_us(model, op, time, rows=r, world_size=p), time)
        part = np.where(eager, time, part)
    time = np.array(time, dtype=float)
    extrapolated = np.zeros(shape, dtype=bool)
    tables = [t for t in profile.kernel_tables if t.op == anchor] if op in ANCHOR_OPS else []
    if not tables or not time.size:
        return KernelEstimate(time, extrapolated)
    free = anchor in DTYPE_FREE_OPS
    group = eager if free else codes * 2 + eager  # dtype-free ops (pair_reduce) match every logits dtype
    key = _broadcast(group * _P_STRIDE + p, shape).reshape(-1)
    flat_x = extrapolated.reshape(-1)
    # views: one row per member (a stack), else the flat points; the points' geometry is the same for every row
    flat_t, flat_part = (time.reshape(len(members), -1), part.reshape(len(members), -1)) if members else \
        (time.reshape(-1), part.reshape(-1))
    flat_r, flat_c = r.reshape(-1), c.reshape(-1)
    points_key = dedup.content_key(key, flat_r, flat_c)
    for table in tables:
        eager_t = table.mode == "eager"
        tkey = (eager_t if free else DTYPE_ORDER.index(table.dtype) * 2 + eager_t) * _P_STRIDE + table.world_size
        found = table_geometry(table, tkey, key, flat_r, flat_c, points_key)
        if found is None:
            continue
        ins, outside, weights = found
        if members:  # each member's own measured/model ratio grid: (members, inside points)
            ratio = np.exp(bilinear_rows(member_ratio_grids(profile, table), weights))
            flat_t[:, ins] += flat_part[:, ins] * (ratio - 1.0)
        else:
            ratio = np.exp(bilinear(ratio_grid(model, table)[2], weights))
            flat_t[ins] += flat_part[ins] * (ratio - 1.0)
        flat_x[outside] = True
    return KernelEstimate(time, extrapolated)


_DEDUP_ORDER = ("rows", "dtype", "elem_bytes", "mode", "cols", "world_size", "padded", "draft_cols")
_DEDUP_SHARED = 4  # rows, dtype, elem_bytes, mode: the same objects for every op of one evaluation
DEDUP = True  # price each unique (rows, cols, world size, dtype, ...) point once (dedup.py); False: every point


def _deduplicated_estimate(profile: Profile, op: str, *, store: dict | None = None, **kw) -> KernelEstimate:
    """_model_estimate, evaluated once per unique combination of its arguments and scattered back.

    The model is element-wise, so this returns the same numbers as pricing every point; it only pays
    off for large arrays (dedup.MIN_POINTS), whose scenario grids repeat rows, shards and dtypes.
    """
    if DEDUP and not stacked_members(profile):  # stacked members share points, not parameters: no dedup
        kw["dtype"] = _dtype_codes(kw["dtype"])
        kw["mode"] = eager_mask(kw["mode"])
        # the arguments every op shares first: their combined key is reused (dedup.unique_points' prefix cache)
        names = [k for k in _DEDUP_ORDER if np.ndim(kw[k])]
        shape = np.broadcast_shapes(*(np.shape(kw[k]) for k in names)) if names else ()
        n = int(np.prod(shape, dtype=np.int64))
        if n >= dedup.MIN_POINTS:
            # same-shape arrays go in as they are (their factorization is reused inside a memo block)
            full = [kw[k] if isinstance(kw[k], np.ndarray) and kw[k].shape == shape
                    else np.broadcast_to(kw[k], shape) for k in names]
            shared = sum(1 for k in names if k in _DEDUP_ORDER[:_DEDUP_SHARED])
            found = dedup.unique_points(full, store, shared)
            if found is not None:
                uniq, inverse = found
                est = _model_estimate(profile, op, **{**kw, **dict(zip(names, uniq))})
                u = (len(uniq[0]),)
                time = np.broadcast_to(est.time_us, u)[inverse]
                extrapolated = (np.broadcast_to(est.extrapolated, u)[inverse] if np.any(est.extrapolated)
                                else np.zeros(inverse.shape, dtype=bool))
                return KernelEstimate(time.reshape(shape), extrapolated.reshape(shape))
    return _model_estimate(profile, op, **kw)


def kernel_time_us(profile: Profile, op: str, *, rows, cols, world_size=1, dtype="bf16", elem_bytes=2,
                   mode="graph", draft_cols=0, padded=False) -> KernelEstimate:
    """Time of one kernel op.

    With a GPU kernel model in the profile (`kernels.model`, costmodel.model.gpu_kernels) and an op it prices:
    the model, corrected inside a measured table's range by the table's measured/model ratio (exact at every
    measured point); outside every table the model alone (flagged `extrapolated` where a table exists).
    Otherwise (CPU profiles, fused ops): a measured table where one covers the point, else the roofline.
    `padded` (model only) adds the padding mask and rank offset launches to local_argmax / key_pack.
    """
    if profile.kernel_model is not None and op in MODEL_OPS:
        store = gpu_kernels.memo_store()
        if store is None:
            return _deduplicated_estimate(profile, op, rows=rows, cols=cols, world_size=world_size, dtype=dtype,
                                          elem_bytes=elem_bytes, mode=mode, padded=padded, draft_cols=draft_cols)
        args = (profile, rows, cols, world_size, dtype, elem_bytes, mode, draft_cols, padded)
        key = ("kernel_time_us", op, *map(id, args))
        hit = store.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], args)):
            return hit[1]
        out = _deduplicated_estimate(profile, op, rows=rows, cols=cols, world_size=world_size, dtype=dtype,
                                     elem_bytes=elem_bytes, mode=mode, padded=padded, draft_cols=draft_cols,
                                     store=store)
        store[key] = (args, out)  # the arguments stay alive inside the memo block, so their ids stay unique
        return out
    r, c, p, d, eager = np.broadcast_arrays(
        np.asarray(rows, dtype=float), np.asarray(cols, dtype=float), np.asarray(world_size, dtype=np.int64),
        np.asarray(dtype).astype(str), eager_mask(mode))
    time = roofline_us(profile, op, rows, cols, world_size, elem_bytes, mode, draft_cols)
    # a stacked ensemble (costmodel.model.members): (members, n) times of (1, n) points; the flags follow the points
    stacked = np.shape(time) != r.shape and bool(stacked_members(profile))
    extrapolated = np.zeros(r.shape if stacked else time.shape, dtype=bool)
    tables = [t for t in profile.kernel_tables if t.op == op]
    if not tables:
        return KernelEstimate(time, extrapolated)
    time = np.broadcast_to(time, np.broadcast_shapes(np.shape(time), r.shape)).copy()
    extrapolated = np.broadcast_to(extrapolated, r.shape).copy()
    for table in tables:
        same_dtype = True if op.removesuffix("_fused") in DTYPE_FREE_OPS else d == table.dtype
        mask = same_dtype & (eager == (table.mode == "eager")) & (p == table.world_size)
        if not mask.any():
            continue
        values, outside = table_us(table, r[mask], c[mask])
        where = (slice(None), mask.reshape(-1)) if stacked else mask  # every member's row at the table's points
        time[where] = np.where(outside, time[where], values)
        extrapolated[mask] = outside
    return KernelEstimate(time, extrapolated)


LM_HEAD_DEFAULT = ("no kernels.lm_head in the profile: default - vLLM's head start (the lm_head GEMM queued before the "
                   "argmax chain) is 0 us, so its host launches count fully exposed")


def lm_head_time_us(profile: Profile, rows, hidden, shard) -> np.ndarray | None:
    """The draft call's lm_head GEMM [rows, hidden] x [hidden, shard] per call (us), from the profile's
    `kernels.lm_head` model (costmodel.profiles.kernel_params.LmHeadModel); None when the profile has none.

    Context only: every strategy runs the same GEMM, so it never changes a saving or a crossover.
    """
    if profile.lm_head is None or hidden is None:
        return None
    return lm_head_gemm_us(profile.lm_head, rows, hidden, shard)


def kernel_context(profile: Profile, scenario) -> dict:
    """What priced the kernels, and the draft call's lm_head GEMM time (context, common to every strategy) for a
    scalar scenario: {"kernels": provenance text, "lm_head_us": float | None, "lm_head_source": str}.

    lm_head_us = lm_head_time_us(rows per call, hidden, shard) per draft call; None without a hidden size
    (presets carry it) or without `kernels.lm_head` in the profile.
    """
    model = profile.kernel_model
    if model is None:
        kernels = "roofline per op (kernels.ops) and the profile's measured tables"
    elif model.provenance == "measured":
        kernels = f"{model.source}; measured tables win inside their range"
    else:
        kernels = model.source
    s = scenario.item(0)
    hidden = None if s.hidden is None else int(s.hidden)
    lm = lm_head_time_us(profile, float(s.rows), hidden, int(s.shard))
    return {"kernels": kernels, "lm_head_us": None if lm is None else float(lm),
            "lm_head_source": LM_HEAD_DEFAULT if profile.lm_head is None else profile.lm_head.source}
