"""The target's step time calibrated from a baseline `vllm bench serve` run: `fit_step`.

The file has no engine timeline, only each request's TTFT, its inter-chunk gaps (ITLs) and the run's duration,
so the timeline is rebuilt first (`timeline`): with the client's concurrency cap C and requests sent in order,
request i is sent when the earliest of the C client slots frees (a heap), start_i = max(a_i, slot free time),
and it ends at start_i + ttft_i + sum(itls_i); a_i = 0 for request_rate inf, else i / request_rate (the
expected Poisson send time: the file does not keep the real ones). Then every inter-chunk gap g (one engine step
with one chunk streamed per step) is regressed, by least squares, on the engine's state during it:

    g_us = alpha + beta * B + gamma * P

B = requests decoding at the gap's midpoint (first token sent, last not yet), P = prompt tokens of the requests
whose first token falls inside the gap (their prefill ran in that step); gaps under 1 us are left out (two chunks
read at once). gamma < 0 is refitted as 0, beta < 0 or alpha < 0 as a constant step (the mean gap). The fit's
error is reported as R^2 and the RMS relative residual of g. alpha + beta * B is the *whole* baseline step
(target forward + the baseline strategy's draft per decode step); a strategy's step adds its difference in that.

TTFT beyond the prefill step (tokenization, HTTP, detokenization: time that does not hold other requests up) is
`overhead_s`, fitted by `costmodel.serving.ab` so the baseline replay's mean TTFT matches the run's.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from ..io.errors import InputError
from .replay import StepModel
from .run import BenchRun


@dataclass(frozen=True)
class StepFit:
    """The fitted step model, its error (r2, rms_rel: RMS of (fit - g) / g) and the gaps behind it."""

    step: StepModel
    r2: float
    rms_rel: float
    gaps: int
    mean_batch: float

    def describe(self) -> str:
        s = self.step
        return (f"step_us = {s.alpha_us:.1f} + {s.beta_us:.2f} x B_decode + {s.gamma_us:.4f} x prefill_tokens "
                f"(least squares on {self.gaps} inter-token gaps, mean decode batch {self.mean_batch:.2f}; "
                f"R^2 {self.r2:.3f}, RMS relative residual {100 * self.rms_rel:.1f}%)")


def timeline(run: BenchRun) -> tuple[np.ndarray, np.ndarray]:
    """(start_s, end_s) per request, rebuilt as the module doc says."""
    if not run.has_timeline:
        raise InputError(f"bench {run.name}: needs ttfts, itls and duration to calibrate the step time")
    latency = run.ttfts_s + run.itl_sum_s
    n = run.n
    sends = np.zeros(n) if math.isinf(run.request_rate) else np.arange(n) / run.request_rate
    cap = run.max_concurrency or n
    slots = [0.0] * min(cap, n)
    start = np.empty(n)
    for i in range(n):  # O(N log C)
        free = heapq.heappop(slots)
        start[i] = max(sends[i], free)
        heapq.heappush(slots, start[i] + latency[i])
    return start, start + latency


def fit_step(run: BenchRun) -> StepFit:
    """Least-squares step model from the run's gaps (module doc)."""
    start, end = timeline(run)
    first = start + run.ttfts_s
    gaps = run.gaps_s
    if gaps is None or gaps.size < 3:
        raise InputError(f"bench {run.name}: fewer than 3 inter-token gaps, nothing to fit the step time on")
    owner = np.repeat(np.arange(run.n), run.itl_count)
    offsets = np.cumsum(gaps) - np.repeat(np.cumsum(run.itl_sum_s) - run.itl_sum_s, run.itl_count)
    tok = first[owner] + offsets  # each chunk's time
    prev = tok - gaps
    mid = (tok + prev) / 2
    dstart, dend = np.sort(first), np.sort(end)
    batch = (np.searchsorted(dstart, mid, "right") - np.searchsorted(dend, mid, "right")).astype(float)
    order = np.argsort(first)
    cum = np.r_[0.0, np.cumsum(run.input_lens[order])]
    fs = first[order]
    prefill = cum[np.searchsorted(fs, tok, "right")] - cum[np.searchsorted(fs, prev, "right")]
    y = gaps * 1e6
    ok = y >= 1.0  # a gap under 1 us is two chunks read at once, not an engine step
    y, batch, prefill = y[ok], batch[ok], prefill[ok]
    if y.size < 3:
        raise InputError(f"bench {run.name}: fewer than 3 inter-token gaps of 1 us or more, nothing to fit the step on")
    cols = [np.ones_like(y), batch, prefill]
    coef = _lstsq(cols, y)
    if coef[2] < 0 or not prefill.any():
        coef = np.r_[_lstsq(cols[:2], y), 0.0]
    if coef[1] < 0 or coef[0] < 0:  # a step never gets faster with more requests, nor takes negative time
        coef = np.array([y.mean(), 0.0, 0.0])
    fit = coef[0] + coef[1] * batch + coef[2] * prefill
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - fit) ** 2).sum()) / ss if ss > 0 else 1.0
    rms = float(np.sqrt(np.mean(((fit - y) / y) ** 2)))
    return StepFit(StepModel(float(coef[0]), float(coef[1]), float(coef[2])), r2, rms, int(y.size),
                   float(batch.mean()))


def _lstsq(cols: list[np.ndarray], y: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(np.stack(cols, axis=1), y, rcond=None)[0]
