"""Bounds of the replay's engine settings, shared by `simulate`'s flags and the dashboard's Serving A/B inputs (no
imports: costmodel.cli.simulate_args reads them at startup)."""

MAX_NUM_SEQS = 4096  # vLLM's max_num_seqs: --max-num-seqs and the dashboard's input
MAX_BATCHED_TOKENS = 10**7  # vLLM's max_num_batched_tokens: --max-num-batched-tokens and the dashboard's input
FIT_PARTS = ("all", "first-half")  # which busy engine steps of a run the step model is fitted on (step_fit)
