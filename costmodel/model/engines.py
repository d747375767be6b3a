"""Engine execution model: what the host launches, what a CUDA graph replays, and the step time.

Every component of a strategy (a collective or a kernel op) has a GPU time `g` (its kernels as
they execute, priced in graph mode) and a host time `h` (the host's cost to launch it: torch ops x
`torch_op_us`, c10d calls x `c10d_call_us`; 0 when a CUDA graph replays it). The host launches the
components in order; the GPU runs each op once the host has launched it and the previous op is
done (a two-stage pipeline). With components c = 1..m of n_c equal ops each, cumulative host time
A_<c before c and GPU time G_>=c from c on, the last op finishes at

    E = max( S + G,                                              (GPU-bound: GPU never waits)
             max_c A_<c + h_c / n_c + G_>=c,                     (first op of c launched late)
             max_c A_<c + h_c + g_c / n_c + G_>c )               (last op of c launched late)

and the step time is E - S, where S is GPU work already queued when the host starts the chain
(the head start; 0 unless the engine launches the lm_head GEMM right before it). So
max(H, G) <= E - S <= H + G: the step behaves like max(host, GPU) when the host runs ahead and
approaches host + GPU when every op must wait for its launch. A host sync after a component
(`sync_after`) ends a segment: the host waits until the GPU is done, and the next segment starts
with an idle GPU, so segments add. `graph` mode (every component captured): E = G.

Per engine, from each engine's current source (read 2026-12-01; file and function cited):

vllm   - `vllm/v1/spec_decode/eagle.py`, `EagleProposer.propose`: the draft model's forward runs
         inside `with set_forward_context(..., cudagraph_runtime_mode=...)` (where vLLM dispatches
         its CUDA graphs); `self.model.compute_logits(...)` (lm_head GEMM + the logits all-gather in
         `LogitsProcessor`) and `logits.argmax(dim=-1)` (or `get_top_tokens` with
         `use_local_argmax_reduction`) run after that block, eagerly, in every draft call; the loop
         over `num_speculative_tokens` has no `.item()` / `.cpu()` / `.tolist()`, so the host does
         not sync between draft calls. Plan: every component eager, no sync, head start = the
         lm_head GEMM's GPU time (queued just before; 0 when the profile cannot price it).
sglang - `python/sglang/srt/speculative/eagle_worker.py`, `EAGLEWorker.draft`: when
         `self.cuda_graph_runner.can_run(forward_batch)` it calls `cuda_graph_runner.replay`
         (`EAGLEDraftCudaGraphRunner` captures `draft_forward`: every draft call's forward, its
         logits (`LogitsProcessor`, which all-gathers the vocab-parallel logits) and the
         `fast_topk` selection); otherwise it runs `draft_forward` eagerly. The host syncs once
         before (`torch.sum(batch.seq_lens).item()` in `_draft_preprocess_decode`), not inside
         the chain. Plan: every component captured (batches above SGLang's
         `cuda_graph_max_bs` run eagerly: use --mode eager for them).
trtllm - `tensorrt_llm/_torch/speculative/mtp.py`, `MTPWorker.draft_sampler`: at TP > 1 without
         attention DP it runs `get_local_max_and_combined` (local max, id + tp_rank * shard,
         fp32 (id, value) pairs), `allgather(combined, ...)` and `get_draft_tokens_from_gathered`
         - local argmax pairs by default - inside the model's forward (`MTPWorker.forward`,
         `MTPEagleWorker.forward`), which the PyTorch backend captures in its CUDA graph for
         generation batches. Plan: every component captured. TensorRT-LLM's own default is
         `local_argmax_pairs` (`DEFAULT_STRATEGY`).

`engine = "none"` keeps the user's `mode` for every component (graph: all captured; eager: all
launched by the host, no sync) - for users who know better than these plans.

vllm-v2 - `vllm/v1/worker/gpu/spec_decode/eagle/speculator.py`, `EagleSpeculator.capture` /
         `multi_step_decode`: each draft call's `generate_draft` (forward + `compute_logits` + `_sample_draft`
         + input update) is one FULL CUDA graph (`eagle/cudagraph.py` `EagleCudaGraphManager`, FULL only),
         replayed per step; the host builds attention metadata between replays, no sync. Plan: every
         component captured. Which vLLM runs V2: `costmodel/model/recipes.py`.
tokenspeed - lightseekorg/tokenspeed `python/tokenspeed/runtime/layers/logits_processor.py`
         `LogitsProcessor`: its collective states are built outside capture ("never rendezvous inside
         capture", `acquire_dist_argmax_state`) and the draft's logits path - multimem all-gather,
         CuTe argmax / `distributed_argmax` - is written to replay inside the engine's CUDA graphs.
         Plan: every component captured.

Host costs come from the profile's `kernels.host` object when present ({"torch_op_us": ..,
"c10d_call_us": .., "view_op_us": ..}); otherwise from `DEFAULT_HOST` below; `Scenario.host_op_us` /
`host_collective_us` (CLI --host-op-us / --host-collective-us) override both (host speed is the user's CPU).
c10d_call_us is the host time of one eager c10d collective call as a BACK-TO-BACK LOOP sees it:
23.4 us, the median of `eager_us` over 1 KiB-256 KiB in ../shared/measurements/engine-figures/
torch_all_reduce_eager_vs_graph_4xh100.json (copied to data/reference/engine-figures/; 4x H100, 200
iterations per point: eager 21.2-28.6 us with two outliers (47.2 us at 8 KiB, 81.5 us at 512 KiB), graph
11.8-14.2 us). Why the eager figure and not the eager-minus-graph gap (~10 us): the loop has no host
sync, so it is a two-stage pipeline whose steady state per call is max(host, GPU), not host + GPU -
at 2 and 4 MiB the eager loop is FASTER than the graph replay (27.3 vs 30.6 us, 40.5 vs 43.3 us), which
only a pipelined loop can show; where eager > graph the loop is host-bound and eager_us is the host time
per call. The single timed call at world size 1 (44.5 us, nccl_world1_eager.csv) that this replaces
includes a call's one-off costs the loop amortizes. torch_op_us = 8.0 us per torch op (the H200 run's
eager-minus-graph gaps per op, `local_pack_eager_us` 45-64 us vs 13-14 us graph for about 5 torch ops)
and view_op_us = 3.4 us per view op (the GPU kernel model's fit of the same eager columns). The spread of
host speed is the "host" factor of the uncertainty model (evidence.discrepancy HOST_SIGMA_LOG).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

ENGINES: tuple[str, ...] = ("none", "vllm", "vllm-v2", "sglang", "trtllm", "tokenspeed")

DEFAULT_HOST: dict[str, float] = {"torch_op_us": 8.0, "view_op_us": 3.4, "c10d_call_us": 23.4}
HOST_SOURCE = ("no kernels.host in the profile: defaults (c10d_call_us = median eager all_reduce loop, 1 KiB-256 KiB, "
               "4x H100, engine-figures/torch_all_reduce_eager_vs_graph_4xh100.json; torch_op_us from the H200 "
               "run's eager-minus-graph kernel timings)")


@dataclass(frozen=True)
class EnginePlan:
    """What an engine captures in a CUDA graph and where its host syncs, per strategy component.

    captured: components replayed by a CUDA graph ("*" = all); sync_after: components after which
    the host waits for the GPU; head_start: GPU work queued right before the chain ("lm_head" or "").
    """

    name: str
    captured: frozenset[str]
    sync_after: frozenset[str] = frozenset()
    head_start: str = ""
    source: str = ""
    default_strategy: str = "full_all_gather"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def is_captured(self, component: str) -> bool:
        return "*" in self.captured or component in self.captured


PLANS: dict[str, EnginePlan] = {
    "vllm": EnginePlan("vllm", frozenset(), head_start="lm_head",
                       source="vllm/v1/spec_decode/eagle.py EagleProposer.propose",
                       notes=("draft forward in the CUDA-graph context; compute_logits + argmax / get_top_tokens "
                              "eager after it; no host sync between draft calls",)),
    "sglang": EnginePlan("sglang", frozenset({"*"}),
                         source="python/sglang/srt/speculative/eagle_worker.py EAGLEWorker.draft",
                         notes=("EAGLEDraftCudaGraphRunner replays every draft call (forward, logits "
                                "all-gather, top-k) as one CUDA graph when can_run",)),
    "trtllm": EnginePlan("trtllm", frozenset({"*"}), default_strategy="local_argmax_pairs",
                         source="tensorrt_llm/_torch/speculative/mtp.py MTPWorker.draft_sampler",
                         notes=("local max + (id, value) all-gather inside the model forward, captured in "
                                "the PyTorch backend's CUDA graph",)),
    "vllm-v2": EnginePlan("vllm-v2", frozenset({"*"}),
                          source="vllm/v1/worker/gpu/spec_decode/eagle/speculator.py EagleSpeculator.multi_step_decode",
                          notes=("Model Runner V2: forward + compute_logits + sampling of each draft call replayed "
                                 "as one FULL CUDA graph (EagleCudaGraphManager)",)),
    "tokenspeed": EnginePlan("tokenspeed", frozenset({"*"}), default_strategy="packed_allreduce_max",
                             source="lightseekorg/tokenspeed python/tokenspeed/runtime/layers/logits_processor.py "
                             "LogitsProcessor",
                             notes=("draft logits path (multimem gather / CuTe distributed_argmax) replayed in the "
                                    "engine's CUDA graphs",)),
}


@dataclass(frozen=True)
class HostCosts:
    """Host launch costs. graph_launch_us: one CUDA-graph replay's host call, the profile's
    `kernels.host.graph_launch_us`; None = the ASSUMPTION of one torch op's host time (`launch_us`)."""

    torch_op_us: float
    c10d_call_us: float
    source: str
    view_op_us: float = DEFAULT_HOST["view_op_us"]
    graph_launch_us: float | None = None

    @property
    def launch_us(self) -> Any:
        """Host time of one CUDA-graph launch: graph_launch_us, else one torch op (a single host call)."""
        return self.torch_op_us if self.graph_launch_us is None else self.graph_launch_us


