"""The engine steps a serving run shows: `engine_steps`, recovered from its token timestamps.

vLLM's engine is one loop (vllm/v1/engine/core.py `EngineCore.step`: schedule, execute the model, update from its
output); every request scheduled in a step gets its token(s) at the step's end, streamed to the client together.
So on the client's clock the tokens of one step arrive together, and steps apart by a step time. With
`--save-detailed`'s per-request `start_times` (when the client sent it), `ttfts` and `itls`, every streamed chunk's
arrival is

    first token of request i:   start_i + ttft_i
    its j-th chunk after that:  start_i + ttft_i + sum(itls_i[:j])

Sorted on one clock, the chunks fall into clusters one step apart; a new step starts where the next chunk is
later than the last by more than `split_s` = SPLIT_SHARE x the median inter-token gap, or where its
request already has a chunk in the current step (one chunk per request per step). Per step k: its end time (the
latest chunk, s), `n_decode` (chunks of requests past their first token), `first` (first tokens: requests whose
prefill completed in it) and `prefill_tokens` (their prompt tokens). Its `duration_s` is the time since the
previous step's end; a step is `busy` (its duration is an engine step, not idle time) when some request was
decoding across the previous step's end - an engine with nothing to run waits, and that wait is not a step - and
it ended more than `split_s` after the previous one (closer, it is chunks the client read late, 2% of the gaps in
`cap8-mnbt256-in64`).

Nothing is fitted here: this is a count over the run's own timestamps. The client's read delay is a constant
offset on every chunk, so it cancels in every duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .run import BenchRun

SPLIT_SHARE = 0.3  # of the median inter-token gap: chunks of one step arrive within ~0.2 ms (median) of each other
# on the bundled real runs, but up to a few ms while the API server takes new requests (cap8-mc12: 2.9 ms of 16)


@dataclass(frozen=True, eq=False)
class EngineSteps:
    """Per recovered engine step k (module doc): end_s (run clock, s), n_decode, first, prefill_tokens, busy; and
    per request: its first-token and last-token steps (`first_step`, `last_step`)."""

    end_s: np.ndarray
    n_decode: np.ndarray
    first: np.ndarray
    prefill_tokens: np.ndarray
    busy: np.ndarray
    first_step: np.ndarray
    last_step: np.ndarray

    @property
    def duration_s(self) -> np.ndarray:
        """Time since the previous step's end (NaN for the first step)."""
        return np.r_[np.nan, np.diff(self.end_s)]

    @property
    def count(self) -> int:
        return int(self.end_s.size)


def sends_on_run_clock(run: BenchRun) -> np.ndarray:
    """Each request's send time on the steps' clock: start_times less the first (the run needs start_times)."""
    return run.start_times_s - run.start_times_s.min()


def chunk_times(run: BenchRun) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(arrival s, request, is first token) of every streamed chunk, sorted by arrival; None without start_times,
    ttfts or itls."""
    if run.start_times_s is None or run.ttfts_s is None or run.gaps_s is None or run.itl_count is None:
        return None
    count = run.itl_count + 1  # the first token, then one chunk per gap
    req = np.repeat(np.arange(run.n), count)
    first = np.zeros(req.size, dtype=bool)
    heads = np.cumsum(count) - count
    first[heads] = True
    steps = np.zeros(req.size)
    steps[~first] = run.gaps_s
    offsets = np.cumsum(steps) - np.repeat(np.cumsum(steps)[heads], count)  # sum of the request's gaps so far
    t = (sends_on_run_clock(run) + run.ttfts_s)[req] + offsets
    order = np.argsort(t, kind="stable")
    return t[order], req[order], first[order]


def _split(t: np.ndarray, req: np.ndarray, split_s: float) -> np.ndarray:
    """Step id of every chunk: a new step after a gap > split_s, or at a request's second chunk in one step."""
    new = np.r_[True, np.diff(t) > split_s]
    sid = np.cumsum(new) - 1
    key = sid * (int(req.max()) + 1) + req
    if np.unique(key).size == key.size:
        return sid
    out = np.empty_like(sid)  # a request twice in one gap-cluster: walk it (rare: two steps closer than split_s)
    current, seen = -1, set()
    for i, (n, r) in enumerate(zip(new, req)):
        if n or r in seen:
            current, seen = current + 1, set()
        seen.add(int(r))
        out[i] = current
    return out


def engine_steps(run: BenchRun) -> EngineSteps | None:
    """The run's engine steps (module doc); None for a run without a per-request timeline."""
    chunks = chunk_times(run)
    if chunks is None:
        return None
    t, req, first = chunks
    gaps = run.gaps_s[run.gaps_s > 0]
    split = SPLIT_SHARE * float(np.median(gaps)) if gaps.size else 0.0
    sid = _split(t, req, split)
    n = int(sid[-1]) + 1
    end = np.full(n, -np.inf)
    np.maximum.at(end, sid, t)
    n_first = np.bincount(sid, weights=first, minlength=n).astype(np.int64)
    n_decode = np.bincount(sid, minlength=n) - n_first
    prefill = np.bincount(sid, weights=np.where(first, run.input_lens[req], 0.0), minlength=n)
    first_step = np.empty(run.n, dtype=np.int64)
    first_step[req[first]] = sid[first]
    last_step = np.zeros(run.n, dtype=np.int64)
    np.maximum.at(last_step, req, sid)
    # decoding across the end of step k - 1: first token at or before it, last token after it
    up = np.bincount(first_step, minlength=n + 1)
    down = np.bincount(last_step, minlength=n + 1)
    across = np.cumsum(up[:n]) - np.cumsum(down[:n])  # decoding after step k's end
    # a "step" closer to the one before than the split window is the client reading two steps' chunks at once (a
    # request's chunk held back and read with the next one's), not an engine step: left out of every fit
    busy = np.r_[False, (across[:-1] > 0) & (np.diff(end) > split)]
    return EngineSteps(end, n_decode, n_first, prefill, busy, first_step, last_step)
