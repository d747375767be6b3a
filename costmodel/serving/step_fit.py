"""The engine's step time calibrated from a baseline `vllm bench serve` run: `fit_step`.

With `--save-detailed`'s per-request `start_times` the run shows its engine steps (`costmodel.serving.steps`:
the chunks of one step arrive together); every busy step k is regressed, by least squares, on what it ran:

    T_k_us = alpha + beta * n_decode_k + gamma * prefill_tokens_k

n_decode = requests decoding in it (one streamed chunk each), prefill_tokens = prompt tokens prefilled in it. A
prompt longer than the step's token budget is prefilled in chunks over the steps before its first token
(`prefill_per_step`: FCFS, each step's budget max_num_batched_tokens less (1 + K) tokens per decoding request),
so the budget enters the regressors; where no `--max-num-batched-tokens` is given it is inferred
(`infer_budget`): the power of two from 64 up to which, so attributed, halves the fit's squared error against
whole prompts in their first-token step - else the run does not show it (every prompt fit in one step).
What is fitted is stated: the run's busy steps (`part="all"`), or only those in the first half of the run's busy
time (`part="first-half"`: the second half is held out, `validate --serving --held-out`). The step model is fitted
on step durations, never on a reported metric: TTFT, ITL, E2EL and throughput come out of the replay.

The front end (the time from the client's send to the engine seeing a request: HTTP, tokenization) is measured,
not fitted: request i's first prefill step k starts at s_k (the previous step's end, or the step's end less its
modelled time where the engine was idle before it - it started on the request); it was seen inside (s_{k-1},
s_k], taken at the middle, s_k less half the step before (at s_k where the engine was idle), so its lag is that
less sent_i (`lag_s`, >= 0). A request that waited for a server slot (the inferred max_num_seqs held when its step
began) shows only an upper bound: it gets the median lag of the others (`front_end_s`). `seen_s` is when the
engine saw each request, kept in the order the engine admitted them (FCFS).

The step jitter is measured too: the fit's relative residuals, centred, on decode-only steps and on steps with
prefill tokens apart (`StepModel.noise_rel`, `noise_prefill_rel`: the replay draws a step's factor from them), and
the machine's speed drift `speed_sd_rel`: the SD of sum(T - fit) / sum(fit) over the run's SPEED_BLOCKS quarters
(a machine that runs a quarter 2% slow runs a whole rerun so too; `ab.detectability`'s run-to-run noise).

Without `start_times` (older files) the timeline is rebuilt (`timeline`): with the client's concurrency cap C and
requests sent in order, request i is sent when the earliest of the C client slots frees (a heap), start_i =
max(a_i, slot free time), and it ends at start_i + ttft_i + sum(itls_i); a_i = 0 for request_rate inf, else
i / request_rate. Then every inter-chunk gap g (one engine step) is regressed on the state during it (B = requests
decoding at its midpoint, P = prompt tokens of requests whose first token falls inside it), gaps under 1 us left
out; front_end_s is 0 there. In both, every coefficient is kept >= 0 (bounded least squares). The fit's error is
R^2 and the RMS relative residual. alpha + beta * B is the *whole* baseline step (target
forward + the baseline strategy's draft per decode step); a strategy's step adds its difference in that.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from ..io.errors import InputError
from .limits import FIT_PARTS as PARTS
from .replay import StepModel
from .run import BenchRun
from .server import infer_server
from .steps import EngineSteps, engine_steps

BUDGETS = tuple(2 ** j for j in range(6, 17))  # 64 .. 65536: max_num_batched_tokens candidates
BUDGET_GAIN = 0.5  # an inferred budget must halve the squared error of whole prompts in their first-token step
SPEED_BLOCKS = 4  # the run's busy steps in quarters: the spread of their mean step level is the machine's drift
NOISE_QUANTILES = 512  # the step jitter kept: quantiles of the fit's relative residuals


@dataclass(frozen=True)
class StepFit:
    """The fitted step model, its error (r2, rms_rel: RMS of (fit - g) / g) and the gaps behind it."""

    step: StepModel
    r2: float
    rms_rel: float
    gaps: int
    mean_batch: float
    front_end_s: float = 0.0
    budget: int | None = None  # max_num_batched_tokens: the given one, the inferred one, or None (not seen)
    budget_source: str = ""
    unit: str = "inter-token gaps"  # what was regressed: "engine steps" (recovered) or inter-token gaps
    part: str = "all"
    lag_s: np.ndarray | None = field(default=None, compare=False)  # per request: the front end's lag (s)
    seen_s: np.ndarray | None = field(default=None, compare=False)  # per request: when the engine saw it (run clock)
    speed_sd_rel: float = 0.0  # the machine's speed drift: SD of the step level over the run's quarters

    def describe(self) -> str:
        s = self.step
        part = "" if self.part == "all" else ", the run's first half only"
        return (f"step_us = {s.alpha_us:.1f} + {s.beta_us:.2f} x B_decode + {s.gamma_us:.4f} x prefill_tokens "
                f"(least squares on {self.gaps} {self.unit}{part}, mean decode batch {self.mean_batch:.2f}; "
                f"R^2 {self.r2:.3f}, RMS relative residual {100 * self.rms_rel:.1f}%)")

    def describe_budget(self) -> str:
        return self.budget_source


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


def _fit_gaps(run: BenchRun) -> StepFit:
    """Least-squares step model from the run's gaps (module doc: without start_times)."""
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
    if ok.sum() < 3:
        raise InputError(f"bench {run.name}: fewer than 3 inter-token gaps of 1 us or more, nothing to fit the step on")
    coef, r2, rms = _regress(y[ok], batch[ok], prefill[ok])
    return StepFit(StepModel(*coef), r2, rms, int(ok.sum()), float(batch[ok].mean()))