def _nonnegative(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value)) and value >= 0


def host_costs(profile: Any) -> HostCosts:
    """Per-op host launch costs: the profile's `kernels.host` where present, else `DEFAULT_HOST` (the scenario's
    overrides are applied by `with_overrides`)."""
    raw = getattr(profile, "raw", {}) or {}
    host = (raw.get("kernels") or {}).get("host") or {}
    values = {key: float(host[key]) if _nonnegative(host.get(key)) else default
              for key, default in DEFAULT_HOST.items()}
    launch = host.get("graph_launch_us")
    source = str(host.get("source") or ("profile kernels.host" if host else HOST_SOURCE))
    return HostCosts(values["torch_op_us"], values["c10d_call_us"], source, values["view_op_us"],
                     float(launch) if _nonnegative(launch) else None)


def with_overrides(hc: HostCosts, op_us: Any = None, collective_us: Any = None) -> HostCosts:
    """`hc` with the user's per-op and per-collective host times (None / NaN: keep the profile's)."""
    def pick(user: Any, base: float) -> Any:
        if user is None:
            return base
        u = np.asarray(user, dtype=float)
        return np.where(np.isnan(u), base, u) if u.ndim else (base if np.isnan(u) else float(u))
    if op_us is None and collective_us is None:
        return hc
    return HostCosts(pick(op_us, hc.torch_op_us), pick(collective_us, hc.c10d_call_us),
                     hc.source + "; overridden by --host-op-us / --host-collective-us", hc.view_op_us,
                     hc.graph_launch_us)


