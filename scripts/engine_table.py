"""The README's per-engine table (issue 17 item 6): Llama 4 Maverick, TP 8, K 5, per engine recipe and GPU profile,
the engine's local path against its baseline at B = 1 / 16 / 64 / 256 and the crossover batch, each with its 90%
interval, exactly as `argmax-tp predict --json` prices them: savings of the WHOLE draft step (the decode step's K
draft calls as the engine composes them, us per decode step; `costmodel.answers.whole_step`), the quantity predict's
headline uses wherever an engine runs the step.

    python scripts/engine_table.py            # prints the Markdown table (a few minutes: one predict per cell)

The local path per engine is the one the engine ships: `local_argmax_pairs` (vLLM's use_local_argmax_reduction,
TensorRT-LLM's MTP draft sampler, SGLang's packed local argmax) and, for tokenspeed, `packed_allreduce_max` (its fused
`distributed_argmax` kernel). vllm-v2 reads the same flag in current vLLM (vllm-project/vllm#46448).
"""

from __future__ import annotations

import json
import subprocess
import sys

ENGINES = ("vllm", "vllm-v2", "sglang", "trtllm", "tokenspeed")
PROFILES = ("h100-sxm-nvlink", "h200-sxm-nvlink", "b200-hgx-nvlink")
BATCHES = (1, 16, 64, 256)
LOCAL = {"tokenspeed": "packed_allreduce_max"}


def predict(profile: str, engine: str, batch: int) -> dict:
    """One `predict --json` run (the CLI, so the table is what a user gets)."""
    argv = [sys.executable, "-m", "costmodel", "predict", "--preset", "llama4-maverick", "--tp", "8",
            "--num-spec-tokens", "5", "--batch", str(batch), "--engine", engine, "--profile", profile,
            "--json", "--no-placements"]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def cell(strategy: dict) -> str:
    """'+s [lo..hi]' us per decode step."""
    iv = strategy.get("interval", {}).get("saving_per_decode_step_us")
    s = strategy["saving_per_decode_step_us"]
    return f"{s:+.0f}" + (f" [{iv['low']:+.0f}..{iv['high']:+.0f}]" if iv else "")


def crossover(strategy: dict) -> str:
    iv = strategy.get("interval", {}).get("crossover_batch") or {}
    text = strategy.get("crossover", {}).get("text") or "-"
    if iv.get("low") is not None and iv.get("high") is not None:
        text += f" [{iv['low']:.1f}..{iv['high']:.1f}]"
    return text


def main() -> None:
    head = "| engine | local path | profile | " + " | ".join(f"B = {b}" for b in BATCHES) + " | crossover B |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for engine in ENGINES:
        local = LOCAL.get(engine, "local_argmax_pairs")
        for profile in PROFILES:
            runs = [predict(profile, engine, b)["strategies"][local] for b in BATCHES]
            print(f"| {engine} | {local} | {profile} | " + " | ".join(cell(r) for r in runs)
                  + f" | {crossover(runs[0])} |")


if __name__ == "__main__":
    main()
