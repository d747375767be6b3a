"""The whole draft step of one decode step, per placement: K x (drafter forward + lm_head + logits path), pipelined.

A placement says where the draft runs inside the target's TP group of p ranks:

target  the draft shares the target's TP p (q = p): per layer 2 all-reduces, the vocab-parallel lm_head and
        today's logits path at p.
tp1     every rank runs the whole draft redundantly (q = 1): no collective at all, the full lm_head GEMM
        [R, hidden] x [hidden, V] and every layer GEMM on one GPU, the draft's weights replicated on every rank.
dp      each rank drafts ceil(B / p) of the sequences at q = 1, then one all-gather over the p ranks of the draft
        tokens (ceil(B / p) x K int64 ids per rank) so every rank holds the B x K ids verification needs.
q=N     draft TP N dividing p (an engine must support it; see `engine_support`).

One draft call (R rows per rank; R = B or ceil(B / p) at dp, x K with parallel drafting) runs three stages, each
a `engines.Stage(host_us, gpu_us, ops)` (the first call's forward runs over the verified tokens, R x (K + 1) rows:
`EagleProposer.propose` feeds all `target_token_ids` to the first forward and samples B of them; where the chain
is not captured the host also launches `PREP_OPS` small torch ops around each forward):
    forward   GPU: `drafter.forward` (or the user's measured --forward-us); host: one CUDA-graph launch
              (`graph_launch_us`) where the forward is captured, else its torch ops x torch_op_us + its
              all-reduces x c10d_call_us
    lm_head   GPU: the lm_head GEMM [R, hidden] x [hidden, V_pad / q]; host: one torch op when launched eagerly
    logits    the strategy's components at TP q (`strategies.build_components` of the scenario at q; their own
              host times per the engine plan)
The K calls of a decode step are chained into one `engines.step_time_us` pipeline with no host sync between them
where the engine has none - vLLM V1 `vllm/v1/spec_decode/eagle.py`, `EagleProposer.propose`: the loop over
`num_speculative_tokens` calls the captured forward, `compute_logits` and the argmax with no `.item()`, `.cpu()`
or `.tolist()` (read 2026-12-01; see engines.py) - so while the GPU runs step k's forward the host launches step
k's logits path and step k + 1: in steady state a step costs max(host, GPU), and only the first step's host time
is exposed. Where the engine captures the whole chain (SGLang `EAGLEDraftCudaGraphRunner`, TensorRT-LLM's MTP
worker, engine "none" in graph mode) the host cost is one graph launch for the whole decode step. EAGLE-3's fc
(once per decode step) leads the chain; dp's token all-gather (a c10d call when not captured) ends it.

The whole draft step time of a strategy = step_time_us(all stages) + nothing else; savings between strategies are
differences of these totals, so they count how much of each strategy's host launches the forward hides.

`graph_launch_us` is the profile's `kernels.host.graph_launch_us` when present, else an ASSUMPTION of one torch
op's host time (`engines.HostCosts.launch_us`): a cudaGraphLaunch is one host call, like one eager kernel launch.
Host costs are the logits path's: the profile's, with the scenario's --host-op-us / --host-collective-us.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..io.errors import InputError
from ..profiles.gpus import gpu_memory
from ..profiles.types import Profile
from . import collective_impls, drafter
from .components import STRATEGIES
from .drafter import DraftArch, DraftMemory
from .engines import Stage, captured_mask, host_costs, stack_paths, step_time_us, unbroadcast, with_overrides
from .kernels import ID_BYTES
from .scenario import Scenario
from .strategies import build_components, validity

PLACEMENTS = ("target", "tp1", "dp")
# eager torch ops the host launches around each draft call's forward where the chain is not captured, read from
# current vLLM: vllm-project/vllm `vllm/v1/spec_decode/llm_base_proposer.py` (commit 00c4f22, read 2026-12-02;
# `EagleProposer` inherits `SpecDecodeBaseProposer.propose`), default EAGLE path (no M-RoPE, no multimodal, no
# parallel drafting):
#   first call (9): `set_inputs_first_pass` - input_ids shift copy, input_ids[token_indices_to_sample] index put,
#     `_set_positions` copy, hidden_states copy (4); `_get_slot_mapping(size, slot_mapping)` copy_ (1); after the
#     forward last_hidden_states[token_indices_to_sample], positions[...] and hidden_states[...] gathers (3);
#     `common_attn_metadata.seq_lens -= num_rejected_tokens_gpu` (1)
#   each later call (4): `draft_token_ids_list[-1].int()` (1); `_update_positions_dependent_metadata` ->
#     `eagle_step_update_slot_mapping_and_metadata` (vllm/v1/spec_decode/utils.py: ONE fused Triton kernel for
#     positions += 1, the max_model_len clamp, seq_lens, block_table gather and slot mapping; one launch, counted
#     as one torch op - an ASSUMPTION on a Triton launch's host cost); input_ids and hidden_states buffer copies (2)
# The older `vllm/v1/spec_decode/eagle.py` `EagleProposer.propose` (commit f7eef1b) ran those updates as 11
# separate eager ops (15 per later call); current vLLM fused them. Not counted: the attention metadata rebuild
# (`build_per_group_and_layer_attn_metadata`, host Python work), and that V1 captures the drafter only PIECEWISE
# (`SpecDecodeBaseProposer.initialize_cudagraph_keys`: "Only supports PIECEWISE cudagraphs"), whose attention runs
# between graph pieces - the forward's host time is priced as one graph launch (see docs/engines.md)
PREP_OPS = (9, 4)


@dataclass(frozen=True)
class Placement:
    """Where the draft runs: its TP q and whether each rank drafts only its share of the sequences (dp)."""

    name: str
    q: int
    data_parallel: bool = False


def parse_placement(text: str, p: int) -> Placement:
    """'target' | 'tp1' | 'dp' | 'q=N' (N dividing p) at target TP p; one-line InputError otherwise."""
    t = str(text).strip().lower()
    if t == "target":
        return Placement("target", int(p))
    if t == "tp1":
        return Placement("tp1", 1)
    if t == "dp":
        return Placement("dp", 1, True)
    if t.startswith("q="):
        try:
            q = int(t[2:])
        except ValueError:
            q = 0
        if q < 1 or p % q:
            raise InputError(f"--placement {text}: N must be a positive integer dividing the target TP {p}")
        return Placement("target" if q == p else "tp1" if q == 1 else f"q={q}", q)
    raise InputError(f"--placement: expected target, tp1, dp or q=N (N dividing the TP), got {text!r}")


def placements_for(p: int) -> list[Placement]:
    """Every placement at target TP p: target, tp1, dp and q=N for each divisor 1 < N < p."""
    out = [Placement("target", int(p)), Placement("tp1", 1), Placement("dp", 1, True)]
    out += [Placement(f"q={n}", n) for n in range(2, int(p)) if p % n == 0]
    return out if p > 1 else out[:1]


@dataclass(frozen=True)
class DraftStep:
    """One placement's whole draft step (module doc), per strategy; scalars or arrays over the scenario's shape."""

    placement: Placement
    total_us: dict[str, np.ndarray]  # strategy -> the K steps' time (+ dp gather), us per decode step
    forward_gpu_us: np.ndarray  # one drafter forward (per draft call)
    forward_host_us: np.ndarray
    all_reduce_us: np.ndarray  # the forward's all-reduces (included in forward_gpu_us)
    lm_head_us: np.ndarray  # per draft call
    logits_gpu_us: dict[str, np.ndarray]  # strategy -> its logits path's GPU time per call
    gather_us: np.ndarray  # dp's token all-gather (0 elsewhere)
    calls: int
    memory: DraftMemory
    forward_source: str
    valid: dict[str, np.ndarray] = field(default_factory=dict)
    first_forward_gpu_us: np.ndarray | float = 0.0  # the first call's forward, over R x (K + 1) rows

    @property
    def forwards_gpu_us(self) -> np.ndarray:
        """GPU time of the decode step's `calls` forwards: the first over the verified tokens, then calls - 1."""
        return np.asarray(self.first_forward_gpu_us) + (self.calls - 1) * np.asarray(self.forward_gpu_us)

    def best(self) -> np.ndarray:
        """The fastest valid strategy per scenario."""
        names = list(self.total_us)
        stack = np.stack([np.where(self.valid.get(n, True), self.total_us[n], np.inf) for n in names])
        return np.asarray(np.asarray(names, dtype=object)[np.argmin(stack, axis=0)])


