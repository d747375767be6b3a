"""The analytical model: a scenario's draft-token strategies priced as collectives, kernels and host launches.

`scenario` is what the user asks about; `collectives` (NCCL's shape) and `collective_impls` (one-shot, multimem)
price the communication, `peer_sync` the custom collectives' small-message floors per NVLink generation;
`gpu_kernels` (ATen's launch configuration), `kernel_tables` (measured tables), `kernel_ratios` (a measured table's
correction of the model) and `kernels` the torch ops; `engines` what the host launches and a CUDA graph replays;
`recipes` which kernels and collectives each engine runs (with `engine_kernels`, the derived kernel kinds they need,
and `serving`, the fixed cost per collective call of a serving step); `components` prices them as `parts` (Calls,
Components) and `strategies` composes them per strategy (on worker threads for large arrays: `threads`); `predict`
totals and savings, `crossover` the batch where a saving changes sign (refined by `brent`: scipy's brentq without
scipy); `drafter` the draft model's forward (layer GEMMs, attention, all-reduces) and memory; `draft_step` the whole
draft step per placement (target, tp1, dp, q=N) as the engine pipelines it; `members` prices an ensemble of profiles
in one evaluation; `points` prices measurement rows; `verification` the whole decode step; `sources` says where each
component's numbers come from (measured, from base, derived, default). Pure numpy (pandas only where a frame is
built) over `costmodel.profiles`.
"""