def captured_mask(component: str, engine: Any, mode: Any) -> np.ndarray:
    """True where `component` is replayed by a CUDA graph: the engine's plan, or `mode` for engine "none".

    engine / mode: string arrays, or precomputed {engine name: bool array} and a "mode is graph" bool array.
    """
    is_engine = engine if isinstance(engine, dict) else {e: np.asarray(engine) == e for e in ENGINES}
    graph = mode if np.asarray(mode).dtype == bool else np.asarray(mode) == "graph"
    out = is_engine["none"] & graph
    for name, plan in PLANS.items():
        if plan.is_captured(component):
            out = out | is_engine[name]
    return out


def sync_mask(component: str, engine: np.ndarray) -> np.ndarray:
    """True where the host syncs with the GPU after `component`."""
    out = np.zeros(np.shape(engine), dtype=bool)
    for name, plan in PLANS.items():
        if component in plan.sync_after:
            out = out | (engine == name)
    return out


@dataclass(frozen=True)
class Stage:
    """One component as the step model sees it: host time, GPU time, ops it launches, sync after; `active`: where
    it runs at all (elsewhere both clocks stay as they are: how `stack_paths` lines up paths of different lengths)."""

    host_us: Any
    gpu_us: Any
    ops: Any = 1
    sync_after: Any = False
    active: Any = True


