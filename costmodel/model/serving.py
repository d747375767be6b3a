"""The serving term: a fixed cost per collective call inside a serving step, apart from nccl-tests' device time.

nccl-tests time a collective with every rank launched together and warmed up; inside a serving step a small
collective also waits for the slowest peer to arrive (the ranks' host launches and preceding kernels differ),
and its kernel lands where the step's launch order puts it. The engine figures
(../shared/measurements/engine-figures/SOURCES.md, section 2) show it: each is an in-engine per-call time for
a small collective; minus the tool's device time for that collective (the profile's NCCL curve, graph mode,
`python -m costmodel` collectives at the stated size), the excess is

    vLLM #55021    B300 TP8, ~40 KB/rank all-gather, Nsight trace mean ~21 us        - 15.8 us =  5.2 us
    SGLang #32551  GB300 2x4 MNNVL, logits all-gather RING_LL ~20 us (gb200-nvl72)   - 15.8 us =  4.2 us
    SGLang #32461  GB300 MNNVL, 1-6 tokens x hidden all-reduce RING_LL 23-33 us (28) - 19.2 us =  8.8 us
    SGLang #37106  2x H20, packed collective "roughly 45-48 us fixed cost" (46.5)     - 11.2 us = 35.3 us

(#37106 ran at TP 2 - its author's comment of 2026-08-30: "validated on 2xH20" - so its collective is the TP-2
pair all-gather; its figure likely includes the packing kernels around that collective: the high end). The term
is their median, SERVING_CALL_US = 7.0 us per collective call, with log-normal spread SERVING_SIGMA_LOG = 0.96
(the sample standard deviation of ln(excess) over the four; 90% interval 1.4-33 us). Derived, in-sample: these
figures set it, and `validate`'s engine-figures set checks against them (so it is not a held-out check).

Applied per call: every collective a strategy issues (its `Call`s of kind "collective", each where it runs)
adds one term, so two paths with different collective counts differ; the fused distributed argmax
(tokenspeed) is one collective call. Only where an engine runs the step (`Scenario.engine != "none"`) and
`Scenario.serving_term` is on (CLI --no-serving-term turns it off for users pricing synchronized
microbenchmarks); GPU-side time (the waiting happens on the device), no host time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SERVING_CALL_US = 7.0
SERVING_SIGMA_LOG = 0.96
SERVING_SOURCE = ("derived: median excess of 4 in-engine small-collective figures over the tool's device time "
                  "(engine-figures/SOURCES.md section 2: vLLM #55021, SGLang #32551, #32461, #37106), in-sample")


def serving_us(collective_calls: Any, enabled: Any, factor: float = 1.0) -> np.ndarray:
    """T_serving = n_calls x SERVING_CALL_US x factor where enabled, else 0 (`factor`: an ensemble draw)."""
    return np.where(enabled, np.asarray(collective_calls, dtype=float) * (SERVING_CALL_US * factor), 0.0)
