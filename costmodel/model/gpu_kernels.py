"""Mechanistic model of the torch CUDA kernels the draft-token strategies run (pure numpy).

A roofline (bytes / bandwidth) is the wrong shape for torch's reductions: their time is flat in
batch over wide ranges, jumps with the row width and drops when a row is long enough to be split
across thread blocks. This module prices each kernel from the launch configuration ATen actually
picks, plus a handful of per-GPU parameters (`GpuKernelModel`), fitted on measured tables
(`fit_model`) or derived from a measured GPU by SM count and HBM bandwidth (`derive_model`).

Reductions over the last dim of a contiguous [R, C] tensor (torch.max(dim=-1), torch.argmax)
-------------------------------------------------------------------------------------------
ATen launches one `reduce_kernel` whose configuration `reduce_launch` reproduces
(pytorch/pytorch aten/src/ATen/native/cuda/Reduce.cuh, `ReduceConfig::set_block_dimension`
and `setReduceConfig`; vt0 = input_vec_size = 4, MAX_NUM_THREADS = 512; the block width cap is the warp size,
`at::cuda::warp_size()`: 32 on NVIDIA, 64 on AMD CDNA wavefronts under ROCm - the profile's `warp_size`):

    dim0 = C / 4 if C >= 128 (vectorize along input) else C;  dim1 = R
    d0 = last_pow2(dim0) capped at 512, d1 = last_pow2(dim1) capped at 512
    block_width  bw = min(d0, warp);  block_height bh = min(d1, 512 / bw);  bw = min(d0, 512 / bh)
    lanes split the row: step = bw, values_per_thread vpt = ceil(C / step)
    split across warps  if vpt >= min(16 * bh, 256):  step *= bh (one output per block)
                        else each warp owns its own output (bh outputs per block)
    target_grid = SMs * (max_threads_per_SM / (bw * bh));  grid = ceil(R / outputs_per_block)
    split across blocks if warps split and vpt >= 256 and grid <= target_grid:
        ctas = max(min(ceil(target_grid / grid), ceil(vpt / 16)), ceil(vpt / 256)); step *= ctas
    blocks = grid * ctas,  vpt = ceil(C / step)

At one output per block and B = 1 the block split starts at C >= 512 * 256 = 131,072 elements:
the threshold seen in the H200 tables. The time of one reduction kernel:

    T = floor_op + global_us * [ctas > 1]
        + sum over waves w of ( wave_us + max(vpt * value_us, elems(w) / rate) )
    waves: full waves of target_grid blocks, then the remainder; elems(w) = blocks(w) * threads * vpt
    rate  = min(elems_per_us[op], reduce_gbps * 1e3 / e)        (elements per us)

vpt * value_us is one thread's serial chain of loads (latency bound, small grids); elems / rate is
the GPU's element-rate or byte-rate bound (full waves). bf16 and fp32 cost the same while the
element rate binds (it does on H200: bf16 and fp32 argmax over [2048, 202048] both ~418 us).

Copies, views and small kernels
-------------------------------
    relayout copy  = 0 when R == 1 or p == 1 (reshape(p, R, s).movedim(0, -2).reshape(R, p*s) is a view)
                     else copy_floor_us + 2 * R * p * s * e / copy_gbps[dtype] * 1e-3
    small kernel   = small_us + R * small_row_us     (one elementwise launch over R rows: casts, stack,
                                                      offset add, key arithmetic, gathers)
    pair reduce    = pair_base_us + pair_row_us * sqrt(R) + pair_peer_us * log2(p)   (four small launches
                     over [p, R] pairs; an empirical shape fitted on the measured table, not mechanistic)

Engine ops (costmodel.io.measurements.KERNEL_OPS) are compositions, with the launch counts of the reference
implementations (calibration/reference/strategies.py) and of vLLM's LogitsProcessor.get_top_tokens:

    local_max       reduce_max(R, s)
    local_argmax_masked  reduce_max(R, s - 64) + 4 small (calibration.kernels' padding variant: the last rank's
                    64 padding ids sliced off, rank offset, pack)
    local_pack      reduce_max(R, s) + 3 small (vals.float(), ids.float(), stack)      (the H200 probe's op)
    local_argmax    local_pack (the rank offset and the padding mask are priced by costmodel.model.strategies as
                    their own components, `local_fixups`; `padded=True` adds them here for a standalone price)
    key_pack        reduce_max(R, s) + KEY_PACK_SMALL small (order key arithmetic) [+ the same fix-ups]
    argmax          reduce_argmax(R, C)
    relayout_copy   copy (above)
    relayout_argmax relayout_copy + reduce_argmax(R, p * s)
    chunked_argmax  reduce_max(p * R, s) + CHUNKED_SMALL small (argmax over p, gathers, id arithmetic)
    pair_reduce     pair reduce (above)
    key_unpack      2 small;  d2t_lookup 2 small
    d2t_scatter     fill [R, V_target] + scatter R * 32000 logits: copy bytes at the copy rate + 3 small

Eager mode: the host launches every torch op one by one (`torch_op_us` per kernel-launching op,
`view_op_us` per view op); the GPU-side time is the graph time plus `eager_gap_us` per kernel:

    T_eager = max(host_ops * torch_op_us + view_ops * view_op_us, T_graph + kernels * eager_gap_us)

Measured tables still win inside their range: `costmodel.model.kernels` multiplies the model by the
interpolated measured/model ratio of the table (exact at every measured point) and uses the model
alone outside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..io.errors import InputError
from ..profiles.kernel_params import GpuKernelModel, LmHeadModel
from . import dedup
from .dedup import _MEMO

# ATen Reduce.cuh constants (see the module doc)
MAX_NUM_THREADS = 512
WARP_SIZE = 32
INPUT_VEC_SIZE = 4
VECTORIZE_MIN_DIM0 = 128
MIN_VALUES_PER_THREAD = 16
MAX_VALUES_PER_THREAD = 256
WARP_SPLIT_VALUES = 16
# row widths where the launch changes for a contiguous last-dim reduction: split across warps from
# 16 * 512 elements, across blocks from 256 * 512 (while the grid fits on the GPU at once)
REGIME_EDGES_COLS = (WARP_SPLIT_VALUES * MAX_NUM_THREADS, MAX_VALUES_PER_THREAD * MAX_NUM_THREADS)

PACK_SMALL = 3  # vals.float(), ids.float(), torch.stack
KEY_PACK_SMALL = 14  # calibration/reference/strategies.py order_key_hi + make_keys: float, ne, full_like, where, eq,
#                      zeros_like, where, >>, &, ^, long, *, -, +
CHUNKED_SMALL = 5  # chunked_argmax: argmax over p, 2 gathers, win * s, + idx
D2T_SCATTER_SMALL = 3  # d2t_targets (arange + d2t), index_put launch, new_full launch

MODEL_OPS = ("local_max", "local_pack", "local_argmax", "local_argmax_masked", "key_pack", "argmax", "relayout_copy",
             "relayout_argmax", "chunked_argmax", "pair_reduce", "key_unpack", "d2t_lookup", "d2t_scatter")
# (kernel-launching torch ops, view ops) the host issues per call in eager mode
HOST_OPS: dict[str, tuple[float, float]] = {
    "local_max": (1, 0), "local_pack": (4, 0), "local_argmax": (4, 0), "local_argmax_masked": (5, 1),
    "key_pack": (1 + KEY_PACK_SMALL, 0),
    "argmax": (1, 1), "relayout_copy": (1, 2), "relayout_argmax": (2, 3), "chunked_argmax": (1 + CHUNKED_SMALL, 2),
    "pair_reduce": (4, 2), "key_unpack": (2, 0), "d2t_lookup": (2, 0), "d2t_scatter": (1 + D2T_SCATTER_SMALL, 0),
}


def _last_pow2(n: np.ndarray) -> np.ndarray:
    """floor to a power of two, at least 1 (Reduce.cuh last_pow2)."""
    _mantissa, exponent = np.frexp(np.maximum(n, 1.0))
    return np.ldexp(1.0, exponent - 1)


@dataclass(frozen=True)
class ReduceLaunch:
    """ATen's launch configuration of one last-dim reduction (arrays broadcast over the inputs)."""

    threads: np.ndarray  # threads per block (block_width * block_height)
    values_per_thread: np.ndarray
    ctas_per_output: np.ndarray  # > 1: the row is split across blocks (a global reduce)
    blocks: np.ndarray
    target_grid: np.ndarray  # blocks resident at once: SMs * (max threads per SM / threads)


