"""The per-scenario pricing context a strategy's components come from (`_Ctx`), and the strategy names.

`_Ctx` holds one scenario's geometry (rows R, shard s = V_pad / p, bytes per logit e) and prices its collectives
(NCCL curve or the engine's collective implementation) and kernels as `costmodel.model.parts` Components, with
the host launch time of what the engine does not capture. `costmodel.model.strategies` composes these per strategy.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..io.errors import InputError
from ..io.schema_names import DTYPES
from ..profiles.families import gpu_vendor
from ..profiles.types import Profile
from . import collective_impls, recipes
from .collectives import collective_time_us
from .engines import ENGINES, PLANS, captured_mask, host_costs, with_overrides
from .exact import false_outside, scaled, zero_outside
from .gpu_kernels import DTYPE_ORDER
from .kernels import ID_BYTES, _dtype_codes, kernel_time_us, table_us
from .parts import TORCH_OPS, TORCH_VIEWS, Call, Component
from .scenario import Scenario

CUTE_NVLINK_GENERATIONS = (4, 5)  # NVIDIA sm 9.x / 10.x (Hopper, datacenter Blackwell): tokenspeed's CuTe kernels
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


_ELEM_BYTES_BY_CODE = np.array([DTYPES[k] for k in DTYPE_ORDER], dtype=np.int64)


def _elem_bytes(scenario: Scenario):
    """Scenario.elem_bytes; for a dtype array, looked up from its integer codes (kernels._dtype_codes, cached
    per array object: the kernel model reads the same codes) - the same int64 values, no string search."""
    dtype = scenario.dtype
    if isinstance(dtype, np.ndarray) and dtype.size > 1 and set(DTYPE_ORDER) == set(DTYPES):
        return _ELEM_BYTES_BY_CODE[_dtype_codes(dtype)]
    return scenario.elem_bytes


class _Ctx:
    """Per-evaluation cache of the scenario's derived arrays, the engine plan and host costs."""

    def __init__(self, scenario: Scenario, profile: Profile, factors: dict[str, float] | None = None):
        self.sc, self.profile = scenario, profile
        self.factors = factors or {}
        self.rows = scenario.rows
        self.shard = scenario.shard
        self.p = scenario.tp
        self.e = _elem_bytes(scenario)
        self.multi = self.p > 1
        self.single = ~self.multi  # one mask object for every p = 1 part (the kernel memo keys on it)
        self.logits_bytes = self.rows * self.shard * self.e  # R s e: the logits each rank sends
        self._parts: dict = {}  # parts several strategies price alike (`shared`)
        self.k = scenario.top_k
        self.fused = (scenario.impl == "fused") & (self.k == 1)  # the fused kernels are argmax-only (k = 1)
        self.any_fused = bool(np.any(self.fused))
        self.topk = self.k > 1
        self.any_topk = bool(np.any(self.topk))
        # the hardware gates only tokenspeed's recipe reads: the multimem gate from the profile's NVLS regimes
        # (their names, shared by a stacked ensemble's members: members.stack_profiles), the CuTe and vendor gates
        # from its provenance (checked equal across the members)
        tokenspeed = bool(np.any(scenario.engine == "tokenspeed"))
        multimem_ok = (collective_impls.available(profile, "multimem", "all_gather", 0.0, scenario.tp, scenario.nodes)
                       if tokenspeed else True)
        self.recipe = recipes.masks(scenario, multimem_ok,
                                    profile.provenance.nvlink_generation in CUTE_NVLINK_GENERATIONS,
                                    gpu_vendor(profile.provenance.gpu), rows=self.rows)
        self.multimem_gather = self.recipe.multimem_gather & self.multi
        self.any_multimem_gather = bool(np.any(self.multimem_gather))
        self.any_impl = bool(np.any(scenario.collective != "nccl"))
        self.host = with_overrides(host_costs(profile), scenario.host_op_us, scenario.host_collective_us)
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
        self._host_arrays: dict[tuple, tuple] = {}
        self._eager_only = {op for op in {t.op for t in profile.kernel_tables}
                            if not any(t.op == op and t.mode == "graph" for t in profile.kernel_tables)}

    def captured(self, component: str) -> np.ndarray:
        hit = self._captured.get(component)
        if hit is None:
            hit = self._captured[component] = captured_mask(component, self._engine_is, self._mode_graph)
        return hit

    def shared(self, key: tuple, build):
        """build(), once per evaluation for `key`: a part several strategies price with the same arguments (the
        all-gather of the logits, the p = 1 argmax, the baseline's selection, the d2t steps) is one object they
        share (read only, as every Component)."""
        hit = self._parts.get(key)
        if hit is None:
            hit = self._parts[key] = build()
        return hit

    def plain_argmax(self) -> Component:
        """The argmax over [R, V] where p = 1 (the local and chunked paths' single-rank step)."""
        return self.shared(("plain_argmax",), lambda: self.kernel("argmax", self.sc.draft_vocab, when=self.single))

    def _host(self, component: str, per_call_us: float, calls, when) -> np.ndarray | float:
        if not self.any_host:
            return 0.0
        if self.sc.size > 1 and isinstance(when, (bool, np.bool_, np.ndarray)) and np.ndim(when) == 0 and not when:
            return 0.0  # no scenario runs it: no host time (a full-size array of zeros before; the same stages)
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
        cost = per_call_us * calls
        if np.ndim(cost) or not isinstance(hit[1], np.ndarray):
            return cost * hit[1]
        # one host array per (per-call cost, mask): the c10d calls of every strategy's collectives share it
        value = (key, np.asarray(cost, dtype=float).tobytes())
        same = self._host_arrays.get(value)
        if same is None or same[0] is not when:
            same = self._host_arrays[value] = (when, cost * hit[1])
        return same[1]

    def collective(self, op: str, bytes_per_rank, component: str | None = None, impl=None) -> Component:
        """The profile's NCCL curve, or - where the scenario's `collective` (or `impl`, an engine recipe's
        choice) is oneshot / multimem and available there - that implementation
        (costmodel/model/collective_impls.py; NCCL is the fallback)."""
        if impl is None:  # the same call in another strategy (the logits' all-gather): priced once
            key = ("collective", op, component, id(bytes_per_rank))
            hit = self._parts.get(key)
            if hit is not None and hit[0] is bytes_per_rank:
                return hit[1]
            out = self._collective(op, bytes_per_rank, component, impl)
            self._parts[key] = (bytes_per_rank, out)  # keeps the argument alive: its id stays unique
            return out
        return self._collective(op, bytes_per_rank, component, impl)

    def _collective(self, op: str, bytes_per_rank, component: str | None, impl) -> Component:
        sc = self.sc
        t = collective_time_us(self.profile, op, bytes_per_rank, sc.tp, sc.nodes, "graph")
        args = {"bytes_per_rank": bytes_per_rank}
        chosen = sc.collective if impl is None else impl
        if self.any_impl or impl is not None:
            t, native = collective_impls.collective_us(self.profile, chosen, op, bytes_per_rank, sc.tp,
                                                       sc.nodes, nccl_us=t)
            args.update(collective=chosen, native=native)
            if sc.size == 1 and str(chosen) != "nccl" and bool(np.all(native)):  # for explanations
                impl, p, n = str(chosen), int(np.asarray(sc.tp)), int(np.asarray(sc.nodes))
                args.update(gpu_us=t, formula=collective_impls.formula(impl, op, self.profile, p, n),
                            impl_provenance=collective_impls.provenance(self.profile, impl, op, p, n))
        t = t * self.factors.get(op, 1.0)
        return Component(t, zero_outside(self.multi, bytes_per_rank),
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
        return Component(t, zero_outside(self.multi, b),
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
            t, x = scaled(est.time_us, self.factors.get(op, 1.0)), est.extrapolated
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
            t, x = zero_outside(when, t), false_outside(when, x)
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
        return Component(zero_outside(when, t), 0.0, False, (call,),
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
        return self.shared(("local_fixups", fusable), lambda: self._local_fixups(fusable))

    def _local_fixups(self, fusable: bool) -> dict[str, Component]:
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
        return Component(zero_outside(when, t), 0.0, False, (call,),
                         self._host(name, self.host.torch_op_us, 1, when), 1)

    def argmax_full(self) -> Component:
        if self._argmax_vocab is None:  # one array object per evaluation: the kernel memo prices it once
            sc = self.sc
            draft = sc.draft_vocab
            # no d2t anywhere: where(d2t, vocab, draft_vocab) holds draft_vocab's values - the object itself where
            # the shapes agree, so this argmax and the p = 1 one (plain_argmax) are one kernel estimate
            same = np.shape(draft) == np.broadcast_shapes(np.shape(sc.d2t), np.shape(sc.vocab), np.shape(draft))
            self._argmax_vocab = draft if same and not np.any(sc.d2t) else sc.argmax_vocab
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

    def topk_component(self, name: str, k1: Component, gpu_us, ops, when=None,
                       how: str = "strategies._Ctx.topk_us: (e + 1) argmax-like radix passes + a k-sort") -> Component:
        """`k1` (the argmax component) where top-k is 1, `gpu_us` with `ops` torch ops (a count, or one per
        scenario) where k > 1 (and `when`)."""
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
        return self.shared(("d2t_scatter",), lambda: self.kernel("d2t_scatter", sc.vocab, draft_cols=sc.draft_vocab,
                                                                 when=sc.d2t))

    def d2t_lookup(self) -> Component:
        """target = draft + d2t[draft] for R ids; at top-k k > 1 for R x k ids plus the -inf tail fill of
        reference.d2t_lookup_topk (TORCH_OPS["d2t_lookup_topk"] ops, priced as the lookup over R x k rows)."""
        return self.shared(("d2t_lookup",), self._d2t_lookup)

    def _d2t_lookup(self) -> Component:
        k1 = self.kernel("d2t_lookup", 0, when=self.sc.d2t)
        if not self.any_topk:
            return k1
        mode = "eager" if "d2t_lookup" in self._eager_only else "graph"
        gpu = kernel_time_us(self.profile, "d2t_lookup", rows=self.rows * self.k, cols=0, dtype=self.sc.dtype,
                             elem_bytes=self.e, mode=mode).time_us * self.factors.get("d2t_lookup", 1.0)
        return self.topk_component("d2t_lookup", k1, np.where(self.sc.d2t, gpu, 0.0), TORCH_OPS["d2t_lookup_topk"],
                                   when=self.sc.d2t, how="the d2t_lookup kernel model over R x k ids")

    def relayout(self, *, view_at_one_row: bool = True, skip=False) -> Component:
        """The relayout copy - a view (0 us on the GPU) at p = 1 or, for the all-gather's reshape, at one row;
        none where `skip` (a multimem all-gather that writes the final [R, V] layout itself)."""
        copies = self.rows > 1 if view_at_one_row else np.ones(np.shape(self.rows), dtype=bool)
        run = self.multi & ~np.asarray(skip, dtype=bool)
        return self.kernel("relayout_copy", self.shard, world_size=self.p, when=run & copies,
                           host_when=run, torch_ops=np.where(copies, TORCH_OPS["relayout_copy"], 0),
                           views=np.where(copies, TORCH_VIEWS["relayout_copy"], TORCH_VIEWS["relayout_copy"] + 1))


def topk_multiblock(rows, cols) -> np.ndarray:
    """ATen aten/src/ATen/native/cuda/TensorTopK.cu `should_use_multiblock(num_slices, slice_size)` (CUB
    scan-by-key build; thresholds from pytorch/pytorch PR #74267): the multi-block radix select for long rows."""
    n, s = np.asarray(rows, dtype=float), np.asarray(cols, dtype=float)
    return (((n <= 20) & (s >= 20000)) | ((n > 20) & (n <= 40) & (s >= 10000)) | ((n > 40) & (n <= 80) & (s >= 8000))
            | ((n > 80) & (n < 200) & (s >= 5000)) | ((n >= 200) & (n < 800) & (s >= 3000))
            | ((n >= 800) & (n <= 4000) & (s >= 800)) | ((n > 4000) & (s >= 400)))
