"""The ways a TP draft model can pick its greedy draft token, as sums of components.

Per draft call with R rows (R = B serial, B*K parallel), shard s = V_pad/p,
e bytes per logit, p ranks, every time in microseconds:

full_all_gather (vLLM today)
    all_gather(R*s*e per rank) + relayout_copy(R, s, p)
    [+ d2t_scatter(R, V_target, V_draft)] + argmax(R, V or V_target)
full_all_gather_no_relayout
    all_gather(R*s*e per rank) + chunked_argmax(R, s, p) [+ d2t_lookup(R)]
    (argmax per rank chunk on the concat-layout buffer, then a reduce over p;
    with d2t the winning draft id is mapped, exact for an increasing d2t)
gather_to_rank0
    gather(R*s*e per rank: p - 1 point-to-point sends into rank 0, see _Ctx.gather_p2p)
    + relayout_copy(R, s, p) (torch.cat: a copy even at R = 1) [+ d2t_scatter]
    + argmax + broadcast(R*8 bytes of int64 ids)
local_argmax_pairs (vLLM use_local_argmax_reduction)
    local_argmax(R, s) + all_gather(R*8 per rank) + pair_reduce(R, p) [+ d2t_lookup]
    (fp32 ids: exact only while V_pad <= 2^24 - otherwise marked invalid)
packed_allreduce_max
    key_pack(R, s) + all_reduce(R*8 bytes, MAX over int64) + key_unpack(R) [+ d2t_lookup]

At p = 1 every collective, relayout and cross-rank reduce costs 0 (an engine
skips them) and the chunked argmax is a plain argmax.

packed_allreduce_max - exact correctness conditions. Each rank builds, per
row, key = (ord32(v) << 32) | (2^32 - 1 - global_id) as a signed int64, where
v is the rank's local max widened to fp32 (exact for bf16/fp16) and
ord32(bits) = bits if bits >= 0 else bits ^ 0x7FFFFFFF (signed int32 view), so
signed key order equals (value ascending, id descending) and MAX picks the
largest value with the lowest id - torch.argmax's first-index tie rule, across
ranks too. Conditions: (1) -0.0 is canonicalized to +0.0 before keying (else
+0.0 would beat an equal -0.0 at a lower id); (2) every NaN is canonicalized
to the positive quiet NaN 0x7FC00000, whose key exceeds +inf, so a NaN wins at
its lowest id, exactly like torch.argmax (which treats NaN as the maximum);
(3) ids must be < 2^32; (4) padding is masked to -inf before the local max, and
a row of all -inf returns id 0 like torch.argmax; (5) any soft-cap / positive
scale is applied before keying (a non-positive scale is rejected).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from . import collective_impls
from .collectives import collective_time_us
from .engines import ENGINES, PLANS, Stage, captured_mask, host_costs, step_time_us, sync_mask
from .errors import InputError
from .kernels import ID_BYTES, PAIR_BYTES, kernel_memo, kernel_time_us, table_us
from .profile import Profile
from .scenario import Scenario

BASELINE = "full_all_gather"
STRATEGIES: tuple[str, ...] = (
    "full_all_gather",
    "full_all_gather_no_relayout",
    "gather_to_rank0",
    "local_argmax_pairs",
    "packed_allreduce_max",
)
LOCAL_STRATEGIES = ("local_argmax_pairs", "packed_allreduce_max")
DESCRIPTIONS: dict[str, str] = {
    "full_all_gather": "all-gather full logits, relayout copy, argmax (vLLM default)",
    "full_all_gather_no_relayout": "all-gather full logits, argmax per rank chunk, no relayout copy",
    "gather_to_rank0": "gather logits to rank 0, argmax there, broadcast ids",
    "local_argmax_pairs": "local argmax, all-gather (value, id) pairs, reduce (vLLM use_local_argmax_reduction)",
    "packed_allreduce_max": "local argmax packed into one 64-bit key, all_reduce(MAX)",
}


@dataclass(frozen=True)
class Call:
    """What a component priced: a collective or kernel op and its arguments (for explanations)."""

    kind: str  # "collective" | "kernel" | "elementwise"
    op: str
    args: dict
    when: np.ndarray | bool = True


@dataclass(frozen=True)
class Component:
    """One named step of a strategy.

    time_us: GPU time (the component's kernels as they execute, priced in graph mode);
    host_us: host launch time when the host launches it (0 when a CUDA graph replays it);
    ops: torch ops / c10d calls it launches (the step model's granularity);
    wire_bytes_per_rank: bytes each rank sends (collectives).
    """

    time_us: np.ndarray
    wire_bytes_per_rank: np.ndarray | float = 0.0
    extrapolated: np.ndarray | bool = False
    calls: tuple[Call, ...] = ()
    host_us: np.ndarray | float = 0.0
    ops: np.ndarray | float = 1.0


# Torch ops each component issues as the reference implementations (calibration/reference/strategies.py) and
# vLLM run them - the host launches this many ops in eager execution:
TORCH_OPS: dict[str, int] = {
    "relayout_copy": 1,    # reshape(p, R, s).movedim(0, -2).reshape(R, p*s): views + one copy (a view at R = 1)
    "argmax": 1,           # logits[..., :V] (view) .argmax(-1)
    "chunked_argmax": 6,   # view, max over chunks, argmax over p, gather id, id + win*s (2)
    "local_argmax": 4,     # max(-1), vals.float(), ids.float(), stack  (local_argmax_pack)
    "pad_mask": 1,         # logits[..., -num_pad:] = -inf, only when V_pad > V
    "rank_offset": 1,      # idx + rank * s, only when p > 1
    "pair_reduce": 5,      # relayout of [p*R, 2] (copy), argmax of the value column, gather, squeeze, .long()
    "key_pack": 14,        # max + order_key_hi (float, isnan, full_like, where, ==, zeros_like, where, >>, &, ^,
                           # long) + make_keys (*, -, +)
    "key_unpack": 2,       # key & 0xFFFFFFFF, 2^32 - 1 - x
    "d2t_scatter": 4,      # new_full(-inf), arange, + d2t, index_put
    "d2t_lookup": 4,       # d2t[ids], +, (value == -inf), masked_fill
    "softcap": 3,          # x / cap, tanh, * cap
    "logit_scale": 1,      # x * scale
    "fused": 1,            # one Triton launch
    "topk": 1,             # torch.topk(logits[..., :V], k) (top-k > 1 only)
    "chunked_topk": 6,     # view, topk per chunk, id + r*s, reshape, topk of the p*k candidates, gather
    "local_topk": 5,       # topk(-1), id + r*s, vals.float(), ids.float(), stack  ([R, k, 2] fp32 pairs)
    "topk_merge": 4,       # relayout of [p*R, k, 2] (copy), topk of the p*k values, gather ids, .long()
    "d2t_lookup_topk": 12,  # clamp, d2t[ids], +, != -inf, where, arange, ==/any, sort, index, sum, -/clamp, where
}
# view ops (no kernel; host time only, engines.HostCosts.view_op_us) each component also issues
TORCH_VIEWS: dict[str, int] = {"relayout_copy": 2, "argmax": 1, "chunked_argmax": 1, "pair_reduce": 3}


class _Ctx:
    """Per-evaluation cache of the scenario's derived arrays, the engine plan and host costs."""

    def __init__(self, scenario: Scenario, profile: Profile, factors: dict[str, float] | None = None):
        self.sc, self.profile = scenario, profile
        self.factors = factors or {}
        self.rows = scenario.rows
        self.shard = scenario.shard
        self.p = scenario.tp
        self.e = scenario.elem_bytes
        self.multi = self.p > 1
        self.k = scenario.top_k
        self.fused = (scenario.impl == "fused") & (self.k == 1)  # the fused kernels are argmax-only (k = 1)
        self.any_fused = bool(np.any(self.fused))
        self.topk = self.k > 1
        self.any_topk = bool(np.any(self.topk))
        self.any_impl = bool(np.any(scenario.collective != "nccl"))
        self.host = host_costs(profile)
        self._captured: dict[str, np.ndarray] = {}
        self._argmax_vocab: np.ndarray | None = None
        self._engine_is = {e: scenario.engine == e for e in ENGINES}  # string compares once, not per component
        self._mode_graph = scenario.mode == "graph"
        self._all_captured = self.captured("*")
        self.any_host = bool(np.any(~self._all_captured))
        # a plan captures all or nothing (engines.PLANS): one host mask for every component
        self._uniform = all(p.is_captured("*") or not p.captured for p in PLANS.values())
        self._eager_f = (~self._all_captured).astype(float) if self.any_host else 0.0
        self._eager_when: dict[int, tuple] = {}
        self._eager_only = {op for op in {t.op for t in profile.kernel_tables}
                            if not any(t.op == op and t.mode == "graph" for t in profile.kernel_tables)}

    def captured(self, component: str) -> np.ndarray:
        hit = self._captured.get(component)
        if hit is None:
            hit = self._captured[component] = captured_mask(component, self._engine_is, self._mode_graph)
        return hit

    def _host(self, component: str, per_call_us: float, calls, when) -> np.ndarray | float:
        if not self.any_host:
            return 0.0
        per_call_us = per_call_us * self.factors.get("host", 1.0)
        if not self._uniform:
            eager = (~self.captured(component)).astype(float)
            return np.where(when, (per_call_us * calls) * eager, 0.0)
        if when is True:
            return (per_call_us * calls) * self._eager_f
        key = id(when)  # the same mask objects recur (multi, d2t, ...): eager x mask once per mask
        hit = self._eager_when.get(key)
        if hit is None or hit[0] is not when:
            hit = self._eager_when[key] = (when, self._eager_f * np.asarray(when, dtype=bool))
        return (per_call_us * calls) * hit[1]

    def collective(self, op: str, bytes_per_rank, component: str | None = None) -> Component:
        """The profile's NCCL curve, or - where the scenario's `collective` is oneshot / multimem and available
        there - that implementation (costmodel/collective_impls.py; NCCL is the fallback)."""
        sc = self.sc
        t = collective_time_us(self.profile, op, bytes_per_rank, sc.tp, sc.nodes, "graph")
        args = {"bytes_per_rank": bytes_per_rank}
        if self.any_impl:
            t, native = collective_impls.collective_us(self.profile, sc.collective, op, bytes_per_rank, sc.tp,
                                                       sc.nodes, nccl_us=t)
            args.update(collective=sc.collective, native=native)
            if sc.size == 1 and str(sc.collective) != "nccl" and bool(np.all(native)):  # for explanations
                impl, p, n = str(sc.collective), int(np.asarray(sc.tp)), int(np.asarray(sc.nodes))
                args.update(gpu_us=t, formula=collective_impls.formula(impl, op, self.profile, p, n),
                            impl_provenance=collective_impls.provenance(self.profile, impl, op, p, n))
        t = t * self.factors.get(op, 1.0)
        return Component(t, np.where(self.multi, bytes_per_rank, 0.0),
                         calls=(Call("collective", op, args, self.multi),),
                         host_us=self._host(component or op, self.host.c10d_call_us, 1, self.multi))

    def gather_p2p(self, bytes_per_rank) -> Component:
        """torch.distributed.gather on NCCL: p - 1 point-to-point sends into rank 0, issued as one group.

        The root receives the p - 1 chunks concurrently over its own links, so one transfer's latency and
        (p - 1) * b bytes through the root: priced as the profile's gather curve at p = 2 carrying (p - 1) * b
        per rank (S f(2) = (p - 1) b), on 2 nodes when the group spans nodes. A profile with a measured
        gather curve at the scenario's p prices it from that curve instead.
        """
        sc = self.sc
        b = np.asarray(bytes_per_rank, dtype=float)
        p, nodes = np.broadcast_arrays(np.asarray(sc.tp), np.asarray(sc.nodes))
        measured = np.zeros(p.shape, dtype=bool)
        has_measured = any(c.op == "gather" and c.provenance == "measured" for c in self.profile.collectives)
        keys = np.unique(p.astype(np.int64) * 65536 + nodes) if has_measured else np.zeros(0, dtype=np.int64)
        for ws, nn in ((int(k) // 65536, int(k) % 65536) for k in keys if k // 65536 > 1):
            try:
                is_measured = self.profile.curve("gather", ws, "graph", nn).provenance == "measured"
            except InputError:
                is_measured = False
            if is_measured:
                measured |= (p == ws) & (nodes == nn)
        p2p = collective_time_us(self.profile, "gather", (p - 1) * b, np.where(self.multi, 2, 1),
                                 np.minimum(nodes, 2), "graph")
        t = np.where(measured, collective_time_us(self.profile, "gather", b, p, nodes, "graph"), p2p) \
            if measured.any() else p2p
        t = t * self.factors.get("gather", 1.0)
        return Component(t, np.where(self.multi, b, 0.0),
                         calls=(Call("collective", "gather", {"bytes_per_rank": b, "p2p": True}, self.multi),),
                         host_us=self._host("gather", self.host.c10d_call_us, 1, self.multi))

    def kernel(self, op: str, cols, *, world_size=1, when=True, draft_cols=0, fusable=False,
               component: str | None = None, torch_ops=None, views=None, host_when=None) -> Component:
        """A kernel component (GPU time in graph mode; host = its torch ops when the host launches it).

        With fusable=True, `<op>_fused` prices the scenarios whose impl is "fused" (one launch).
        An op the profile measured only eagerly (e.g. a CPU calibration) is priced from its eager table,
        which already contains the launches, so it adds no separate host time.
        """
        measured_eager = op in self._eager_only
        mode = "eager" if measured_eager else "graph"
        args = {"cols": cols, "world_size": world_size, "draft_cols": draft_cols, "mode": mode}

        def estimate(name: str):
            return kernel_time_us(self.profile, name, rows=self.rows, cols=cols, world_size=world_size,
                                  dtype=self.sc.dtype, elem_bytes=self.e, mode=mode, draft_cols=draft_cols)

        nothing = when is not True and not np.any(when)  # no scenario runs it: its GPU time is 0, skip the model
        if nothing:
            t, x = 0.0, False
        else:
            est = estimate(op)
            t, x = est.time_us * self.factors.get(op, 1.0), est.extrapolated
        calls = (Call("kernel", op, args, when & ~self.fused if fusable else when),)
        n_ops = TORCH_OPS.get(op, 1) if torch_ops is None else torch_ops
        ops = n_ops
        if fusable and self.any_fused:
            if not nothing:
                fused = estimate(f"{op}_fused")
                t = np.where(self.fused, fused.time_us * self.factors.get(f"{op}_fused", 1.0), t)
                x = np.where(self.fused, fused.extrapolated, x)
            calls += (Call("kernel", f"{op}_fused", args, when & self.fused),)
            ops = np.where(self.fused, TORCH_OPS["fused"], n_ops)
        n_views = TORCH_VIEWS.get(op, 0) if views is None else views
        if fusable and self.any_fused:
            n_views = np.where(self.fused, 0, n_views)
        hw = when if host_when is None else host_when
        # one pass: (torch ops x torch_op_us + views x view_op_us) x the eager mask (scalar counts stay scalar)
        host = 0.0 if measured_eager else self._host(component or op, 1.0, np.asarray(ops) * self.host.torch_op_us
                                                     + np.asarray(n_views) * self.host.view_op_us, hw)
        if when is not True:
            t, x = np.where(when, t, 0.0), np.where(when, x, False)
        return Component(t, 0.0, x, calls, host, np.maximum(ops, 1))

    def elementwise(self, name: str, cols, kernels: int, *, when=True, copies=1) -> Component:
        """`kernels` element-wise passes over [rows, cols] (read + write each), at the copy rate.

        T = kernels * (graph_kernel_us + 2 * rows * cols * e / copy_bw); copy_bw = the profile's
        relayout_copy bandwidth (an element-wise pass moves the bytes a copy moves).
        """
        when = np.asarray(when, dtype=bool)
        bw = self.profile.kernel_ops["relayout_copy"].bw_gbps
        nbytes = 2.0 * self.rows * np.asarray(cols, dtype=float) * self.e * copies
        t = kernels * (self.profile.graph_kernel_us + nbytes / bw * 1e-3) * self.factors.get("relayout_copy", 1.0)
        call = Call("elementwise", name, {"cols": cols, "kernels": kernels, "bw_gbps": bw}, when)
        return Component(np.where(when, t, 0.0), 0.0, False, (call,),
                         self._host(name, self.host.torch_op_us, kernels, when), kernels)

    def prestep(self, cols) -> dict[str, Component]:
        """Soft-cap (3 kernels) and logit scale (1 kernel) over [rows, cols], where the model has them."""
        out = {}
        if np.any(self.sc.softcap):
            out["softcap"] = self.elementwise("softcap", cols, TORCH_OPS["softcap"], when=self.sc.softcap)
        if np.any(self.sc.logit_scale):
            out["logit_scale"] = self.elementwise("logit_scale", cols, TORCH_OPS["logit_scale"],
                                                  when=self.sc.logit_scale)
        return out

    def local_fixups(self, *, fusable: bool) -> dict[str, Component]:
        """The padding mask (only where V_pad > V) and the rank offset (only at p > 1) of the torch local step.

        Each is one small kernel (graph_kernel_us + its bytes); the fused kernel does both inside its launch.
        """
        torch_path = ~self.fused if fusable else True
        pad = self.sc.padding
        mask_when = (pad > 0) & self.multi & torch_path
        offset_when = self.multi & torch_path
        return {
            "pad_mask": (self.elementwise("pad_mask", pad, TORCH_OPS["pad_mask"], when=mask_when, copies=0.5)
                         if np.any(mask_when) else Component(np.zeros(()), 0.0, False, (), 0.0, 1)),
            "rank_offset": self._small("rank_offset", offset_when),
        }

    def _small(self, name: str, when) -> Component:
        """One launch over R int64 values: graph_kernel_us + 2 * R * 8 bytes / copy_bw."""
        when = np.asarray(when, dtype=bool)
        bw = self.profile.kernel_ops["relayout_copy"].bw_gbps
        t = self.profile.graph_kernel_us + 2.0 * self.rows * ID_BYTES / bw * 1e-3
        call = Call("elementwise", name, {"cols": 1, "kernels": 1, "bw_gbps": bw, "elem_bytes": ID_BYTES}, when)
        return Component(np.where(when, t, 0.0), 0.0, False, (call,),
                         self._host(name, self.host.torch_op_us, 1, when), 1)

    def argmax_full(self) -> Component:
        if self._argmax_vocab is None:  # one array object per evaluation: the kernel memo prices it once
            self._argmax_vocab = self.sc.argmax_vocab
        return self.kernel("argmax", self._argmax_vocab)

    def topk_us(self, rows, cols, *, fp32: bool = False) -> np.ndarray:
        """torch.topk over [rows, cols] at k > 1 (derived, not measured): radix passes + a k-sort.

        ATen TensorTopK.cu picks the multi-block radix select where `should_use_multiblock(rows, cols)` holds
        (`topk_multiblock`): e digit passes of 8 bits over the data (e = bytes per value), then a gather pass,
        each priced as one argmax-like reduction over [rows, cols] in the kernel model; otherwise the single-block
        kernel (one block per row, one launch): one such reduction. Then sorting the k winners, one launch moving
        rows * k * (e + 8) bytes at the copy rate.
        """
        e = np.full(np.shape(self.e), 4) if fp32 else self.e
        dtype = "fp32" if fp32 else self.sc.dtype
        mode = "eager" if "argmax" in self._eager_only else "graph"
        one = kernel_time_us(self.profile, "argmax", rows=rows, cols=cols, world_size=1, dtype=dtype,
                             elem_bytes=e, mode=mode).time_us
        bw = self.profile.kernel_ops["relayout_copy"].bw_gbps
        sort = self.profile.graph_kernel_us + 2.0 * rows * self.k * (e + ID_BYTES) / bw * 1e-3
        passes = np.where(topk_multiblock(rows, cols), e + 1, 1)
        return (passes * one + sort) * self.factors.get("topk", 1.0)

    def measured_topk(self, op: str, rows, cols, *, world_size=1, fp32: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(time_us, found): the profile's measured `op` table (schema.TOPK_KERNEL_OPS, one per k) where one at
        this scenario's k, dtype (fp32 for the merge), mode and world size covers (rows, cols), interpolated as
        every kernel table (`kernels.table_us`); found is False elsewhere (the derived `topk_us` prices it)."""
        r, c, k, p, d = np.broadcast_arrays(np.asarray(rows, dtype=float), np.asarray(cols, dtype=float),
                                            np.asarray(self.k), np.asarray(world_size),
                                            np.asarray("fp32" if fp32 else self.sc.dtype).astype(str))
        time, found = np.zeros(r.shape), np.zeros(r.shape, dtype=bool)
        mode = "eager" if op in self._eager_only else "graph"
        for t in self.profile.kernel_tables:
            if t.op != op or t.mode != mode:
                continue
            mask = (k == t.k) & (p == t.world_size) & (d == t.dtype) & ~found
            if not mask.any():
                continue
            values, outside = table_us(t, r[mask], c[mask])
            time[mask] = np.where(outside, 0.0, values)
            found[mask] = ~outside
        # the factor after the lookup: a stacked ensemble's (members, 1) factors widen the (1, n) points
        return time * self.factors.get(op, 1.0), found

    def topk_component(self, name: str, k1: Component, gpu_us, ops: int, when=None,
                       how: str = "strategies._Ctx.topk_us: (e + 1) argmax-like radix passes + a k-sort") -> Component:
        """`k1` (the argmax component) where top-k is 1, `gpu_us` with `ops` torch ops where k > 1 (and `when`)."""
        when = self.topk if when is None else self.topk & when
        host = self._host(name, self.host.torch_op_us, ops, when & self.multi if name == "topk_merge" else when)
        call = Call("kernel", name, {"top_k": self.k, "gpu_us": gpu_us,
                                     "formula": f"{name} at top-k {self.k} ("
                                                f"{'' if how.startswith('measured') else 'derived, '}{how})"}, when)
        k1_calls = tuple(replace(c, when=np.asarray(c.when) & ~when) for c in k1.calls)
        return Component(np.where(when, gpu_us, k1.time_us), 0.0, np.where(when, False, k1.extrapolated),
                         k1_calls + (call,), np.where(when, host, k1.host_us), np.where(when, ops, k1.ops))

    def d2t_scatter(self) -> Component:
        sc = self.sc
        return self.kernel("d2t_scatter", sc.vocab, draft_cols=sc.draft_vocab, when=sc.d2t)

    def d2t_lookup(self) -> Component:
        """target = draft + d2t[draft] for R ids; at top-k k > 1 for R x k ids plus the -inf tail fill of
        reference.d2t_lookup_topk (TORCH_OPS["d2t_lookup_topk"] ops, priced as the lookup over R x k rows)."""
        k1 = self.kernel("d2t_lookup", 0, when=self.sc.d2t)
        if not self.any_topk:
            return k1
        mode = "eager" if "d2t_lookup" in self._eager_only else "graph"
        gpu = kernel_time_us(self.profile, "d2t_lookup", rows=self.rows * self.k, cols=0, dtype=self.sc.dtype,
                             elem_bytes=self.e, mode=mode).time_us * self.factors.get("d2t_lookup", 1.0)
        return self.topk_component("d2t_lookup", k1, np.where(self.sc.d2t, gpu, 0.0), TORCH_OPS["d2t_lookup_topk"],
                                   when=self.sc.d2t, how="the d2t_lookup kernel model over R x k ids")

    def relayout(self, *, view_at_one_row: bool = True) -> Component:
        """The relayout copy - a view (0 us on the GPU) at p = 1 or, for the all-gather's reshape, at one row."""
        copies = self.rows > 1 if view_at_one_row else np.ones(np.shape(self.rows), dtype=bool)
        return self.kernel("relayout_copy", self.shard, world_size=self.p, when=self.multi & copies,
                           host_when=self.multi, torch_ops=np.where(copies, TORCH_OPS["relayout_copy"], 0),
                           views=np.where(copies, TORCH_VIEWS["relayout_copy"], TORCH_VIEWS["relayout_copy"] + 1))


def topk_multiblock(rows, cols) -> np.ndarray:
    """ATen aten/src/ATen/native/cuda/TensorTopK.cu `should_use_multiblock(num_slices, slice_size)` (CUB
    scan-by-key build; thresholds from pytorch/pytorch PR #74267): the multi-block radix select for long rows."""
    n, s = np.asarray(rows, dtype=float), np.asarray(cols, dtype=float)
    return (((n <= 20) & (s >= 20000)) | ((n > 20) & (n <= 40) & (s >= 10000)) | ((n > 40) & (n <= 80) & (s >= 8000))
            | ((n > 80) & (n < 200) & (s >= 5000)) | ((n >= 200) & (n < 800) & (s >= 3000))
            | ((n >= 800) & (n <= 4000) & (s >= 800)) | ((n > 4000) & (s >= 400)))


def _select_full(c: _Ctx) -> dict[str, Component]:
    """The baseline's last step: argmax (top-k 1) or torch.topk over [R, V or V_target] (key "topk" then)."""
    arg = c.argmax_full()
    if not c.any_topk:
        return {"argmax": arg}
    return {"topk": c.topk_component("topk", arg, c.topk_us(c.rows, c.sc.argmax_vocab), TORCH_OPS["topk"])}


def _ids_bytes(c: _Ctx):
    """Bytes of the ids a row returns: 8 (one int64) or k x 8 at top-k."""
    return ID_BYTES * c.k if c.any_topk else ID_BYTES


def full_all_gather(c: _Ctx) -> dict[str, Component]:
    return {
        "all_gather": c.collective("all_gather", c.rows * c.shard * c.e),
        "relayout_copy": c.relayout(),
        **c.prestep(c.sc.draft_vocab),
        "d2t_scatter": c.d2t_scatter(),
        **_select_full(c),
    }


def full_all_gather_no_relayout(c: _Ctx) -> dict[str, Component]:
    chunked = c.kernel("chunked_argmax", c.shard, world_size=c.p, when=c.multi)
    plain = c.kernel("argmax", c.sc.draft_vocab, when=~c.multi)
    arg = Component(chunked.time_us + plain.time_us, 0.0, chunked.extrapolated | plain.extrapolated,
                    chunked.calls + plain.calls, _add(chunked.host_us, plain.host_us),
                    np.where(c.multi, chunked.ops, plain.ops))
    if c.any_topk:  # top-k per rank chunk ([p*R, s]) then over the p*k candidates; p = 1: one topk over [R, V]
        gpu = np.where(c.multi, c.topk_us(c.rows * c.p, c.shard) + c.topk_us(c.rows, c.p * c.k, fp32=True),
                       c.topk_us(c.rows, c.sc.draft_vocab))
        select = {"chunked_topk": c.topk_component("chunked_topk", arg, gpu, TORCH_OPS["chunked_topk"])}
    else:
        select = {"chunked_argmax": arg}
    return {
        "all_gather": c.collective("all_gather", c.rows * c.shard * c.e),
        **c.prestep(c.sc.padded_draft_vocab),
        **select,
        "d2t_lookup": c.d2t_lookup(),
    }


def gather_to_rank0(c: _Ctx) -> dict[str, Component]:
    return {
        "gather": c.gather_p2p(c.rows * c.shard * c.e),
        "relayout_copy": c.relayout(view_at_one_row=False),  # torch.cat(parts, -1) copies even one row
        **c.prestep(c.sc.draft_vocab),
        "d2t_scatter": c.d2t_scatter(),
        **_select_full(c),
        "broadcast": c.collective("broadcast", c.rows * _ids_bytes(c)),
    }


def _local(c: _Ctx, op: str, collective: str, wire_bytes: int, reduce_op: str, reduce_cols) -> dict[str, Component]:
    """The local paths: [prestep] + local op (a plain argmax at p = 1) + fix-ups + collective + reduce + [d2t]."""
    local = c.kernel(op, c.shard, fusable=True, when=c.multi)
    plain = c.kernel("argmax", c.sc.draft_vocab, when=~c.multi)
    first = Component(local.time_us + plain.time_us, 0.0, local.extrapolated | plain.extrapolated,
                      local.calls + plain.calls, _add(local.host_us, plain.host_us),
                      np.where(c.multi, local.ops, plain.ops))
    reduce = c.kernel(reduce_op, 0, world_size=reduce_cols, when=c.multi, fusable=True)
    if c.any_topk and op == "local_argmax":
        # top-k pairs: topk of the shard ([R, s]; p = 1: of [R, V]) + k (value, id) pairs per row, a relayout
        # of the [p*R, k, 2] fp32 gather and a topk over the p*k candidates (the torch path; no fused kernel)
        bw = c.profile.kernel_ops["relayout_copy"].bw_gbps
        relayout = c.profile.graph_kernel_us + 2.0 * c.rows * c.p * c.k * PAIR_BYTES / bw * 1e-3
        local_gpu = np.where(c.multi, c.topk_us(c.rows, c.shard), c.topk_us(c.rows, c.sc.draft_vocab))
        merge_gpu = np.where(c.multi, relayout + c.topk_us(c.rows, c.p * c.k, fp32=True), 0.0)
        # a measured local_topk / topk_merge table (calibration.kernels, per k) replaces the derived time inside it
        local_meas, local_found = c.measured_topk("local_topk", c.rows, c.shard)
        merge_meas, merge_found = c.measured_topk("topk_merge", c.rows, c.p * c.k, world_size=c.p, fp32=True)
        local_found, merge_found = local_found & c.multi, merge_found & c.multi
        local_gpu = np.where(local_found, local_meas, local_gpu)
        merge_gpu = np.where(merge_found, relayout + merge_meas, merge_gpu)
        measured = "measured kernels.tables local_topk / topk_merge (per k) inside them, else "
        how = "strategies._Ctx.topk_us: (e + 1) argmax-like radix passes + a k-sort"
        steps = {"local_topk": c.topk_component("local_topk", first, local_gpu, TORCH_OPS["local_topk"],
                                                how=(measured + how) if local_found.any() else how)}
        tail = {"topk_merge": c.topk_component("topk_merge", reduce, merge_gpu, TORCH_OPS["topk_merge"],
                                               how=(measured + how) if merge_found.any() else how)}
        wire = wire_bytes * c.k
    else:
        steps, tail, wire = {op: first}, {reduce_op: reduce}, wire_bytes
    return {
        **c.prestep(c.shard),
        **steps,
        **c.local_fixups(fusable=True),
        collective: c.collective(collective, c.rows * wire),
        **tail,
        "d2t_lookup": c.d2t_lookup(),
    }


def local_argmax_pairs(c: _Ctx) -> dict[str, Component]:
    return _local(c, "local_argmax", "all_gather", PAIR_BYTES, "pair_reduce", c.p)


def packed_allreduce_max(c: _Ctx) -> dict[str, Component]:
    return _local(c, "key_pack", "all_reduce", ID_BYTES, "key_unpack", 1)


def _add(a, b):
    return np.asarray(a) + np.asarray(b)


BUILDERS: dict[str, Callable[[_Ctx], dict[str, Component]]] = {
    "full_all_gather": full_all_gather,
    "full_all_gather_no_relayout": full_all_gather_no_relayout,
    "gather_to_rank0": gather_to_rank0,
    "local_argmax_pairs": local_argmax_pairs,
    "packed_allreduce_max": packed_allreduce_max,
}


def validity(name: str, scenario: Scenario) -> np.ndarray:
    """Where a strategy returns exactly torch.argmax's ids (see the module doc)."""
    ok = np.ones(scenario.shape, dtype=bool)
    if name == "local_argmax_pairs":
        ok &= np.broadcast_to(scenario.ids_exact_in_fp32, scenario.shape)
    if name == "packed_allreduce_max":  # all_reduce(MAX) of one key per row: exact at top-k 1 only
        ok &= np.broadcast_to(scenario.top_k == 1, scenario.shape)
    return ok


def build_components(scenario: Scenario, profile: Profile, strategies: tuple[str, ...] = STRATEGIES,
                     factors: dict[str, float] | None = None) -> dict[str, dict[str, Component]]:
    """{strategy: {component: Component}} for a (vectorized) scenario.

    factors: optional multipliers of each op's GPU time ({op: f}; "host" scales host costs) - how
    `uncertainty.propagate` applies per-op model discrepancy to one ensemble member.
    """
    with kernel_memo():  # one evaluation: identical kernel calls and factorizations priced once
        ctx = _Ctx(scenario, profile, factors)
        out = {}
        for name in strategies:
            comps = BUILDERS[name](ctx)
            if ctx.any_host:
                comps["host_exposed"] = _host_exposed(ctx, comps)
            out[name] = comps
    return out


def _host_exposed(ctx: _Ctx, comps: dict[str, Component]) -> Component:
    """Step time (engines.step_time_us) minus the GPU time: the host launch time the GPU waits for."""
    sc = ctx.sc
    syncs = {k: sync_mask(k, sc.engine) for k in comps}
    # a stage with no host and no GPU work leaves both clocks as they are (engines.step_time_us): skip it
    stages = [Stage(c.host_us, c.time_us, c.ops, syncs[k]) for k, c in comps.items()
              if np.any(c.host_us) or np.any(c.time_us) or np.any(syncs[k])]
    head = np.where(sc.engine == "vllm", lm_head_us(ctx.profile, sc), 0.0)
    step = step_time_us(stages, head)
    gpu = sum((np.asarray(c.time_us, dtype=float) for c in comps.values()), np.zeros(()))
    host_total = (sum((np.asarray(c.host_us, dtype=float) for c in comps.values()), np.zeros(()))
                  if sc.size == 1 else np.nan)  # for explanations (single scenarios) only
    exposed = np.maximum(step - gpu, 0.0)
    return Component(exposed, 0.0, False, (Call("host", "host_exposed", {"host_us": host_total, "gpu_us": gpu,
                                                                          "head_start_us": head, "exposed": exposed},
                                                     exposed > 0),))


def lm_head_us(profile: Profile, scenario: Scenario) -> np.ndarray | float:
    """GPU time of the draft lm_head GEMM queued right before the chain (vLLM's head start), or 0.

    Uses the profile's lm_head model (`costmodel.kernels.lm_head_time_us`) when it has one and the
    scenario knows the hidden size; otherwise 0 (no head start: the host's launches are fully exposed).
    """
    from . import kernels as kmod

    fn = getattr(kmod, "lm_head_time_us", None)
    if fn is None or scenario.hidden is None:
        return 0.0
    try:
        return np.asarray(fn(profile, scenario.rows, scenario.hidden, scenario.shard), dtype=float)
    except (InputError, KeyError, ValueError, TypeError):
        return 0.0


# ops of the measurement schema without a strategy component of their own: torch ops they issue
_POINT_OPS = {"local_max": 1, "local_pack": 4, "local_argmax_masked": 6, "relayout_argmax": 2}


def engine_points(frame, profile: Profile, engine: str):
    """Measurement rows priced as `engine` runs each op alone (predict-points --engine).

    Captured engines (sglang, trtllm): the graph-mode price. vllm: the op is launched by the host,
    so one op of n torch ops / c10d calls alone takes step_time_us([Stage(h, g, n)]) =
    max(h/n + g, h + g/n) with g its graph-mode GPU time and h its host time
    (engines.HostCosts). Returns a copy of `frame` with `predicted_us` and `mode` as priced.
    """
    from .points import predict_points  # points imports kernels / collectives only

    plan = PLANS.get(engine)
    if plan is None:
        raise InputError(f"engine: unknown {engine!r} (known: {', '.join(PLANS)})")
    graph = predict_points(frame.assign(mode="graph"), profile)
    if plan.is_captured("*"):
        return graph
    hc = host_costs(profile)
    ops = graph["op"].astype(str)
    n = ops.map(lambda op: TORCH_OPS["fused"] if op.endswith("_fused")
                else TORCH_OPS.get(op, _POINT_OPS.get(op, 1))).to_numpy(float)
    views = ops.map(lambda op: TORCH_VIEWS.get(op, 0)).to_numpy(float)
    collective = ops.isin(["all_gather", "all_reduce", "gather", "broadcast"]).to_numpy()
    h = np.where(collective, hc.c10d_call_us, n * hc.torch_op_us + views * hc.view_op_us)
    n = np.where(collective, 1.0, n)
    g = graph["predicted_us"].to_numpy(float)
    out = graph.assign(mode="eager")
    out["predicted_us"] = step_time_us([Stage(h, g, n)])
    return out