def reduce_launch(rows, cols, sm_count: int, max_threads_per_sm: int = 2048,
                  warp_size: int = WARP_SIZE) -> ReduceLaunch:
    """Reduce.cuh's setReduceConfig for a contiguous [rows, cols] tensor reduced over its last dim (block width
    capped at `warp_size`: 32 threads per warp on NVIDIA, 64 per wavefront on AMD CDNA)."""
    r = np.maximum(np.asarray(rows, dtype=float), 1.0)
    c = np.maximum(np.asarray(cols, dtype=float), 1.0)
    dim0 = np.where(c >= VECTORIZE_MIN_DIM0, np.floor(c / INPUT_VEC_SIZE), c)
    d0 = np.where(dim0 < MAX_NUM_THREADS, _last_pow2(dim0), MAX_NUM_THREADS)
    d1 = np.where(r < MAX_NUM_THREADS, _last_pow2(r), MAX_NUM_THREADS)
    bw = np.minimum(d0, warp_size)
    bh = np.minimum(d1, MAX_NUM_THREADS / bw)
    bw = np.minimum(d0, MAX_NUM_THREADS / bh)
    threads = bw * bh
    vpt = np.ceil(c / bw)
    warp_split = vpt >= np.minimum(WARP_SPLIT_VALUES * bh, MAX_VALUES_PER_THREAD)
    step = np.where(warp_split, bw * bh, bw)
    vpt = np.ceil(c / step)
    target = sm_count * np.floor(max_threads_per_sm / threads)
    grid = np.ceil(r / np.where(warp_split, 1.0, bh))
    block_split = warp_split & (vpt >= MAX_VALUES_PER_THREAD) & (grid <= target)
    ctas = np.maximum(np.minimum(np.ceil(target / grid), np.ceil(vpt / MIN_VALUES_PER_THREAD)),
                      np.ceil(vpt / MAX_VALUES_PER_THREAD))
    ctas = np.where(block_split, ctas, 1.0)
    vpt = np.ceil(c / (step * ctas))
    return ReduceLaunch(threads, vpt, ctas, grid * ctas, target)


