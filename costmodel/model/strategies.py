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
from dataclasses import replace

import numpy as np

from ..io.errors import InputError
from ..profiles.types import Profile
from . import engine_kernels as ek
from .components import STRATEGIES, _Ctx
from .engines import Stage, step_time_us, sync_mask
from .exact import pick
from .kernels import ID_BYTES, PAIR_BYTES, kernel_memo, lm_head_time_us
from .parts import TORCH_OPS, Call, Component
from .scenario import Scenario
from .serving import SERVING_SOURCE, serving_us
from .threads import run as run_threads
from .threads import worker_count


def _override(comp: Component, where, gpu_us, formula: str, *, collective: bool = False) -> Component:
    """`comp` with its GPU time replaced by `gpu_us` where `where` (an engine recipe's kernel; recipes.py); its
    own calls then apply only elsewhere. collective: the recipe's kernel is one collective call (serving term)."""
    where = np.asarray(where, dtype=bool)
    if not where.any():
        return comp
    gpu = np.where(where, gpu_us, comp.time_us)
    call = Call("kernel", "recipe", {"formula": formula, "gpu_us": gpu, "counts_as_collective": collective}, where)
    own = tuple(replace(c, when=np.asarray(c.when) & ~where) for c in comp.calls)
    return replace(comp, time_us=gpu, extrapolated=np.where(where, False, comp.extrapolated), calls=own + (call,))


def _select_full(c: _Ctx) -> dict[str, Component]:
    """The baseline's last step: argmax (top-k 1) or torch.topk over [R, V or V_target] (key "topk" then);
    the recipe's bandwidth-bound argmax (tokenspeed), SGLang's split-vocab argmax (top-k 1, CUDA) or its softmax
    over [R, V] before the max (above top-k 1, ROCm)."""
    m, vocab = c.recipe, c.sc.argmax_vocab
    out = {"softmax": _softmax(c, m.softmax_max, vocab)} if np.any(m.softmax_max) else {}
    arg = _recipe_argmax(c, c.argmax_full(), vocab)
    if not c.any_topk:
        return {**out, "argmax": arg}
    return {**out, "topk": c.topk_component("topk", arg, c.topk_us(c.rows, vocab), TORCH_OPS["topk"])}


def _single_select(c: _Ctx) -> dict[str, Component]:
    """The p = 1 step of the local and chunked paths, {"argmax": ...} (with "softmax" first where the recipe runs
    one): at TP 1 nothing is gathered, so the argmax over [R, V_draft] takes the recipe's kernel where its baseline
    does (bandwidth-bound argmax, SGLang's split-vocab argmax) and SGLang's softmax over [R, V] where its baseline
    runs it - at p = 1 (d2t off) every strategy is the baseline's selection. tokenspeed: `_init_dist_argmax_state`
    takes its fused path only at TP >= 2; SGLang: assumed (PR #37106's code not read; docs/engines.md)."""
    def build() -> dict[str, Component]:
        vocab = c.sc.draft_vocab
        arg = _recipe_argmax(c, c.plain_argmax(), vocab, c.single)
        when = c.recipe.softmax_max & c.single
        return {"softmax": _softmax(c, when, vocab), "argmax": arg} if np.any(when) else {"argmax": arg}
    return c.shared(("single_select",), build)


def _recipe_argmax(c: _Ctx, arg: Component, vocab, where=True) -> Component:
    """`arg` (an ATen argmax over [R, vocab]) with the recipe's own kernel where its baseline runs one (and
    `where`): tokenspeed's bandwidth-bound argmax, SGLang's split-vocab argmax."""
    m = c.recipe
    arg = _override(arg, m.argmax_bw & where, ek.argmax_bw_us(c.profile, c.rows, vocab, c.e),
                    "engine_kernels.argmax_bw_us (CuTe ArgmaxKernel): " + ek.DERIVED)
    return _override(arg, m.split_argmax & where, ek.split_argmax_us(c.profile, c.rows, vocab, c.e),
                     "engine_kernels.split_argmax_us (SGLang draft_topk1_postprocess): " + ek.DERIVED)