def _regress(y: np.ndarray, batch: np.ndarray, prefill: np.ndarray) -> tuple[tuple[float, float, float], float, float]:
    """((alpha, beta, gamma), R^2, RMS relative residual) of y = alpha + beta batch + gamma prefill, least squares
    with every coefficient >= 0 (a step never gets faster with more work, nor takes negative time): `_nnls`."""
    cols = np.stack([np.ones_like(y), batch, prefill], axis=1)
    coef = _nnls(cols, y)
    fit = cols @ coef
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - fit) ** 2).sum()) / ss if ss > 0 else 1.0
    rms = float(np.sqrt(np.mean(((fit - y) / np.maximum(y, 1e-9)) ** 2)))
    return (float(coef[0]), float(coef[1]), float(coef[2])), r2, rms


def _nnls(cols: np.ndarray, y: np.ndarray) -> np.ndarray:
    """min |cols c - y|^2 subject to c >= 0, exactly, for a handful of columns: the optimum is the plain least-squares
    fit on its own support, so the best of the plain fits on every subset of columns whose coefficients are all
    >= 0 is it (2^3 = 8 small solves here; written out rather than scipy.optimize.nnls, whose import costs every
    `simulate` a third of a second)."""
    best, best_sse = np.zeros(cols.shape[1]), float((y ** 2).sum())
    for mask in range(1, 1 << cols.shape[1]):
        idx = [j for j in range(cols.shape[1]) if mask >> j & 1]
        sub = np.linalg.lstsq(cols[:, idx], y, rcond=None)[0]
        if (sub < 0).any():
            continue
        sse = float(((cols[:, idx] @ sub - y) ** 2).sum())
        if sse < best_sse - 1e-12 * max(best_sse, 1.0):
            best, best_sse = np.zeros(cols.shape[1]), sse
            best[idx] = sub
    return best