# -- pricing -------------------------------------------------------------------------------------------------
def memo_store() -> dict | None:
    """The active `memo()` store (None outside a memo block; see costmodel.model.dedup.memo)."""
    return _MEMO.get()


def reduce_time_us(model: GpuKernelModel, kind: str, rows, cols, elem_bytes) -> np.ndarray:
    """Graph-mode time of one last-dim reduction kernel (`kind` "max" or "argmax"), module-doc formula."""
    store = _MEMO.get()
    if store is not None:
        args = (rows, cols, elem_bytes)
        key = (id(model), kind, *map(id, args))
        hit = store.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], args)):
            return hit[1]
        out = _reduce_time_us(model, kind, rows, cols, elem_bytes)
        store[key] = (args, out)  # keeps the arguments alive, so their ids stay unique inside the block
        return out
    return _reduce_time_us(model, kind, rows, cols, elem_bytes)


# reduce_launch of small (rows, cols) arrays by content: the same for every ensemble member of one scenario
_LAUNCHES = dedup.ContentCache(256)


def _launch(rows, cols, sm_count: int, max_threads_per_sm: int, warp_size: int = WARP_SIZE) -> ReduceLaunch:
    """reduce_launch, cached by the contents of small inputs (dedup.content_key; the result is shared: read only)."""
    found = dedup.content_key(rows, cols)
    if found is None:
        return reduce_launch(rows, cols, sm_count, max_threads_per_sm, warp_size)
    key = (found, sm_count, max_threads_per_sm, warp_size)
    hit = _LAUNCHES.get(key)
    if hit is None:
        hit = reduce_launch(rows, cols, sm_count, max_threads_per_sm, warp_size)
        _LAUNCHES.put(key, hit)
    return hit


