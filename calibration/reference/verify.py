"""Check every strategy against full logits + torch.argmax on real torch.distributed ranks.

    torchrun --standalone --nproc-per-node N -m calibration.verify --backend gloo|nccl
        [--seed S] [--cases WORD,...] [--inject-bug NAME] [--softcap C --scale A] [--fused [--allow-interpreter]]
        [--time [--profile P] [--time-points BxV,...] [--time-dtype bf16] [--repeats N]]

Each case builds the same padded logits [B, V_pad] on every rank (seeded), rank r
runs each strategy on its shard [B, s], and the ids must equal
torch.argmax(prestep(logits[:, :V])) (after the d2t scatter for EAGLE-3 cases)
on every rank, bit for bit. Cases cover random logits, ties inside and across
shards, maxima in the padding, rows of all -inf, signed zeros, NaN (first NaN
wins), infinities, negative extremes / subnormals, bf16 / fp16 / fp32, vocabs
not divisible by 64 (1000, 32003, 128256, 151936), EAGLE-3 d2t maps, soft-cap and
scale, batch 1 and larger. Prints a case x strategy table (PASS, FAIL@row<first
mismatching row>, ERROR when the strategy raised, SKIP when p does not divide
V_pad); exit 1 on any mismatch or error, 2 on bad input, 3 when the process group
fails (init, or a peer rank that dies mid-run) - always one `error:` line.

`--inject-bug NAME` swaps a strategy for a deliberately broken one (see `BUGS`),
to show the cases catch it. `--time` then times each strategy end to end
(barrier, call, device sync; median over repeats of the per-iteration max across
ranks) and prints it beside costmodel.model.predict(...) for the same scenario in eager
mode.

`--fused` adds the fused Triton variants of the two local strategies
("local_argmax_pairs[fused]", "packed_allreduce_max[fused]", see
`reference.fused_strategy_funcs`): same collectives, the per-rank work in Triton
kernels. They must PASS every case too; `--time` times them beside the model's
impl="fused" prediction (n/a when the profile has no fused kernel parameters).
Triton is required (exit 2 without it). With the gloo backend the tensors are on
the CPU, where the kernels run under Triton's interpreter: verify sets
TRITON_INTERPRET=1 in its own process before importing Triton. The interpreter's
results are checked like any other, but its times are meaningless (and slow to
get), so `--time` leaves the fused variants out there unless --allow-interpreter.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import torch

from calibration.reference import strategies as ref
from calibration.reference.strategies import DraftHead, Strategy
from costmodel.io.errors import InputError, OneLineParser, first_line
from costmodel.model.scenario import padded_vocab

NAN = float("nan")
INF = float("inf")
PAD_TRAP = INF  # default padding content: beats every real logit unless padding is masked
DEFAULT_TIME_POINTS = ((1, 32000), (64, 128256), (256, 151936))
ABBREV = {"full_all_gather": "FAG", "full_all_gather_no_relayout": "FAG-NR", "gather_to_rank0": "G0",
          "local_argmax_pairs": "PAIRS", "packed_allreduce_max": "KEYS",
          ref.fused_name("local_argmax_pairs"): "PAIRS-F", ref.fused_name("packed_allreduce_max"): "KEYS-F"}


# -- cases -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One verification input: logits [batch, vocab] of `dtype` from `build(gen, case)` (padding included)."""

    name: str
    vocab: int
    batch: int
    dtype: str
    build: Callable[[torch.Generator, Case], torch.Tensor]
    target_vocab: int | None = None  # EAGLE-3: d2t into this target vocab
    softcap: float | None = None
    scale: float = 1.0
    top_k: int | None = None  # None: the run's --top-k; an int: this case's own k (only run when --top-k > 1)
    greedy_k: int | None = None  # target-side greedy verification of K drafts: batch = B x (K + 1) target rows

    @property
    def padded_vocab(self) -> int:
        return int(padded_vocab(self.vocab))

    @property
    def torch_dtype(self) -> torch.dtype:
        return ref.TORCH_DTYPES[self.dtype]


def _pad(x: torch.Tensor, case: Case, fill: float | torch.Tensor = PAD_TRAP) -> torch.Tensor:
    """Append the padding columns; `fill` is a scalar or a per-row [B] tensor."""
    extra = case.padded_vocab - case.vocab
    pad = torch.empty((x.shape[0], extra), dtype=x.dtype)
    pad[:] = fill if not isinstance(fill, torch.Tensor) else fill.to(x.dtype)[:, None]
    return torch.cat([x, pad], dim=-1)


def _randn(g: torch.Generator, case: Case, std: float = 3.0) -> torch.Tensor:
    return (torch.randn(case.batch, case.vocab, generator=g) * std).to(case.torch_dtype)


def _nan_bits(dtype: torch.dtype, negative: bool, payload: int = 0) -> torch.Tensor:
    """A NaN with a given sign and payload (bit patterns differ from the canonical one)."""
    if dtype == torch.float32:
        bits = (0xFFC00000 if negative else 0x7FC00000) | payload
        return torch.tensor([bits - (1 << 32) if bits >= 1 << 31 else bits], dtype=torch.int32).view(dtype)
    base = {torch.bfloat16: 0x7FC0, torch.float16: 0x7E00}[dtype]
    bits = (base | 0x8000 if negative else base) | payload
    return torch.tensor([bits - (1 << 16) if bits >= 1 << 15 else bits], dtype=torch.int16).view(dtype)


def _put(x: torch.Tensor, row: int, col: int, value: torch.Tensor) -> None:
    """x[row, col] = value bit for bit (a NaN keeps its sign and payload)."""
    ints = torch.int32 if x.dtype == torch.float32 else torch.int16
    x[row].view(ints)[col] = value.view(ints)[0]


