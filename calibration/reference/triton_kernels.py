"""Fused Triton kernels for the local-argmax path (local_argmax_pairs and packed_allreduce_max).

Per rank, on the local logits [B, s] (s = V_pad / p, ids [rank*s, (rank+1)*s), padding at the end of
the last shard, i.e. every local column c with rank*s + c >= vocab):

    y[b, c] = -inf                        where rank*s + c >= vocab (padding, masked AFTER the transforms)
            = T(x[b, c])                  otherwise
    T(x)    = r(r(x0 * scale))            with x0 = r(r(tanh(r(x / cap))) * cap) if a soft-cap is set, else x
    best[b] = lowest c with k(y[b, c]) == max_c k(y[b, c])
    k(v)    = ord32(canon(v))             (the order key of costmodel/model/strategies.py)

r() rounds to the logits dtype after every step, like torch's eager op-by-op pipeline on bf16/fp16
logits (vLLM's LogitsProcessor: logits / cap, tanh, * cap, then *= scale). The arithmetic follows torch
on each device: natively on CUDA x / cap is x * fp32(1 / cap) and tanh is libdevice tanhf (what torch's
CUDA kernels compute); under the interpreter (CPU) x / cap is an IEEE division and tanh is evaluated in
fp64 and rounded to fp32 (torch's CPU tanh is within an ulp of it: with a soft-cap on fp32 logits the
value can then differ from torch's in the last bit). A positive scale alone matches torch bit for bit.
canon() maps -0.0 to +0.0 and every NaN to the quiet NaN 0x7FC00000, and
ord32(bits) = bits if bits >= 0 else bits ^ 0x7FFFFFFF (signed int32), so integer order equals float
order with NaN above +inf: the result is exactly torch.argmax's (NaN counts as the maximum, ties and
NaNs resolve to the lowest index; a row of all -inf returns column 0).

Kernels
    _local_partial_kernel   grid (B, n_chunks): max key and its lowest column per BLOCK-wide chunk;
                            with one chunk per row it writes the final output itself (one launch)
    _local_combine_kernel   grid (B,): reduce the chunk partials per row (ties to the lowest column) and write
                              pairs: out[b] = (fp32 value canon(y[b, best]), fp32 id best + rank*s)  [B, 2] fp32
                              keys:  out[b] = (k << 32) | (2^32 - 1 - (best + rank*s))                [B] int64
    _pair_reduce_kernel     gathered pairs -> int64 id of the lowest rank holding the largest key k(value);
                            reads [B, 2p] (all_gather(dim=-1): rank r at columns 2r, 2r+1) or, in place,
                            [p*B, 2] (all_gather_into_tensor's concat layout: rank r at rows r*B..)
    _key_unpack_kernel      id = 2^32 - 1 - (key & 0xFFFFFFFF)

Chunk size (`choose_block`), BLOCK a power of two:
    shard <= 4096                           next_pow2(shard) (>= 16): one chunk per row, one launch
    rows * ceil(shard / 4096) >= 1024       4096  (enough programs to fill the GPU with big tiles)
    rows * ceil(shard / 2048) >= 512        2048
    otherwise                               1024  (small batches: split the vocab finely for parallelism)
A shard that BLOCK does not divide is handled by masking the last chunk.

Triton is imported here and only here; without it importing this module raises ImportError. On CPU
tensors the kernels run only under Triton's interpreter: TRITON_INTERPRET=1 must be set before this
module is imported (`INTERPRETED` tells which mode the kernels were built in).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from costmodel.model.scenario import MAX_EXACT_FP32_ID

try:
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice
except ImportError as exc:  # pragma: no cover - exercised only where Triton is absent
    raise ImportError(
        f"calibration.reference.triton_kernels needs Triton (pip install triton==3.9.0); it could not be imported: "
        f"{exc}"
    ) from exc

__all__ = [
    "INTERPRETED",
    "choose_block",
    "fused_local_argmax_pairs",
    "fused_key_pack",
    "fused_pair_reduce",
    "fused_key_unpack",
]

MAX_KEY_ID = 2**32  # ids must fit the 32-bit low half of the packed key
_ROUND = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
_PAIR_ROWS = 64  # rows per program of the pair reduce
_UNPACK_BLOCK = 1024  # keys per program of the key unpack


# --- device helpers --------------------------------------------------------------------------------
@triton.jit
def _round_to(x, ROUND: tl.constexpr):
    """Round fp32 x to the logits dtype (0 fp32: identity, 1 bf16, 2 fp16), round to nearest even, as fp32."""
    if ROUND == 1:
        bits = x.to(tl.int32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        x = tl.where(x != x, x, rounded.to(tl.float32, bitcast=True))
    elif ROUND == 2:
        x = x.to(tl.float16).to(tl.float32)
    return x


@triton.jit
def _tanh_f32(y, CUDA_MATH: tl.constexpr):
    """tanh of fp32 y. CUDA: libdevice tanhf (what torch's CUDA tanh calls). Else in fp64, rounded to fp32:
    (1 - e^-2a) / (1 + e^-2a) with a = |y|, and a * (1 - a^2/3) below a = 2^-10."""
    if CUDA_MATH:
        t = libdevice.tanh(y)
    else:
        a = tl.abs(y).to(tl.float64)
        e = tl.exp(-2.0 * a)
        big = (1.0 - e) / (1.0 + e)
        small = a * (1.0 - a * a / 3.0)
        t = tl.where(a < 0.0009765625, small, big)
        t = tl.where(y < 0, -t, t).to(tl.float32)
    return t


@triton.jit
def _transform(x, softcap, inv_softcap, scale, SOFTCAP: tl.constexpr, SCALE: tl.constexpr,
               CUDA_MATH: tl.constexpr, ROUND: tl.constexpr):
    """vLLM's soft-cap then scale, rounded to the logits dtype after every op (see the module doc).

    x / cap is x * fp32(1 / cap) with CUDA_MATH (torch's CUDA division by a Python scalar), else IEEE x / cap.
    """
    if SOFTCAP:
        if CUDA_MATH:
            x = _round_to(x * inv_softcap, ROUND)
        else:
            x = _round_to(tl.math.div_rn(x, softcap), ROUND)
        x = _round_to(_tanh_f32(x, CUDA_MATH), ROUND)
        x = _round_to(x * softcap, ROUND)
    if SCALE:
        x = _round_to(x * scale, ROUND)
    return x


@triton.jit
def _order_key(v):
    """ord32(canon(v)): signed int32 whose order is the float order, -0.0 == +0.0, every NaN above +inf."""
    v = tl.where(v == 0.0, 0.0, v)
    bits = v.to(tl.int32, bitcast=True)
    bits = tl.where(v != v, 0x7FC00000, bits)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


@triton.jit
def _write_result(out_ptr, row, kmax, col, id_base, low_base, OUT_KEY: tl.constexpr):
    """Pairs: (fp32 value, fp32 id) at out[row, 0:2]; keys: (kmax << 32) + (2^32 - 1 - id) at out[row]."""
    if OUT_KEY:
        key = (kmax.to(tl.int64) << 32) + (low_base.to(tl.int64) - col.to(tl.int64))
        tl.store(out_ptr + row, key)
    else:
        bits = tl.where(kmax >= 0, kmax, kmax ^ 0x7FFFFFFF)
        gid = col.to(tl.int64) + id_base
        tl.store(out_ptr + row * 2, bits.to(tl.float32, bitcast=True))
        tl.store(out_ptr + row * 2 + 1, gid.to(tl.float32))


# --- kernels ---------------------------------------------------------------------------------------
@triton.jit
def _local_partial_kernel(x_ptr, stride_row, n_valid, n_chunks, part_key_ptr, part_col_ptr, out_ptr,
                          id_base, low_base, softcap, inv_softcap, scale,
                          BLOCK: tl.constexpr, SOFTCAP: tl.constexpr, SCALE: tl.constexpr, CUDA_MATH: tl.constexpr,
                          ROUND: tl.constexpr, FINAL: tl.constexpr, OUT_KEY: tl.constexpr,
                          BF16_BITS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    cols = chunk * BLOCK + tl.arange(0, BLOCK)
    valid = cols < n_valid
    if BF16_BITS:  # bf16 logits passed as int16 bits: widen exactly (fp32 bits = bf16 bits << 16); -128 = -inf
        bits = tl.load(x_ptr + row * stride_row + cols, mask=valid, other=-128)
        x = (bits.to(tl.int32) << 16).to(tl.float32, bitcast=True)
    else:
        x = tl.load(x_ptr + row * stride_row + cols, mask=valid, other=float("-inf")).to(tl.float32)
    if SOFTCAP or SCALE:
        x = _transform(x, softcap, inv_softcap, scale, SOFTCAP, SCALE, CUDA_MATH, ROUND)
        x = tl.where(valid, x, float("-inf"))
    key = _order_key(x)
    kmax = tl.max(key, axis=0)
    col = tl.min(tl.where(key == kmax, cols, 0x7FFFFFFF), axis=0)
    if FINAL:
        _write_result(out_ptr, row, kmax, col, id_base, low_base, OUT_KEY)
    else:
        tl.store(part_key_ptr + row * n_chunks + chunk, kmax)
        tl.store(part_col_ptr + row * n_chunks + chunk, col)


@triton.jit
def _local_combine_kernel(part_key_ptr, part_col_ptr, n_chunks, out_ptr, id_base, low_base,
                          BLOCK_C: tl.constexpr, OUT_KEY: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK_C)
    live = c < n_chunks
    key = tl.load(part_key_ptr + row * n_chunks + c, mask=live, other=-2147483648)
    col = tl.load(part_col_ptr + row * n_chunks + c, mask=live, other=0x7FFFFFFF)
    kmax = tl.max(key, axis=0)
    best = tl.min(tl.where(key == kmax, col, 0x7FFFFFFF), axis=0)
    _write_result(out_ptr, row, kmax, best, id_base, low_base, OUT_KEY)


@triton.jit
def _pair_reduce_kernel(g_ptr, stride_row, stride_rank, n_rows, out_ptr, P: tl.constexpr, P_POW2: tl.constexpr,
                        ROWS: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    ranks = tl.arange(0, P_POW2)
    live = (rows[:, None] < n_rows) & (ranks[None, :] < P)
    base = g_ptr + rows[:, None] * stride_row + ranks[None, :].to(tl.int64) * stride_rank
    vals = tl.load(base, mask=live, other=float("-inf"))
    ids = tl.load(base + 1, mask=live, other=0.0)
    key = tl.where(live, _order_key(vals), -2147483648)
    kmax = tl.max(key, axis=1)
    best = tl.min(tl.where(key == kmax[:, None], ranks[None, :], P_POW2), axis=1)
    gid = tl.sum(tl.where(ranks[None, :] == best[:, None], ids, 0.0), axis=1)
    tl.store(out_ptr + rows, gid.to(tl.int64), mask=rows < n_rows)


@triton.jit
def _key_unpack_kernel(key_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = offs < n
    key = tl.load(key_ptr + offs, mask=live, other=0)
    low = key - ((key >> 32) << 32)
    top = tl.full([BLOCK], 4294967295, tl.int64)
    tl.store(out_ptr + offs, top - low, mask=live)


INTERPRETED: bool = type(_local_partial_kernel).__name__ == "InterpretedFunction"


# --- Python wrappers -------------------------------------------------------------------------------
def choose_block(rows: int, shard: int) -> int:
    """Columns per program of the split-vocab pass (the table in the module doc)."""
    if shard <= 4096:
        return max(16, triton.next_power_of_2(shard))
    if rows * triton.cdiv(shard, 4096) >= 1024:
        return 4096
    if rows * triton.cdiv(shard, 2048) >= 512:
        return 2048
    return 1024


def _check_device(t: torch.Tensor, what: str) -> None:
    if t.device.type == "cuda":
        return
    if t.device.type == "cpu" and INTERPRETED:
        return
    hint = " (CPU tensors need TRITON_INTERPRET=1 set before this module is imported)" if t.device.type == "cpu" else ""
    raise ValueError(f"{what} is on {t.device}; the Triton kernels run on CUDA tensors{hint}")


def _positive(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r} "
                         "(a non-positive scale reverses or flattens the logit order)")
    return value


def _device_ctx(t: torch.Tensor):
    """Make t's GPU current for the launch (a no-op when it already is, and on CPU)."""
    if t.device.type != "cuda" or t.device.index is None or t.device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(t.device)


def _local(local_logits: torch.Tensor, rank: int, shard: int, vocab: int, scale: float | None,
           softcap: float | None, block: int | None, out_key: bool) -> torch.Tensor:
    if not isinstance(local_logits, torch.Tensor) or local_logits.dim() != 2:
        raise ValueError("local_logits must be a 2-D tensor [rows, shard]")
    if local_logits.dtype not in _ROUND:
        raise ValueError(f"local_logits dtype must be bf16, fp16 or fp32, got {local_logits.dtype}")
    rank, shard, vocab = int(rank), int(shard), int(vocab)
    if shard < 1 or rank < 0 or vocab < 1:
        raise ValueError(f"need shard >= 1, rank >= 0, vocab >= 1 (got shard={shard}, rank={rank}, vocab={vocab})")
    if local_logits.shape[1] != shard:
        raise ValueError(f"local_logits has {local_logits.shape[1]} columns, expected shard={shard}")
    top_id = (rank + 1) * shard
    if out_key and top_id > MAX_KEY_ID:
        raise ValueError(f"ids up to {top_id - 1} do not fit the 32-bit id half of the key")
    if not out_key and top_id > MAX_EXACT_FP32_ID:
        raise ValueError(f"ids up to {top_id - 1} are not exact in fp32 (limit 2^24); use fused_key_pack")
    scale = _positive(scale, "scale")
    softcap = _positive(softcap, "softcap")
    _check_device(local_logits, "local_logits")
    if block is not None and (block < 16 or block & (block - 1)):
        raise ValueError(f"block must be a power of two >= 16, got {block}")
    x = local_logits if local_logits.stride(1) == 1 else local_logits.contiguous()
    rows = x.shape[0]
    out = torch.empty((rows,) if out_key else (rows, 2), dtype=torch.int64 if out_key else torch.float32,
                      device=x.device)
    if rows == 0:
        return out
    n_valid = min(max(vocab - rank * shard, 0), shard)
    blk = block or choose_block(rows, shard)
    n_chunks = triton.cdiv(shard, blk)
    final = n_chunks == 1
    cuda_math = x.device.type == "cuda" and not INTERPRETED
    cap = softcap if softcap is not None else 1.0
    inv_cap = float(np.float32(1.0) / np.float32(cap))
    if final:
        part_key = part_col = out  # unused by the single-launch variant
    else:
        part_key = torch.empty((rows, n_chunks), dtype=torch.int32, device=x.device)
        part_col = torch.empty((rows, n_chunks), dtype=torch.int32, device=x.device)
    id_base, low_base = rank * shard, MAX_KEY_ID - 1 - rank * shard
    # bf16 is widened from its bits (fp32 bits = bf16 bits << 16, exact everywhere): Triton 3.9.0's interpreter
    # turns bf16 subnormals into -0.0 in a plain cast, and one code path keeps CPU tests and GPU runs identical
    bf16_bits = x.dtype == torch.bfloat16
    with _device_ctx(x):
        _local_partial_kernel[(rows, n_chunks)](
            x.view(torch.int16) if bf16_bits else x, x.stride(0), n_valid, n_chunks, part_key, part_col, out,
            id_base, low_base,
            cap, inv_cap, scale if scale is not None else 1.0,
            BLOCK=blk, SOFTCAP=softcap is not None, SCALE=scale is not None, CUDA_MATH=cuda_math,
            ROUND=_ROUND[x.dtype], FINAL=final, OUT_KEY=out_key, BF16_BITS=bf16_bits,
            num_warps=4 if blk <= 1024 else 8)
        if not final:
            _local_combine_kernel[(rows,)](
                part_key, part_col, n_chunks, out, id_base, low_base,
                BLOCK_C=max(16, triton.next_power_of_2(n_chunks)), OUT_KEY=out_key, num_warps=1)
    return out


def fused_local_argmax_pairs(local_logits: torch.Tensor, rank: int, shard: int, vocab: int, *,
                             scale: float | None = None, softcap: float | None = None,
                             block: int | None = None) -> torch.Tensor:
    """[B, 2] fp32 (value, global id) of each row's local max, ready for all_gather(dim=-1).

    value = canon(max) widened to fp32 (-0.0 -> +0.0, NaN -> 0x7FC00000), id = local argmax + rank*shard;
    padding (ids >= vocab) never wins. `block` overrides `choose_block` (a power of two, for tests/tuning).
    Raises ValueError for bad shapes/dtypes, a non-positive scale or soft-cap, or ids >= 2^24.
    """
    return _local(local_logits, rank, shard, vocab, scale, softcap, block, out_key=False)


def fused_key_pack(local_logits: torch.Tensor, rank: int, shard: int, vocab: int, *,
                   scale: float | None = None, softcap: float | None = None,
                   block: int | None = None) -> torch.Tensor:
    """[B] int64 keys (ord32(canon(max)) << 32) | (2^32 - 1 - global id), ready for all_reduce(MAX)."""
    return _local(local_logits, rank, shard, vocab, scale, softcap, block, out_key=True)


def fused_pair_reduce(gathered: torch.Tensor, p: int, *, concat: bool = False) -> torch.Tensor:
    """[B] int64 global argmax from the p gathered (value, id) pairs of every row.

    gathered: [B, 2p] as vLLM's tensor_model_parallel_all_gather(pair, dim=-1) returns it (rank r at columns
    2r, 2r+1); with concat=True the [p*B, 2] buffer of dist.all_gather_into_tensor (rank r's block at rows
    r*B .. r*B+B-1), read in place without the relayout copy. The lowest rank among equal largest values wins
    (= the lowest id, torch.argmax's tie rule); NaN counts as the largest value.
    """
    p = int(p)
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    if not isinstance(gathered, torch.Tensor) or gathered.dim() != 2:
        raise ValueError("gathered must be a 2-D tensor")
    if concat and (gathered.shape[1] != 2 or gathered.shape[0] % p):
        raise ValueError(f"gathered must be a [p*rows, 2] tensor (concat layout, p={p}), got {list(gathered.shape)}")
    if not concat and gathered.shape[1] != 2 * p:
        raise ValueError(f"gathered must be a [rows, 2p] = [rows, {2 * p}] tensor, got {list(gathered.shape)}")
    if gathered.dtype != torch.float32:
        raise ValueError(f"gathered must be fp32, got {gathered.dtype}")
    _check_device(gathered, "gathered")
    g = gathered if gathered.stride(1) == 1 else gathered.contiguous()
    rows = g.shape[0] // p if concat else g.shape[0]
    stride_rank = rows * g.stride(0) if concat else 2
    out = torch.empty((rows,), dtype=torch.int64, device=g.device)
    if rows:
        with _device_ctx(g):
            _pair_reduce_kernel[(triton.cdiv(rows, _PAIR_ROWS),)](
                g, g.stride(0), stride_rank, rows, out, P=p, P_POW2=triton.next_power_of_2(p), ROWS=_PAIR_ROWS,
                num_warps=2)
    return out


def fused_key_unpack(keys: torch.Tensor) -> torch.Tensor:
    """int64 ids = 2^32 - 1 - (key & 0xFFFFFFFF), same shape as `keys`."""
    if not isinstance(keys, torch.Tensor) or keys.dtype != torch.int64:
        raise ValueError("keys must be an int64 tensor")
    _check_device(keys, "keys")
    flat = keys.contiguous().view(-1)
    out = torch.empty_like(flat)
    n = flat.numel()
    if n:
        with _device_ctx(flat):
            _key_unpack_kernel[(triton.cdiv(n, _UNPACK_BLOCK),)](flat, out, n, BLOCK=_UNPACK_BLOCK, num_warps=4)
    return out.view(keys.shape)