def _reduce_time_us(model: GpuKernelModel, kind: str, rows, cols, elem_bytes) -> np.ndarray:
    op = model.reduce_ops[kind]
    launch = _launch(rows, cols, model.sm_count, model.max_threads_per_sm, model.warp_size)
    rate = np.minimum(op.elems_per_us, model.reduce_gbps * 1e3 / np.asarray(elem_bytes, dtype=float))
    lat = launch.values_per_thread * model.value_us
    per_block = launch.threads * launch.values_per_thread / rate
    full = np.floor(launch.blocks / launch.target_grid)
    rest = launch.blocks - full * launch.target_grid
    waves = (full * (model.wave_us + np.maximum(lat, launch.target_grid * per_block))
             + (rest > 0) * (model.wave_us + np.maximum(lat, rest * per_block)))
    return op.floor_us + model.global_reduce_us * (launch.ctas_per_output > 1) + waves


def small_us(model: GpuKernelModel, rows) -> np.ndarray:
    """One small elementwise launch over `rows` rows (graph mode)."""
    return model.small_us + np.asarray(rows, dtype=float) * model.small_row_us


DTYPE_ORDER = ("bf16", "fp16", "fp32")  # integer dtype codes (costmodel.model.kernels passes codes, not strings)


def _copy_gbps(model: GpuKernelModel, dtype) -> np.ndarray:
    """copy_gbps per point; `dtype` is dtype names or integer codes into DTYPE_ORDER."""
    stacked = any(np.ndim(v) for v in model.copy_gbps.values())  # (members, 1) arrays: costmodel.model.members
    fallback = np.maximum.reduce(list(model.copy_gbps.values())) if stacked else max(model.copy_gbps.values())
    arr = np.asarray(dtype)
    if arr.dtype.kind in "iu":
        if stacked:
            return np.choose(arr, [model.copy_gbps.get(k, fallback) for k in DTYPE_ORDER])
        return np.array([model.copy_gbps.get(k, fallback) for k in DTYPE_ORDER])[arr]
    names = arr.astype(str)
    out = fallback if stacked else np.full(names.shape, fallback)
    for k, v in model.copy_gbps.items():
        out = np.where(names == k, v, out)
    return out


def relayout_copy_us(model: GpuKernelModel, rows, cols, world_size, elem_bytes, dtype) -> np.ndarray:
    """0 when rows == 1 or p == 1 (a view), else copy_floor + 2*R*p*s*e / copy_gbps[dtype]."""
    r = np.asarray(rows, dtype=float)
    p = np.asarray(world_size, dtype=float)
    nbytes = 2 * r * p * np.asarray(cols, dtype=float) * np.asarray(elem_bytes, dtype=float)
    t = model.copy_floor_us + nbytes / _copy_gbps(model, dtype) * 1e-3
    return np.where((r > 1) & (p > 1), t, 0.0)


def pair_reduce_us(model: GpuKernelModel, rows, world_size) -> np.ndarray:
    """pair_base + pair_row * sqrt(R) + pair_peer * log2(p) (empirical shape, see the module doc)."""
    r = np.asarray(rows, dtype=float)
    return (model.pair_base_us + model.pair_row_us * np.sqrt(r)
            + model.pair_peer_us * np.log2(np.maximum(np.asarray(world_size, dtype=float), 1.0)))


def graph_time_us(model: GpuKernelModel, op: str, *, rows, cols, world_size=1, elem_bytes=2, dtype="bf16",
                  padded=False, draft_cols=0) -> np.ndarray:
    """CUDA-graph time of one engine op (composition table in the module doc; the reductions get the caller's
    own array objects, so `memo()` can recognise repeated arguments)."""
    r = np.asarray(rows, dtype=float)
    s = np.asarray(cols, dtype=float)
    p = np.asarray(world_size, dtype=float)
    e = np.asarray(elem_bytes, dtype=float)
    if op == "local_max":
        return reduce_time_us(model, "max", rows, cols, elem_bytes)
    if op == "local_pack":
        return reduce_time_us(model, "max", rows, cols, elem_bytes) + PACK_SMALL * small_us(model, r)
    if op in ("local_argmax", "key_pack"):
        extra = PACK_SMALL if op == "local_argmax" else KEY_PACK_SMALL
        return (reduce_time_us(model, "max", rows, cols, elem_bytes)
                + (extra + 2 * np.asarray(padded, dtype=float)) * small_us(model, r))
    if op == "local_argmax_masked":  # the benchmark's padding variant: max over s - 64 columns, offset, pack
        return reduce_time_us(model, "max", r, s - 64, e) + (PACK_SMALL + 1) * small_us(model, r)
    if op == "argmax":
        return reduce_time_us(model, "argmax", rows, cols, elem_bytes)
    if op == "relayout_copy":
        return relayout_copy_us(model, r, s, p, e, dtype)
    if op == "relayout_argmax":
        return relayout_copy_us(model, r, s, p, e, dtype) + reduce_time_us(model, "argmax", rows, p * s, elem_bytes)
    if op == "chunked_argmax":
        return reduce_time_us(model, "max", p * r, cols, elem_bytes) + CHUNKED_SMALL * small_us(model, r)
    if op == "pair_reduce":
        return pair_reduce_us(model, r, p)
    if op in ("key_unpack", "d2t_lookup"):
        return 2 * small_us(model, r) + 0 * s
    if op == "d2t_scatter":
        vd = np.asarray(draft_cols, dtype=float)
        nbytes = r * s * e + 2 * r * vd * e
        return model.copy_floor_us + nbytes / _copy_gbps(model, dtype) * 1e-3 + D2T_SCATTER_SMALL * small_us(model, r)
    raise InputError(f"the GPU kernel model has no op {op!r}")


