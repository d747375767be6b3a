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
time (`part="first-half"`: the second half is held out, `validate --serving --serving-fit first-half`). The step
model is fitted on step durations, never on a reported metric: TTFT, ITL, E2EL and throughput come out of the
replay.

The front end's lag per request and when the engine saw each request are measured on the same steps
(`costmodel.serving.front_end`); prompts longer than a step's budget are spread over steps by
`costmodel.serving.prefill`.

The step jitter is measured too: the fit's relative residuals (as factors scaled to mean 1), on decode-only steps
and on steps with prefill tokens apart (`StepModel.noise_rel`, `noise_prefill_rel`: the replay draws a step's
factor from them), and the machine's speed drift `speed_sd_rel`: the SD of sum(T - fit) / sum(fit) over the
run's SPEED_BLOCKS quarters (a machine that runs a quarter 2% slow runs a whole rerun so too;
`ab.detectability`'s run-to-run noise).

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
from .front_end import front_end
from .limits import FIT_PARTS as PARTS
from .prefill import prefill_per_step
from .replay import StepModel
from .run import BenchRun
from .steps import EngineSteps, engine_steps, sends_on_run_clock

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


def _fit_steps(steps: EngineSteps, run: BenchRun, prefill: np.ndarray, part: str
               ) -> tuple[tuple[float, float, float], float, float, np.ndarray, np.ndarray, np.ndarray]:
    """(coef, R^2, RMS, the busy steps used, their times y_us, the fit there) of the step regression, the prompt
    tokens of each step given (`prefill_per_step` under a budget)."""
    use = steps.busy.copy()
    if part == "first-half":
        t = steps.end_s
        cut = np.median(t[use]) if use.any() else t[-1]
        use &= t <= cut
    if use.sum() < 3:
        raise InputError(f"bench {run.name}: fewer than 3 engine steps to fit the step time on")
    y = steps.duration_s[use] * 1e6
    coef, r2, rms = _regress(y, steps.n_decode[use].astype(float), prefill[use])
    return coef, r2, rms, use, y, coef[0] + coef[1] * steps.n_decode[use] + coef[2] * prefill[use]


def infer_budget(steps: EngineSteps, run: BenchRun, spec_tokens: int) -> tuple[int | None, str]:
    """max_num_batched_tokens as the run shows it (module doc), and how it was found."""
    sent = sends_on_run_clock(run)

    def sse(budget: int | None) -> float:
        prefill = prefill_per_step(steps, run.input_lens, budget, spec_tokens, sent)[0]
        _, _, _, _, y, fit = _fit_steps(steps, run, prefill, "all")
        return float(((y - fit) ** 2).sum())

    base = sse(None)
    most = float(steps.prefill_tokens.max() + (steps.n_decode * (1 + spec_tokens)).max())
    tried = [(b, sse(b)) for b in BUDGETS if b < most]
    if tried:
        b, best = min(tried, key=lambda x: x[1])
        if best < BUDGET_GAIN * base:
            return b, (f"inferred max_num_batched_tokens {b}: prompts chunked at {b} tokens per step explain the "
                       f"step times {base / max(best, 1e-9):.1f}x better than whole prompts")
    return None, (f"max_num_batched_tokens not seen (>= {most:.0f}): every prompt fit in one step's budget")


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
    chunks = prefill_per_step(steps, run.input_lens, budget, spec_tokens, sends_on_run_clock(run))
    coef, r2, rms, use, y, fit = _fit_steps(steps, run, chunks[0], part)
    rel = y / np.maximum(fit, 1e-9) - 1.0
    with_prefill = chunks[0][use] > 0
    step = StepModel(*coef, noise_rel=_jitter(rel[~with_prefill]), noise_prefill_rel=_jitter(rel[with_prefill]))
    quarters = np.array_split(np.arange(y.size), SPEED_BLOCKS)  # the machine's speed, quarter by quarter
    speed = np.array([(y[b] - fit[b]).sum() / max(fit[b].sum(), 1e-9) for b in quarters if b.size])
    speed_sd = float(np.std(speed, ddof=1)) if speed.size > 1 else 0.0
    lag, seen = front_end(steps, run, step, chunks)
    return StepFit(step, r2, rms, int(use.sum()), float(steps.n_decode[use].mean()), float(np.median(lag)),
                   budget, source, "engine steps", part, lag, seen, speed_sd)