def _softmax(c: _Ctx, when, vocab) -> Component:
    """SGLang's softmax over [R, vocab] before the max (`engine_kernels.softmax_us`, derived) where `when`."""
    gpu = np.where(when, ek.softmax_us(c.profile, c.rows, vocab, c.e), 0.0) * c.factors.get("softmax", 1.0)
    return Component(gpu, 0.0, False, (Call("kernel", "softmax", {"formula": "engine_kernels.softmax_us: "
                                                                  + ek.DERIVED, "gpu_us": gpu}, when),),
                     c._host("softmax", c.host.torch_op_us, 1, when), 1)


def _ids_bytes(c: _Ctx):
    """Bytes of the ids a row returns: 8 (one int64) or k x 8 at top-k."""
    return ID_BYTES * c.k if c.any_topk else ID_BYTES


def full_all_gather(c: _Ctx) -> dict[str, Component]:
    mm = c.multimem_gather  # tokenspeed: its multimem all-gather writes [R, V] itself (no relayout)
    impl = np.where(mm, "multimem", c.sc.collective) if c.any_multimem_gather else None
    return {
        "all_gather": c.collective("all_gather", c.logits_bytes, impl=impl),
        "relayout_copy": c.relayout(skip=mm),
        **c.prestep(c.sc.draft_vocab),
        "d2t_scatter": c.d2t_scatter(),
        **c.shared(("select_full",), lambda: _select_full(c)),
    }


def full_all_gather_no_relayout(c: _Ctx) -> dict[str, Component]:
    chunked = c.kernel("chunked_argmax", c.shard, world_size=c.p, when=c.multi)
    single = _single_select(c)
    plain = single["argmax"]
    arg = Component(chunked.time_us + plain.time_us, 0.0, chunked.extrapolated | plain.extrapolated,
                    chunked.calls + plain.calls, _add(chunked.host_us, plain.host_us),
                    pick(c.multi, chunked.ops, plain.ops))
    if c.any_topk:  # top-k per rank chunk ([p*R, s]) then over the p*k candidates; p = 1: one topk over [R, V]
        gpu = np.where(c.multi, c.topk_us(c.rows * c.p, c.shard) + c.topk_us(c.rows, c.p * c.k, fp32=True),
                       c.topk_us(c.rows, c.sc.draft_vocab))
        # p = 1: one torch.topk, the baseline's ops (TORCH_OPS["topk"])
        ops = np.where(c.multi, TORCH_OPS["chunked_topk"], TORCH_OPS["topk"])
        select = {"chunked_topk": c.topk_component("chunked_topk", arg, gpu, ops)}
    else:
        select = {"chunked_argmax": arg}
    return {
        "all_gather": c.collective("all_gather", c.logits_bytes),
        **c.prestep(c.sc.padded_draft_vocab),
        **{k: v for k, v in single.items() if k == "softmax"},
        **select,
        "d2t_lookup": c.d2t_lookup(),
    }


def gather_to_rank0(c: _Ctx) -> dict[str, Component]:
    return {
        "gather": c.gather_p2p(c.logits_bytes),
        "relayout_copy": c.relayout(view_at_one_row=False),  # torch.cat(parts, -1) copies even one row
        **c.prestep(c.sc.draft_vocab),
        "d2t_scatter": c.d2t_scatter(),
        **c.shared(("select_full",), lambda: _select_full(c)),
        "broadcast": c.collective("broadcast", c.rows * _ids_bytes(c)),
    }


