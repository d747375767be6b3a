"""The server a `vllm bench serve` run ran against, read from the run itself: `infer_server`.

vLLM's scheduler (vllm/v1/core/sched/scheduler.py `Scheduler.schedule`) runs at most `max_num_seqs` requests at
once; the rest wait in its queue. A run's per-request timeline shows it: request i decodes on the server from its
first token to its last, [start_i + ttft_i, start_i + latency_i) (`start_times`, `ttfts`, `latencies` of
`--save-result --save-detailed`; without `latencies`, ttft + the sum of its inter-token gaps). Counting the
requests inside that window over time gives the decode concurrency c(t); a request is *waiting* at t when it was
sent but has no first token yet, start_i <= t < start_i + ttft_i. Then

    peak      = max_t c(t)
    held      = share of the run's decode window (first first-token to last last-token) with c(t) = peak
    waiting   = share of that window with c(t) = peak and at least WAITING_MIN requests waiting

The cap binds - and `max_num_seqs` = peak - when the peak is held while requests wait for a slot (waiting >=
BINDS_MIN_SHARE); a prefill of a waiting request shows as c(t) = peak with requests waiting only for a step or
two, far below that share. Otherwise the server's cap is not observable: it is at least the peak (the client's
`max_concurrency`, or the arrivals, held the concurrency below it) and any value from the peak up replays alike.
Nothing is fitted: the inference is a count over the run's own timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .run import BenchRun

WAITING_MIN = 1  # requests waiting for a slot that make a peak instant "binding"
BINDS_MIN_SHARE = 0.05  # share of the decode window at the peak with requests waiting: the cap binds (the bundled
# real runs, data/serving-runs/: 8-78% where the cap binds - chunked prefill and bursts bind least -, 0-3% where a
# client cap or the arrivals held the server below it; the margin is narrow, 3% vs 8%)


@dataclass(frozen=True)
class ServerInference:
    """What the run says of the server's max_num_seqs (module doc). max_num_seqs: the cap where it binds, None
    where it never does (then at least `peak`)."""

    peak: int
    held: float
    waiting: float
    max_num_seqs: int | None

    @property
    def binds(self) -> bool:
        return self.max_num_seqs is not None

    def describe(self) -> str:
        """"inferred max_num_seqs 16: peak decode concurrency 16, held 74% of the run, requests waiting 70%"."""
        seen = (f"peak decode concurrency {self.peak}, held {self.held:.0%} of the run, with requests waiting for "
                f"a slot {self.waiting:.0%}")
        if self.binds:
            return f"inferred max_num_seqs {self.max_num_seqs}: {seen}"
        return (f"max_num_seqs not seen (>= {self.peak}): {seen} - the client's cap or the arrivals kept the "
                f"server below its cap")


def _starts_and_ends(run: BenchRun) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(sent, first token, last token) per request, seconds on one clock; None without start_times / ttfts."""
    if run.start_times_s is None or run.ttfts_s is None:
        return None
    sent = run.start_times_s
    first = sent + run.ttfts_s
    if run.latencies_s is not None:
        last = sent + run.latencies_s
    elif run.itl_sum_s is not None:
        last = first + run.itl_sum_s
    else:
        return None
    return sent, first, np.maximum(last, first)


def _step_counts(times: np.ndarray, up: np.ndarray, down: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A count stepping +1 at every `up` and -1 at every `down`, sampled on the sorted `times`: the count on each
    interval [times[j], times[j + 1]) (ends before starts at one instant: a freed slot is reused, not doubled)."""
    counts = np.searchsorted(np.sort(up), times, side="right") - np.searchsorted(np.sort(down), times, side="right")
    return counts[:-1], np.diff(times)


def decode_concurrency(run: BenchRun) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(decoding, waiting, duration_s) per interval of the run's decode window (module doc); None for a run
    without a per-request timeline."""
    spans = _starts_and_ends(run)
    if spans is None or run.n == 0:
        return None
    sent, first, last = spans
    lo, hi = float(first.min()), float(last.max())
    times = np.unique(np.concatenate([sent, first, last]))
    times = times[(times >= lo) & (times <= hi)]
    if times.size < 2 or hi <= lo:
        return None
    decoding, dt = _step_counts(times, first, last)
    waiting, _ = _step_counts(times, sent, first)
    return decoding, waiting, dt


def infer_server(run: BenchRun) -> ServerInference | None:
    """The server's max_num_seqs as the run shows it (module doc); None for a run without a per-request timeline."""
    return server_from(decode_concurrency(run))


def server_from(seen: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> ServerInference | None:
    """`infer_server` from `decode_concurrency`'s counts (for a caller that has them already)."""
    if seen is None:
        return None
    decoding, waiting, dt = seen
    peak = int(decoding.max())
    window = float(dt.sum())
    at_peak = decoding == peak
    held = float(dt[at_peak].sum() / window)
    queued = float(dt[at_peak & (waiting >= WAITING_MIN)].sum() / window)
    return ServerInference(peak, held, queued, peak if queued >= BINDS_MIN_SHARE else None)
