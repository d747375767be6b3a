"""The front end as a run shows it: `front_end` - each request's lag from the client's send to the engine seeing
it (HTTP, tokenization, the hand-over; vllm/v1/engine/async_llm.py `AsyncLLM.add_request`), and when the engine
saw it, measured on the run's engine steps (`costmodel.serving.steps`), not fitted.

Request i's first prefill step k starts at s_k (the previous step's end, or the step's end less its modelled time
where the engine was idle before it - it started on the request). The request was seen inside (s_{k-1}, s_k],
taken at the middle (at s_k where the engine was idle before step k, or for the run's first step); its lag is that
less its send, >= 0 (`lag_s`). A request that waited for a server slot (the inferred max_num_seqs held when its
step began) shows only an upper bound: it gets the median lag of the others. `seen_s` is when the engine saw each
request, kept in the order the engine admitted them (FCFS): a request that waited was seen no earlier than one
admitted ahead of it.
"""

from __future__ import annotations

import numpy as np

from .replay import StepModel
from .run import BenchRun
from .server import infer_server
from .steps import EngineSteps, sends_on_run_clock


def front_end(steps: EngineSteps, run: BenchRun, step: StepModel, chunks: tuple[np.ndarray, np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray]:
    """(lag_s, seen_s) per request (module doc): the front end's lag from send to the engine, >= 0, and when the
    engine saw it, in the order it admitted them. chunks: `prefill.prefill_per_step`'s (prompt tokens per step,
    each request's first prefill step) under the run's budget."""
    dur = np.nan_to_num(steps.duration_s)
    sent = sends_on_run_clock(run)
    prefill, k = chunks
    modelled = (step.alpha_us + step.beta_us * steps.n_decode + step.gamma_us * prefill) * 1e-6
    start = np.where(steps.busy, steps.end_s - dur, steps.end_s - modelled)
    # seen by the engine inside (start of the step before, start of its first prefill step]; at the start where the
    # engine was idle before that step (it started on the request) or for the run's first step
    waited = (k > 0) & steps.busy[k]
    seen = np.where(waited, 0.5 * (start[np.maximum(k - 1, 0)] + start[k]), start[k])
    free = np.ones(run.n, dtype=bool)
    server = infer_server(run)
    if server is not None and server.binds:  # only requests that found a free slot were admitted when seen
        # slots held through step j: requests from their first prefill step to their last token's step
        held = np.cumsum(np.bincount(k, minlength=steps.count + 1) -
                         np.bincount(steps.last_step + 1, minlength=steps.count + 1))
        free = (k == 0) | (held[np.maximum(k - 1, 0)] < server.max_num_seqs)
    lag = np.maximum(seen - sent, 0.0)
    lag = np.where(free, lag, np.median(lag[free]))
    # a request that waited for a slot was seen at some time before its admission: sent + the median lag, but not
    # before a request the engine admitted ahead of it (FCFS: the replay admits in the order the engine did)
    engine_order = np.lexsort((sent, k))
    seen_s = np.empty(run.n)
    seen_s[engine_order] = np.maximum.accumulate((sent + lag)[engine_order])
    return lag, seen_s