def split_graph_us(model: GpuKernelModel, op: str, anchor: str, **kw) -> tuple[np.ndarray, np.ndarray]:
    """(anchor part, rest) of `op`'s graph time, where `anchor` is the measured op inside it (costmodel.model.kernels
    corrects the anchor part with its table): local_argmax = local_pack + [fix-ups], key_pack = local_max + key
    arithmetic; any other op is its own anchor (rest 0)."""
    if op in ("local_argmax", "key_pack") and anchor != op:
        r = np.asarray(kw["rows"], dtype=float)
        reduce = reduce_time_us(model, "max", kw["rows"], kw["cols"], kw.get("elem_bytes", 2))
        small = small_us(model, r)
        pad = 2 * np.asarray(kw.get("padded", False), dtype=float)
        if op == "local_argmax":  # anchor local_pack = max + pack
            return reduce + PACK_SMALL * small, pad * small
        return reduce, (KEY_PACK_SMALL + pad) * small
    g = graph_time_us(model, op, **kw)
    return g, np.zeros(np.shape(g))


def launches_per_call(op: str, rows, world_size) -> tuple[np.ndarray, np.ndarray]:
    """(kernel-launching torch ops, view ops) of one call; the relayout reshape is a view at R == 1 or p == 1."""
    launching, views = HOST_OPS[op]
    shape = np.broadcast_shapes(np.shape(rows), np.shape(world_size))
    launching = np.full(shape, float(launching))
    views = np.full(shape, float(views))
    if op in ("relayout_copy", "relayout_argmax"):
        view = ~((np.asarray(rows) > 1) & (np.asarray(world_size) > 1))
        launching = launching - view
        views = views + view
    return launching, views


def eager_time_us(model: GpuKernelModel, op: str, graph_us, *, rows, world_size=1) -> np.ndarray:
    """max(host launch time, GPU time + per-kernel eager gaps) (module doc)."""
    launching, views = launches_per_call(op, rows, world_size)
    host = launching * model.torch_op_us + views * model.view_op_us
    return np.maximum(host, np.asarray(graph_us, dtype=float) + launching * model.eager_gap_us)


def model_time_us(model: GpuKernelModel, op: str, *, rows, cols, world_size=1, elem_bytes=2, dtype="bf16",
                  eager=False, padded=False, draft_cols=0) -> np.ndarray:
    """Time of one engine op in graph or eager mode (`eager` may be a boolean array)."""
    g = graph_time_us(model, op, rows=rows, cols=cols, world_size=world_size, elem_bytes=elem_bytes, dtype=dtype,
                      padded=padded, draft_cols=draft_cols)
    eager = np.asarray(eager, dtype=bool)
    if not eager.any():
        return g
    return np.where(eager, eager_time_us(model, op, g, rows=rows, world_size=world_size), g)


def lm_head_gemm_us(model: LmHeadModel, rows, hidden, shard) -> np.ndarray:
    """LmHeadModel's formula, vectorized."""
    h = np.asarray(hidden, dtype=float)
    s = np.asarray(shard, dtype=float)
    r = np.asarray(rows, dtype=float)
    return model.floor_us + np.maximum(h * s * 2 / model.weight_gbps * 1e-3, 2 * r * h * s / model.tflops * 1e-6)
