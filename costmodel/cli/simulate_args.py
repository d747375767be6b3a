"""`simulate`'s own flags (argparse only: imported by costmodel.cli.main at startup; the scenario flags come from
`_add_scenario_args`)."""

from __future__ import annotations

import argparse

from ..serving.limits import MAX_BATCHED_TOKENS, MAX_NUM_SEQS
from .options import ACCEPTANCE, ITL_MS, TEXT, bounded_float, bounded_int

DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN = 1024, 128  # without --bench: vllm bench serve's random dataset defaults
# the flags that describe a run without --bench: the bench file says all of them, so --bench refuses them
WITHOUT_BENCH = ("num_prompts", "input_len", "output_len", "request_rate", "max_concurrency")


def add_args(p: argparse.ArgumentParser) -> None:
    """simulate's own flags (the scenario flags come from `_add_scenario_args`)."""
    p.add_argument("--bench", default=None, help="a `vllm bench serve --save-result` JSON (the baseline run)")
    p.add_argument("--num-prompts", type=bounded_int(1, 100_000), default=None,
                   help="without --bench: requests in the run")
    p.add_argument("--prompts", default=None,
                   help="without --bench: a ShareGPT-format JSON whose conversations give the requests' lengths "
                        "(characters / 4; the first --num-prompts, default all)")
    p.add_argument("--input-len", type=bounded_int(1, 10**6), default=None,
                   help=f"without --bench: prompt tokens per request (default {DEFAULT_INPUT_LEN})")
    p.add_argument("--output-len", type=bounded_int(1, 10**5), default=None,
                   help=f"without --bench: output tokens per request (default {DEFAULT_OUTPUT_LEN})")
    p.add_argument("--request-rate", type=float, default=None,
                   help="without --bench: requests/s (default inf: all at once)")
    p.add_argument("--max-concurrency", type=bounded_int(1, 100_000), default=None,
                   help="without --bench: the client's cap")
    p.add_argument("--itl-ms", type=ITL_MS, default=None,
                   help="without --bench: the baseline ITL, ms per decode step, at the run's concurrency")
    p.add_argument("--acceptance-length", type=ACCEPTANCE, default=None,
                   help="mean tokens per decode step, 1..K+1; with --bench the file wins where it states one "
                        "(its acceptance_length, else its tokens per streamed chunk) and this flag is then unused")
    p.add_argument("--max-num-seqs", type=bounded_int(1, MAX_NUM_SEQS), default=None,
                   help="vLLM's max_num_seqs (server batch cap; default: inferred from --bench where the run's "
                        "timeline shows its cap binding, else vLLM's API-server default for the profile's GPU, 1024 "
                        "on >= 70 GiB GPUs but A100, else 256)")
    p.add_argument("--max-num-batched-tokens", type=bounded_int(1, MAX_BATCHED_TOKENS), default=None,
                   help="vLLM's token budget per step (default: vLLM's for the profile's GPU, 8192 or 2048)")
    p.add_argument("--seeds", type=bounded_int(2, 200), default=12, help="simulation seeds per strategy (2..200)")
    p.add_argument("--acceptance-drift", type=bounded_float(0.0, 1.0), default=0.007,
                   help="run-to-run relative spread of the acceptance length (detectability)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--csv", type=TEXT, default=None,
                   help="write the long table (strategy, metric, value, low, high) as CSV")
