"""Bit-exact reference implementations of every draft-token strategy, written as an engine runs them.

Every strategy of `costmodel.model.components.STRATEGIES` is a function
``strategy(local, comm, head) -> ids`` called on each of the p ranks with the
rank's vocab shard of the draft logits (`local`, [B, s] in the model dtype)
and returning the same B int64 token ids on every rank. `comm` wraps real
torch.distributed collectives (`TorchComm`) or p threads of one process
(`ThreadComm`, for tests). The single-rank building blocks are pure functions
(they never write their inputs); `calibration.kernels` times exactly these.

Vocab layout (vLLM): V_pad = ceil(V / 64) * 64, shard s = V_pad / p, rank r
holds ids [r*s, (r+1)*s); ids >= V are padding and never win. A p that does not
divide V_pad is rejected, like vLLM does.

Pre-step on every path (vLLM LogitsProcessor order), applied to the local
logits in their own dtype: x = cap * tanh(x / cap) when a soft-cap is set,
then x = x * scale. Both are monotone, so the argmax is unchanged; a scale
<= 0 (or a non-finite one, or a soft-cap <= 0) raises `InputError` (a
ValueError) with a one-line message.

Exactness. Every strategy returns exactly torch.argmax over the full,
unpadded logits (after the same pre-step; after the EAGLE-3 d2t scatter into
the target vocab when a d2t map is given):
* ties: the lowest global id wins, inside a shard (torch's first-index rule)
  and across shards (the lowest rank wins; rank order is vocab order);
* NaN policy: like torch.argmax, NaN counts as the maximum and the first
  (lowest-id) NaN wins, on every path: the local max returns the shard's first
  NaN, the pair reduce's argmax and the 64-bit key (every NaN canonicalized to
  0x7FC00000, above +inf) both pick the lowest rank holding a NaN;
* -0.0 and +0.0 tie (lowest id wins); the packed key canonicalizes -0.0;
* a row of all -inf returns id 0 (with d2t: target id 0, which is what the
  scatter baseline returns - the d2t lookup paths map such rows to 0 rather
  than to target(draft 0) = d2t[0] as vLLM's `top + d2t[top]` would);
* EAGLE-3 d2t maps must be strictly increasing (target = draft + d2t[draft]),
  which makes "argmax then map" equal "scatter then argmax", ties included;
* local_argmax_pairs carries ids in fp32: exact only for V_pad <= 2^24 (else
  `InputError`); bf16 / fp16 values widen to fp32 exactly.

Fused variants. `fused_strategy_funcs(device_type)` returns "local_argmax_pairs[fused]" and
"packed_allreduce_max[fused]": the same collectives and d2t rule, with the per-rank work done by the Triton
kernels of `calibration.reference.triton_kernels` (imported lazily; on CPU under Triton's interpreter, which
`import_triton_kernels("cpu")` switches on). They are not in `STRATEGY_FUNCS`.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from costmodel.io.errors import InputError, first_line
from costmodel.model.scenario import MAX_EXACT_FP32_ID, padded_vocab

TORCH_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
NEG_INF = float("-inf")
CANONICAL_NAN_BITS = 0x7FC00000  # positive quiet NaN: its key exceeds +inf's
_LOW32 = 0xFFFFFFFF
_TWO32 = 1 << 32


# -- layout and options ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VocabLayout:
    """V (unpadded draft vocab), p ranks, V_pad = ceil(V/64)*64, shard s = V_pad / p."""

    vocab: int
    world_size: int
    padded_vocab: int
    shard: int

    def valid_cols(self, rank: int) -> int:
        """Columns of rank `rank` that hold real ids: clamp(V - rank*s, 0, s)."""
        return valid_cols(rank, self.shard, self.vocab)


def vocab_layout(vocab: int, world_size: int) -> VocabLayout:
    """Layout of a V-id vocab over p ranks; raises `InputError` when p does not divide V_pad."""
    if vocab < 1:
        raise InputError(f"vocab must be >= 1, got {vocab}")
    if world_size < 1:
        raise InputError(f"world size must be >= 1, got {world_size}")
    padded = int(padded_vocab(vocab))
    if padded % world_size:
        raise InputError(f"TP size {world_size} does not divide the padded vocab {padded} (vLLM rejects this)")
    return VocabLayout(vocab, world_size, padded, padded // world_size)


def valid_cols(rank: int, shard: int, vocab: int) -> int:
    """clamp(V - rank*s, 0, s): the rank's non-padding columns."""
    return max(0, min(shard, vocab - rank * shard))


def check_prestep(softcap: float | None = None, scale: float = 1.0) -> None:
    """Reject a non-positive or non-finite scale / soft-cap (they reverse or flatten the order)."""
    if not isinstance(scale, int | float) or not math.isfinite(scale) or scale <= 0:
        raise InputError(f"scale must be a finite number > 0, got {scale!r} (a non-positive scale "
                         "reverses or flattens the logit order)")
    if softcap is not None and (not isinstance(softcap, int | float) or not math.isfinite(softcap) or softcap <= 0):
        raise InputError(f"soft-cap must be a finite number > 0 or unset, got {softcap!r}")


def apply_softcap_scale(logits: torch.Tensor, softcap: float | None = None, scale: float = 1.0) -> torch.Tensor:
    """x -> cap * tanh(x / cap) (if a soft-cap is set), then x * scale; in the logits' dtype (vLLM's order)."""
    check_prestep(softcap, scale)
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    if scale != 1.0:
        logits = logits * scale
    return logits