def _forward_captured(sc: Scenario) -> np.ndarray:
    """The drafter forward runs from a CUDA graph: every engine plan (vLLM captures it too), or graph mode."""
    return (sc.engine != "none") | (sc.mode == "graph")


def draft_step(scenario: Scenario, profile: Profile, placement: Placement, arch: DraftArch, *, kv_len: int = 2048,
               forward_us: float | None = None, strategies: tuple[str, ...] = STRATEGIES,
               factors: dict[str, float] | None = None) -> DraftStep:
    """Price the placement's whole draft step for every strategy (module doc). K must be one value.

    factors: one interval-ensemble member's multipliers (`evidence.ensemble`), as `strategies.build_components`
    takes them: the logits path's ops and serving term there; here "host" scales every host time of the chain,
    "all_reduce" the drafter forward's all-reduces and "all_gather" dp's token all-gather."""
    sc = scenario
    f = factors or {}
    f_host, f_ar = f.get("host", 1.0), f.get("all_reduce", 1.0)
    ks = np.unique(np.asarray(sc.num_spec_tokens))
    if ks.size != 1:
        raise InputError("the whole draft step takes one --num-spec-tokens value")
    p = int(np.max(sc.tp))
    q = placement.q
    if p % q:
        raise InputError(f"placement {placement.name}: draft TP {q} does not divide the target TP {p}")
    if forward_us is None:
        arch.check_tp(q)
    per_rank = np.ceil(sc.batch / p) if placement.data_parallel else sc.batch
    nodes = sc.nodes if q == p else np.ones_like(sc.nodes)
    scq = sc.with_(tp=q, batch=per_rank, nodes=nodes, hidden=arch.hidden)
    rows = scq.rows
    host = with_overrides(host_costs(profile), sc.host_op_us, sc.host_collective_us)  # as the logits path's
    whole = captured_mask("*", scq.engine, scq.mode)  # the engine captures the whole draft step
    fwd_graph = _forward_captured(scq)
    launch = host.launch_us
    first_rows = np.where(scq.parallel, rows, rows * (scq.num_spec_tokens + 1))  # the verified tokens
    if forward_us is None:
        fwd = drafter.forward(profile, arch, rows, q, kv_len, collective=scq.collective, nodes=nodes)
        fwd_gpu, ar_us, fc_once = fwd.gpu_us + (f_ar - 1.0) * fwd.all_reduce_us, fwd.all_reduce_us * f_ar, \
            fwd.fc_once_us
        first = drafter.forward(profile, arch, first_rows, q, kv_len, collective=scq.collective, nodes=nodes)
        fwd_first_gpu = first.gpu_us + (f_ar - 1.0) * first.all_reduce_us
        eager_host = fwd.eager_ops * host.torch_op_us + fwd.all_reduces * host.c10d_call_us
        source = "derived: costmodel.model.drafter (the lm_head GEMM model per layer GEMM, KV-read attention)"
    else:
        if not np.isfinite(forward_us) or forward_us <= 0:
            raise InputError(f"--forward-us: expected a positive number of microseconds, got {forward_us}")
        fwd_gpu = np.full(np.shape(rows), float(forward_us))
        fwd_first_gpu = fwd_gpu
        ar_us, fc_once = np.zeros(np.shape(rows)), np.zeros(np.shape(rows))
        eager_host = np.full(np.shape(rows), host.torch_op_us * drafter.EAGER_OPS_PER_LAYER * arch.layers)
        source = f"measured by the user: --forward-us {forward_us:g} per draft call"
    prep_first, prep_next = (np.where(whole, 0.0, n * host.torch_op_us) for n in PREP_OPS)
    fwd_host_first = (np.where(fwd_graph, launch, eager_host) + prep_first) * f_host
    fwd_host_next = np.where(whole, 0.0, np.where(fwd_graph, launch, eager_host) + prep_next) * f_host
    lm = drafter.gemm_us(profile, rows, arch.hidden, scq.shard) if profile.lm_head is not None \
        else np.zeros(np.shape(rows))
    lm_host = np.where(whole, 0.0, host.torch_op_us) * f_host
    calls = int(np.max(scq.calls_per_decode_step))
    comps = build_components(scq, profile, strategies, factors)
    gather = np.zeros(np.shape(rows))
    gather_host = np.zeros(np.shape(rows))
    if placement.data_parallel and p > 1:
        ids_bytes = np.ceil(sc.batch / p) * sc.num_spec_tokens * ID_BYTES
        gather, _ = collective_impls.collective_us(profile, sc.collective, "all_gather", ids_bytes, p, sc.nodes)
        gather = gather * f.get("all_gather", 1.0)
        gather_host = np.where(whole, 0.0, host.c10d_call_us) * f_host
    paths = {name: [Stage(c.host_us, c.time_us, c.ops) for k, c in parts.items() if k != "host_exposed"]
             for name, parts in comps.items()}
    lead = [Stage(np.where(whole, 0.0, host.torch_op_us) * f_host, fc_once)] if np.any(fc_once) else []
    tail = [Stage(gather_host, gather, 1)] if placement.data_parallel and p > 1 else []
    totals = _chain_totals(paths, lead, (Stage(fwd_host_first, fwd_first_gpu, 1), Stage(fwd_host_next, fwd_gpu, 1)),
                           Stage(lm_host, lm, 1), tail, calls)
    logits_gpu, valid = {}, {}
    for name, parts in comps.items():
        logits_gpu[name] = sum((np.asarray(c.time_us, dtype=float) for k, c in parts.items() if k != "host_exposed"),
                               np.zeros(()))
        valid[name] = validity(name, scq)
    mem = drafter.memory(arch, q, target_tp=p, target_vocab=int(np.max(sc.vocab)), kv_len=kv_len,
                         sequences_per_rank=int(np.max(per_rank)))
    return DraftStep(placement, totals, np.asarray(fwd_gpu), np.asarray(np.where(fwd_graph, launch, eager_host)),
                     np.asarray(ar_us), np.asarray(lm), logits_gpu, np.asarray(gather), calls, mem, source, valid,
                     np.asarray(fwd_first_gpu))


