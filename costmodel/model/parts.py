"""The vocabulary a strategy is summed from: a priced `Call`, a `Component`, and the torch ops each step issues.

A `Call` is one priced collective or kernel (its op, parameters and time); a `Component` a strategy's step with
its GPU time, host launch time, torch-op count and whether a CUDA graph captures it. TORCH_OPS / TORCH_VIEWS are
the torch ops and views each op issues (counted from calibration/reference/strategies.py): the host launches
that many in eager execution. `costmodel.model.components` prices them per scenario.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Call:
    """What a component priced: a collective or kernel op and its arguments (for explanations)."""

    kind: str  # "collective" | "kernel" | "elementwise"
    op: str
    args: dict
    when: np.ndarray | bool = True


@dataclass(frozen=True)
class Component:
    """One named step of a strategy.

    time_us: GPU time (the component's kernels as they execute, priced in graph mode);
    host_us: host launch time when the host launches it (0 when a CUDA graph replays it);
    ops: torch ops / c10d calls it launches (the step model's granularity);
    wire_bytes_per_rank: bytes each rank sends (collectives).
    """

    time_us: np.ndarray
    wire_bytes_per_rank: np.ndarray | float = 0.0
    extrapolated: np.ndarray | bool = False
    calls: tuple[Call, ...] = ()
    host_us: np.ndarray | float = 0.0
    ops: np.ndarray | float = 1.0


# Torch ops each component issues as the reference implementations (calibration/reference/strategies.py) and
# vLLM run them - the host launches this many ops in eager execution:
TORCH_OPS: dict[str, int] = {
    "relayout_copy": 1,    # reshape(p, R, s).movedim(0, -2).reshape(R, p*s): views + one copy (a view at R = 1)
    "argmax": 1,           # logits[..., :V] (view) .argmax(-1)
    "chunked_argmax": 6,   # view, max over chunks, argmax over p, gather id, id + win*s (2)
    "local_argmax": 4,     # max(-1), vals.float(), ids.float(), stack  (local_argmax_pack)
    "pad_mask": 1,         # logits[..., -num_pad:] = -inf, only when V_pad > V
    "rank_offset": 1,      # idx + rank * s, only when p > 1
    "pair_reduce": 5,      # relayout of [p*R, 2] (copy), argmax of the value column, gather, squeeze, .long()
    "key_pack": 14,        # max + order_key_hi (float, isnan, full_like, where, ==, zeros_like, where, >>, &, ^,
                           # long) + make_keys (*, -, +)
    "key_unpack": 2,       # key & 0xFFFFFFFF, 2^32 - 1 - x
    "d2t_scatter": 4,      # new_full(-inf), arange, + d2t, index_put
    "d2t_lookup": 4,       # d2t[ids], +, (value == -inf), masked_fill
    "softcap": 3,          # x / cap, tanh, * cap
    "logit_scale": 1,      # x * scale
    "fused": 1,            # one Triton launch
    "topk": 1,             # torch.topk(logits[..., :V], k) (top-k > 1 only)
    "chunked_topk": 6,     # view, topk per chunk, id + r*s, reshape, topk of the p*k candidates, gather
    "local_topk": 5,       # topk(-1), id + r*s, vals.float(), ids.float(), stack  ([R, k, 2] fp32 pairs)
    "topk_merge": 4,       # relayout of [p*R, k, 2] (copy), topk of the p*k values, gather ids, .long()
    "d2t_lookup_topk": 12,  # clamp, d2t[ids], +, != -inf, where, arange, ==/any, sort, index, sum, -/clamp, where
}
# view ops (no kernel; host time only, engines.HostCosts.view_op_us) each component also issues
TORCH_VIEWS: dict[str, int] = {"relayout_copy": 2, "argmax": 1, "chunked_argmax": 1, "pair_reduce": 3}
