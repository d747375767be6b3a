"""Single-device timings of every kernel op of `costmodel.io.measurements.KERNEL_OPS`, with the reference building
blocks.

    python -m calibration.kernels --out DIR [--device cpu|cuda] [--rows 1,2,...] [--cols ...]
        [--dtypes bf16,fp16,fp32] [--modes graph,eager] [--world-sizes 2,4,8] [--ops ...]
        [--quick] [--resume] [--budget-s S] [--point-seconds S] [--threads N] [--allow-interpreter]

Each op calls exactly the `calibration.reference.strategies` function a strategy calls
(what `cols` means per op is `KERNEL_OPS[op]`; rows = sampled rows R):

    local_argmax     local_argmax_pack(x[R, s], rank 0, s, V=s)    (max + rank offset add + fp32 pack)
    local_pack       pack_pairs(*x[R, s].max(-1))                   (no rank offset: the H200 probe's op)
    local_max        x[R, s].max(-1)                                (plain max: the TP = 1 local path)
    local_argmax_masked  local_argmax_pack(x[R, s], rank 1, s, V=2s-64) (the padding-mask variant)
    key_pack         key_pack(x[R, s], rank 0, s, V=s)
    relayout_copy    relayout(g[p*R, s], p)                              (world_size = p)
    relayout_argmax  full_argmax(relayout(g, p)[:, :p*s])                (world_size = p)
    chunked_argmax   chunked_argmax(g[p*R, s], p, V=p*s)                 (world_size = p)
    argmax           full_argmax(x[R, cols])
    pair_reduce      pair_reduce(pairs[p*R, 2] fp32, p)       cols = 0   (world_size = p, dtype fp32)
    key_unpack       key_unpack(keys[R] int64)                cols = 0   (dtype int64)
    d2t_scatter      d2t_scatter(x[R, 32000], d2t, V_target=cols)
    d2t_lookup       d2t_lookup(ids[R], d2t, vals[R] == -inf) cols = 0   (dtype int64)

Fused Triton variants (`costmodel.io.measurements.FUSED_KERNEL_OPS`, calibration/reference/triton_kernels.py), on the
same grid and with the same timing as their torch counterparts (cols / world_size / dtype as for the base op):

    local_argmax_fused   fused_local_argmax_pairs(x[R, s], rank 0, s, V=s)
    key_pack_fused       fused_key_pack(x[R, s], rank 0, s, V=s)
    pair_reduce_fused    fused_pair_reduce(pairs[p*R, 2] fp32, p, concat=True)   (the all_gather_into_tensor
                                                                                  buffer, read in place)
    key_unpack_fused     fused_key_unpack(keys[R] int64)

They are added by default when the device is CUDA and Triton imports (compiled, not interpreted); each is
first checked against its torch building block (exact ids; pairs and keys bit for bit) at the smallest and
the largest cols of the grid. On CPU they are skipped: Triton's interpreter is orders of magnitude slower
than a GPU kernel, so its times are meaningless - `--ops ..._fused --allow-interpreter` runs them anyway
(tests), setting TRITON_INTERPRET=1 before Triton is imported. provenance.json records `triton`
(available, version, interpreted, what happened to the fused ops).

pair_reduce / key_unpack / d2t_lookup do not touch logits: they are measured once,
labelled with the dtype of the data they read (fp32 pairs, int64 keys / ids).
p-dependent shard ops keep p * s <= 262,208 (the largest padded vocab modelled).

Timing: CUDA graph mode captures N calls in one CUDA graph and times replays with
CUDA events; CUDA eager times N back-to-back calls with CUDA events; CPU (eager
only, 1 intra-op thread unless --threads) times each call with perf_counter_ns.
Per-call time = sample / N. Inputs
rotate over k buffers (k * buffer bytes >= 128 MiB on CUDA, 64 MiB on CPU, k in
[2, 32]) so caches do not flatter large inputs. Samples are taken until the
median's 95% CI is within 2% (`calibration.bench.timing.converged`, checked at min_iters
and every 8 samples after), or the per-point time budget is spent. Each op is
checked once against a numpy formulation before it is timed. Rows are appended (flushed per row) to DIR/kernels.csv;
DIR/provenance.json describes the run; --resume skips measured points;
--budget-s stops starting new points (rows are the outer loop, so every op keeps
its small-row points). --quick (smoke test): rows 1,16; s 4000,16032;
V 32000,64128; bf16; p 2,8; 0.02 s per point; two buffers, no rotation.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from calibration.bench.timing import Stats, check_due, converged
from calibration.logs.results import RowWriter, existing_keys, point_key
from calibration.reference import strategies as ref
from costmodel.io.errors import InputError, OneLineParser, first_line
from costmodel.io.measurements import D2T_DRAFT_COLS, ELEM_BYTES, FUSED_KERNEL_OPS, KERNEL_OPS, MODES, TOPK_KERNEL_OPS

ROWS = tuple(2**k for k in range(12))  # 1 .. 2048
# ATen's reduction changes its launch configuration at two row widths (costmodel.model.gpu_kernels.REGIME_EDGES_COLS:
# 8,192 - split across warps; 131,072 - split across blocks): the grid keeps a width just below and just above
# each edge, so a measured table never interpolates across a regime change.
SHARD_COLS = (4000, 7936, 8448, 16032, 32064, 64128, 126976, 131104)  # 32000/8 .. 262208/2
VOCAB_COLS = (7936, 8448, 16000, 32000, 64128, 128256, 135168, 202048, 262208)  # argmaxed widths V / V_target
WORLD_SIZES = (2, 4, 8)
QUICK_ROWS = (1, 16)
QUICK_SHARD_COLS = (4000, 16032)
QUICK_VOCAB_COLS = (32000, 64128)
QUICK_WORLD_SIZES = (2, 8)
MAX_PADDED_VOCAB = 262208
MASK_PAD_COLS = 64  # local_argmax_masked: padding ids on the last rank (vLLM pads V to a multiple of 64)
ROTATE_BYTES = {"cuda": 128 << 20, "cpu": 64 << 20}
MEMORY_CAP_BYTES = {"cuda": 48 << 30, "cpu": 2 << 30}
CHECK_MEMORY_FACTOR = 6  # check_op: inputs + output + numpy copies (float64 of a bf16 input is 4x)
MAX_FLAG_INT = 2**31 - 1  # --rows / --cols / --world-sizes values
MAX_BUFFERS = 32
CSV_NAME = "kernels.csv"
PROVENANCE_NAME = "provenance.json"


@dataclass(frozen=True)
class OpSpec:
    """cols_kind: shard (s), vocab (V), target (V_target > 32000) or none (0); per_p: depends on p."""

    cols_kind: str
    per_p: bool = False
    data_dtype: str | None = None  # fixed dtype label for ops that never read logits


OPS: dict[str, OpSpec] = {
    "local_argmax": OpSpec("shard"),
    "relayout_copy": OpSpec("shard", per_p=True),
    "argmax": OpSpec("vocab"),
    "relayout_argmax": OpSpec("shard", per_p=True),
    "chunked_argmax": OpSpec("shard", per_p=True),
    "pair_reduce": OpSpec("none", per_p=True, data_dtype="fp32"),
    "key_pack": OpSpec("shard"),
    "key_unpack": OpSpec("none", data_dtype="int64"),
    "d2t_scatter": OpSpec("target"),
    "d2t_lookup": OpSpec("none", data_dtype="int64"),
    "local_max": OpSpec("shard"),
    "local_pack": OpSpec("shard"),
    "local_argmax_masked": OpSpec("shard"),
}
assert set(OPS) == set(KERNEL_OPS), "calibration.kernels must cover every schema kernel op"
FUSED_OPS: dict[str, OpSpec] = {op: OPS[op.removesuffix("_fused")] for op in FUSED_KERNEL_OPS}
# top-k kernels, one point per k of the grid: local_topk over the shard (cols = s), topk_merge over the p x k
# gathered fp32 candidates (cols = p * k, world_size = p)
TOPK_OPS: dict[str, OpSpec] = {"local_topk": OpSpec("shard"), "topk_merge": OpSpec("merge", per_p=True,
                                                                                   data_dtype="fp32")}
assert set(TOPK_OPS) == set(TOPK_KERNEL_OPS), "calibration.kernels must cover every schema top-k op"
TOP_KS = (2, 8, 32)  # k of the top-k ops (the README's tree-drafting range)
QUICK_TOP_KS = (8,)
SPECS: dict[str, OpSpec] = {**OPS, **FUSED_OPS, **TOPK_OPS}


@dataclass(frozen=True)
class Point:
    op: str
    dtype: str
    mode: str
    world_size: int
    rows: int
    cols: int
    k: int = 1  # candidates per row (TOPK_OPS only)


@dataclass(frozen=True)
class Grid:
    rows: tuple[int, ...]
    shard_cols: tuple[int, ...]
    vocab_cols: tuple[int, ...]
    dtypes: tuple[str, ...]
    modes: tuple[str, ...]
    world_sizes: tuple[int, ...]
    ops: tuple[str, ...]
    top_ks: tuple[int, ...] = QUICK_TOP_KS

    def cols_for(self, op: str, p: int) -> tuple[int, ...]:
        kind = SPECS[op].cols_kind
        if kind == "none":
            return (0,)
        if kind == "merge":
            return tuple(p * k for k in self.top_ks)
        if kind == "vocab":
            return self.vocab_cols
        if kind == "target":
            return tuple(c for c in self.vocab_cols if c > D2T_DRAFT_COLS)
        return tuple(s for s in self.shard_cols if not SPECS[op].per_p or p * s <= MAX_PADDED_VOCAB)

    def points(self) -> list[Point]:
        """Every (dtype, mode, rows, op, p, cols); logits-free ops once per mode with their data dtype.

        Rows are the outer loop inside a (dtype, mode), so a run stopped by --budget-s still covers every
        op at the small row counts that decide the crossover.
        """
        out: dict[Point, None] = {}
        for dtype in self.dtypes:
            for mode in self.modes:
                for rows in sorted(self.rows):
                    for op in self.ops:
                        spec = SPECS[op]
                        label = spec.data_dtype or dtype
                        for p in (self.world_sizes if spec.per_p else (1,)):
                            if op == "topk_merge":
                                for k in self.top_ks:
                                    out[Point(op, label, mode, p, rows, p * k, k)] = None
                                continue
                            for cols in self.cols_for(op, p):
                                for k in (self.top_ks if op in TOPK_OPS else (1,)):
                                    out[Point(op, label, mode, p, rows, cols, k)] = None
        return list(out)


# -- inputs, calls and checks per op -----------------------------------------------------------------------------
@dataclass(frozen=True)
class OpCase:
    """make(i) builds the i-th input tuple; call(inputs) runs the op; expect(inputs) is numpy's answer;
    reference(inputs) is the torch building block a fused op must match exactly (None for torch ops)."""

    make: Callable[[int], tuple]
    call: Callable[[tuple], object]
    expect: Callable[[tuple], np.ndarray]
    bytes_per_input: int
    bytes_per_output: int
    reference: Callable[[tuple], object] | None = None


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy() if t.is_floating_point() else t.detach().cpu().numpy()


def _d2t_map(target_vocab: int, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    targets = torch.randperm(target_vocab, generator=g)[:D2T_DRAFT_COLS].sort().values
    return (targets - torch.arange(D2T_DRAFT_COLS)).to(device)


def _np_argmax_concat(g: np.ndarray, p: int) -> np.ndarray:
    return np.argmax(np.concatenate(np.split(g, p, axis=0), axis=1), axis=1)


def fused_case(op: str, rows: int, cols: int, p: int, dtype: str, device: torch.device, seed: int = 0) -> OpCase:
    """The base op's inputs and expectation, called through the Triton kernel; the torch call as `reference`."""
    tk = ref.import_triton_kernels(device.type)
    base = op_case(op.removesuffix("_fused"), rows, cols, p, dtype, device, seed)
    calls: dict[str, Callable[[tuple], object]] = {
        "local_argmax_fused": lambda x: tk.fused_local_argmax_pairs(x[0], 0, cols, cols),
        "key_pack_fused": lambda x: tk.fused_key_pack(x[0], 0, cols, cols),
        "pair_reduce_fused": lambda x: tk.fused_pair_reduce(x[0], p, concat=True),
        "key_unpack_fused": lambda x: tk.fused_key_unpack(x[0]),
    }
    return OpCase(base.make, calls[op], base.expect, base.bytes_per_input, base.bytes_per_output,
                  reference=base.call)