# strategies x scenario entries up to which one stacked pipeline beats one per strategy (timed on 4-7 stage logits
# paths, K = 4: per-stage Python overhead dominates below; above, the stacked clocks outgrow the CPU caches)
STACK_MAX_ENTRIES = 2048


def _shape(stages: list[Stage], *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of the stages' times and ops (and `shapes`)."""
    return np.broadcast_shapes(*shapes, *(x.shape if isinstance(x, np.ndarray) else np.shape(x)
                                          for s in stages for x in (s.host_us, s.gpu_us, s.ops)))


def _chain(path: list[Stage], lead: list[Stage], forwards: tuple[Stage, Stage], lm: Stage, tail: list[Stage],
           calls: int) -> list[Stage]:
    """lead + [first forward, lm, *path] + (calls - 1) x [next forward, lm, *path] + tail (module doc)."""
    return [*lead, forwards[0], lm, *path] + [forwards[1], lm, *path] * (calls - 1) + tail


def _chain_totals(paths: dict[str, list[Stage]], lead: list[Stage], forwards: tuple[Stage, Stage], lm: Stage,
                  tail: list[Stage], calls: int) -> dict[str, np.ndarray]:
    """{strategy: step_time_us(_chain(its logits path, ...))}. Up to STACK_MAX_ENTRIES, every strategy in one
    `step_time_us` over a leading strategy axis (`engines.stack_paths`: row i sees only strategy i's logits stages,
    so its floats are those of its own chain), each total at its own chain's shape (`engines.unbroadcast`); above,
    one `step_time_us` per strategy. The same floats either way (tests/model/test_draft_step_stacked.py)."""
    if not paths:
        return {}
    shared = [*lead, forwards[0], lm, *tail] + ([forwards[1]] if calls > 1 else [])
    common = _shape(shared)
    own = {name: _shape(path, common) for name, path in paths.items()}
    shape = np.broadcast_shapes(*own.values())
    if len(paths) * int(np.prod(shape)) > STACK_MAX_ENTRIES:
        return {name: step_time_us(_chain(path, lead, forwards, lm, tail, calls)) for name, path in paths.items()}
    stacked = step_time_us(_chain(stack_paths(list(paths.values()), shape), lead, forwards, lm, tail, calls))
    return {name: unbroadcast(stacked[i], own[name]) for i, name in enumerate(paths)}


def check_fits(profile: Profile, step: DraftStep, free_bytes: float | None = None) -> str | None:
    """None when the placement's resident draft bytes fit the GPU, else the one-line reason.

    The budget is `free_bytes` (what the user says is left after the target) or the GPU's whole memory from
    data/presets/gpus.csv; a GPU the table does not name is not checked."""
    if free_bytes is None:
        row = gpu_memory(profile.provenance.gpu)
        if row is None or row.memory_bytes is None:
            return None
        free_bytes, where = float(row.memory_bytes), f"{row.gpu} has {row.memory_bytes / 1e9:.0f} GB"
    else:
        where = f"--gpu-free-gb leaves {free_bytes / 1e9:.1f} GB"
    need = step.memory.resident_bytes
    if need <= free_bytes:
        return None
    m = step.memory
    return (f"placement {step.placement.name}: the draft needs {need / 1e9:.1f} GB per GPU (weights "
            f"{m.extra_weight_bytes / 1e9:.2f} GB + KV {m.kv_bytes_per_sequence * m.sequences_per_rank / 1e9:.2f} GB "
            f"for {m.sequences_per_rank} sequences) but {where}")


def engine_support(engine: str, placement: Placement, p: int) -> str:
    """What the engine does with the placement (from its current source; see docs/placement.md):
    "supported: <config>", "ignored: <why>", "unsupported: <why>" or "unchecked: <what was not read>"."""
    name = placement.name
    if name == "target" or p == 1:
        return "supported: the default (the draft runs at the target's TP)"
    if engine == "vllm-v2" and name == "tp1":
        return ("unchecked: vLLM's config accepts draft_tensor_parallel_size=1 (SpeculativeConfig."
                "_verify_and_get_draft_tp), but whether Model Runner V2's EagleSpeculator honours it was not read")
    if engine in ("vllm", "vllm-v2", "none"):  # the draft TP is checked in the runner-independent config
        if name == "tp1":
            return ("ignored: vLLM accepts speculative_config draft_tensor_parallel_size=1 "
                    "(vllm/config/speculative.py SpeculativeConfig._verify_and_get_draft_tp) but the EAGLE/MTP "
                    "proposer still builds the draft at the target's TP (vllm-project/vllm PR #31886, open); "
                    "method draft_model raises (DraftModelProposer._raise_if_draft_tp_mismatch)")
        if name.startswith("q="):
            return ("unsupported: vLLM refuses draft_tensor_parallel_size other than 1 or the target's TP "
                    "(_verify_and_get_draft_tp raises ValueError)")
        return "unsupported: vLLM has no data-parallel draft placement"
    if engine == "sglang":
        if name == "dp":
            return ("unsupported in a release: SGLang RFC #14343 (DPDraft, open) and PR #23407 "
                    "(--speculative-draft-dp, closed WIP) propose it")
        return "unsupported: SGLang's EAGLE draft worker inherits the target's TP group (RFC #14343)"
    if engine == "trtllm":
        return "unsupported: TensorRT-LLM's MTP / EAGLE draft runs inside the target's model forward at its TP"
    return f"unchecked: {engine}'s draft placement options were not read from its source"


def paste_config(engine: str, placement: Placement) -> str:
    """The config that requests a non-default placement, where the engine has a setting for it ("" for the
    default target placement, which needs none, and where the engine has no setting). It may be ignored: see
    `engine_support` (vLLM's EAGLE / MTP proposer ignores draft_tensor_parallel_size=1)."""
    if engine in ("vllm", "none") and placement.name == "tp1":
        return "--speculative-config '{\"draft_tensor_parallel_size\": 1, ...}'"
    return ""


def draft_steps(scenario: Scenario, profile: Profile, arch: DraftArch, *, kv_len: int = 2048,
                forward_us: float | None = None, strategies: tuple[str, ...] = STRATEGIES) -> list[DraftStep]:
    """Every placement at the scenario's TP (`placements_for`) that the draft's shapes allow."""
    p = int(np.max(scenario.tp))
    out = []
    for pl in placements_for(p):
        try:
            out.append(draft_step(scenario, profile, pl, arch, kv_len=kv_len, forward_us=forward_us,
                                  strategies=strategies))
        except InputError:
            if pl.name == "target":
                raise
    return out