def d2t_targets(d2t: torch.Tensor) -> torch.Tensor:
    """Target ids of the draft ids: arange(V_draft) + d2t."""
    return torch.arange(d2t.shape[0], device=d2t.device, dtype=d2t.dtype) + d2t


def check_d2t(d2t: torch.Tensor, draft_vocab: int, target_vocab: int) -> None:
    """An EAGLE-3 map must have V_draft int64 offsets whose targets are strictly increasing and < V_target."""
    if d2t.dim() != 1 or d2t.shape[0] != draft_vocab:
        raise InputError(f"d2t must have shape [{draft_vocab}] (one offset per draft id), got {list(d2t.shape)}")
    if d2t.dtype != torch.int64:
        raise InputError(f"d2t must be int64, got {d2t.dtype}")
    if target_vocab < draft_vocab:
        raise InputError(f"target vocab {target_vocab} is smaller than the draft vocab {draft_vocab}")
    targets = d2t_targets(d2t)
    if int(targets.min()) < 0 or int(targets.max()) >= target_vocab:
        raise InputError(f"d2t maps a draft id outside the target vocab [0, {target_vocab})")
    if draft_vocab > 1 and not bool((targets[1:] > targets[:-1]).all()):
        raise InputError("d2t targets must be strictly increasing (else argmax-then-map differs from the baseline)")


@dataclass(frozen=True)
class DraftHead:
    """What a strategy needs besides the logits: layout, optional EAGLE-3 map, soft-cap and scale."""

    layout: VocabLayout
    d2t: torch.Tensor | None = None
    target_vocab: int | None = None
    softcap: float | None = None
    scale: float = 1.0
    top_k: int = 1  # 1: one greedy id per row ([B] ids); k > 1: the top-k ids per row ([B, k], see `stable_topk`)


def check_top_k(top_k: int, vocab: int) -> None:
    """1 <= k <= V (the draft vocab): with k > V some output slots would have no real id."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= vocab:
        raise InputError(f"top-k must be an integer in 1..{vocab} (the vocab), got {top_k!r}")


def draft_head(vocab: int, world_size: int, *, d2t: torch.Tensor | None = None, target_vocab: int | None = None,
               softcap: float | None = None, scale: float = 1.0, top_k: int = 1) -> DraftHead:
    """Validated `DraftHead` (layout, d2t map, pre-step, top-k); raises `InputError`."""
    check_prestep(softcap, scale)
    check_top_k(top_k, vocab)
    layout = vocab_layout(vocab, world_size)
    if d2t is not None:
        if target_vocab is None:
            raise InputError("a d2t map needs the target vocab size")
        check_d2t(d2t, vocab, target_vocab)
    elif target_vocab is not None and target_vocab != vocab:
        raise InputError("a target vocab different from the draft vocab needs a d2t map")
    return DraftHead(layout, d2t, target_vocab if d2t is not None else None, softcap, scale, top_k)


# -- single-rank building blocks (pure) --------------------------------------------------------------------------
def local_argmax(local: torch.Tensor, rank: int, shard: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(max value, global id) per row of a rank's [B, s] shard, padding excluded.

    Equivalent to vLLM's "padding := -inf; vals, idx = max(-1); id = idx + rank*s" without writing the
    input: the max runs over the non-padding columns only; a shard of padding only gives (-inf, rank*s).
    torch.max returns the first maximal index, and the first NaN when the row has one.
    """
    if local.shape[-1] != shard:
        raise InputError(f"local logits have {local.shape[-1]} columns, expected the shard {shard}")
    valid = valid_cols(rank, shard, vocab)
    if valid == shard:
        vals, idx = local.max(dim=-1)
    elif valid > 0:
        vals, idx = local[..., :valid].max(dim=-1)
    else:
        vals = local.new_full(local.shape[:-1], NEG_INF)
        idx = torch.zeros(local.shape[:-1], dtype=torch.int64, device=local.device)
    return vals, idx + rank * shard