def prefill_per_step(steps: EngineSteps, input_lens: np.ndarray, budget: int | None, spec_tokens: int = 0,
                     sent_s: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(prompt tokens prefilled in each step, each request's first prefill step) (module doc): whole prompts in
    their first-token step where they fit the step's budget, else chunked backwards from it into the steps with room
    left, FCFS (requests in first-token order). A chunk never goes before the first step that ended after the
    request was sent (`sent_s`, run clock) nor before the run's first step: that step takes what is left.
    O(requests + steps): full steps are skipped by a union-find over the steps (each points to the nearest step at
    or before it with room; path halving)."""
    whole = steps.prefill_tokens.astype(float)
    room = (np.inf if budget is None else np.maximum(budget - steps.n_decode * (1 + spec_tokens), 0)) + 0 * whole
    if (whole <= room).all():
        return whole, steps.first_step.copy()
    rooms = _Rooms(room)
    used, first = np.zeros(steps.count), steps.first_step.copy()
    lowest = (np.zeros(input_lens.size, dtype=np.int64) if sent_s is None else
              np.minimum(np.searchsorted(steps.end_s, sent_s, side="right"), steps.first_step))
    for i in np.argsort(steps.first_step, kind="stable"):  # a Python loop only for runs that chunk
        left, floor = float(input_lens[i]), int(lowest[i])
        k = rooms.at_or_before(int(steps.first_step[i]))
        while left > 0:
            k = max(k, floor)
            take = rooms.take(k, left, everything=k == floor)  # the earliest step it can be in takes what is left
            used[k] += take
            left -= take
            first[i] = k
            if left > 0:
                k = rooms.at_or_before(k - 1)
    return used, first


class _Rooms:
    """Room left per step, and for any step the nearest one at or before it with room: a union-find over the steps
    (a full step points to the one before it; path halving), so a walk back skips full steps in amortized O(1).
    `finds` counts the pointer hops (tests/serving/test_step_fit.py bounds it by the steps and requests)."""

    def __init__(self, room: np.ndarray) -> None:
        self.room = room.astype(float).tolist()
        self.parent = [k if self.room[k] > 0 or k == 0 else k - 1 for k in range(len(self.room))]
        self.finds = 0

    def at_or_before(self, k: int) -> int:
        """The nearest step <= k with room (step 0 if none: the run's first step takes what is left)."""
        parent = self.parent
        while k > 0 and parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
            self.finds += 1
        return max(k, 0)

    def take(self, k: int, want: float, everything: bool = False) -> float:
        """Up to `want` tokens of step k's room (all of `want` at step 0 or where `everything`); a step left full
        points back."""
        got = want if everything or k == 0 else min(want, self.room[k])
        self.room[k] -= got
        if k > 0 and self.room[k] <= 0:
            self.parent[k] = k - 1
        return got


def _sent(run: BenchRun) -> np.ndarray:
    """Each request's send time on the run's clock (the steps' clock: start_times less the first)."""
    return run.start_times_s - run.start_times_s.min()


def _fit_steps(steps: EngineSteps, run: BenchRun, budget: int | None, spec_tokens: int, part: str
               ) -> tuple[tuple[float, float, float], float, float, np.ndarray, float]:
    """(coef, R^2, RMS, the busy steps used, SSE) of the step regression under a budget."""
    prefill = prefill_per_step(steps, run.input_lens, budget, spec_tokens, _sent(run))[0]
    use = steps.busy.copy()
    if part == "first-half":
        t = steps.end_s
        cut = np.median(t[use]) if use.any() else t[-1]
        use &= t <= cut
    if use.sum() < 3:
        raise InputError(f"bench {run.name}: fewer than 3 engine steps to fit the step time on")
    y = steps.duration_s[use] * 1e6
    coef, r2, rms = _regress(y, steps.n_decode[use].astype(float), prefill[use])
    fit = coef[0] + coef[1] * steps.n_decode[use] + coef[2] * prefill[use]
    return coef, r2, rms, use, float(((y - fit) ** 2).sum())


def infer_budget(steps: EngineSteps, run: BenchRun, spec_tokens: int) -> tuple[int | None, str]:
    """max_num_batched_tokens as the run shows it (module doc), and how it was found."""
    base = _fit_steps(steps, run, None, spec_tokens, "all")[4]
    most = float(steps.prefill_tokens.max() + (steps.n_decode * (1 + spec_tokens)).max())
    tried = [(b, _fit_steps(steps, run, b, spec_tokens, "all")[4]) for b in BUDGETS if b < most]
    if tried:
        b, sse = min(tried, key=lambda x: x[1])
        if sse < BUDGET_GAIN * base:
            return b, (f"inferred max_num_batched_tokens {b}: prompts chunked at {b} tokens per step explain the "
                       f"step times {base / max(sse, 1e-9):.1f}x better than whole prompts")
    return None, (f"max_num_batched_tokens not seen (>= {most:.0f}): every prompt fit in one step's budget")


def front_end(steps: EngineSteps, run: BenchRun, step: StepModel, budget: int | None, spec_tokens: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """(lag_s, seen_s) per request (module doc): the front end's lag from send to the engine, >= 0, and when the
    engine saw it, in the order it admitted them."""
    dur = np.nan_to_num(steps.duration_s)
    prefill, k = prefill_per_step(steps, run.input_lens, budget, spec_tokens, _sent(run))  # k: first prefill step
    modelled = (step.alpha_us + step.beta_us * steps.n_decode + step.gamma_us * prefill) * 1e-6
    start = np.where(steps.busy, steps.end_s - dur, steps.end_s - modelled)
    # seen by the engine inside (start of the step before, start of its first prefill step]; at the start where the
    # engine was idle before that step (it started on the request) or for the run's first step
    waited = (k > 0) & steps.busy[k]
    seen = np.where(waited, 0.5 * (start[np.maximum(k - 1, 0)] + start[k]), start[k])
    sent = _sent(run)
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


def _jitter(rel: np.ndarray) -> tuple[float, ...]:
    """Relative residuals as the replay's step jitter: factors 1 + e floored at 0.01 (a step never takes negative or
    zero time) and scaled to mean 1 (the jitter keeps the fitted mean step), at most NOISE_QUANTILES of their
    quantiles (bounded); returned as e = factor - 1."""
    if rel.size == 0:
        return ()
    factor = np.maximum(1.0 + rel, 0.01)
    q = np.quantile(factor / factor.mean(), np.linspace(0, 1, min(rel.size, NOISE_QUANTILES)))
    return tuple(float(x) for x in q / q.mean() - 1.0)


def fit_step(run: BenchRun, *, budget: int | None = None, spec_tokens: int = 0, part: str = "all") -> StepFit:
    """The step model of the run (module doc): on its engine steps where it has start_times, else on its gaps.
    budget: the server's max_num_batched_tokens if known (else inferred); spec_tokens: K of the run."""
    if part not in PARTS:
        raise InputError(f"step fit part must be one of {', '.join(PARTS)}")
    steps = engine_steps(run) if run.has_timeline else None
    if steps is None or steps.busy.sum() < 3:
        return _fit_gaps(run)
    source = f"max_num_batched_tokens {budget} (given)"
    if budget is None:
        budget, source = infer_budget(steps, run, spec_tokens)
    coef, r2, rms, use, _ = _fit_steps(steps, run, budget, spec_tokens, part)
    prefill = prefill_per_step(steps, run.input_lens, budget, spec_tokens, _sent(run))[0][use]
    fit = coef[0] + coef[1] * steps.n_decode[use] + coef[2] * prefill
    y = steps.duration_s[use] * 1e6
    rel = y / np.maximum(fit, 1e-9) - 1.0
    step = StepModel(*coef, noise_rel=_jitter(rel[prefill == 0]), noise_prefill_rel=_jitter(rel[prefill > 0]))
    quarters = np.array_split(np.arange(y.size), SPEED_BLOCKS)  # the machine's speed, quarter by quarter
    speed = np.array([(y[b] - fit[b]).sum() / max(fit[b].sum(), 1e-9) for b in quarters if b.size])
    speed_sd = float(np.std(speed, ddof=1)) if speed.size > 1 else 0.0
    lag, seen = front_end(steps, run, step, budget, spec_tokens)
    return StepFit(step, r2, rms, int(use.sum()), float(steps.n_decode[use].mean()), float(np.median(lag)),
                   budget, source, "engine steps", part, lag, seen, speed_sd)