class _Prepared(NamedTuple):
    """A stage's arrays as step_time_us uses them (n = max(ops, 1)), and what it may skip exactly."""

    h: np.ndarray
    g: np.ndarray
    n: np.ndarray
    one: bool  # n == 1 everywhere
    no_host: bool  # h == 0 everywhere
    sync: np.ndarray | None  # None: no sync anywhere
    inactive: np.ndarray | None  # None: the stage runs everywhere
    idle_where_inactive: bool  # h = 0, g = 0, n = 1 and no sync wherever it is inactive


def _prepare(s: Stage) -> _Prepared:
    h, g = np.asarray(s.host_us, dtype=float), np.asarray(s.gpu_us, dtype=float)
    if isinstance(s.ops, (int, float)):  # a plain number: max(ops, 1) as np.maximum gives it (NaN stays NaN)
        n = np.asarray(max(float(s.ops), 1.0))
        one = bool(n == 1.0)
    else:
        n = np.maximum(np.asarray(s.ops, dtype=float), 1.0)
        one = bool(np.all(n == 1.0))
    sync = None if s.sync_after is False else np.asarray(s.sync_after)
    sync = sync if sync is not None and sync.any() else None
    inactive = None if s.active is True else ~np.asarray(s.active, dtype=bool)
    inactive = inactive if inactive is not None and inactive.any() else None
    idle = inactive is not None and not (((h != 0.0) | (g != 0.0) | (n != 1.0)) & inactive).any() and (
        sync is None or not (sync & inactive).any())
    return _Prepared(h, g, n, one, not h.any(), sync, inactive, idle)


