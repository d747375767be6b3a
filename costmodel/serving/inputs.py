"""A serving run's requests as the replay takes them: `replay_inputs` (when each is sent, the order the engine
admits them in, their front-end lags and seen times) and `request_acceptance` (each request's acceptance length).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .replay import arrivals
from .run import BenchRun
from .step_fit import StepFit


def send_times(run: BenchRun, seeds: int, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """(seeds, N) arrival times a_i and what they are: the run's own send times (`start_times`) where the client
    did not cap its concurrency - the same for every seed: `vllm bench serve --seed` draws the same arrivals, so an
    A/B against this run is paired -, all 0 at rate inf, else a Poisson process per seed (a client-capped run's
    start_times are the cap's doing, not the arrivals)."""
    if math.isinf(run.request_rate):
        return np.zeros((seeds, run.n)), "all at once (request_rate inf)"
    if run.start_times_s is not None and (run.max_concurrency is None or run.max_concurrency >= run.n):
        own = run.start_times_s - run.start_times_s.min()
        return np.broadcast_to(np.maximum.accumulate(own), (seeds, run.n)).copy(), (
            "the run's own send times (start_times)")
    return arrivals(run.n, run.request_rate, seeds, rng), f"Poisson at {run.request_rate:g}/s, drawn per seed"


def engine_order(run: BenchRun, fit: StepFit | None, send: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray | None, float | np.ndarray, str]:
    """(order, seen_s, lag_s, how): the order the replay admits the requests in (its FCFS), and when the engine
    saw them / their front-end lag in that order:
    * the client did not cap its concurrency and the run shows when the engine saw each request
      (`StepFit.seen_s`): in that order, with those times;
    * the client capped it at C: the first C requests (sent at their arrival, no slot to wait for) in the order
      the engine took them, by a_i + lag_i (a burst's front end reorders them: `cap16-mc24` saw request 1 alone in
      its first step, 15 more in the next), the rest as sent when slots free; each with its own front-end lag
      (`StepFit.lag_s`);
    * without engine steps: as sent, no lag."""
    if fit is None or fit.lag_s is None:
        return np.arange(run.n), None, 0.0, ""
    if fit.seen_s is not None and (run.max_concurrency or run.n) >= run.n:
        order = np.argsort(fit.seen_s, kind="stable")
        return order, fit.seen_s[order], fit.lag_s[order], "; the engine saw each request when the run's steps show it"
    first = min(run.max_concurrency or run.n, run.n)  # the client sends these at their arrival, no slot to wait for
    order = np.r_[np.argsort(send[0, :first] + fit.lag_s[:first], kind="stable"), np.arange(first, run.n)]
    return order, None, fit.lag_s[order], "; each request's front-end lag as the run's steps show it"


def request_acceptance(run: BenchRun, length: float, k: int) -> float | np.ndarray:
    """Each request's acceptance length, where the run shows it: its tokens per streamed chunk c_i = (output_i -
    1) / chunks_i scaled to the run's own length L, L_i = 1 + (c_i - 1) (L - 1) / (c - 1) with c the pooled tokens
    per chunk, clipped to 1..K+1 (requests without a chunk: L) - a prompt's drafts are accepted more or less often
    than another's, the same in every rerun and every strategy (greedy decoding: data/serving-runs/README.md), and
    one rate for all spreads TPOT too little (p99 TPOT -13..-22% on the bundled speculative runs). Else L."""
    if k == 0 or run.itl_count is None or run.itl_count.sum() == 0:
        return length
    chunks = run.itl_count.astype(float)
    pooled = float((run.output_lens - 1).sum() / chunks.sum())
    if pooled <= 1.0 + 1e-9 or length <= 1.0:
        return length
    own = np.where(chunks > 0, (run.output_lens - 1) / np.maximum(chunks, 1.0), pooled)
    return np.clip(1.0 + (own - 1.0) * (length - 1.0) / (pooled - 1.0), 1.0, k + 1.0)


@dataclass(frozen=True, eq=False)  # arrays inside
class ReplayInputs:
    """The run's requests as the replay takes them (`send_times`, then `engine_order`): lengths, sends (seeds, N),
    seen times and lags in the replay's order, that order, and how the arrivals were found."""

    input_lens: np.ndarray
    output_lens: np.ndarray
    send_s: np.ndarray
    seen_s: np.ndarray | None
    lag_s: float | np.ndarray
    order: np.ndarray
    arrivals: str

    def per_request(self, value: float | np.ndarray) -> float | np.ndarray:
        """A per-request array of the run in the replay's order (a single value as it is)."""
        return value[self.order] if np.ndim(value) else value


def replay_inputs(run: BenchRun, fit: StepFit | None, seeds: int, rng: np.random.Generator) -> ReplayInputs:
    """The run's arrivals per seed and its requests in the order the replay admits them."""
    send, how = send_times(run, seeds, rng)
    order, seen, lag, how_seen = engine_order(run, fit, send)
    return ReplayInputs(run.input_lens[order], run.output_lens[order], send[:, order], seen, lag, order,
                        how + how_seen)
