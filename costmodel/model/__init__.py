"""The analytical model: a scenario's draft-token strategies priced as collectives, kernels and host launches.

`scenario` is what the user asks about; `collectives` (NCCL's shape) and `collective_impls` (one-shot, multimem)
price the communication; `gpu_kernels` (ATen's launch configuration), `kernel_tables` (measured tables) and
`kernels` the torch ops; `engines` what the host launches and a CUDA graph replays; `recipes` which kernels and
collectives each engine runs (with `engine_kernels`, the derived kernel kinds they need, and `serving`, the fixed
cost per collective call of a serving step); `components` and `strategies`
compose them per strategy; `predict` totals, savings and crossovers; `members` prices an ensemble of profiles in one
evaluation; `points` prices measurement rows; `verification` the whole decode step; `sources` says where each
component's numbers come from (measured, from base, derived, default). Pure numpy (pandas only where a frame is
built) over `costmodel.profiles`.
"""