def build_random(g: torch.Generator, case: Case) -> torch.Tensor:
    return _pad(_randn(g, case), case)


def build_ties_in_shard(g: torch.Generator, case: Case) -> torch.Tensor:
    """Small integers: many equal maxima in every shard; row 0 constant, row 1 max only near the end."""
    x = torch.randint(-4, 4, (case.batch, case.vocab), generator=g).to(case.torch_dtype)
    x[0] = 1.0
    x[1] = -2.0
    x[1, -5:] = 3.0
    return _pad(x, case)


def build_ties_across_shards(g: torch.Generator, case: Case) -> torch.Tensor:
    """The row maximum at 1-4 ids spread over the vocab (so over different shards); the first such id wins."""
    x = _randn(g, case, std=0.5).clamp(max=4.0)
    fractions = (0.1, 0.35, 0.6, 0.85, 0.999)
    for row in range(case.batch):
        chosen = fractions[row % 4:] if row % 5 != 4 else fractions[1:2] + fractions[3:]
        for f in chosen:
            x[row, min(case.vocab - 1, int(f * case.vocab) + row)] = 7.0
    return _pad(x, case)


def build_max_in_padding(g: torch.Generator, case: Case) -> torch.Tensor:
    """Padding holds +inf, NaN, a huge finite value, the largest finite value: it must never win."""
    x = _randn(g, case)
    big = torch.finfo(case.torch_dtype).max
    fills = torch.tensor([INF, NAN, 1e4, big] * case.batch, dtype=torch.float32)[:case.batch]
    return _pad(x, case, fills)