def step_time_us(stages: Sequence[Stage], head_start_us: Any = 0.0) -> np.ndarray:
    """E - S of the two-stage pipeline in the module doc, vectorized over scenarios.

    Stage by stage with host clock H and GPU clock F (start: H = 0, F = S), a stage of n equal ops
    (host a = h/n, GPU b = g/n each) ends its GPU work at F' = max(F + g, H + a + g, H + h + b) (the
    endpoints of max_k H + k a + (n - k + 1) b), computed as F' = max(max(F, H + a) + g, H' + b) with
    H' = H + h; the host clock becomes H', and max(H', F') after a sync. Where a stage is not `active`
    both clocks keep their values.

    Two exact shortcuts (the same float for every input, only fewer operations): h = 0 everywhere gives
    H + a = H + 0 = H and H' = H (the clocks start at +0.0 and only add non-negative times, so no -0.0 meets
    +0.0); n = 1 everywhere (a = h, b = g) gives F' = max(max(F, H') + g, H' + g) = max(F, H') + g, since
    max(F, H') >= H' and rounding x + g is monotone in x, a tie is the same float, and a NaN clock or time
    makes the first term NaN, which np.maximum returns. The clocks are buffers of the broadcast shape of
    every stage, updated in place; a stage object listed several times is prepared once.

    An inactive entry needs no restoring where the stage is idle there (h = 0, g = 0, n = 1, no sync) and
    every GPU time of the chain and the head start are >= 0 (+0.0, not -0.0): then F >= H throughout (F starts
    at S >= 0 = H, and F' >= H' + b >= H' for b = g / n >= 0; a sync sets H' = F'), neither clock is -0.0, and the
    idle stage gives H' = H + 0 = H and F' = max(F, H) + 0 = F, the same floats (a NaN clock stays NaN).
    """
    head = np.asarray(head_start_us, dtype=float)
    memo: dict[int, _Prepared] = {}
    prepared = [memo.get(id(s)) or memo.setdefault(id(s), _prepare(s)) for s in stages]
    # the result's shape: every stage's times, ops and activity, and each sync but the last stage's (a sync widens
    # the host clock, which reaches the GPU clock only through a later stage); the clocks may be wider
    shapes = [x.shape for p in memo.values() for x in (p.h, p.g, p.n, p.inactive) if x is not None]
    shapes += [p.sync.shape for p in prepared[:-1] if p.sync is not None]
    out_shape = np.broadcast_shapes(head.shape, *shapes)
    last_sync = prepared[-1].sync if prepared else None
    shape = out_shape if last_sync is None else np.broadcast_shapes(out_shape, last_sync.shape)
    host, gpu = np.zeros(shape), np.empty(shape)
    gpu[...] = head
    a, b = np.empty(shape), np.empty(shape)  # H + a and H' + b of the stage at hand
    monotone = any(p.idle_where_inactive for p in memo.values()) and bool(np.all(head >= 0.0)) and not np.signbit(
        head).any() and all(bool(np.all(p.g >= 0.0)) for p in memo.values())  # only asked where it would skip
    for p in prepared:
        masked = p.inactive is not None and not (monotone and p.idle_where_inactive)
        if masked:
            kept = host.copy(), gpu.copy()
        if p.no_host:
            first = host  # both launch clocks stay where they are
        else:
            if not p.one:
                first = np.add(host, np.divide(p.h, p.n, out=a), out=a)  # the stage's first launch: H + h / n
            np.add(host, p.h, out=host)  # its last launch is done: H' = H + h
            if p.one:
                first = host  # one op: its first launch is its last
        np.add(np.maximum(gpu, first, out=gpu), p.g, out=gpu)  # max(F, H + a) + g
        if not p.one:
            np.maximum(gpu, np.add(host, np.divide(p.g, p.n, out=b), out=b), out=gpu)  # ... and H' + b
        if p.sync is not None:
            np.copyto(host, np.maximum(host, gpu), where=p.sync)
        if masked:
            np.copyto(host, kept[0], where=p.inactive)
            np.copyto(gpu, kept[1], where=p.inactive)
    if shape != out_shape:
        gpu = unbroadcast(gpu, out_shape)
    if prepared and head.ndim == 0 and head == 0.0 and not np.signbit(head):
        return gpu if gpu.ndim else gpu[()]  # x - (+0.0) = x, every x; a 0-d result as the float ufuncs give
    return gpu - head


def unbroadcast(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The values of `x`, an array broadcast from `shape` (equal along every axis `shape` lacks or has as 1),
    at `shape`: its first entry along those axes."""
    lead = x.ndim - len(shape)
    return x[(0,) * lead + tuple(slice(None) if d == w else slice(0, 1) for d, w in zip(shape, x.shape[lead:]))]


def stack_paths(paths: Sequence[Sequence[Stage]], shape: tuple[int, ...]) -> list[Stage]:
    """The stages of several paths as one list over a leading path axis: stage j holds, in row i, paths[i][j]
    broadcast to `shape` (arrays of shape (len(paths), *shape)), and is inactive in the rows of paths with no
    stage j. So `step_time_us` of a chain with these stages (other stages broadcast over the path axis) gives, in
    row i, the same floats as the chain with paths[i]'s stages alone (a row's clocks see only its own stages). Paths
    with no stage at all: one stage inactive everywhere, so the chain still has the path axis."""
    m, k = max([1, *(len(path) for path in paths)]), len(paths)
    stages = [s for path in paths for s in path]
    h, g, n = np.zeros((m, k, *shape)), np.zeros((m, k, *shape)), np.ones((m, k, *shape))
    # a sync / activity array per stage only where a path has one (else False / one flag per path)
    syncs = any(s.sync_after is not False and np.any(s.sync_after) for s in stages)
    sync = np.zeros((m, k, *shape), dtype=bool) if syncs else None
    flags = all(s.active is True or np.ndim(s.active) == 0 for s in stages)
    runs = np.zeros((m, k) + ((1,) * len(shape) if flags else shape), dtype=bool)
    for i, path in enumerate(paths):
        for j, s in enumerate(path):
            h[j, i], g[j, i], n[j, i], runs[j, i] = s.host_us, s.gpu_us, s.ops, s.active
            if sync is not None:
                sync[j, i] = s.sync_after
    return [Stage(h[j], g[j], n[j], False if sync is None else sync[j], runs[j]) for j in range(m)]
