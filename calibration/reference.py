"""Bit-exact reference implementations of every draft-token strategy, written as an engine runs them.

Every strategy of `costmodel.strategies.STRATEGIES` is a function
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
kernels of `calibration.triton_kernels` (imported lazily; on CPU under Triton's interpreter, which
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

from costmodel.errors import InputError, first_line
from costmodel.scenario import MAX_EXACT_FP32_ID, padded_vocab

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


def draft_head(vocab: int, world_size: int, *, d2t: torch.Tensor | None = None, target_vocab: int | None = None,
               softcap: float | None = None, scale: float = 1.0) -> DraftHead:
    """Validated `DraftHead` (layout, d2t map, pre-step); raises `InputError`."""
    check_prestep(softcap, scale)
    layout = vocab_layout(vocab, world_size)
    if d2t is not None:
        if target_vocab is None:
            raise InputError("a d2t map needs the target vocab size")
        check_d2t(d2t, vocab, target_vocab)
    elif target_vocab is not None and target_vocab != vocab:
        raise InputError("a target vocab different from the draft vocab needs a d2t map")
    return DraftHead(layout, d2t, target_vocab if d2t is not None else None, softcap, scale)


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


def gather_to_rank0(local: torch.Tensor, comm: Comm, head: DraftHead) -> torch.Tensor:
    """dist.gather to group rank 0 -> cat -> [:, :V] -> [d2t scatter] -> argmax there -> broadcast int64 ids."""
    x = _prestep(local, head)
    if comm.world_size == 1:
        return _scatter_and_argmax(x[:, :head.layout.vocab], head)
    parts = comm.gather_to_first(x.contiguous())
    if comm.rank == 0:
        ids = _scatter_and_argmax(torch.cat(parts, dim=-1)[:, :head.layout.vocab], head)
    else:
        ids = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
    comm.broadcast_from_first(ids)
    return ids


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


Strategy = Callable[[torch.Tensor, Comm, DraftHead], torch.Tensor]

STRATEGY_FUNCS: dict[str, Strategy] = {
    "full_all_gather": full_all_gather,
    "full_all_gather_no_relayout": full_all_gather_no_relayout,
    "gather_to_rank0": gather_to_rank0,
    "local_argmax_pairs": local_argmax_pairs,
    "packed_allreduce_max": packed_allreduce_max,
}


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
    """Ground truth: the same pre-step on the unsharded [B, V] logits, [d2t scatter], torch.argmax."""
    x = apply_softcap_scale(full[:, :head.layout.vocab], head.softcap, head.scale)
    return _scatter_and_argmax(x, head)


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
TRITON_KERNELS_MODULE = "calibration.triton_kernels"
# Triton's interpreter patches triton.language globally for the duration of each launch, so interpreted launches
# from several threads (ThreadComm ranks) must not overlap; compiled launches never take this lock.
_INTERPRETER_LOCK = threading.Lock()


def fused_name(strategy: str) -> str:
    """Name of the fused variant of a local strategy: "<strategy>[fused]"."""
    return f"{strategy}{FUSED_SUFFIX}"


def import_triton_kernels(device_type: str):
    """`calibration.triton_kernels`, loaded in the mode tensors on `device_type` ("cuda" or "cpu") need.

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