def _local(c: _Ctx, op: str, collective: str, wire_bytes: int, reduce_op: str, reduce_cols) -> dict[str, Component]:
    """The local paths: [prestep] + local op (a plain argmax at p = 1) + fix-ups + collective + reduce + [d2t]."""
    local = c.kernel(op, c.shard, fusable=True, when=c.multi)
    single = _single_select(c)
    plain = single["argmax"]
    first = Component(local.time_us + plain.time_us, 0.0, local.extrapolated | plain.extrapolated,
                      local.calls + plain.calls, _add(local.host_us, plain.host_us),
                      pick(c.multi, local.ops, plain.ops))
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
        ops = np.where(c.multi, TORCH_OPS["local_topk"], TORCH_OPS["topk"])  # p = 1: one torch.topk
        steps = {"local_topk": c.topk_component("local_topk", first, local_gpu, ops,
                                                how=(measured + how) if local_found.any() else how)}
        tail = {"topk_merge": c.topk_component("topk_merge", reduce, merge_gpu, TORCH_OPS["topk_merge"],
                                               how=(measured + how) if merge_found.any() else how)}
        wire = wire_bytes * c.k
    else:
        steps, tail, wire = {op: first}, {reduce_op: reduce}, wire_bytes
    return {
        **c.prestep(c.shard),
        **{k: v for k, v in single.items() if k == "softmax"},
        **steps,
        **c.local_fixups(fusable=True),
        collective: c.collective(collective, c.rows * wire),
        **tail,
        "d2t_lookup": c.d2t_lookup(),
    }


def local_argmax_pairs(c: _Ctx) -> dict[str, Component]:
    comps = _local(c, "local_argmax", "all_gather", PAIR_BYTES, "pair_reduce", c.p)
    w = c.recipe.compiled_pairs  # TensorRT-LLM: torch.compile'd local max + pack, and pick
    if np.any(w):
        first, last = ("local_topk", "topk_merge") if "local_topk" in comps else ("local_argmax", "pair_reduce")
        comps[first] = _override(comps[first], w, ek.argmax_bw_us(c.profile, c.rows, c.shard, c.e),
                                          "compiled get_local_max_and_combined = engine_kernels.argmax_bw_us: "
                                          + ek.DERIVED)
        for k in ("pad_mask", "rank_offset"):  # inside the compiled kernel
            comps[k] = _override(comps[k], w, 0.0, "fused into the compiled local reduce")
        comps[last] = _override(comps[last], w, ek.small_us(c.profile, c.rows, c.p * PAIR_BYTES),
                                         "compiled get_draft_tokens_from_gathered = engine_kernels.small_us: "
                                         + ek.DERIVED)
    return comps


def packed_allreduce_max(c: _Ctx) -> dict[str, Component]:
    comps = _local(c, "key_pack", "all_reduce", ID_BYTES, "key_unpack", 1)
    w = c.recipe.fused_packed  # tokenspeed: one CuTe distributed_argmax kernel does all of it
    if np.any(w):
        exchange = c.collective("all_reduce", c.rows * ID_BYTES, impl="multimem").time_us
        comps["key_pack"] = _override(comps["key_pack"], w,
                                      ek.fused_dist_argmax_us(c.profile, c.rows, c.shard, c.e, exchange),
                                      "CuTe distributed_argmax = engine_kernels.fused_dist_argmax_us: " + ek.DERIVED,
                                      collective=True)
        for k in ("pad_mask", "rank_offset", "all_reduce", "key_unpack"):  # inside the one kernel
            comps[k] = _override(comps[k], w, 0.0, "inside the fused distributed_argmax kernel")
    return comps


def _add(a, b):
    return np.asarray(a) + np.asarray(b)


def sum_from_zero(values) -> np.ndarray:
    """sum(values, np.zeros(())): ((0 + v1) + v2) + ..., the same additions in the same order, each after the first
    written into the running sum (a temporary of this function) where it has the result's shape."""
    acc = np.zeros(())
    own = False
    for v in values:
        if own and np.broadcast_shapes(acc.shape, np.shape(v)) == acc.shape:
            np.add(acc, v, out=acc)
        else:
            acc = acc + v
            own = isinstance(acc, np.ndarray) and acc.ndim > 0
    return acc


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


# the order worker threads start the strategies in: the two that build the parts the others reuse (the logits
# all-gather and relayout; the local max and its factorized points) first, so the rest find them built
THREAD_ORDER = ("full_all_gather", "local_argmax_pairs", "full_all_gather_no_relayout", "packed_allreduce_max",
                "gather_to_rank0")