def _np_stable_topk(values: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """numpy's answer: per row the ids of the k largest values, equal values by lowest id (np.lexsort)."""
    order = np.lexsort((ids, -values.astype(np.float64)), axis=-1)[:, :k]
    return np.take_along_axis(ids, order, axis=-1)


def topk_case(op: str, rows: int, cols: int, k: int, dtype: str, device: torch.device, seed: int = 0) -> OpCase:
    """local_topk: ref.local_topk + pack_topk_pairs on x[R, s] (rank 0, V = s); topk_merge: ref.merge_topk of
    [R, p*k] fp32 candidates (values with ties, distinct ids). Both are checked against numpy's stable order."""
    gen = torch.Generator().manual_seed(seed)
    if op == "local_topk":
        tdt = ref.TORCH_DTYPES[dtype]
        e = ELEM_BYTES[dtype]

        def make_local(i: int) -> tuple:  # rounded values: ties at the k-th place are common
            x = torch.randint(-8, 8, (rows, cols), generator=gen).to(tdt)
            return (x.to(device),)

        def call_local(x: tuple):
            vals, ids = ref.local_topk(x[0], 0, cols, cols, k)
            return ref.pack_topk_pairs(vals, ids)

        def expect_local(x: tuple) -> np.ndarray:
            v = _np(x[0]).astype(np.float64)
            ids = np.broadcast_to(np.arange(cols), v.shape)
            return _np_stable_topk(v, ids, min(k, cols))

        return OpCase(make_local, call_local, expect_local, rows * cols * e, rows * k * 8)

    def make_merge(i: int) -> tuple:
        vals = torch.randint(-4, 4, (rows, cols), generator=gen).float()
        ids = torch.argsort(torch.rand((rows, cols), generator=gen), dim=-1)
        return vals.to(device), ids.to(device)

    return OpCase(make_merge, lambda x: ref.merge_topk(x[0], x[1], k)[1],
                  lambda x: _np_stable_topk(_np(x[0]), _np(x[1]), k), rows * cols * 16, rows * k * 16)


def op_case(op: str, rows: int, cols: int, p: int, dtype: str, device: torch.device, seed: int = 0,
            k: int = 1) -> OpCase:
    """Inputs, the reference call and an independent numpy expectation for one point."""
    if op in TOPK_OPS:
        return topk_case(op, rows, cols, k, dtype, device, seed)
    if op in FUSED_OPS:
        return fused_case(op, rows, cols, p, dtype, device, seed)
    tdt = ref.TORCH_DTYPES.get(dtype, torch.float32)
    e = ELEM_BYTES[dtype]

    def randn(shape: Sequence[int], i: int, dt: torch.dtype = tdt) -> torch.Tensor:
        gen = torch.Generator(device=device).manual_seed(seed * 1000 + i)
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(dt)

    def randint(high: int, shape: Sequence[int], i: int) -> torch.Tensor:
        gen = torch.Generator(device=device).manual_seed(seed * 1000 + i + 500)
        return torch.randint(0, high, tuple(shape), generator=gen, device=device)

    if op == "local_argmax_masked":  # rank 1 of 2: the shard's last 64 columns are padding
        valid = cols - MASK_PAD_COLS

        def expect_masked(x: tuple) -> np.ndarray:
            return np.argmax(_np(x[0])[:, :valid], axis=1) + cols

        return OpCase(lambda i: (randn((rows, cols), i),),
                      lambda x: ref.local_argmax_pack(x[0], 1, cols, 2 * cols - MASK_PAD_COLS), expect_masked,
                      rows * cols * e, rows * 16)
    if op in ("local_argmax", "key_pack", "local_max", "local_pack"):
        fn = {"local_argmax": ref.local_argmax_pack, "key_pack": ref.key_pack,
              "local_max": lambda x, _r, _s, _v: x.max(dim=-1).indices,
              "local_pack": lambda x, _r, _s, _v: ref.pack_pairs(*x.max(dim=-1))}[op]

        def expect_local(x: tuple) -> np.ndarray:
            return np.argmax(_np(x[0]), axis=1)

        def call_local(x: tuple):
            return fn(x[0], 0, cols, cols)

        return OpCase(lambda i: (randn((rows, cols), i),), call_local, expect_local, rows * cols * e, rows * 16)
    if op in ("relayout_copy", "relayout_argmax", "chunked_argmax"):
        def make_gathered(i: int) -> tuple:
            return (randn((p * rows, cols), i),)

        if op == "relayout_copy":
            return OpCase(make_gathered, lambda x: ref.relayout(x[0], p),
                          lambda x: np.concatenate(np.split(_np(x[0]), p, axis=0), axis=1),
                          p * rows * cols * e, p * rows * cols * e)
        if op == "relayout_argmax":
            return OpCase(make_gathered, lambda x: ref.full_argmax(ref.relayout(x[0], p)[:, :p * cols]),
                          lambda x: _np_argmax_concat(_np(x[0]), p), p * rows * cols * e, p * rows * cols * e)
        return OpCase(make_gathered, lambda x: ref.chunked_argmax(x[0], p, p * cols)[0],
                      lambda x: _np_argmax_concat(_np(x[0]), p), p * rows * cols * e, rows * 16)
    if op == "argmax":
        return OpCase(lambda i: (randn((rows, cols), i),), lambda x: ref.full_argmax(x[0]),
                      lambda x: np.argmax(_np(x[0]), axis=1), rows * cols * e, rows * 8)
    if op == "pair_reduce":
        def make_pairs(i: int) -> tuple:
            vals = randn((p * rows,), i, torch.float32)
            ids = randint(1 << 24, (p * rows,), i).float()
            return (torch.stack([vals, ids], dim=-1),)

        def expect_pairs(x: tuple) -> np.ndarray:
            table = _np(x[0]).reshape(p, rows, 2)
            win = np.argmax(table[:, :, 0], axis=0)
            return table[win, np.arange(rows), 1].astype(np.int64)

        return OpCase(make_pairs, lambda x: ref.pair_reduce(x[0], p)[0], expect_pairs, p * rows * 8, rows * 16)
    if op == "key_unpack":
        def make_keys(i: int) -> tuple:
            ids = randint(1 << 31, (rows,), i)
            return ref.make_keys(randn((rows,), i, torch.float32), ids), ids

        return OpCase(make_keys, lambda x: ref.key_unpack(x[0]), lambda x: _np(x[1]), rows * 16, rows * 8)
    if op == "d2t_scatter":
        d2t = _d2t_map(cols, device, seed)

        def expect_scatter(x: tuple) -> np.ndarray:
            out = np.full((rows, cols), -np.inf, dtype=np.float32)
            out[:, np.arange(D2T_DRAFT_COLS) + _np(d2t)] = _np(x[0])
            return out

        return OpCase(lambda i: (randn((rows, D2T_DRAFT_COLS), i),), lambda x: ref.d2t_scatter(x[0], d2t, cols),
                      expect_scatter, rows * D2T_DRAFT_COLS * e, rows * cols * e)
    if op == "d2t_lookup":
        d2t = _d2t_map(128256, device, seed)

        def make_lookup(i: int) -> tuple:
            vals = randn((rows,), i, torch.float32)
            vals[0] = ref.NEG_INF  # one all -inf row: maps to 0 like the scatter baseline
            return randint(D2T_DRAFT_COLS, (rows,), i), vals

        def expect_lookup(x: tuple) -> np.ndarray:
            ids, vals = _np(x[0]), _np(x[1])
            return np.where(vals == -np.inf, 0, ids + _np(d2t)[ids])

        return OpCase(make_lookup, lambda x: ref.d2t_lookup(x[0], d2t, x[1] == ref.NEG_INF), expect_lookup,
                      rows * 12, rows * 8)
    raise InputError(f"unknown kernel op {op!r}")


def check_op(op: str, dtype: str, p: int, cols: int, device: torch.device, k: int = 1) -> None:
    """Run the op once on a small input and compare with numpy; raise AssertionError naming the op.

    A fused op must also equal its torch building block exactly (ids; pairs and keys bit for bit).
    """
    case = op_case(op, 3, cols, p, dtype, device, seed=7, k=k)
    need = CHECK_MEMORY_FACTOR * (case.bytes_per_input + case.bytes_per_output)
    if need > MEMORY_CAP_BYTES[device.type]:  # the cap applies to the check as to the timing
        raise MemoryError(f"{op} (cols={cols}): the correctness check needs ~{need / 2**30:.1f} GiB, over the "
                          f"{MEMORY_CAP_BYTES[device.type] / 2**30:g} GiB memory cap")
    inputs = case.make(0)
    got = case.call(inputs)
    want = case.expect(inputs)
    if case.reference is not None:
        torch_out = case.reference(inputs)
        if not (got.shape == torch_out.shape and got.dtype == torch_out.dtype and torch.equal(got, torch_out)):
            raise AssertionError(f"{op} ({dtype}, p={p}, cols={cols}) differs from the torch building block: "
                                 f"got {_np(got).ravel()[:4]}, torch {_np(torch_out).ravel()[:4]}")
        op = op.removesuffix("_fused")
    if op == "local_topk":  # [R, k, 2] pairs: ids in the second slot, -inf / id V pads past the shard
        got = got[:, :min(k, cols), 1].long()
    elif op in ("local_argmax", "local_pack", "local_argmax_masked"):  # (value, id) pairs: the row max
        width = cols - MASK_PAD_COLS if op == "local_argmax_masked" else cols
        if not np.array_equal(_np(got[:, 0]), np.max(_np(inputs[0])[:, :width], axis=1)):
            raise AssertionError(f"{op} ({dtype}, cols={cols}) packs a value that is not the row max")
        got = got[:, 1].long()
    elif op == "key_pack":
        got = ref.key_unpack(got)
    got_np = _np(got)
    if got_np.shape != want.shape or not np.array_equal(got_np, want):
        raise AssertionError(f"{op} ({dtype}, p={p}, cols={cols}) differs from numpy: got {got_np.ravel()[:4]}, "
                             f"expected {want.ravel()[:4]}")


# -- timing ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimingPolicy:
    point_seconds: float
    min_iters: int
    max_iters: int
    rel_tol: float = 0.02
    hard_min_iters: int = 5  # even past the time budget
    rotate: bool = True  # False (--quick): two buffers, no cache defeating


def _buffers(case: OpCase, device: torch.device, rotate: bool = True) -> list[tuple] | None:
    """k input buffers: k * bytes >= ROTATE_BYTES (2 <= k <= 32), within the memory cap; None if 2 do not fit."""
    per = max(case.bytes_per_input, 1)
    cap = MEMORY_CAP_BYTES[device.type]
    if 2 * per + 4 * case.bytes_per_output > cap:
        return None
    k = int(min(MAX_BUFFERS, max(2, math.ceil(ROTATE_BYTES[device.type] / per)))) if rotate else 2
    k = max(2, min(k, (cap - 4 * case.bytes_per_output) // per))
    return [case.make(i) for i in range(k)]


def _enough(samples: list[float], started: float, policy: TimingPolicy) -> bool:
    n = len(samples)
    if n >= policy.max_iters:
        return True
    if check_due(n, policy.min_iters) and converged(samples, policy.rel_tol, policy.min_iters):
        return True
    return n >= policy.hard_min_iters and time.perf_counter() - started >= policy.point_seconds


def time_cpu(call: Callable[[tuple], object], inputs: list[tuple], policy: TimingPolicy) -> list[float]:
    """perf_counter_ns around each call (inputs rotated); samples in us."""
    for i in range(2):
        call(inputs[i % len(inputs)])
    samples: list[float] = []
    started = time.perf_counter()
    i = 0
    while not _enough(samples, started, policy):
        x = inputs[i % len(inputs)]
        t0 = time.perf_counter_ns()
        call(x)
        samples.append((time.perf_counter_ns() - t0) / 1e3)
        i += 1
    return samples


def time_cuda(call: Callable[[tuple], object], inputs: list[tuple], mode: str, policy: TimingPolicy) -> list[float]:
    """CUDA events around N calls: one CUDA-graph replay (graph) or N back-to-back launches (eager)."""
    k = len(inputs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream (required before capture)
        for i in range(3):
            call(inputs[i % k])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(3):
        call(inputs[i % k])
    torch.cuda.synchronize()
    est_us = max((time.perf_counter() - t0) / 3 * 1e6, 1.0)
    n = int(min(64, max(2, math.ceil(1000.0 / est_us))))
    n = max(n, k) if k * est_us < 20000 else n

    graph = None
    if mode == "graph":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(n):
                call(inputs[i % k])
        run: Callable[[], None] = graph.replay
    else:
        def run() -> None:
            for i in range(n):
                call(inputs[i % k])
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    run()
    torch.cuda.synchronize()
    samples: list[float] = []
    started = time.perf_counter()
    while not _enough(samples, started, policy):
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / n)
    del graph
    return samples


def measure(point: Point, device: torch.device, policy: TimingPolicy) -> Stats | None:
    """Stats of one point (None when its buffers do not fit the memory cap)."""
    case = op_case(point.op, point.rows, point.cols, point.world_size, point.dtype, device, k=point.k)
    inputs = _buffers(case, device, policy.rotate)
    if inputs is None:
        return None
    if device.type == "cuda":
        samples = time_cuda(case.call, inputs, point.mode, policy)
    else:
        samples = time_cpu(case.call, inputs, policy)
    del inputs
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return Stats.from_samples(samples)


# -- CLI ---------------------------------------------------------------------------------------------------------
def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or any(not 1 <= v <= MAX_FLAG_INT for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: need integers in 1..{MAX_FLAG_INT}")
    return tuple(dict.fromkeys(values))


def _choice_list(allowed: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        values = tuple(v.strip() for v in text.split(",") if v.strip())
        bad = [v for v in values if v not in allowed]
        if not values or bad:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated subset of {', '.join(allowed)}")
        return values
    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = OneLineParser(prog="python -m calibration.kernels", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="output folder (kernels.csv, provenance.json)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rows", type=_int_list, help="sampled rows R (default 1,2,4,...,2048)")
    ap.add_argument("--cols", type=_int_list, help="cols for every op that has cols (default: per-op grids)")
    ap.add_argument("--dtypes", type=_choice_list(tuple(ref.TORCH_DTYPES)), default=("bf16", "fp16", "fp32"))
    ap.add_argument("--modes", type=_choice_list(MODES), help="graph,eager (CUDA default); CPU: eager only")
    ap.add_argument("--world-sizes", type=_int_list, help="p for the ops that depend on it (default 2,4,8)")
    ap.add_argument("--ops", type=_choice_list(tuple(SPECS)), default=None,
                    help="ops to time (default: every torch op, plus the *_fused ops on CUDA when Triton imports)")
    ap.add_argument("--top-ks", type=_int_list, default=None,
                    help="k of the top-k ops local_topk / topk_merge (default 2,8,32; --quick: 8)")
    ap.add_argument("--allow-interpreter", action="store_true",
                    help="let --ops name *_fused ops on CPU, under Triton's interpreter (for tests: the times "
                         "are meaningless)")
    ap.add_argument("--quick", action="store_true", help="a far smaller grid and time budget (smoke test)")
    ap.add_argument("--resume", action="store_true", help="add to DIR/kernels.csv, skipping measured points")
    ap.add_argument("--budget-s", type=float, default=None, help="start no new point after this many seconds")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads (default: 1 on CPU, where shared busy cores make OpenMP "
                         "contention dominate; torch's default on CUDA)")
    ap.add_argument("--point-seconds", type=float, default=None,
                    help="time budget per point (default 1.0 CUDA, 0.5 CPU, 0.02 with --quick)")
    return ap.parse_args(argv)


def make_grid(args: argparse.Namespace) -> Grid:
    quick = args.quick
    if args.device == "cpu":
        modes = args.modes or ("eager",)
        if "graph" in modes:
            raise InputError("--modes graph needs --device cuda (CUDA graphs); use --modes eager on CPU")
    else:
        modes = args.modes or MODES
    cols = args.cols
    return Grid(
        rows=args.rows or (QUICK_ROWS if quick else ROWS),
        shard_cols=cols or (QUICK_SHARD_COLS if quick else SHARD_COLS),
        vocab_cols=cols or (QUICK_VOCAB_COLS if quick else VOCAB_COLS),
        dtypes=args.dtypes if not (quick and args.dtypes == ("bf16", "fp16", "fp32")) else ("bf16",),
        modes=tuple(modes),
        world_sizes=args.world_sizes or (QUICK_WORLD_SIZES if quick else WORLD_SIZES),
        ops=tuple(args.ops or (*OPS, *TOPK_OPS)),
        top_ks=args.top_ks or (QUICK_TOP_KS if quick else TOP_KS),
    )


def triton_status() -> dict:
    """{"available": Triton installed, "version": its version or None} - without importing it."""
    import importlib.metadata
    import importlib.util

    try:
        available = importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        available = False
    try:
        version = importlib.metadata.version("triton") if available else None
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"available": available, "version": version}


def select_ops(requested: tuple[str, ...] | None, device_type: str, allow_interpreter: bool) -> tuple[tuple, dict]:
    """(ops to time, the provenance's `triton` entry).

    Default (`requested` None): every torch op (the top-k ops included), plus every fused op when the device
    is CUDA and Triton loads compiled (else they are skipped, and the entry says why). Fused ops named
    explicitly: on CPU only with `allow_interpreter` (Triton's interpreter is switched on), on CUDA Triton
    must load; else `InputError`.
    """
    info: dict = {**triton_status(), "interpreted": None}
    if requested is None:
        ops: tuple[str, ...] = (*OPS, *TOPK_OPS)
        if device_type != "cuda":
            info["fused_ops"] = ("skipped: CPU (Triton's interpreter times are meaningless; "
                                 "--ops NAME_fused --allow-interpreter runs them anyway)")
            return ops, info
        try:
            tk = ref.import_triton_kernels("cuda")
        except InputError as exc:
            info["fused_ops"] = f"skipped: {exc}"
            return ops, info
        info["interpreted"] = tk.INTERPRETED
        if tk.INTERPRETED:
            info["fused_ops"] = "skipped: TRITON_INTERPRET=1 is set (interpreted kernels on CUDA)"
            return ops, info
        info["fused_ops"] = "timed"
        return ops + tuple(FUSED_OPS), info
    fused = [op for op in requested if op in FUSED_OPS]
    if not fused:
        info["fused_ops"] = "not requested"
        return requested, info
    if device_type != "cuda" and not allow_interpreter:
        raise InputError(f"--ops {fused[0]} on CPU runs under Triton's interpreter, whose times are meaningless; "
                         "add --allow-interpreter to run it anyway (tests) or use --device cuda")
    tk = ref.import_triton_kernels(device_type)
    if tk.INTERPRETED and device_type == "cuda" and not allow_interpreter:
        raise InputError("TRITON_INTERPRET=1 is set: the fused kernels would be interpreted on CUDA; unset it "
                         "or add --allow-interpreter")
    info["interpreted"] = tk.INTERPRETED
    info["fused_ops"] = "timed under the interpreter (meaningless times)" if tk.INTERPRETED else "timed"
    return requested, info


def _policy(args: argparse.Namespace) -> TimingPolicy:
    default = 0.02 if args.quick else (1.0 if args.device == "cuda" else 0.5)
    seconds = default if args.point_seconds is None else args.point_seconds
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(f"--point-seconds must be > 0, got {seconds}")
    if args.quick:
        return TimingPolicy(seconds, min_iters=5, max_iters=200, rotate=False)
    return TimingPolicy(seconds, min_iters=10, max_iters=200 if args.device == "cuda" else 2000)


def _provenance(argv: list[str], device: str, out_dir: Path, grid: Grid, n_points: int, triton: dict):
    from calibration.logs.provenance import ProvenanceFile, collect_provenance, with_previous_runs

    data = collect_provenance(argv, "none", device)
    data.update(tool="calibration.kernels", csv=CSV_NAME, triton=triton,
                grid={"rows": list(grid.rows), "shard_cols": list(grid.shard_cols),
                      "vocab_cols": list(grid.vocab_cols), "dtypes": list(grid.dtypes), "modes": list(grid.modes),
                      "world_sizes": list(grid.world_sizes), "ops": list(grid.ops)},
                points_planned=n_points, torch_threads=torch.get_num_threads())
    path = out_dir / PROVENANCE_NAME
    return ProvenanceFile(path, with_previous_runs(path, data))  # keeps earlier runs' records


def _row_key(pt: Point) -> dict:
    """The point as a row for `point_key`: k only on top-k rows (empty elsewhere, as the CSV writes it)."""
    row = dict(pt.__dict__)
    if pt.op not in TOPK_OPS:
        row.pop("k")
    return row


def _gpu_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def run(args: argparse.Namespace, argv: list[str]) -> int:
    grid = make_grid(args)
    policy = _policy(args)
    if args.budget_s is not None and not (math.isfinite(args.budget_s) and args.budget_s > 0):
        raise InputError(f"--budget-s must be a finite number > 0, got {args.budget_s}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device (torch.cuda.is_available() is False); use --device cpu")
    ops, triton_info = select_ops(args.ops, args.device, args.allow_interpreter)
    grid = replace(grid, ops=ops)
    threads = args.threads if args.threads is not None else (1 if args.device == "cpu" else None)
    if threads is not None:
        if not 1 <= threads <= 4096:
            raise InputError(f"--threads must be in 1..4096, got {threads}")
        torch.set_num_threads(threads)
    device = torch.device(args.device)
    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out}: exists and is not a directory (kernels.csv and provenance.json go "
                         "into a directory)")
    csv_path = args.out / CSV_NAME
    done = existing_keys(csv_path)
    if done and not args.resume:
        raise InputError(f"{csv_path} already holds {len(done)} measured points; pass --resume to add to it "
                         "or choose another --out")
    gpu = _gpu_name(device)
    base = {"backend": "none", "device": device.type, "gpu": gpu, "nodes": 1, "bytes_per_rank": 0}
    points = grid.points()
    todo = [pt for pt in points if point_key({**base, **_row_key(pt)}) not in done]
    args.out.mkdir(parents=True, exist_ok=True)
    prov = _provenance(argv, device.type, args.out, grid, len(points), triton_info)
    from tqdm import tqdm

    checked: dict[tuple[str, str, int, int], str | None] = {}
    measured = skipped = 0
    failures: list[str] = []
    started = time.perf_counter()
    status = "ok"
    print(f"kernels: {len(todo)} of {len(points)} points to measure on {device.type} ({gpu}) -> {csv_path}",
          file=sys.stderr)
    if triton_info["fused_ops"].startswith("skipped") and args.device == "cuda":
        print(f"kernels: fused ops {triton_info['fused_ops']}", file=sys.stderr)
    try:
        with RowWriter(csv_path, extra_columns=("k",)) as writer, \
                tqdm(total=len(todo), desc="kernels", unit="pt", file=sys.stderr, mininterval=2.0) as bar:
            for pt in todo:
                if args.budget_s is not None and time.perf_counter() - started > args.budget_s:
                    status = f"stopped: --budget-s {args.budget_s:g} spent"
                    break
                bar.update(1)
                key = (pt.op, pt.dtype, pt.world_size if pt.op in FUSED_OPS else 0, pt.k)  # a fused kernel per p
                if key not in checked:
                    try:
                        cols = grid.cols_for(pt.op, pt.world_size)
                        # fused kernels pick their chunking by cols: check both ends of the grid
                        for c in dict.fromkeys((cols[0], cols[-1]) if pt.op in FUSED_OPS else cols[:1]):
                            check_op(pt.op, pt.dtype, pt.world_size, c if pt.op != "topk_merge" else pt.cols,
                                     device, pt.k)
                        checked[key] = None
                    except Exception as exc:  # noqa: BLE001 - reported, the op is not timed
                        checked[key] = f"{type(exc).__name__}: {first_line(exc)}"
                        failures.append(f"{pt.op} {pt.dtype}: correctness check failed: {checked[key]}")
                if checked[key] is not None:
                    skipped += 1
                    continue
                try:
                    stats = measure(pt, device, policy)
                except Exception as exc:  # noqa: BLE001 - e.g. capture failure or out of memory: keep going
                    failures.append(f"{pt}: {type(exc).__name__}: {first_line(exc)}")
                    skipped += 1
                    continue
                if stats is None:
                    skipped += 1
                    continue
                writer.write({**base, "op": pt.op, "dtype": pt.dtype, "mode": pt.mode,
                              "world_size": pt.world_size, "rows": pt.rows, "cols": pt.cols,
                              **({"k": pt.k} if pt.op in TOPK_OPS else {}), **stats.as_row()})
                measured += 1
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if failures and status == "ok":
            status = f"failed: {len(failures)} op/point error(s)"
        prov.update(points_measured=measured, points_skipped=skipped, failures=failures[:50],
                    wall_s=round(time.perf_counter() - started, 1))
        prov.finish(status)
    for line in failures[:20]:
        print(f"error: {line}", file=sys.stderr)
    left = len(todo) - measured - skipped
    note = f"; {left} left - rerun with --resume" if left > 0 else ""
    print(f"kernels: measured {measured} points, skipped {skipped} (too large or failed){note}; "
          f"{time.perf_counter() - started:.0f} s -> {csv_path}", file=sys.stderr)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    """CLI: 0 ok, 1 some op/point failed, 2 bad input, 3 the run could not go on (e.g. an unwritable --out)."""
    from calibration.logs.provenance import count_rows, interrupted_exit, interruptible

    argv = sys.argv[1:] if argv is None else argv
    args = None
    try:
        with interruptible():  # SIGTERM too: provenance "interrupted", rows kept
            args = parse_args(argv)
            return run(args, ["-m", "calibration.kernels", *argv])
    except KeyboardInterrupt as exc:
        return interrupted_exit(exc, count_rows(args.out / CSV_NAME) if args is not None else 0)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as exc:  # measured rows stay in kernels.csv (flushed per row)
        print(f"error: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
