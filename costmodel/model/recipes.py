"""Per-engine recipes: what each engine runs for the baseline and for the local path, read from its source.

`engines.PLANS` says what an engine captures in a CUDA graph and where its host syncs; a `Recipe` says WHICH
kernels and collectives it runs for the two strategies engines ship (the full-vocab baseline
`full_all_gather` and a local path). Sources read 2026-12-02 (file, function):

vllm (V1 GPUModelRunner; the default runner for most models, see vllm-v2)
    baseline: `vllm/model_executor/layers/logits_processor.py` `LogitsProcessor._gather_logits` ->
    `tensor_model_parallel_all_gather` (NCCL all_gather_into_tensor, then the GroupCoordinator.all_gather
    movedim/reshape: the relayout copy), then `logits.argmax(dim=-1)` in `vllm/v1/spec_decode/eagle.py`
    `EagleProposer.propose` (ATen argmax). Local: `get_top_tokens` with
    `SpeculativeConfig.use_local_argmax_reduction` (vllm/config/speculative.py): torch ops.
vllm-v2 (Model Runner V2, `vllm/v1/worker/gpu/`)
    `vllm/v1/worker/gpu/spec_decode/eagle/speculator.py` `EagleSpeculator.capture` records `generate_draft`
    (model forward + `compute_logits` + `_sample_draft` (`logits.argmax(dim=-1)` when greedy) +
    `update_eagle_draft_inputs`) as one FULL CUDA graph per batch size (`eagle/cudagraph.py`
    `EagleCudaGraphManager`, FULL mode only) and `multi_step_decode` replays it per draft call
    (`run_fullgraph`). Same collective, relayout and ATen argmax as V1. Local path: current vLLM's
    `vllm/v1/worker/gpu/spec_decode/speculator.py` `DraftModelSpeculator._greedy_sample_draft` calls the model's
    `get_top_tokens` when `use_local_argmax_reduction` is on (vllm-project/vllm#46448, merged 2026-06-23; the
    older `_sample_draft` above always argmaxed the gathered logits): priced as those torch ops, captured.
    Which runner runs: `vllm/config/vllm.py` `VllmConfig.use_v2_model_runner` - `VLLM_USE_V2_MODEL_RUNNER`
    if set; unset, V1 up to the releases where V2 was opt-in (env default "0", V2 "[Experimental]" in
    vllm/v1/worker/gpu/README.md), then V2 for the architectures in `DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`
    (Llama / Mistral / Qwen3 dense, unquantized, from about v0.23) - a list later widened; check your
    release's `use_v2_model_runner` (uncertain: version boundaries read from third-party notes of the source).
sglang
    `python/sglang/srt/speculative/eagle_worker_v2.py` `EagleDraftWorker.draft_forward` (and `eagle_worker.py`
    `EAGLEWorker.draft_forward`), per draft call: at top-k 1 on CUDA `draft_topk1_postprocess`
    (`python/sglang/kernels/ops/speculative/topk1.py`, sgl-project/sglang PR #30947: a split-vocab Triton argmax,
    `_draft_topk1_partial_argmax_kernel` over (B, cdiv(V, BLOCK)) CTAs + a one-warp finalize kernel; no softmax);
    at top-k 1 on other non-ROCm devices `torch.argmax`; above top-k 1, or on ROCm (`not _is_hip` gates the top-k
    1 branch), `renorm_draft_probs` (a softmax over [B, V]) then `fast_topk` (`torch.max` / `torch.topk`). The
    logits come from `python/sglang/srt/layers/logits_processor.py` `LogitsProcessor._get_logits`
    (`tensor_model_parallel_all_gather`: NCCL + the relayout). Baseline = NCCL + relayout + that selection.
    Local: the packed local argmax of PR #37106 (off by default) / torch ops, captured.
trtllm
    `tensorrt_llm/_torch/speculative/mtp.py` `MTPWorker.draft_sampler`: `get_local_max_and_combined` and
    `get_draft_tokens_from_gathered` are `@torch.compile`d, so the local path is one fused reduce over the
    shard (max, id + rank * shard, (id, value) pair) + the pair all-gather + one fused pick: priced as a
    bandwidth-bound reduce over [R, s] and one small kernel. Baseline: NCCL + relayout + ATen argmax.
tokenspeed (github lightseekorg/tokenspeed)
    `python/tokenspeed/runtime/layers/logits_processor.py` `LogitsProcessor`: draft models construct with
    `do_argmax=True`; `_argmax` runs `tokenspeed_kernel.ops.sampling.cute_dsl.distributed_argmax` (one CuTe
    kernel: local argmax, packed (value, id) key multimem store, poll, reduce) where `_init_dist_argmax_state`
    allows it: 2 <= TP <= 32, an unpadded vocab split (vocab_per_rank * tp == vocab), `supports_dist_argmax_shape`
    (vocab_per_rank >= 4096, a multiple of 32), rows <= `_LOGITS_DIST_ARGMAX_MAX_TOKENS` (8192). The gather
    path (`require_full_vocab_logits`, speculative sampling): `_get_logits` all-gathers through its Triton
    multimem all-gather (`all_gather_inner`) straight into [T, V] for rows <= `_LOGITS_AG_MAX_TOKENS` (128)
    and V_pad % (8 p) == 0 (NCCL otherwise), then `tokenspeed_kernel.ops.sampling.argmax` (the CuTe
    `ArgmaxKernel`, bandwidth-bound; V >= 4096 and V % 32 == 0, else torch.argmax).
    Hardware gates (`masks(..., multimem_ok, cute_ok)`): the multimem gather and the distributed argmax's packed
    multimem store need NVLS multicast (`collective_impls.available(profile, "multimem", ...)`: an NVSwitch domain
    at that TP on one node), else NCCL + relayout and the torch-op packed path; the CuTe kernels run only on
    NVIDIA sm 9.x / 10.x (`cute_dsl._ts_supported_arch`: Hopper / datacenter Blackwell; ROCm, Ada and sm_120 get
    the torch fallback) - a profile with `provenance.nvlink_generation` 4 or 5.

`none` keeps the project's reference recipe (NCCL + relayout + ATen argmax; torch-op local paths) for every
engine-free scenario, so `--mode` pricing is unchanged. Each recipe applies to `full_all_gather` and the local
strategies; `full_all_gather_no_relayout` and `gather_to_rank0` are priced as the project's reference
implementations in every engine (no engine ships them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .engines import ENGINES


@dataclass(frozen=True)
class Recipe:
    """What an engine runs. baseline_collective: "nccl" | "multimem"; selection: "argmax" (ATen) |
    "argmax_bw" (bandwidth-bound) | "split_argmax" (SGLang's split-vocab argmax at top-k 1 on CUDA; softmax over
    [B, V] then max above top-k 1 and on ROCm) | "softmax_max" (softmax over [B, V], then max); local: "torch" |
    "compiled" (torch.compile'd pair path) | "fused" (one distributed-argmax kernel)."""

    engine: str
    baseline_collective: str = "nccl"
    selection: str = "argmax"
    local: str = "torch"
    source: str = ""
    baseline_text: str = "NCCL all-gather + relayout copy + torch.argmax (ATen)"
    local_text: str = "torch ops"


RECIPES: dict[str, Recipe] = {
    "none": Recipe("none", source="the project's reference implementations (calibration/reference/strategies.py)"),
    "vllm": Recipe("vllm", source="vllm/v1/spec_decode/eagle.py EagleProposer.propose; "
                   "vllm/model_executor/layers/logits_processor.py LogitsProcessor._gather_logits",
                   local_text="torch ops (get_top_tokens, use_local_argmax_reduction), eager"),
    "vllm-v2": Recipe("vllm-v2", source="vllm/v1/worker/gpu/spec_decode/eagle/speculator.py "
                      "EagleSpeculator.generate_draft / capture; eagle/cudagraph.py EagleCudaGraphManager",
                      local_text="get_top_tokens torch ops inside the FULL graph (DraftModelSpeculator."
                      "_greedy_sample_draft with use_local_argmax_reduction, vllm-project/vllm#46448)"),
    "sglang": Recipe("sglang", selection="split_argmax",
                     source="python/sglang/srt/speculative/eagle_worker_v2.py EagleDraftWorker.draft_forward "
                     "(draft_topk1_postprocess, kernels/ops/speculative/topk1.py; softmax + fast_topk above top-k 1 "
                     "and on ROCm); python/sglang/srt/layers/logits_processor.py LogitsProcessor._get_logits",
                     baseline_text="NCCL all-gather + relayout copy + split-vocab Triton argmax (draft_topk1_"
                     "postprocess) at top-k 1 on CUDA; softmax over [B, V] + max (fast_topk) above top-k 1 / ROCm",
                     local_text="torch ops, captured (packed local argmax, PR #37106, off by default)"),
    "trtllm": Recipe("trtllm", local="compiled",
                     source="tensorrt_llm/_torch/speculative/mtp.py MTPWorker.draft_sampler "
                     "(@torch.compile get_local_max_and_combined, get_draft_tokens_from_gathered)",
                     local_text="torch.compile'd: one fused local reduce + pair all-gather + one fused pick "
                     "(local_argmax_pairs at top-k 1; torch ops otherwise)"),
    "tokenspeed": Recipe("tokenspeed", baseline_collective="multimem", selection="argmax_bw", local="fused",
                         source="lightseekorg/tokenspeed python/tokenspeed/runtime/layers/logits_processor.py "
                         "LogitsProcessor._get_logits / _argmax / _init_dist_argmax_state",
                         baseline_text="multimem all-gather into [T, V] (rows <= 128; else NCCL + relayout) + "
                         "CuTe bandwidth-bound argmax",
                         local_text="one CuTe distributed_argmax kernel (local argmax, packed multimem store, poll, "
                         "reduce) for packed_allreduce_max where its shape gates hold; torch ops otherwise"),
}
assert tuple(RECIPES) == ENGINES, "one recipe per engine"

TOKENSPEED_AG_MAX_ROWS = 128  # LogitsProcessor._LOGITS_AG_MAX_TOKENS
TOKENSPEED_DIST_ARGMAX_MAX_ROWS = 8192  # LogitsProcessor._LOGITS_DIST_ARGMAX_MAX_TOKENS
CUTE_MIN_COLS, CUTE_COL_ALIGN = 4096, 32  # cute_dsl._MIN_VOCAB_SIZE, _VOCAB_SIZE_ALIGNMENT


@dataclass(frozen=True)
class RecipeMasks:
    """Per-scenario booleans (broadcast with the scenario) saying where each recipe choice applies."""

    multimem_gather: Any  # the baseline all-gather goes through multimem straight into [T, V]: no relayout
    argmax_bw: Any  # the baseline selection is the bandwidth-bound argmax kernel
    split_argmax: Any  # the baseline selection is SGLang's split-vocab argmax (partial kernel + finalize)
    softmax_max: Any  # the baseline selection is softmax over [R, V] then max
    compiled_pairs: Any  # local_argmax_pairs runs as torch.compile'd fused kernels
    fused_packed: Any  # packed_allreduce_max runs as one fused distributed-argmax kernel
    serving: Any  # the serving term applies (an engine, and Scenario.serving_term on)


def _false(*operands: Any) -> np.ndarray:
    """All-False booleans of the operands' broadcast shape (what `a & b & ...` of them is where one is False)."""
    return np.zeros(np.broadcast_shapes(*(np.shape(x) for x in operands)), dtype=bool)


def masks(sc: Any, multimem_ok: Any = True, cute_ok: Any = True, vendor: str = "NVIDIA", *,
          rows: Any = None) -> RecipeMasks:
    """The recipe choices per scenario (see the module doc for each engine's gates). multimem_ok: where the profile
    runs an NVLS multicast at the scenario's (TP, nodes); cute_ok: whether its GPU runs tokenspeed's CuTe kernels;
    vendor: the profile GPU's vendor (families.gpu_vendor) - SGLang's top-k 1 branch is CUDA-only. rows: the
    scenario's rows per call when the caller has them (`sc.rows`)."""
    eng = np.asarray(sc.engine)
    rows, p, k = np.asarray(sc.rows if rows is None else rows), np.asarray(sc.tp), np.asarray(sc.top_k)
    multi = p > 1
    ts, sg = eng == "tokenspeed", eng == "sglang"
    draft = np.asarray(sc.draft_vocab)
    if not ts.any():  # no tokenspeed scenario: its three gates are False everywhere, in the shapes they would have
        multimem_gather = _false(ts, multi, multimem_ok, rows, draft, p)  # padded_draft_vocab: draft_vocab's shape
        argmax_bw = _false(ts, cute_ok, sc.d2t, sc.vocab, draft, k)  # argmax_vocab = where(d2t, vocab, draft_vocab)
        fused_packed = _false(ts, p, draft, rows, k, sc.d2t, multimem_ok, cute_ok)
    else:
        v_pad, vocab = np.asarray(sc.padded_draft_vocab), np.asarray(sc.argmax_vocab)
        per_rank = draft // p
        dist_ok = ((p >= 2) & (p <= 32) & (v_pad == draft) & (per_rank >= CUTE_MIN_COLS)
                   & (per_rank % CUTE_COL_ALIGN == 0) & (rows <= TOKENSPEED_DIST_ARGMAX_MAX_ROWS) & (k == 1)
                   & ~np.asarray(sc.d2t))
        multimem_gather = ts & multi & multimem_ok & (rows <= TOKENSPEED_AG_MAX_ROWS) & (v_pad % (8 * p) == 0)
        argmax_bw = ts & cute_ok & (vocab >= CUTE_MIN_COLS) & (vocab % CUTE_COL_ALIGN == 0) & (k == 1)
        fused_packed = ts & dist_ok & multimem_ok & cute_ok
    return RecipeMasks(
        multimem_gather=multimem_gather,
        argmax_bw=argmax_bw,
        split_argmax=sg & (k == 1) & (vendor == "NVIDIA"),
        softmax_max=sg & ((k > 1) | (vendor == "AMD")),
        compiled_pairs=(eng == "trtllm") & multi & (k == 1),
        fused_packed=fused_packed,
        serving=(eng != "none") & np.asarray(sc.serving_term),
    )


def describe(engine: str, strategy: str) -> str:
    """Which recipe priced `strategy` under `engine` (one line, for predict's text and JSON)."""
    r = RECIPES[engine]
    if strategy == "full_all_gather":
        what = r.baseline_text
    elif strategy in ("local_argmax_pairs", "packed_allreduce_max"):
        what = r.local_text
    else:
        what = "the project's reference implementation (no engine ships it)"
    return f"{engine} recipe: {what} [{r.source}]"
