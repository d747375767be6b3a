"""The config to paste: vLLM's `speculative_config`, and what SGLang / TensorRT-LLM users set instead.

`vllm_speculative_config` builds the JSON for `--speculative-config` with `use_local_argmax_reduction` on or off;
`config_notes` states what the tool assumed (top-k, collective implementation, verification) that the config does
not set; `_configs` gives every engine's entry for a decision; `engine_cannot` says, next to a number, where the
engine cannot run what was priced (a strategy it does not ship or switch on, a collective its recipe does not use).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..model.components import BASELINE
from ..model.engines import PLANS
from ..model.recipes import RECIPES

ENGINE_NOTES = {
    "vllm": "vllm/config/speculative.py SpeculativeConfig.use_local_argmax_reduction (default False); "
            "greedy, non-tree drafting only",
    "sglang": "no switch for draft tokens: SGLANG_ENABLE_TP_SHARDED_GREEDY (sglang/srt/layers/tp_sharded_greedy.py, "
              "can_use_tp_sharded_greedy) is refused for batches with speculative info",
    "trtllm": "no switch: the MTP Eagle draft_sampler (tensorrt_llm/_torch/speculative/mtp.py) always all-gathers "
              "(id, value) pairs when TP > 1 without attention DP",
}


@dataclass(frozen=True)
class EngineConfig:
    engine: str
    available: bool
    text: str   # what to paste (empty when nothing can be set)
    note: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def vllm_speculative_config(num_spec_tokens: int, *, enable: bool, method: str = "eagle",
                            parallel: bool = False) -> str:
    """The `--speculative-config` JSON: the draft `model` left for the user to fill in, except for an MTP method
    ("mtp", "deepseek_mtp", ...), whose draft is the target checkpoint's own MTP layers - vLLM takes the target model
    when `model` is unset and, for MTP, the target's model config as the draft's (vllm/config/speculative.py,
    SpeculativeConfig.__post_init__): there is no separate draft to name (issue 43 item 6)."""
    mtp = method == "mtp" or method.endswith("_mtp")
    cfg: dict[str, Any] = {"method": method, **({} if mtp else {"model": "<your draft model>"}),
                           "num_speculative_tokens": num_spec_tokens, "use_local_argmax_reduction": enable}
    if parallel:
        cfg["parallel_drafting"] = True
    return "--speculative-config '" + json.dumps(cfg) + "'"


V2_NOTE = ("engine vllm-v2: Model Runner V2 honours use_local_argmax_reduction in current vLLM "
           "(vllm/v1/worker/gpu/spec_decode/speculator.py DraftModelSpeculator._greedy_sample_draft -> "
           "get_top_tokens; vllm-project/vllm#46448, merged 2026-06-23); V2 releases before it ignore the flag")


def config_notes(top_k: int, collective: str, verify: bool, engine: str = "none") -> list[str]:
    """What the pasted configs cannot set for the chosen (top-k, collective, verification, engine), said plainly."""
    notes = [V2_NOTE] if engine == "vllm-v2" else []
    if top_k > 1:
        notes.append(f"top-k {top_k}: no engine has a switch for the local top-k pair gather - vLLM's "
                     "use_local_argmax_reduction covers greedy (top-k 1) drafting only")
    if collective != "nccl":
        notes.append(f"collective {collective}: none of these settings selects the collective implementation; the "
                     f"numbers assume the strategy's all-gather / all-reduce run as {collective} (derived from "
                     "published figures), which the engine must do for them to hold")
    if verify:
        notes.append("verification: no switch keeps the target's verification logits vocab-sharded during "
                     "speculative decoding (SGLANG_ENABLE_TP_SHARDED_GREEDY is refused for batches with speculative "
                     "info); the verification group's saving is modelled, not something to paste")
    return notes


def _configs(decision: str, k: int, method: str, parallel: bool, top_k: int = 1,
             engine: str = "none") -> tuple[EngineConfig, ...]:
    enable = decision == "enable"
    if top_k > 1:  # the flag selects the greedy pairs path only: nothing to paste for tree drafting
        vllm = EngineConfig("vllm", False, "", ENGINE_NOTES["vllm"] + f"; nothing to set for top-k {top_k}")
    else:  # V1 and current Model Runner V2 both read the flag (V2_NOTE)
        vllm = EngineConfig("vllm", True, vllm_speculative_config(k, enable=enable, method=method, parallel=parallel),
                            ENGINE_NOTES["vllm"] + ("" if decision != "uncertain" else
                                                    "; uncertain: kept at the default (off) - calibrate to decide"))
    sglang = EngineConfig("sglang", False, "", ENGINE_NOTES["sglang"])
    trt = EngineConfig("trtllm", False, "", ENGINE_NOTES["trtllm"] + (
        "; the model says it is slower here, and TensorRT-LLM offers no way back" if decision == "keep off" else ""))
    return (vllm, sglang, trt)


VLLM_ENGINES = ("vllm", "vllm-v2")


def engine_collectives(engine: str) -> tuple[str, ...]:
    """The collective implementations an engine's recipe runs for the logits path (`costmodel.model.recipes`: NCCL,
    and the baseline's own where it has one - tokenspeed's multimem all-gather); every one under engine none."""
    if engine == "none":
        return ("nccl", "oneshot", "multimem", "nccl-symm")
    return tuple(dict.fromkeys(("nccl", RECIPES[engine].baseline_collective)))


def engine_cannot(engine: str, strategy: str, collective: str = "nccl", top_k: int = 1) -> str:
    """"" where `engine` can run `strategy` over `collective` at `top_k`, else why not, in one phrase (shown next to
    the number): vLLM switches between its default (full_all_gather) and local_argmax_pairs
    (use_local_argmax_reduction, greedy top-k 1 only: ENGINE_NOTES); every engine runs its own default
    (`engines.PLANS[engine].default_strategy`); no engine selects a collective its recipe does not use."""
    if engine == "none":
        return ""
    reasons = []
    if engine in VLLM_ENGINES:
        if strategy == "local_argmax_pairs" and top_k > 1:
            reasons.append(f"vLLM's use_local_argmax_reduction covers greedy (top-k 1) drafting only, not "
                           f"top-k {top_k}")
        elif strategy not in (BASELINE, "local_argmax_pairs"):
            reasons.append("vLLM does not ship this strategy (modelled only)")
    elif engine == "trtllm" and strategy == BASELINE:
        reasons.append("TensorRT-LLM always gathers (id, value) pairs at TP > 1 without attention DP: no way back "
                       "to the full gather (modelled only)")
    elif strategy not in (BASELINE, PLANS[engine].default_strategy):
        reasons.append(f"{engine} has no switch for this strategy (modelled only)")
    if collective not in engine_collectives(engine):
        reasons.append(f"{engine} runs its logits collectives as {' / '.join(engine_collectives(engine))}; no "
                       f"setting selects {collective} (modelled only)")
    return "; ".join(reasons)