def pack_pairs(vals: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[B, 2] fp32 rows (value, global id): exact for bf16/fp16/fp32 values and ids < 2^24."""
    return torch.stack([vals.float(), ids.float()], dim=-1)


def local_argmax_pack(local: torch.Tensor, rank: int, shard: int, vocab: int) -> torch.Tensor:
    """vLLM's local step: mask padding, local max, global id = idx + rank*s, pack [B, 2] fp32."""
    return pack_pairs(*local_argmax(local, rank, shard, vocab))


def relayout(gathered: torch.Tensor, p: int) -> torch.Tensor:
    """vLLM's all_gather(dim=-1) relayout: [p*B, s] -> reshape(p, B, s) -> movedim(0, -2) -> reshape(B, p*s).

    The movedim makes the view non-contiguous, so the last reshape copies all B*p*s elements (p > 1).
    """
    rows = gathered.shape[0] // p
    out = gathered.reshape(p, rows, gathered.shape[-1]).movedim(0, -2)
    return out.reshape(rows, p * gathered.shape[-1])


def full_argmax(logits: torch.Tensor) -> torch.Tensor:
    """torch.argmax over the last dim (first maximal index; NaN counts as the maximum)."""
    return logits.argmax(dim=-1)


def chunked_argmax(gathered: torch.Tensor, p: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(global id, value) of the argmax of a concat-layout [p*B, s] all-gather buffer, without a relayout copy.

    Max of each rank chunk over its non-padding columns ([q, B], q = ranks holding real ids), then
    argmax over the q chunk maxima (first max = lowest rank, NaN first) and id = idx + rank*s.
    Ranks holding padding only are left out: they could only tie at -inf, which a lower rank wins.
    """
    rows, shard = gathered.shape[0] // p, gathered.shape[-1]
    chunks = gathered.view(p, rows, shard)
    full = min(p, vocab // shard)  # ranks without padding
    vals, idx = [], []
    if full:
        v, i = chunks[:full].max(dim=-1)
        vals.append(v)
        idx.append(i)
    rest = valid_cols(full, shard, vocab) if full < p else 0
    if rest:
        v, i = chunks[full, :, :rest].max(dim=-1)
        vals.append(v.unsqueeze(0))
        idx.append(i.unsqueeze(0))
    vals_t = vals[0] if len(vals) == 1 else torch.cat(vals)
    idx_t = idx[0] if len(idx) == 1 else torch.cat(idx)
    win = vals_t.argmax(dim=0, keepdim=True)
    ids = idx_t.gather(0, win).squeeze(0) + win.squeeze(0) * shard
    return ids, vals_t.gather(0, win).squeeze(0)


def pair_reduce(pairs: torch.Tensor, p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(int64 id, fp32 value) from the concat-layout all-gather of p [B, 2] pair blocks ([p*B, 2] fp32).

    vLLM: all_gather(dim=-1) relayout -> [B, 2p] -> view(B, p, 2); top = argmax of the value column
    (first max = lowest rank; NaN first); id = the id column at top, cast to int64.
    """
    rows = pairs.shape[0] // p
    table = relayout(pairs, p).view(rows, p, 2)
    top = table[..., 0].argmax(dim=-1, keepdim=True)
    ids = table[..., 1].gather(-1, top).squeeze(-1).long()
    return ids, table[..., 0].gather(-1, top).squeeze(-1)


def order_key_hi(vals: torch.Tensor) -> torch.Tensor:
    """ord32 of fp32 values as int64: canonical NaN / +0.0, then bits ^ 0x7FFFFFFF for negatives.

    ord32(bits) = bits if bits >= 0 else bits ^ 0x7FFFFFFF (signed int32 view), so integer order equals
    float order; -0.0 (bits -2^31) becomes +0.0 (0) and every NaN becomes 0x7FC00000 (> +inf).
    """
    v = vals.float()
    bits = v.view(torch.int32)
    bits = torch.where(v != v, torch.full_like(bits, CANONICAL_NAN_BITS), bits)
    bits = torch.where(bits == -(2**31), torch.zeros_like(bits), bits)
    return (bits ^ ((bits >> 31) & 0x7FFFFFFF)).long()


def make_keys(vals: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """key = ord32(v) * 2^32 + (2^32 - 1 - id) as a signed int64 (== (ord32 << 32) | (2^32-1-id))."""
    return order_key_hi(vals) * _TWO32 + (_LOW32 - ids)


def key_pack(local: torch.Tensor, rank: int, shard: int, vocab: int) -> torch.Tensor:
    """Local step of packed_allreduce_max: mask padding, local max, one int64 key per row (see `make_keys`)."""
    return make_keys(*local_argmax(local, rank, shard, vocab))


def key_unpack(keys: torch.Tensor) -> torch.Tensor:
    """id = 2^32 - 1 - (key & 0xFFFFFFFF), int64."""
    return _LOW32 - (keys & _LOW32)


# the smallest key whose value is above -inf: keys below it carry a -inf maximum (a row of all -inf)
NEG_INF_KEY_LIMIT = (int(order_key_hi(torch.tensor([NEG_INF])).item()) + 1) * _TWO32


def key_is_neg_inf(keys: torch.Tensor) -> torch.Tensor:
    """True where the reduced key's value is -inf (the row was all -inf)."""
    return keys < NEG_INF_KEY_LIMIT


def d2t_scatter(logits: torch.Tensor, d2t: torch.Tensor, target_vocab: int) -> torch.Tensor:
    """EAGLE-3 baseline: new_full((B, V_target), -inf); out[:, arange(V_draft) + d2t] = logits."""
    out = logits.new_full((logits.shape[0], target_vocab), NEG_INF)
    out[:, d2t_targets(d2t)] = logits
    return out


def d2t_lookup(ids: torch.Tensor, d2t: torch.Tensor, neg_inf_rows: torch.Tensor | None = None) -> torch.Tensor:
    """target = draft + d2t[draft]; rows flagged all -inf return 0, as the scatter baseline does."""
    target = ids + d2t[ids]
    if neg_inf_rows is not None:
        target = target.masked_fill(neg_inf_rows, 0)
    return target


# -- communication -----------------------------------------------------------------------------------------------
class Comm(Protocol):
    """The four collectives the strategies use, on a group of `world_size` ranks."""

    rank: int
    world_size: int

    def all_gather_into(self, out: torch.Tensor, inp: torch.Tensor) -> None: ...

    def gather_to_first(self, inp: torch.Tensor) -> list[torch.Tensor] | None: ...

    def broadcast_from_first(self, tensor: torch.Tensor) -> None: ...

    def all_reduce_max(self, tensor: torch.Tensor) -> None: ...


class TorchComm:
    """torch.distributed collectives on `group` (None: the default group)."""

    def __init__(self, group=None):
        import torch.distributed as dist

        self.dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.first = dist.get_global_rank(group, 0) if group is not None else 0
        # torch >= 2.13 renames all_gather_into_tensor to all_gather_single (same collective)
        self._all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def all_gather_into(self, out: torch.Tensor, inp: torch.Tensor) -> None:
        """dist.all_gather_into_tensor: rank r's [B, ...] block lands at rows r*B..(r+1)*B ("concat style")."""
        self._all_gather(out, inp, group=self.group)

    def gather_to_first(self, inp: torch.Tensor) -> list[torch.Tensor] | None:
        parts = [torch.empty_like(inp) for _ in range(self.world_size)] if self.rank == 0 else None
        self.dist.gather(inp, parts, dst=self.first, group=self.group)
        return parts

    def broadcast_from_first(self, tensor: torch.Tensor) -> None:
        self.dist.broadcast(tensor, src=self.first, group=self.group)

    def all_reduce_max(self, tensor: torch.Tensor) -> None:
        self.dist.all_reduce(tensor, op=self.dist.ReduceOp.MAX, group=self.group)


ONESHOT_MAX_BYTES = 8 * 1024 * 1024  # vLLM CustomAllreduce max_size (8 MiB): above it engines fall back to NCCL


class OneShotComm(TorchComm):
    """One-shot semantics over any backend (gloo included): every rank reads every peer's buffer once.

    all_gather_into / all_reduce_max: the rank exposes its input, reads the p - 1 peer buffers (here: one
    isend / irecv per peer pair, `dist.batch_isend_irecv`, then a barrier, as the symmetric-memory kernels end
    with one) and combines them locally in rank order, so every rank computes the same result from the same p
    buffers (vLLM / SGLang custom all-reduce, torch `_symmetric_memory` one_shot_all_reduce). A buffer above
    `max_bytes` (symmetric buffer bytes: p x input for all-gather, the input for all-reduce) falls back to the
    NCCL collective, as the engines do; gather / broadcast always use it (no one-shot variant).
    """

    def __init__(self, group=None, max_bytes: int = ONESHOT_MAX_BYTES):
        super().__init__(group)
        self.max_bytes = max_bytes
        self.fallbacks = 0

    def _read_peers(self, inp: torch.Tensor) -> list[torch.Tensor]:
        dist, p, me = self.dist, self.world_size, self.rank
        parts = [inp if r == me else torch.empty_like(inp) for r in range(p)]
        peer = (lambda r: dist.get_global_rank(self.group, r)) if self.group is not None else (lambda r: r)
        ops = [dist.P2POp(dist.isend, inp, peer(r), self.group) for r in range(p) if r != me]
        ops += [dist.P2POp(dist.irecv, parts[r], peer(r), self.group) for r in range(p) if r != me]
        for work in dist.batch_isend_irecv(ops) if ops else ():
            work.wait()
        dist.barrier(group=self.group)
        return parts

    def all_gather_into(self, out: torch.Tensor, inp: torch.Tensor) -> None:
        if inp.numel() * inp.element_size() * self.world_size > self.max_bytes:
            self.fallbacks += 1
            return super().all_gather_into(out, inp)
        torch.cat(self._read_peers(inp.contiguous()), dim=0, out=out)

    def all_reduce_max(self, tensor: torch.Tensor) -> None:
        if tensor.numel() * tensor.element_size() > self.max_bytes:
            self.fallbacks += 1
            return super().all_reduce_max(tensor)
        tensor.copy_(torch.stack(self._read_peers(tensor.contiguous().clone())).amax(dim=0))


class _ThreadGroup:
    def __init__(self, world_size: int):
        self.world_size = world_size
        self.barrier = threading.Barrier(world_size, timeout=120)
        self.slots: list[torch.Tensor | None] = [None] * world_size


class ThreadComm:
    """Collectives between p threads of one process (tests): same semantics as `TorchComm`."""

    def __init__(self, group: _ThreadGroup, rank: int):
        self.group, self.rank, self.world_size = group, rank, group.world_size

    def _exchange(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        self.group.slots[self.rank] = tensor.clone()
        self.group.barrier.wait()
        parts = list(self.group.slots)
        self.group.barrier.wait()
        return parts

    def all_gather_into(self, out: torch.Tensor, inp: torch.Tensor) -> None:
        torch.cat(self._exchange(inp), dim=0, out=out)

    def gather_to_first(self, inp: torch.Tensor) -> list[torch.Tensor] | None:
        parts = self._exchange(inp)
        return parts if self.rank == 0 else None

    def broadcast_from_first(self, tensor: torch.Tensor) -> None:
        tensor.copy_(self._exchange(tensor)[0])

    def all_reduce_max(self, tensor: torch.Tensor) -> None:
        tensor.copy_(torch.stack(self._exchange(tensor)).amax(dim=0))


def run_threads(world_size: int, fn: Callable[[ThreadComm], torch.Tensor]) -> list[torch.Tensor]:
    """Run fn(comm) on `world_size` threads sharing a `ThreadComm` group; results by rank (re-raises errors)."""
    group = _ThreadGroup(world_size)
    results: list[torch.Tensor | None] = [None] * world_size
    errors: list[BaseException] = []

    def body(rank: int) -> None:
        try:
            results[rank] = fn(ThreadComm(group, rank))
        except threading.BrokenBarrierError:
            pass
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
            group.barrier.abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    if any(r is None for r in results):
        raise RuntimeError("a simulated rank stopped at a broken barrier")
    return results  # type: ignore[return-value]


# -- strategies --------------------------------------------------------------------------------------------------
def _prestep(local: torch.Tensor, head: DraftHead) -> torch.Tensor:
    return apply_softcap_scale(local, head.softcap, head.scale)


def _gather_concat(x: torch.Tensor, comm: Comm) -> torch.Tensor:
    out = x.new_empty((comm.world_size * x.shape[0], *x.shape[1:]))
    comm.all_gather_into(out, x.contiguous())
    return out


def _scatter_and_argmax(logits: torch.Tensor, head: DraftHead) -> torch.Tensor:
    if head.d2t is not None:
        logits = d2t_scatter(logits, head.d2t, head.target_vocab)
    return full_argmax(logits)


def full_all_gather(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    """all_gather_into_tensor -> relayout copy -> [:, :V] -> [d2t scatter] -> argmax (vLLM default)."""
    x = _prestep(local, head)
    p = comm.world_size
    full = relayout(_gather_concat(x, comm), p) if p > 1 else x
    return _scatter_and_argmax(full[:, :head.layout.vocab], head)


def full_all_gather_no_relayout(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    """all_gather_into_tensor -> argmax per rank chunk of the concat buffer -> reduce over p -> [d2t lookup]."""
    x = _prestep(local, head)
    p = comm.world_size
    gathered = _gather_concat(x, comm) if p > 1 else x
    ids, vals = chunked_argmax(gathered, p, head.layout.vocab)
    if head.d2t is not None:
        ids = d2t_lookup(ids, head.d2t, vals == NEG_INF)
    return ids


def _gather_select_broadcast(local: torch.Tensor, comm: Comm, head: DraftHead, select, id_shape) -> torch.Tensor:
    """dist.gather to group rank 0 -> cat -> [:, :V] -> select(full logits, head) there -> broadcast the int64 ids
    (shape id_shape(rows)) to every rank; at world size 1 select runs on the local logits."""
    x = _prestep(local, head)
    if comm.world_size == 1:
        return select(x[:, :head.layout.vocab], head)
    parts = comm.gather_to_first(x.contiguous())
    if comm.rank == 0:
        ids = select(torch.cat(parts, dim=-1)[:, :head.layout.vocab], head).contiguous()
    else:
        ids = torch.empty(id_shape(x.shape[0]), dtype=torch.int64, device=x.device)
    comm.broadcast_from_first(ids)
    return ids


def gather_to_rank0(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    """dist.gather to group rank 0 -> cat -> [:, :V] -> [d2t scatter] -> argmax there -> broadcast int64 ids."""
    return _gather_select_broadcast(local, comm, head, _scatter_and_argmax, lambda rows: (rows,))


def local_argmax_pairs(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    """vLLM use_local_argmax_reduction: local max, [B, 2] fp32 (value, id) all-gather, reduce, [d2t lookup]."""
    if head.layout.padded_vocab > MAX_EXACT_FP32_ID:
        raise InputError(f"local_argmax_pairs: padded vocab {head.layout.padded_vocab} > 2^24, "
                         "ids are not exact in fp32")
    x = _prestep(local, head)
    lay = head.layout
    vals, ids = local_argmax(x, comm.rank, lay.shard, lay.vocab)
    if comm.world_size > 1:
        ids, vals = pair_reduce(_gather_concat(pack_pairs(vals, ids), comm), comm.world_size)
    if head.d2t is not None:
        ids = d2t_lookup(ids, head.d2t, vals == NEG_INF)
    return ids


def packed_allreduce_max(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    """One int64 key per row (value ascending, id descending), all_reduce(MAX), unpack, [d2t lookup]."""
    x = _prestep(local, head)
    lay = head.layout
    keys = key_pack(x, comm.rank, lay.shard, lay.vocab)
    if comm.world_size > 1:
        comm.all_reduce_max(keys)
    ids = key_unpack(keys)
    if head.d2t is not None:
        ids = d2t_lookup(ids, head.d2t, key_is_neg_inf(keys))
    return ids

# -- top-k (tree / multi-candidate drafting) ---------------------------------------------------------------------
# Output definition (every strategy, k > 1): per row the k largest values in descending order, ties broken by the
# lowest global id - exactly `stable_topk` (torch.sort(descending=True, stable=True)[..., :k]) over the full,
# unpadded logits after the pre-step (and after the d2t scatter into the target vocab when a map is given).
# torch.topk promises no tie order, so the reference is a stable sort. As for argmax: NaN counts as the largest
# value (several NaNs in id order), -0.0 ties +0.0, padding never appears, and -inf entries are ordered by id.
def stable_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, ids) [.., k]: the k largest of the last dim, descending; equal values by lowest index; NaN first."""
    vals, idx = torch.sort(x, dim=-1, descending=True, stable=True)
    return vals[..., :k], idx[..., :k]


def local_topk(local: torch.Tensor, rank: int, shard: int, vocab: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values [B, k], global ids [B, k]) of a rank's shard, padding excluded, in `stable_topk` order.

    A shard with fewer than k real ids (k > shard, or padding) fills the rest with (-inf, V): sentinel ids
    >= V lose every tie against a real id, so with k <= V none reaches the merged output.
    """
    if local.shape[-1] != shard:
        raise InputError(f"local logits have {local.shape[-1]} columns, expected the shard {shard}")
    valid = valid_cols(rank, shard, vocab)
    take = min(k, valid)
    rows = local.shape[:-1]
    vals = local.new_full((*rows, k), NEG_INF)
    ids = torch.full((*rows, k), vocab, dtype=torch.int64, device=local.device)
    if take:
        v, i = stable_topk(local[..., :valid], take)
        vals[..., :take] = v
        ids[..., :take] = i + rank * shard
    return vals, ids


def merge_topk(vals: torch.Tensor, ids: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top k of p*k candidates [B, p*k] by (value descending, id ascending): a stable sort by id, then by value."""
    by_id = torch.sort(ids, dim=-1, stable=True)
    v = vals.gather(-1, by_id.indices)
    v, order = torch.sort(v, dim=-1, descending=True, stable=True)
    return v[..., :k], by_id.values.gather(-1, order)[..., :k]


def pack_topk_pairs(vals: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[B, k, 2] fp32 (value, id): k x 8 bytes per row; exact for bf16/fp16/fp32 values and ids < 2^24."""
    return torch.stack([vals.float(), ids.float()], dim=-1)


def topk_pair_merge(gathered: torch.Tensor, p: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, int64 ids) [B, k] from the concat-layout all-gather of p [B, k, 2] pair blocks ([p*B, k, 2])."""
    rows = gathered.shape[0] // p
    table = gathered.reshape(p, rows, k, 2).movedim(0, 1).reshape(rows, p * k, 2)
    return merge_topk(table[..., 0], table[..., 1].long(), k)


def d2t_lookup_topk(ids: torch.Tensor, vals: torch.Tensor, d2t: torch.Tensor) -> torch.Tensor:
    """Target ids of draft top-k [B, k], equal to the scatter baseline's stable top-k over the target vocab.

    Entries above -inf map to draft + d2t[draft] (an increasing map keeps their tie order). They form a prefix
    of m entries; when m < k the baseline fills the rest with -inf positions of the target row in id order, i.e.
    the smallest target ids not among those m targets (all other target ids hold -inf): at most m of the ids
    0 .. k + m - 1 are taken, so the first k - m free ones among 0 .. 2k - 1 are what the baseline returns.
    """
    k = ids.shape[-1]
    live = vals != NEG_INF  # NaN counts as live (it beats -inf)
    target = ids.clamp(max=d2t.shape[0] - 1)
    target = target + d2t[target]
    mapped = torch.where(live, target, torch.full_like(target, -1))
    cand = torch.arange(2 * k, device=ids.device, dtype=torch.int64)
    taken = (cand[None, :, None] == mapped[:, None, :]).any(-1)
    free = cand[torch.sort(taken.to(torch.int8), dim=-1, stable=True).indices]
    slot = (torch.arange(k, device=ids.device)[None, :] - live.sum(-1, keepdim=True)).clamp(min=0)
    return torch.where(live, target, free.gather(-1, slot))


def _topk_full(x: torch.Tensor, head: DraftHead) -> torch.Tensor:
    """Baseline top-k of the unsharded [B, V] (pre-stepped) logits: [d2t scatter] then `stable_topk`."""
    if head.d2t is not None:
        x = d2t_scatter(x, head.d2t, head.target_vocab)
    return stable_topk(x, head.top_k)[1]


def chunked_topk(gathered: torch.Tensor, p: int, vocab: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, ids) [B, k] of a concat-layout [p*B, s] all-gather buffer: top-k per rank chunk, then merge."""
    rows, shard = gathered.shape[0] // p, gathered.shape[-1]
    chunks = gathered.view(p, rows, shard)
    parts = [local_topk(chunks[r], r, shard, vocab, k) for r in range(p)]
    return merge_topk(torch.cat([v for v, _ in parts], -1), torch.cat([i for _, i in parts], -1), k)


def _topk_full_all_gather(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    x = _prestep(local, head)
    full = relayout(_gather_concat(x, comm), comm.world_size) if comm.world_size > 1 else x
    return _topk_full(full[:, :head.layout.vocab], head)


def _topk_no_relayout(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    x = _prestep(local, head)
    p = comm.world_size
    gathered = _gather_concat(x, comm) if p > 1 else x
    vals, ids = chunked_topk(gathered, p, head.layout.vocab, head.top_k)
    return d2t_lookup_topk(ids, vals, head.d2t) if head.d2t is not None else ids


def _topk_gather_to_rank0(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    """gather_to_rank0 with the full-logits top-k (stable order) on rank 0 and [B, k] ids broadcast."""
    return _gather_select_broadcast(local, comm, head, _topk_full, lambda rows: (rows, head.top_k))


def _topk_pairs(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    """Local top-k, [B, k, 2] fp32 (value, id) all-gather (k x 8 B per row per rank), merge p x k, [d2t]."""
    lay = head.layout
    if lay.padded_vocab > MAX_EXACT_FP32_ID:
        raise InputError(f"local_argmax_pairs: padded vocab {lay.padded_vocab} > 2^24, ids are not exact in fp32")
    x = _prestep(local, head)
    k = head.top_k
    vals, ids = local_topk(x, comm.rank, lay.shard, lay.vocab, k)
    if comm.world_size > 1:
        vals, ids = topk_pair_merge(_gather_concat(pack_topk_pairs(vals, ids), comm), comm.world_size, k)
    return d2t_lookup_topk(ids, vals, head.d2t) if head.d2t is not None else ids


def _topk_keys(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    raise InputError("packed_allreduce_max is exact only at top-k 1: all_reduce(MAX) keeps one key per row")


_TOPK_FUNCS: dict[str, Callable[[torch.Tensor, Comm, DraftHead], torch.Tensor]] = {
    "full_all_gather": _topk_full_all_gather,
    "full_all_gather_no_relayout": _topk_no_relayout,
    "gather_to_rank0": _topk_gather_to_rank0,
    "local_argmax_pairs": _topk_pairs,
    "packed_allreduce_max": _topk_keys,
}
TOPK_EXACT: dict[str, str] = {
    "packed_allreduce_max": "top-k 1 only (an all_reduce(MAX) of one 64-bit key per row cannot carry k > 1)",
    "local_argmax_pairs": "V_pad <= 2^24 (fp32 ids, the sentinel id V included)",
}


def _topk_dispatch(name: str):
    def wrap(fn):
        def run(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
            if head.top_k > 1:
                return _TOPK_FUNCS[name](local, comm, head)
            return fn(local, comm, head)
        run.__name__, run.__doc__, run.__wrapped__ = fn.__name__, fn.__doc__, fn
        return run
    return wrap


Strategy = Callable[[torch.Tensor, Comm, DraftHead], torch.Tensor]

# every strategy dispatches to its top-k variant when head.top_k > 1 (k = 1 runs the argmax code unchanged)
STRATEGY_FUNCS: dict[str, Strategy] = {
    name: _topk_dispatch(name)(fn) for name, fn in {
        "full_all_gather": full_all_gather,
        "full_all_gather_no_relayout": full_all_gather_no_relayout,
        "gather_to_rank0": gather_to_rank0,
        "local_argmax_pairs": local_argmax_pairs,
        "packed_allreduce_max": packed_allreduce_max,
    }.items()
}


# -- target-side greedy verification --------------------------------------------------------------------------
def greedy_verify(strategy: Strategy, target_local: torch.Tensor, comm: Comm, head: DraftHead,
                  draft_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy (temperature-0) verification of K draft tokens on the vocab-sharded target logits.

    target_local: this rank's shard of the target logits for the B x (K + 1) verified rows ([B*(K+1), s],
    row b*(K+1) + j = position j of request b); draft_ids: [B, K]. The target argmax of every row comes from
    `strategy` at top-k 1 (the same code as a draft call), then accepted = the length of the prefix where
    draft == target argmax, and the tokens emitted are the target ids of positions 0..accepted (the accepted
    drafts plus the target's own next token). Returns (accepted [B] int64, target ids [B, K+1]).
    """
    b, k = draft_ids.shape
    if target_local.shape[0] != b * (k + 1):
        raise InputError(f"verification needs B x (K + 1) = {b * (k + 1)} target rows, got {target_local.shape[0]}")
    if head.top_k != 1:
        raise InputError("greedy verification takes the target argmax (top-k 1)")
    target = strategy(target_local, comm, head).reshape(b, k + 1)
    accepted = torch.cumprod((draft_ids == target[:, :k]).to(torch.int64), dim=-1).sum(-1)
    return accepted, target


# -- whole-problem helpers ---------------------------------------------------------------------------------------
def pad_logits(full: torch.Tensor, padded_vocab: int, fill: float = 0.0) -> torch.Tensor:
    """[B, V] -> [B, V_pad] with `fill` in the padding columns (what an lm_head's padding rows produce)."""
    extra = padded_vocab - full.shape[-1]
    if extra < 0:
        raise InputError(f"logits have {full.shape[-1]} columns, more than the padded vocab {padded_vocab}")
    if extra == 0:
        return full
    return torch.cat([full, full.new_full((full.shape[0], extra), fill)], dim=-1)


def shard_of(padded: torch.Tensor, rank: int, layout: VocabLayout) -> torch.Tensor:
    """Rank `rank`'s [B, s] shard of [B, V_pad] logits (a contiguous copy, as an lm_head would produce)."""
    return padded[:, rank * layout.shard:(rank + 1) * layout.shard].contiguous()


def expected_ids(full: torch.Tensor, head: DraftHead) -> torch.Tensor:
    """Ground truth: the same pre-step on the unsharded [B, V] logits, [d2t scatter], torch.argmax ([B]) -
    or, at top-k k > 1, `stable_topk` ([B, k])."""
    x = apply_softcap_scale(full[:, :head.layout.vocab], head.softcap, head.scale)
    return _topk_full(x, head) if head.top_k > 1 else _scatter_and_argmax(x, head)


def simulate(strategy: Strategy, padded: torch.Tensor, head: DraftHead) -> list[torch.Tensor]:
    """Run `strategy` on p threads (`ThreadComm`), rank r getting its shard of `padded` [B, V_pad]."""
    lay = head.layout
    if padded.shape[-1] != lay.padded_vocab:
        raise InputError(f"logits have {padded.shape[-1]} columns, expected V_pad {lay.padded_vocab}")
    shards: Sequence[torch.Tensor] = [shard_of(padded, r, lay) for r in range(lay.world_size)]
    return run_threads(lay.world_size, lambda comm: strategy(shards[comm.rank], comm, head))


# -- fused Triton variants of the local strategies ------------------------------------------------------------------
FUSED_SUFFIX = "[fused]"
FUSABLE_STRATEGIES: tuple[str, ...] = ("local_argmax_pairs", "packed_allreduce_max")
TRITON_KERNELS_MODULE = "calibration.reference.triton_kernels"
# Triton's interpreter patches triton.language globally for the duration of each launch, so interpreted launches
# from several threads (ThreadComm ranks) must not overlap; compiled launches never take this lock.
_INTERPRETER_LOCK = threading.Lock()


def fused_name(strategy: str) -> str:
    """Name of the fused variant of a local strategy: "<strategy>[fused]"."""
    return f"{strategy}{FUSED_SUFFIX}"


def import_triton_kernels(device_type: str):
    """`calibration.reference.triton_kernels`, loaded in the mode tensors on `device_type` ("cuda" or "cpu") need.

    CPU tensors need Triton's interpreter, whose flag is read when Triton is imported: for "cpu" this sets
    TRITON_INTERPRET=1 in this process (os.environ) before importing Triton. Raises `InputError` (one line)
    when Triton is missing or fails to import, or when it was already imported in this process without the
    interpreter and CPU tensors are asked for.
    """
    import importlib
    import os
    import sys

    tk = sys.modules.get(TRITON_KERNELS_MODULE)
    if tk is None:
        if device_type == "cpu":
            if sys.modules.get("triton") is not None and os.environ.get("TRITON_INTERPRET") != "1":
                raise InputError("triton was imported in this process without TRITON_INTERPRET=1; CPU tensors "
                                 "need Triton's interpreter (set TRITON_INTERPRET=1 before starting)")
            os.environ["TRITON_INTERPRET"] = "1"
        try:
            tk = importlib.import_module(TRITON_KERNELS_MODULE)
        except Exception as exc:  # noqa: BLE001 - ImportError, or a broken Triton install
            raise InputError(f"Triton is unavailable for the fused kernels: {first_line(exc)}") from None
    if device_type == "cpu" and not tk.INTERPRETED:
        raise InputError(f"{TRITON_KERNELS_MODULE} was loaded for CUDA without the interpreter; CPU tensors need "
                         "TRITON_INTERPRET=1 set before Triton is imported")
    return tk


def _fused_prestep(head: DraftHead) -> dict[str, float | None]:
    """The kernel's soft-cap / scale arguments (None = not applied, like the torch path's scale == 1)."""
    check_prestep(head.softcap, head.scale)
    return {"softcap": head.softcap, "scale": None if head.scale == 1.0 else float(head.scale)}


def fused_strategy_funcs(device_type: str) -> dict[str, Strategy]:
    """{"local_argmax_pairs[fused]": ..., "packed_allreduce_max[fused]": ...} built on the Triton kernels.

    Same collectives, layouts and d2t rule as the torch strategies:
    pairs  fused_local_argmax_pairs (pre-step, padding mask, max, pack [B, 2] fp32) -> all_gather_into_tensor
           [p*B, 2] -> fused_pair_reduce(concat=True) read in place -> [d2t lookup; a row whose p values are
           all -inf maps to 0]
    keys   fused_key_pack (pre-step, padding mask, max, 64-bit key) -> all_reduce(MAX) -> fused_key_unpack
           -> [d2t lookup; a key below NEG_INF_KEY_LIMIT maps to 0]
    Raises `InputError` when Triton cannot be loaded for `device_type` (see `import_triton_kernels`).
    """
    tk = import_triton_kernels(device_type)
    lock = _INTERPRETER_LOCK if tk.INTERPRETED else contextlib.nullcontext()

    def local_argmax_pairs_fused(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
        lay = head.layout
        if lay.padded_vocab > MAX_EXACT_FP32_ID:
            raise InputError(f"local_argmax_pairs: padded vocab {lay.padded_vocab} > 2^24, ids are not exact in fp32")
        kw = _fused_prestep(head)
        p = comm.world_size
        with lock:
            pairs = tk.fused_local_argmax_pairs(local, comm.rank, lay.shard, lay.vocab, **kw)
        if p > 1:
            gathered = _gather_concat(pairs, comm)
            with lock:
                ids = tk.fused_pair_reduce(gathered, p, concat=True)
            vals = gathered[:, 0].reshape(p, -1)
        else:
            ids, vals = pairs[:, 1].long(), pairs[:, 0].reshape(1, -1)
        if head.d2t is not None:
            ids = d2t_lookup(ids, head.d2t, (vals == NEG_INF).all(dim=0))
        return ids

    def packed_allreduce_max_fused(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
        lay = head.layout
        kw = _fused_prestep(head)
        with lock:
            keys = tk.fused_key_pack(local, comm.rank, lay.shard, lay.vocab, **kw)
        if comm.world_size > 1:
            comm.all_reduce_max(keys)
        with lock:
            ids = tk.fused_key_unpack(keys)
        if head.d2t is not None:
            ids = d2t_lookup(ids, head.d2t, key_is_neg_inf(keys))
        return ids

    return {fused_name("local_argmax_pairs"): local_argmax_pairs_fused,
            fused_name("packed_allreduce_max"): packed_allreduce_max_fused}


# -- the dp draft placement: each rank drafts its share of the sequences, then one all-gather of the tokens ----------
def dp_rows(batch: int, world_size: int, rank: int) -> slice:
    """The sequences rank r drafts under the dp placement: rows r*c .. min(B, (r+1)*c), c = ceil(B / p)
    (costmodel.model.draft_step: ceil(B / p) sequences per rank; the last ranks may hold fewer, or none)."""
    c = -(-batch // world_size)
    return slice(min(batch, rank * c), min(batch, (rank + 1) * c))


def dp_gather_tokens(tokens: torch.Tensor, comm: Comm, batch: int) -> torch.Tensor:
    """All-gather the dp placement's draft tokens: `tokens` is this rank's [n_r, K] int64 ids (n_r rows of
    `dp_rows`); each rank pads them to [ceil(B / p), K] (pad id -1), one all_gather_into_tensor concatenates the
    p blocks in rank order, and the padding is dropped: every rank returns the same [B, K] ids, bit-exact, which
    is what verification reads. Wire bytes per rank: ceil(B / p) x K x 8 (the model's token all-gather)."""
    p, k = comm.world_size, tokens.shape[1]
    c = -(-batch // p)
    rows = dp_rows(batch, p, comm.rank)
    if tokens.dtype != torch.int64 or tokens.shape[0] != rows.stop - rows.start:
        raise ValueError(f"rank {comm.rank}: expected [{rows.stop - rows.start}, K] int64 tokens, got "
                         f"{list(tokens.shape)} {tokens.dtype}")
    block = tokens.new_full((c, k), -1)
    block[: tokens.shape[0]] = tokens
    out = tokens.new_empty((p * c, k))
    comm.all_gather_into(out, block)
    counts = [dp_rows(batch, p, r).stop - dp_rows(batch, p, r).start for r in range(p)]
    index = torch.cat([r * c + torch.arange(n) for r, n in enumerate(counts)])
    return out[index]