def build_all_neg_inf(g: torch.Generator, case: Case) -> torch.Tensor:
    """Rows 0 and 2 all -inf (id 0 wins), row 1 random, row 3 -inf except one finite value."""
    x = _randn(g, case)
    x[0::2] = -INF
    if case.batch > 3:
        x[3] = -INF
        x[3, case.vocab * 3 // 4] = -1e4
    return _pad(x, case)


def build_signed_zero(g: torch.Generator, case: Case) -> torch.Tensor:
    """Maxima of -0.0 and +0.0 (equal): the lowest id wins whatever the sign."""
    v = case.vocab
    x = torch.full((case.batch, v), -1.0, dtype=case.torch_dtype)
    x[0, 10], x[0, v - 100] = -0.0, 0.0  # -0.0 first (lower rank), +0.0 later
    x[1, 5], x[1, v * 7 // 10] = 0.0, -0.0
    signs = torch.randint(0, 2, (v,), generator=g).bool()
    x[2] = torch.where(signs, torch.tensor(-0.0), torch.tensor(0.0)).to(case.torch_dtype)
    if case.batch > 3:
        x[3] = 0.0
        x[3, 0] = -0.0
    return _pad(x, case)


def build_nan(g: torch.Generator, case: Case) -> torch.Tensor:
    """NaN policy: NaN is the maximum and the first NaN wins (signs and payloads vary)."""
    v, dt = case.vocab, case.torch_dtype
    x = _randn(g, case)
    x[0, v // 3] = NAN
    x[1, v // 2], x[1, v - 7] = NAN, NAN
    _put(x, 1, v // 4 + 1, _nan_bits(dt, negative=True))  # the first NaN has its sign bit set
    x[2] = NAN
    if case.batch > 3:
        _put(x, 3, v // 5, _nan_bits(dt, negative=True, payload=3))
        x[3, v * 4 // 5] = NAN
    if case.batch > 4:
        x[4, 3], x[4, v - 2] = INF, NAN  # NaN beats +inf
    return _pad(x, case)  # row 5+: no NaN


def build_infinities(g: torch.Generator, case: Case) -> torch.Tensor:
    v = case.vocab
    x = _randn(g, case)
    x[0, v // 8], x[0, v // 2], x[0, v - 1] = INF, INF, INF
    x[1] = -INF
    x[1, v - 3] = INF
    x[2, ::2] = -INF
    x[2, 1::2] = INF
    return _pad(x, case)


def build_negative_extremes(g: torch.Generator, case: Case) -> torch.Tensor:
    """All-negative rows (key order of negative floats), subnormals, the most negative finite value."""
    v, dt = case.vocab, case.torch_dtype
    fi = torch.finfo(dt)
    x = torch.full((case.batch, v), -fi.max, dtype=dt)
    x[0] = -(torch.rand(v, generator=g) * 1e3 + 1.0).to(dt)
    x[1] = -fi.smallest_normal / 4  # negative subnormal ties: id 0
    x[1, v // 2] = -fi.smallest_normal / 8  # a closer-to-zero subnormal wins
    x[2, v - 1] = -fi.max / 2
    if case.batch > 3:
        x[3] = 0.0
        x[3, v // 3], x[3, v // 6] = fi.smallest_normal / 8, fi.smallest_normal / 16
    return _pad(x, case)


def build_d2t_edge(g: torch.Generator, case: Case) -> torch.Tensor:
    """EAGLE-3 edge rows: all -inf, NaNs, cross-shard ties, signed zeros, random."""
    v = case.vocab
    x = _randn(g, case)
    x[0] = -INF
    x[1, v // 3], x[1, v // 2] = NAN, NAN
    x[2, v // 8], x[2, v // 2], x[2, v - 1] = 50.0, 50.0, 50.0
    x[3] = -1.0
    x[3, v // 5], x[3, v - 1] = -0.0, 0.0
    return _pad(x, case)


def build_softcap(g: torch.Generator, case: Case) -> torch.Tensor:
    """Large logits: the soft-cap saturates many of them to the same value (ties after the pre-step)."""
    return _pad(_randn(g, case, std=40.0), case)


def default_cases() -> list[Case]:
    c = Case
    return [
        c("random-fp32-V1000-B1", 1000, 1, "fp32", build_random),
        c("random-bf16-V32003-B33", 32003, 33, "bf16", build_random),
        c("random-fp16-V128256-B2", 128256, 2, "fp16", build_random),
        c("random-bf16-V151936-B1", 151936, 1, "bf16", build_random),
        c("batch128-fp16-V1000", 1000, 128, "fp16", build_random),
        c("ties-in-shard-bf16-V32003-B8", 32003, 8, "bf16", build_ties_in_shard),
        c("ties-across-shards-fp32-V1000-B8", 1000, 8, "fp32", build_ties_across_shards),
        c("ties-across-shards-bf16-V128256-B5", 128256, 5, "bf16", build_ties_across_shards),
        c("max-in-padding-bf16-V32003-B4", 32003, 4, "bf16", build_max_in_padding),
        c("max-in-padding-fp32-V1000-B4", 1000, 4, "fp32", build_max_in_padding),
        c("all-neg-inf-fp32-V1000-B4", 1000, 4, "fp32", build_all_neg_inf),
        c("all-neg-inf-bf16-V32003-B4", 32003, 4, "bf16", build_all_neg_inf),
        c("signed-zero-fp32-V1000-B4", 1000, 4, "fp32", build_signed_zero),
        c("signed-zero-bf16-V32003-B4", 32003, 4, "bf16", build_signed_zero),
        c("nan-fp32-V32003-B6", 32003, 6, "fp32", build_nan),
        c("nan-bf16-V1000-B6", 1000, 6, "bf16", build_nan),
        c("nan-fp16-V1000-B4", 1000, 4, "fp16", build_nan),
        c("infinities-fp16-V1000-B4", 1000, 4, "fp16", build_infinities),
        c("negative-extremes-fp32-V1000-B4", 1000, 4, "fp32", build_negative_extremes),
        c("negative-extremes-bf16-V32003-B4", 32003, 4, "bf16", build_negative_extremes),
        c("eagle3-d2t-bf16-V32000-T128256-B5", 32000, 5, "bf16", build_ties_in_shard, target_vocab=128256),
        c("eagle3-d2t-edge-fp32-V1000-T4096-B6", 1000, 6, "fp32", build_d2t_edge, target_vocab=4096),
        c("softcap5-scale0.5-bf16-V32003-B4", 32003, 4, "bf16", build_softcap, softcap=5.0, scale=0.5),
        c("softcap30-scale1.7-fp32-V1000-B3", 1000, 3, "fp32", build_softcap, softcap=30.0, scale=1.7),
        c("eagle3-d2t-softcap-fp16-V1000-T2000-B4", 1000, 4, "fp16", build_softcap, target_vocab=2000,
          softcap=8.0, scale=2.0),
        c("greedy-verify-bf16-V32003-B4-K5", 32003, 4 * 6, "bf16", build_ties_in_shard, top_k=1, greedy_k=5),
    ]


# -- top-k cases (run when --top-k K > 1) ---------------------------------------------------------------------
def _case_k(case: Case, k: int) -> int:
    return case.top_k if case.top_k is not None else k


def build_kth_ties_across_shards(g: torch.Generator, case: Case, k: int = 4) -> torch.Tensor:
    """k - 1 clear winners, then the k-th place tied at 3.0 by ids spread over every shard (lowest id wins)."""
    v = case.vocab
    x = (torch.rand(case.batch, v, generator=g) - 1.0).to(case.torch_dtype)  # in [-1, 0)
    for row in range(case.batch):
        for j in range(k - 1):
            x[row, (j * 997 + row * 13 + 5) % v] = 5.0 + j % 3  # winners (with ties among them too)
        for f in (0.93, 0.71, 0.52, 0.27, 0.04):  # ties at the k-th place, highest id first
            col = min(v - 1, int(f * v) + row)
            if x[row, col] < 1:
                x[row, col] = 3.0
    return _pad(x, case)


def build_kth_ties_in_shard(g: torch.Generator, case: Case, k: int = 4) -> torch.Tensor:
    """The k-th place tied by a run of equal values inside one shard, after k - 1 winners in other shards."""
    v = case.vocab
    x = torch.randint(-6, -1, (case.batch, v), generator=g).to(case.torch_dtype)
    for row in range(case.batch):
        for j in range(k - 1):
            x[row, v - 1 - j * 3] = 9.0
        start = (row * 101) % (v // 2)
        x[row, start:start + 3 * k] = 2.0
    return _pad(x, case)


def _topk_builder(fn: Callable) -> Callable[[torch.Generator, Case], torch.Tensor]:
    """Bind the case's k into a top-k builder (`Case.build` takes (g, case))."""
    def build(g: torch.Generator, case: Case) -> torch.Tensor:
        return fn(g, case, case.top_k or 4)
    build.__name__ = fn.__name__
    return build


def topk_cases(k: int) -> list[Case]:
    """Adversarial top-k inputs: k-th place ties inside and across shards, k > shard, few finite values + d2t."""
    c = Case
    return [
        c("topk-kth-ties-across-shards-fp32-V1000-B6", 1000, 6, "fp32", _topk_builder(build_kth_ties_across_shards),
          top_k=k),
        c("topk-kth-ties-across-shards-bf16-V32003-B3", 32003, 3, "bf16",
          _topk_builder(build_kth_ties_across_shards), top_k=k),
        c("topk-kth-ties-in-shard-fp16-V1000-B4", 1000, 4, "fp16", _topk_builder(build_kth_ties_in_shard), top_k=k),
        c("topk-k-over-shard-bf16-V130-B3", 130, 3, "bf16", build_ties_in_shard, top_k=100),
        c("topk-k-is-vocab-fp32-V130-B2", 130, 2, "fp32", build_max_in_padding, top_k=130),
        c("topk-k-over-shard-neg-inf-fp32-V130-B4", 130, 4, "fp32", build_all_neg_inf, top_k=100),
        c("topk-d2t-few-finite-fp32-V1000-T4096-B4", 1000, 4, "fp32", build_all_neg_inf, target_vocab=4096),
        c("topk-d2t-kth-ties-bf16-V1000-T3000-B4", 1000, 4, "bf16", _topk_builder(build_kth_ties_across_shards),
          target_vocab=3000, top_k=k),
    ]


def make_d2t(g: torch.Generator, draft_vocab: int, target_vocab: int) -> torch.Tensor:
    """A random strictly increasing EAGLE-3 map that never maps draft id 0 to target id 0 (d2t[0] > 0)."""
    targets = (torch.randperm(target_vocab - 1, generator=g)[:draft_vocab] + 1).sort().values
    return targets - torch.arange(draft_vocab)


def case_inputs(case: Case, seed: int, world_size: int, top_k: int = 1) -> tuple[torch.Tensor, DraftHead]:
    """(padded logits [B, V_pad], validated head at the case's top-k) - identical on every rank for the same seed."""
    g = torch.Generator().manual_seed(seed)
    padded = case.build(g, case)
    d2t = make_d2t(g, case.vocab, case.target_vocab) if case.target_vocab else None
    head = ref.draft_head(case.vocab, world_size, d2t=d2t, target_vocab=case.target_vocab,
                          softcap=case.softcap, scale=case.scale, top_k=_case_k(case, top_k))
    return padded, head


# -- deliberately broken strategies --------------------------------------------------------------------------------
def _pairs_ties_highest(local: torch.Tensor, comm: ref.Comm, head: DraftHead) -> torch.Tensor:
    """BUG: the pair reduce picks the HIGHEST rank among equal maxima."""
    x = ref.apply_softcap_scale(local, head.softcap, head.scale)
    vals, ids = ref.local_argmax(x, comm.rank, head.layout.shard, head.layout.vocab)
    p = comm.world_size
    if p > 1:
        buf = x.new_empty((p * x.shape[0], 2), dtype=torch.float32)
        comm.all_gather_into(buf, ref.pack_pairs(vals, ids))
        table = ref.relayout(buf, p).view(x.shape[0], p, 2)
        top = (p - 1 - table[..., 0].flip(-1).argmax(-1)).unsqueeze(-1)
        ids, vals = table[..., 1].gather(-1, top).squeeze(-1).long(), table[..., 0].gather(-1, top).squeeze(-1)
    if head.d2t is not None:
        ids = ref.d2t_lookup(ids, head.d2t, vals == -INF)
    return ids


def _keys_no_pad_mask(local: torch.Tensor, comm: ref.Comm, head: DraftHead) -> torch.Tensor:
    """BUG: the key path forgets to mask the padding columns."""
    x = ref.apply_softcap_scale(local, head.softcap, head.scale)
    s = head.layout.shard
    keys = ref.key_pack(x, comm.rank, s, s * comm.world_size)
    if comm.world_size > 1:
        comm.all_reduce_max(keys)
    ids = ref.key_unpack(keys)
    return ids if head.d2t is None else ref.d2t_lookup(ids, head.d2t, ref.key_is_neg_inf(keys))


def _keys_raw_negzero(local: torch.Tensor, comm: ref.Comm, head: DraftHead) -> torch.Tensor:
    """BUG: the key path keeps -0.0 below +0.0 (no canonicalization)."""
    x = ref.apply_softcap_scale(local, head.softcap, head.scale)
    vals, ids = ref.local_argmax(x, comm.rank, head.layout.shard, head.layout.vocab)
    bits = vals.float().view(torch.int32)
    hi = torch.where(vals.float() != vals.float(), torch.full_like(bits, ref.CANONICAL_NAN_BITS), bits)
    keys = (hi ^ ((hi >> 31) & 0x7FFFFFFF)).long() * (1 << 32) + (0xFFFFFFFF - ids)
    if comm.world_size > 1:
        comm.all_reduce_max(keys)
    ids = ref.key_unpack(keys)
    return ids if head.d2t is None else ref.d2t_lookup(ids, head.d2t, ref.key_is_neg_inf(keys))


def _pairs_nan_dropped(local: torch.Tensor, comm: ref.Comm, head: DraftHead) -> torch.Tensor:
    """BUG: NaN logits are replaced by -inf before the local max (NaN no longer wins)."""
    return ref.local_argmax_pairs(torch.nan_to_num(local, nan=-INF), comm, head)


def _topk_pairs_ties_highest(local: torch.Tensor, comm: ref.Comm, head: DraftHead) -> torch.Tensor:
    """BUG (top-k): the merge sorts the p x k candidates by value only, highest rank first among equal values."""
    lay, k, p = head.layout, head.top_k, comm.world_size
    x = ref.apply_softcap_scale(local, head.softcap, head.scale)
    vals, ids = ref.local_topk(x, comm.rank, lay.shard, lay.vocab, k)
    if p > 1:
        buf = ref._gather_concat(ref.pack_topk_pairs(vals, ids), comm)
        table = buf.reshape(p, -1, k, 2).flip(0).movedim(0, 1).reshape(-1, p * k, 2)
        v, order = torch.sort(table[..., 0], dim=-1, descending=True, stable=True)
        vals, ids = v[..., :k], table[..., 1].long().gather(-1, order)[..., :k]
    return ref.d2t_lookup_topk(ids, vals, head.d2t) if head.d2t is not None else ids


def _topk_pairs_pad_zero(local: torch.Tensor, comm: ref.Comm, head: DraftHead) -> torch.Tensor:
    """BUG (top-k): a shard with fewer than k real ids fills its list with (-inf, id 0) instead of (-inf, V)."""
    lay, k, p = head.layout, head.top_k, comm.world_size
    x = ref.apply_softcap_scale(local, head.softcap, head.scale)
    vals, ids = ref.local_topk(x, comm.rank, lay.shard, lay.vocab, k)
    ids = torch.where(ids >= lay.vocab, torch.zeros_like(ids), ids)
    if p > 1:
        vals, ids = ref.topk_pair_merge(ref._gather_concat(ref.pack_topk_pairs(vals, ids), comm), p, k)
    else:
        vals, ids = ref.merge_topk(vals, ids, k)
    return ref.d2t_lookup_topk(ids, vals, head.d2t) if head.d2t is not None else ids


def _topk_pairs_d2t_naive(local: torch.Tensor, comm: ref.Comm, head: DraftHead) -> torch.Tensor:
    """BUG (top-k): every draft id is mapped as target = id + d2t[id], -inf entries too (vLLM's `top + d2t[top]`)."""
    if head.d2t is None:
        return ref.STRATEGY_FUNCS["local_argmax_pairs"](local, comm, head)
    plain = ref.DraftHead(head.layout, None, None, head.softcap, head.scale, head.top_k)
    ids = ref.STRATEGY_FUNCS["local_argmax_pairs"](local, comm, plain)
    safe = ids.clamp(max=head.d2t.shape[0] - 1)
    return safe + head.d2t[safe]


BUGS: dict[str, tuple[str, Strategy]] = {
    "ties-highest": ("local_argmax_pairs", _pairs_ties_highest),
    "no-pad-mask": ("packed_allreduce_max", _keys_no_pad_mask),
    "raw-negzero": ("packed_allreduce_max", _keys_raw_negzero),
    "nan-dropped": ("local_argmax_pairs", _pairs_nan_dropped),
    "topk-ties-highest": ("local_argmax_pairs", _topk_pairs_ties_highest),
    "topk-pad-id-zero": ("local_argmax_pairs", _topk_pairs_pad_zero),
    "topk-d2t-naive": ("local_argmax_pairs", _topk_pairs_d2t_naive),
}


def strategies_with_bug(bug: str | None) -> dict[str, Strategy]:
    """The reference strategies, one replaced by the broken variant `bug` (None: all correct)."""
    out = dict(ref.STRATEGY_FUNCS)
    if bug is not None:
        if bug not in BUGS:
            raise InputError(f"unknown --inject-bug {bug!r} (known: {', '.join(BUGS)})")
        name, fn = BUGS[bug]
        out[name] = fn
    return out


# -- running -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """status PASS | FAIL (first_bad_row set) | ERROR (the strategy raised) | SKIP (p does not divide V_pad)."""

    case: str
    strategy: str
    status: str
    first_bad_row: int | None = None
    got: int | None = None
    expected: int | None = None
    message: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("FAIL", "ERROR")

    @property
    def cell(self) -> str:
        return f"FAIL@row{self.first_bad_row}" if self.status == "FAIL" else self.status


# per (case, strategy) code reduced with MIN over ranks: 0 error < row + 1 mismatch < PASS < SKIP
_ERROR, _PASS, _SKIP = 0, 1 << 40, (1 << 40) + 1


def topk_skip(name: str, top_k: int) -> bool:
    """True where a strategy has no exact top-k variant at this k (packed keys and the fused argmax kernels)."""
    base = name[:-len(ref.FUSED_SUFFIX)] if name.endswith(ref.FUSED_SUFFIX) else name
    return top_k > 1 and (name.endswith(ref.FUSED_SUFFIX) or base == "packed_allreduce_max")


def run_cases(cases: list[Case], strategies: dict[str, Strategy], comm: ref.Comm, device: torch.device,
              seed: int, top_k: int = 1) -> list[Outcome]:
    """Every case x strategy on this rank at `top_k` (a case may fix its own k); outcomes reduced over ranks
    (the worst rank decides). SKIP: p does not divide V_pad, k > V, or no exact top-k variant (`topk_skip`)."""
    codes, detail, keys = [], {}, []
    for index, case in enumerate(cases):
        k = _case_k(case, top_k)
        try:
            ref.vocab_layout(case.vocab, comm.world_size)
            ref.check_top_k(k, case.vocab)
        except InputError:  # p does not divide V_pad: the engine would refuse this TP size
            keys += [(case.name, name) for name in strategies]
            codes += [_SKIP] * len(strategies)
            continue
        padded, head = case_inputs(case, seed + index, comm.world_size, top_k)
        padded = padded.to(device)
        head = _head_to(head, device)
        expected = ref.expected_ids(padded, head)
        draft = None
        if case.greedy_k:  # verification: the strategies' argmax of B x (K + 1) target rows, then acceptance
            target = expected.reshape(-1, case.greedy_k + 1)
            draft = greedy_drafts(target, case.greedy_k)
            expected = greedy_expected(target, draft)
        local = ref.shard_of(padded, comm.rank, head.layout)
        for name, fn in strategies.items():
            keys.append((case.name, name))
            if topk_skip(name, k):
                codes.append(_SKIP)
                continue
            try:
                if draft is None:
                    got = fn(local, comm, head)
                else:
                    got = torch.cat([t.reshape(draft.shape[0], -1)
                                     for t in ref.greedy_verify(fn, local, comm, head, draft)], dim=-1)
            except Exception as exc:  # noqa: BLE001 - a broken strategy is a result, not a crash
                detail[(case.name, name)] = f"{type(exc).__name__}: {first_line(exc)}"
                codes.append(_ERROR)
                continue
            bad = torch.nonzero((got != expected).reshape(got.shape[0], -1).any(-1)).flatten() \
                if got.shape == expected.shape else torch.zeros(1, dtype=torch.int64)
            if bad.numel():
                first = int(bad[0])
                detail[(case.name, name)] = _first_diff(got, expected)
                codes.append(first + 1)
            else:
                codes.append(_PASS)
    negated = -torch.tensor(codes, dtype=torch.int64, device=device)
    comm.all_reduce_max(negated)  # max of -code == -(min over ranks of code)
    outcomes = []
    for (case_name, name), code in zip(keys, (-negated).tolist()):
        mine = detail.get((case_name, name))
        if code == _PASS:
            outcomes.append(Outcome(case_name, name, "PASS"))
        elif code == _SKIP:
            outcomes.append(Outcome(case_name, name, "SKIP"))
        elif code == _ERROR:
            message = mine if isinstance(mine, str) else "raised on another rank"
            outcomes.append(Outcome(case_name, name, "ERROR", message=message))
        else:
            row = code - 1
            got = expected = None
            if isinstance(mine, tuple) and row < mine[0].numel():
                got, expected = int(mine[0][row]), int(mine[1][row])
            outcomes.append(Outcome(case_name, name, "FAIL", row, got, expected))
    return outcomes


def greedy_drafts(target: torch.Tensor, k: int) -> torch.Tensor:
    """Draft ids [B, K] against the target argmax [B, K + 1]: request b keeps its first (2b + 2) % (K + 2)
    drafts equal to the target's and changes the next one (>= K: every draft accepted)."""
    draft = target[:, :k].clone()
    for b in range(draft.shape[0]):
        wrong = (2 * b + 2) % (k + 2)
        if wrong < k:
            draft[b, wrong] += 1
    return draft


def greedy_expected(target: torch.Tensor, draft: torch.Tensor) -> torch.Tensor:
    """[B, K + 2]: accepted prefix length (counted in Python), then the target argmax ids."""
    accepted = []
    for t_row, d_row in zip(target.tolist(), draft.tolist()):
        n = 0
        while n < len(d_row) and d_row[n] == t_row[n]:
            n += 1
        accepted.append(n)
    return torch.cat([torch.tensor(accepted, device=target.device)[:, None], target], dim=-1)


def _first_diff(got: torch.Tensor, expected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, (got, expected) at the first differing slot (top-k rows have k slots; argmax rows one)."""
    exp = expected.reshape(expected.shape[0], -1)
    if got.shape != expected.shape:
        return got.reshape(-1)[:exp.shape[0]].cpu(), exp[:, 0].cpu()
    g = got.reshape(exp.shape)
    col = (g != exp).to(torch.int8).argmax(-1, keepdim=True)
    return g.gather(1, col).squeeze(1).cpu(), exp.gather(1, col).squeeze(1).cpu()


def _head_to(head: DraftHead, device: torch.device) -> DraftHead:
    if head.d2t is None:
        return head
    return DraftHead(head.layout, head.d2t.to(device), head.target_vocab, head.softcap, head.scale, head.top_k)


def format_table(outcomes: list[Outcome], strategies: list[str]) -> str:
    """case x strategy matrix of PASS / FAIL@rowN / ERROR / SKIP, then one line per failure."""
    cases = list(dict.fromkeys(o.case for o in outcomes))
    cell = {(o.case, o.strategy): o for o in outcomes}
    width = max(len(c) for c in cases) if cases else 4
    heads = [ABBREV.get(s, s) for s in strategies]
    cols = [max(len(h), max((len(cell[(c, s)].cell) for c in cases), default=4)) for h, s in zip(heads, strategies)]
    lines = ["case".ljust(width) + "  " + "  ".join(h.ljust(w) for h, w in zip(heads, cols))]
    for c in cases:
        lines.append(c.ljust(width) + "  " + "  ".join(cell[(c, s)].cell.ljust(w) for s, w in zip(strategies, cols)))
    lines.append("legend: " + ", ".join(f"{ABBREV.get(s, s)}={s}" for s in strategies))
    for o in outcomes:
        if o.status == "FAIL":
            where = (f"got id {o.got}, expected {o.expected} (rank 0)" if o.got is not None
                     else "rank 0 agrees, another rank differs")
            lines.append(f"FAIL {o.case} / {o.strategy}: first mismatching row {o.first_bad_row}: {where}")
        elif o.status == "ERROR":
            lines.append(f"ERROR {o.case} / {o.strategy}: {o.message}")
    return "\n".join(lines)


# -- timing ------------------------------------------------------------------------------------------------------
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _split_fused(name: str) -> tuple[str, bool]:
    """("local_argmax_pairs", True) for "local_argmax_pairs[fused]"; (name, False) otherwise."""
    if name.endswith(ref.FUSED_SUFFIX):
        return name[:-len(ref.FUSED_SUFFIX)], True
    return name, False


def predicted_us(scenario, profile, names: list[str]) -> dict[str, float]:
    """The model's per-call time of each strategy; a "[fused]" name is priced with impl="fused".

    NaN where the profile cannot price it (e.g. no fused kernel parameters) or the name is not a model strategy.
    """
    from costmodel import predict
    from costmodel.model.components import STRATEGIES

    out: dict[str, float] = {}
    for fused in (False, True):
        wanted = {n: base for n in names for base, f in [_split_fused(n)] if f == fused and base in STRATEGIES}
        if not wanted:
            continue
        try:
            pred = predict(scenario.with_(impl="fused") if fused else scenario, profile,
                           strategies=tuple(dict.fromkeys(wanted.values())))
        except InputError:
            continue
        out.update({n: float(pred.total_us(base).reshape(-1)[0]) for n, base in wanted.items()})
    return {n: out.get(n, NAN) for n in names}


def time_strategies(strategies: dict[str, Strategy], comm: ref.Comm, device: torch.device,
                    points: list[tuple[int, int]], dtype: str, repeats: int, barrier: Callable[[], None],
                    profile: str | None, top_k: int = 1) -> list[dict]:
    """Median over `repeats` of the per-iteration max across ranks, with the model's eager prediction.

    top_k > 1 times the top-k output (head and scenario at k) and leaves out the strategies `run_cases`
    skips at k > 1 (`topk_skip`: the packed key and the fused kernels are argmax-only).
    """
    from costmodel import Scenario, load_profile

    prof = load_profile(profile)
    timed = {n: fn for n, fn in strategies.items() if not topk_skip(n, top_k)}
    rows = []
    for batch, vocab in points:
        try:
            head = ref.draft_head(vocab, comm.world_size, top_k=top_k)
            scenario = Scenario(vocab=vocab, tp=comm.world_size, batch=batch, dtype=dtype, mode="eager", top_k=top_k)
            pred = predicted_us(scenario, prof, list(timed))
        except InputError as exc:
            rows.append({"batch": batch, "vocab": vocab, "strategy": "-", "note": str(exc)})
            continue
        g = torch.Generator().manual_seed(batch * 7 + vocab)
        local = (torch.randn(batch, head.layout.shard, generator=g)).to(ref.TORCH_DTYPES[dtype]).to(device)
        for name, fn in timed.items():
            for _ in range(2):
                fn(local, comm, head)
            samples = torch.empty(repeats, dtype=torch.float64)
            for i in range(repeats):
                barrier()
                _sync(device)
                t0 = time.perf_counter_ns()
                fn(local, comm, head)
                _sync(device)
                samples[i] = (time.perf_counter_ns() - t0) / 1e3
            per_iter = samples.to(device)
            comm.all_reduce_max(per_iter)
            rows.append({"batch": batch, "vocab": vocab, "strategy": name,
                         "measured_us": float(per_iter.median()),
                         "predicted_us": pred[name]})
    return rows


def format_timing(rows: list[dict], dtype: str, world_size: int, backend: str, profile: str | None,
                  top_k: int = 1) -> str:
    k = f", top-{top_k}" if top_k > 1 else ""
    lines = [f"end-to-end time per call, {dtype}{k}, p={world_size}, {backend} (median over repeats of the max across "
             f"ranks) vs costmodel eager prediction (profile {profile or 'default'})",
             f"{'batch':>6} {'vocab':>7}  {'strategy':<28} {'measured_us':>12} {'predicted_us':>13} {'ratio':>7}"]
    for r in rows:
        if "note" in r:
            lines.append(f"{r['batch']:>6} {r['vocab']:>7}  skipped: {r['note']}")
            continue
        pred = r["predicted_us"]
        if pred > 0:  # False for NaN (the model cannot price it)
            tail = f"{pred:>13.1f} {r['measured_us'] / pred:>7.2f}"
        else:
            tail = f"{'n/a':>13} {'n/a':>7}"
        lines.append(f"{r['batch']:>6} {r['vocab']:>7}  {r['strategy']:<28} {r['measured_us']:>12.1f} {tail}")
    return "\n".join(lines)


# -- CLI ---------------------------------------------------------------------------------------------------------
def _points(text: str) -> list[tuple[int, int]]:
    out = []
    for item in text.split(","):
        try:
            b, v = item.lower().split("x")
            out.append((int(b), int(v)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"time point {item!r} is not BATCHxVOCAB (e.g. 64x128256)") from None
        if out[-1][0] < 1 or out[-1][1] < 1:
            raise argparse.ArgumentTypeError(f"time point {item!r} needs batch >= 1 and vocab >= 1")
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = OneLineParser(prog="python -m calibration.verify", description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("gloo", "nccl"), required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--inject-bug", choices=sorted(BUGS), default=None,
                    help="replace one strategy by a deliberately broken variant (verify must then FAIL)")
    ap.add_argument("--cases", default=None, help="only cases whose name contains one of these comma-separated words")
    ap.add_argument("--softcap", type=float, default=None, help="add a case with this soft-cap (and --scale)")
    ap.add_argument("--scale", type=float, default=None, help="add a case with this logit scale (must be > 0)")
    ap.add_argument("--top-k", type=int, default=1,
                    help="check the top-k output (k largest, descending, ties by lowest id; default 1 = argmax) and "
                         "add the adversarial top-k cases")
    ap.add_argument("--collective", choices=("nccl", "oneshot"), default="nccl",
                    help="oneshot: all-gather / all-reduce with one-shot semantics (every rank reads every peer's "
                         "buffer, reference.OneShotComm) instead of the backend's collective")
    ap.add_argument("--fused", action="store_true",
                    help="also check (and with --time, time) the fused Triton variants of the local strategies "
                         "(needs Triton; on CPU they run under its interpreter)")
    ap.add_argument("--allow-interpreter", action="store_true",
                    help="with --fused --time on CPU: time the interpreted fused variants too (meaningless times)")
    ap.add_argument("--time", action="store_true", help="also time every strategy and compare with the model")
    ap.add_argument("--profile", default=None, help="cost-model profile for --time predictions (name or JSON)")
    ap.add_argument("--time-points", type=_points, default=list(DEFAULT_TIME_POINTS),
                    help="BATCHxVOCAB,... (default 1x32000,64x128256,256x151936)")
    ap.add_argument("--time-dtype", choices=tuple(ref.TORCH_DTYPES), default="bf16")
    ap.add_argument("--repeats", type=int, default=20)
    return ap.parse_args(argv)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _device(backend: str) -> torch.device:
    """cuda:LOCAL_RANK for nccl (made current; raises `InputError` without CUDA), cpu for gloo."""
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise InputError("--backend nccl needs CUDA GPUs (torch.cuda.is_available() is False); use gloo")
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _init(backend: str, device: torch.device) -> None:
    import torch.distributed as dist

    timeout = timedelta(seconds=300)
    try:
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            kwargs = {"device_id": device} if backend == "nccl" else {}
            dist.init_process_group(backend, timeout=timeout, **kwargs)
        else:  # plain `python -m calibration.verify`: a group of one
            dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1,
                                    timeout=timeout)
    except ValueError as exc:  # e.g. a torchrun environment without MASTER_ADDR / MASTER_PORT
        raise InputError(f"cannot start the process group: {first_line(exc)}") from None


def triton_note(device: torch.device) -> str:
    """", fused: Triton <version> (compiled|interpreter)" for the header line."""
    import importlib.metadata

    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    mode = "interpreter" if ref.import_triton_kernels(device.type).INTERPRETED else "compiled"
    return f", fused: Triton {version} ({mode})"


def main(argv: list[str] | None = None) -> int:
    """CLI: 0 PASS, 1 FAIL, 2 bad input, 3 the run broke (failed init, a dead peer): one `error:` line each."""
    try:
        args = parse_args(argv)
        cases = default_cases()
        if args.softcap is not None or args.scale is not None:
            scale = 1.0 if args.scale is None else args.scale
            ref.check_prestep(args.softcap, scale)
            cases.append(Case(f"cli-softcap{args.softcap}-scale{scale}-bf16-V32003-B4", 32003, 4, "bf16",
                              build_softcap, softcap=args.softcap, scale=scale))
        if not 1 <= args.top_k <= 4096:
            raise InputError(f"--top-k must be in 1..4096, got {args.top_k}")
        if args.top_k > 1:
            cases += topk_cases(args.top_k)
        if args.cases:
            words = [w for w in args.cases.split(",") if w]
            cases = [c for c in cases if any(w in c.name for w in words)]
            if not cases:
                raise InputError(f"--cases {args.cases!r} matches no case (see the table of a full run)")
        if not 1 <= args.repeats <= 100_000:
            raise InputError(f"--repeats must be in 1..100000, got {args.repeats}")
        if not 0 <= args.seed <= 2**31 - 1:
            raise InputError(f"--seed must be in 0..{2**31 - 1}, got {args.seed}")
        if args.time:
            from costmodel import load_profile

            load_profile(args.profile)  # fail early on a bad profile
        strategies = strategies_with_bug(args.inject_bug)
        device = _device(args.backend)
        if args.fused:  # before the process group: a missing Triton is a one-line error on every rank
            strategies.update(ref.fused_strategy_funcs(device.type))
        _init(args.backend, device)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as exc:  # the process group could not start
        print(f"error: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    import torch.distributed as dist

    try:
        comm = ref.OneShotComm() if args.collective == "oneshot" else ref.TorchComm()
        rank, world = comm.rank, comm.world_size
        outcomes = run_cases(cases, strategies, comm, device, args.seed, args.top_k)
        failed = any(o.failed for o in outcomes)
        if rank == 0:
            bug = f", injected bug: {args.inject_bug}" if args.inject_bug else ""
            fused = triton_note(device) if args.fused else ""
            print(f"verify: {len(cases)} cases x {len(strategies)} strategies, world size {world}, "
                  f"backend {args.backend}, device {device.type}, seed {args.seed}, top-k {args.top_k}, "
                  f"collective {args.collective}{bug}{fused}")
            print(format_table(outcomes, list(strategies)))
            n_fail = sum(o.status == "FAIL" for o in outcomes)
            n_error = sum(o.status == "ERROR" for o in outcomes)
            n_skip = sum(o.status == "SKIP" for o in outcomes)
            print(f"result: {'FAIL' if failed else 'PASS'} ({n_fail} mismatching, {n_error} raised, "
                  f"{n_skip} skipped of {len(outcomes)})")
            sys.stdout.flush()
        if args.time:
            interpreted = args.fused and ref.import_triton_kernels(device.type).INTERPRETED
            timed = {n: fn for n, fn in strategies.items()
                     if not (interpreted and not args.allow_interpreter and n.endswith(ref.FUSED_SUFFIX))}
            rows = time_strategies(timed, comm, device, args.time_points, args.time_dtype, args.repeats,
                                   dist.barrier, args.profile, args.top_k)
            if rank == 0:
                print(format_timing(rows, args.time_dtype, world, args.backend, args.profile, args.top_k))
                if interpreted and args.allow_interpreter:
                    print("note: the [fused] rows ran under Triton's interpreter (CPU): their times are not "
                          "meaningful")
                elif interpreted:
                    print("note: the [fused] variants were not timed: Triton's interpreter (CPU) gives meaningless "
                          "times (--allow-interpreter times them anyway)")
                sys.stdout.flush()
        dist.barrier()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as exc:  # typically a peer rank died or the group broke
        print(f"error: {type(exc).__name__}: {first_line(exc)} (a peer rank died or hung?)", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("error: interrupted (verify keeps no partial results; rerun it)", file=sys.stderr)
        return 130
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
