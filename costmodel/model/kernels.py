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
from ..io.schema_names import DTYPES
from ..profiles.kernel_params import GpuKernelModel
from ..profiles.types import KernelTable, Profile
from . import dedup, gpu_kernels
from .collectives import eager_mask
from .dedup import memo
from .gpu_kernels import DTYPE_ORDER, MODEL_OPS, eager_time_us, lm_head_gemm_us, model_time_us, split_graph_us
from .kernel_tables import table_us

kernel_memo = memo  # `with kernel_memo():` around a strategy sweep reuses identical reductions (gpu_kernels.memo)

ID_BYTES = 8  # int64 ids / packed 64-bit keys
# ops that never touch the logits, so their measured tables apply to every logits dtype
DTYPE_FREE_OPS = ("pair_reduce", "key_unpack", "d2t_lookup")
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
_RATIO_CACHE: dict[tuple[int, int], tuple[KernelTable, GpuKernelModel, tuple]] = {}
_RATIO_CACHE_SIZE = 4096  # (model, table) pairs: 16 ensembles of 100 members x a few tables each
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
    grids = np.broadcast_to(_log_ratio_grid(profile.kernel_model, table, flat=True), (len(members), len(table.rows)
                                                                                       * len(table.cols)))
    cache[id(table)] = (table, grids)
    return grids


def _bilinear_rows(grids: np.ndarray, weights: tuple) -> np.ndarray:
    """`_bilinear` of every row of `grids` (one flat grid per ensemble member), in the same order of operations:
    (members, points)."""
    (k00, k01, k10, k11), (nu, u, nv, v) = weights
    return nu * (nv * grids[:, k00] + v * grids[:, k01]) + u * (nv * grids[:, k10] + v * grids[:, k11])


def _log_ratio_grid(model: GpuKernelModel, table: KernelTable, flat: bool = False) -> np.ndarray:
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


def _ratio_grid(model: GpuKernelModel, table: KernelTable) -> tuple:
    """(log rows axis, log cols axis, log(measured / model) grid) of a table; cached per (model, table)."""
    key = (id(model), id(table))
    hit = _RATIO_CACHE.get(key)
    if hit is not None and hit[0] is table and hit[1] is model:
        return hit[2]
    out = (np.log(np.asarray(table.rows)), np.log(np.asarray(table.cols)), _log_ratio_grid(model, table))
    if len(_RATIO_CACHE) >= _RATIO_CACHE_SIZE:  # oldest first: a profile's 100 replicates x tables fit
        _RATIO_CACHE.pop(next(iter(_RATIO_CACHE)))
    _RATIO_CACHE[key] = (table, model, out)  # both kept alive, so their ids stay theirs while cached
    return out


def _axis_weights(axis: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower index, weight of the upper node) of linear interpolation on a sorted axis (x inside it)."""
    if len(axis) == 1:
        return np.zeros(x.shape, dtype=np.int64), np.zeros(x.shape)
    i = np.clip(np.searchsorted(axis, x, side="right") - 1, 0, len(axis) - 2)
    return i, np.clip((x - axis[i]) / (axis[i + 1] - axis[i]), 0.0, 1.0)


def _bilinear_weights(lr: np.ndarray, lc: np.ndarray, r: np.ndarray, c: np.ndarray) -> tuple:
    """The grid nodes (flat indices into a C-ordered (len(lr), len(lc)) grid: [i, j], [i, j+1], [i+1, j],
    [i+1, j+1]) and weights (1 - u, u, 1 - v, v) of (log r, log c) on the axes (lr, lc)."""
    i, u = _axis_weights(lr, np.log(r))
    j, v = _axis_weights(lc, np.log(np.maximum(c, 1e-12)))
    i1, j1, n = np.minimum(i + 1, len(lr) - 1), np.minimum(j + 1, len(lc) - 1), len(lc)
    return (i * n + j, i * n + j1, i1 * n + j, i1 * n + j1), (1 - u, u, 1 - v, v)


def _bilinear(g: np.ndarray, weights: tuple) -> np.ndarray:
    """(1 - u) ((1 - v) g[i, j] + v g[i, j1]) + u ((1 - v) g[i1, j] + v g[i1, j1]) (this order of operations)."""
    (k00, k01, k10, k11), (nu, u, nv, v) = weights
    flat = np.ravel(g)
    return nu * (nv * flat.take(k00) + v * flat.take(k01)) + u * (nv * flat.take(k10) + v * flat.take(k11))


def _log_ratio(grid: tuple, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Bilinear interpolation of the log ratio grid in (log rows, log cols)."""
    lr, lc, g = grid
    return _bilinear(g, _bilinear_weights(lr, lc, r, c))


# per (points, table axes): (points inside the table, points outside, bilinear weights) - the same for every
# ensemble member pricing one scenario (only the ratio grid and the model part differ)
_GEOMETRY = dedup.ContentCache(256)


def _table_geometry(table: KernelTable, tkey: int, key: np.ndarray, flat_r: np.ndarray,
                    flat_c: np.ndarray, points_key: tuple | None) -> tuple | None:
    """(flat indices inside `table`'s range, flat indices outside it, bilinear weights of the inside ones) of the
    points whose (dtype, mode, world size) key is `tkey`; None when there are none. Cached by content."""
    ckey = None if points_key is None else (points_key, tkey, table.rows, table.cols)
    hit = None if ckey is None else _GEOMETRY.get(ckey)
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
        out = (sel[inside], sel[~inside], _bilinear_weights(lr, lc, rm[inside], cm[inside]))
    if ckey is not None:
        _GEOMETRY.put(ckey, (out,))
    return out


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
        found = _table_geometry(table, tkey, key, flat_r, flat_c, points_key)
        if found is None:
            continue
        ins, outside, weights = found
        if members:  # each member's own measured/model ratio grid: (members, inside points)
            ratio = np.exp(_bilinear_rows(member_ratio_grids(profile, table), weights))
            flat_t[:, ins] += flat_part[:, ins] * (ratio - 1.0)
        else:
            ratio = np.exp(_bilinear(_ratio_grid(model, table)[2], weights))
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
    """The draft step's lm_head GEMM [rows, hidden] x [hidden, shard] per call (us), from the profile's
    `kernels.lm_head` model (costmodel.profiles.kernel_params.LmHeadModel); None when the profile has none.

    Context only: every strategy runs the same GEMM, so it never changes a saving or a crossover.
    """
    if profile.lm_head is None or hidden is None:
        return None
    return lm_head_gemm_us(profile.lm_head, rows, hidden, shard)


def kernel_context(profile: Profile, scenario) -> dict:
    """What priced the kernels, and the draft step's lm_head GEMM time (context, common to every strategy) for a
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