def build_components(scenario: Scenario, profile: Profile, strategies: tuple[str, ...] = STRATEGIES,
                     factors: dict[str, float] | None = None, workers: int | None = None
                     ) -> dict[str, dict[str, Component]]:
    """{strategy: {component: Component}} for a (vectorized) scenario.

    factors: optional multipliers of each op's GPU time ({op: f}; "host" scales host costs) - how
    `uncertainty.propagate` applies per-op model discrepancy to one ensemble member.
    workers: threads for a large scenario array (None: one per CPU; 1: this thread; costmodel.model.threads).
    """
    threads = worker_count(scenario.size, len(strategies), workers)
    with kernel_memo():  # one evaluation: identical kernel calls and factorizations priced once
        ctx = _Ctx(scenario, profile, factors)
        serving = ctx.recipe.serving & ctx.multi
        any_serving = bool(np.any(serving))

        def build(name: str) -> dict[str, Component]:
            comps = BUILDERS[name](ctx)
            if any_serving:
                comps["serving"] = _serving(ctx, comps, serving)
            if ctx.any_host:
                comps["host_exposed"] = _host_exposed(ctx, comps)
            return comps

        return run_threads(build, strategies, threads, THREAD_ORDER)


def _serving(ctx: _Ctx, comps: dict[str, Component], enabled) -> Component:
    """The serving term (costmodel/model/serving.py): SERVING_CALL_US per collective call the strategy issues."""
    calls = sum((np.asarray(call.when, dtype=float) for comp in comps.values() for call in comp.calls
                 if call.kind == "collective" or call.args.get("counts_as_collective")), np.zeros(()))
    t = serving_us(calls, enabled, ctx.factors.get("serving", 1.0))
    return Component(t, 0.0, False, (Call("serving", "serving", {"collective_calls": calls, "gpu_us": t, "formula":
                                                                  SERVING_SOURCE}, enabled & (calls > 0)),))


def _host_exposed(ctx: _Ctx, comps: dict[str, Component]) -> Component:
    """Step time (engines.step_time_us) minus the GPU time: the host launch time the GPU waits for."""
    sc = ctx.sc
    syncs = {k: sync_mask(k, sc.engine) for k in comps}
    # a stage with no host and no GPU work leaves both clocks as they are (engines.step_time_us): skip it
    stages = [Stage(c.host_us, c.time_us, c.ops, syncs[k]) for k, c in comps.items()
              if np.any(c.host_us) or np.any(c.time_us) or np.any(syncs[k])]
    head = np.where(sc.engine == "vllm", lm_head_us(ctx.profile, sc), 0.0)
    step = step_time_us(stages, head)
    gpu = sum_from_zero(np.asarray(c.time_us, dtype=float) for c in comps.values())
    host_total = (sum((np.asarray(c.host_us, dtype=float) for c in comps.values()), np.zeros(()))
                  if sc.size == 1 else np.nan)  # for explanations (single scenarios) only
    exposed = step - gpu
    exposed = np.maximum(exposed, 0.0, out=exposed if exposed.ndim else None)
    return Component(exposed, 0.0, False, (Call("host", "host_exposed", {"host_us": host_total, "gpu_us": gpu,
                                                                          "head_start_us": head, "exposed": exposed},
                                                     exposed > 0),))


def lm_head_us(profile: Profile, scenario: Scenario) -> np.ndarray | float:
    """GPU time of the draft lm_head GEMM queued right before the chain (vLLM's head start), or 0.

    Uses the profile's lm_head model (`costmodel.model.kernels.lm_head_time_us`) when it has one and the
    scenario knows the hidden size; otherwise 0 (no head start: the host's launches are fully exposed) - the
    documented default for a profile without `kernels.lm_head` (`costmodel.model.kernels.LM_HEAD_DEFAULT`).
    """
    if scenario.hidden is None:
        return 0.0
    try:
        head = lm_head_time_us(profile, scenario.rows, scenario.hidden, scenario.shard)
    except (InputError, KeyError, ValueError, TypeError):
        return 0.0
    return 0.0 if head is None else np.asarray(head, dtype=float)
