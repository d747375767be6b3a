"""The step model calibrated from a serving run (costmodel/serving/step_fit.py, prefill.py, front_end.py):
`fit_step` recovers a known step model from a run an engine stepping by it would stream, `prefill_per_step` by
hand, the budget inferred from the bundled real vLLM runs, the front end's lag, the step jitter, fuzzing and a
20,000-request run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.io.errors import InputError
from costmodel.serving import prefill
from costmodel.serving.front_end import front_end
from costmodel.serving.prefill import prefill_per_step
from costmodel.serving.replay import StepModel
from costmodel.serving.run import load_bench_run, parse_bench_run
from costmodel.serving.server import infer_server
from costmodel.serving.step_fit import NOISE_QUANTILES, _jitter, _regress, fit_step, infer_budget
from costmodel.serving.steps import EngineSteps, engine_steps
from tests.conftest import ROOT

RUNS = ROOT / "data" / "serving-runs"
REAL = sorted(p.stem for p in RUNS.glob("*.json") if not p.name.endswith(".provenance.json"))
ALPHA, BETA, GAMMA = 6000.0, 450.0, 35.0  # us, us per decoding request, us per prompt token


def spec_tokens(name: str) -> int:
    """K of a bundled run, from its provenance (0 without speculation)."""
    prov = json.loads((RUNS / f"{name}.provenance.json").read_text())
    return int((prov.get("speculative") or {}).get("num_speculative_tokens") or 0)


def simulate(sends, inputs, outputs, alpha=ALPHA, beta=BETA, gamma=GAMMA, *, lags=None, budget=None, clock=5000.0):
    """An engine stepping FCFS with step time alpha + beta n_decode + gamma prefill_tokens (us): the bench dict its
    client would save, each step (start, end, n_decode, prefill tokens; engine clock = send clock) and when each
    request's first prefill step started. The engine sees request i at sends[i] + lags[i]; it admits every request
    seen by a step's start; with a budget, each step prefills FCFS what budget - n_decode leaves (chunked prefill);
    a request emits its first token at the end of the step that completes its prompt, then one per step."""
    n = len(sends)
    seen = [s + (lags[i] if lags is not None else 0.0) for i, s in enumerate(sends)]
    order = sorted(range(n), key=lambda i: (seen[i], i))
    t, p = 0.0, 0
    queue, decoding = [], []
    times = [[] for _ in range(n)]
    admitted = [math.nan] * n
    steps = []
    while p < n or queue or decoding:
        if not queue and not decoding and seen[order[p]] > t:
            t = seen[order[p]]  # idle until the next request
        while p < n and seen[order[p]] <= t:
            queue.append([order[p], inputs[order[p]]])
            p += 1
        room = math.inf if budget is None else budget - len(decoding)
        prefill, done = 0, []
        for q in queue:
            take = max(min(q[1], room), 0)
            if take > 0 and math.isnan(admitted[q[0]]):
                admitted[q[0]] = t
            q[1] -= take
            room -= take
            prefill += take
            if q[1] == 0:
                done.append(q)
        start, n_dec = t, len(decoding)
        t += (alpha + beta * n_dec + gamma * prefill) * 1e-6
        steps.append((start, t, n_dec, prefill))
        for d in decoding:
            times[d[0]].append(t)
            d[1] -= 1
        decoding = [d for d in decoding if d[1] > 0]
        for q in done:
            queue.remove(q)
            times[q[0]].append(t)
            if outputs[q[0]] > 1:
                decoding.append([q[0], outputs[q[0]] - 1])
    data = {"duration": t - min(sends), "request_rate": "inf", "input_lens": list(inputs),
            "output_lens": list(outputs), "ttfts": [times[i][0] - sends[i] for i in range(n)],
            "itls": [np.diff(times[i]).tolist() for i in range(n)], "start_times": [clock + s for s in sends]}
    return data, np.array(steps), np.array(admitted)


def random_run(seed: int = 1, n: int = 40, **kw):
    """40 requests over 1 s (four sent at one instant), prompts 16..399 tokens, 2..29 output tokens."""
    rng = np.random.default_rng(seed)
    sends = np.sort(rng.uniform(0, 1.0, n))
    sends[5:9] = sends[5]
    return simulate(sends.tolist(), rng.integers(16, 400, n).tolist(), rng.integers(2, 30, n).tolist(), **kw)


def steps_of(n_decode, prefill, first_step) -> EngineSteps:
    """EngineSteps by hand (end_s, busy and last_step do not enter prefill_per_step)."""
    n_decode, prefill = np.asarray(n_decode), np.asarray(prefill, dtype=float)
    count = n_decode.size
    return EngineSteps(np.arange(count) * 0.01, n_decode, (prefill > 0).astype(np.int64), prefill,
                       np.ones(count, dtype=bool), np.asarray(first_step), np.full(len(first_step), count - 1))


def one_line(exc: BaseException) -> bool:
    text = str(exc)
    return bool(text) and "\n" not in text and "\r" not in text


# --- engine steps of the simulated engine -------------------------------------------------------------------------

def test_the_simulated_run_shows_the_engines_steps():
    data, truth, _ = random_run()
    steps = engine_steps(parse_bench_run(data))
    assert steps.count == len(truth)  # every step of this engine streams a chunk (no chunked prefill)
    sends = np.array(data["start_times"]) - 5000.0  # the engine's clock is the send clock less simulate's offset
    assert steps.end_s == pytest.approx(truth[:, 1] - sends.min(), abs=1e-9)
    assert steps.n_decode.tolist() == truth[:, 2].astype(int).tolist()
    assert steps.prefill_tokens.tolist() == truth[:, 3].tolist()


# --- fit_step ------------------------------------------------------------------------------------------------------

def test_fit_recovers_the_step_model_it_was_generated_from():
    data, truth, _ = random_run()
    run = parse_bench_run(data)
    fit = fit_step(run)
    assert fit.unit == "engine steps" and fit.part == "all"
    assert (fit.step.alpha_us, fit.step.beta_us, fit.step.gamma_us) == pytest.approx((ALPHA, BETA, GAMMA), rel=1e-6)
    assert fit.r2 == pytest.approx(1.0, abs=1e-9) and fit.rms_rel < 1e-6
    steps = engine_steps(run)
    assert fit.gaps == int(steps.busy.sum()) == len(truth) - 1  # only the first step follows an idle engine here
    assert fit.mean_batch == pytest.approx(steps.n_decode[steps.busy].mean())
    # whole prompts explain the steps exactly: no budget is inferred
    assert fit.budget is None and "not seen" in fit.budget_source
    assert "engine steps" in fit.describe()
    # an exact model leaves no jitter
    assert max(map(abs, fit.step.noise_rel + fit.step.noise_prefill_rel)) < 1e-6


def test_a_given_budget_is_used_as_given():
    data, _, _ = random_run()
    run = parse_bench_run(data)
    fit = fit_step(run, budget=4096)
    assert fit.budget == 4096 and fit.budget_source == "max_num_batched_tokens 4096 (given)"
    assert fit.step.alpha_us == pytest.approx(ALPHA, rel=1e-6)
    # a budget under the prompts chunks them over earlier steps: a worse fit of this engine (which did not chunk)
    small = fit_step(run, budget=128)
    assert small.budget == 128 and small.budget_source == "max_num_batched_tokens 128 (given)"
    assert small.rms_rel > 1e-3


def test_first_half_fits_fewer_steps_and_the_same_model():
    data, _, _ = random_run()
    run = parse_bench_run(data)
    full, half = fit_step(run), fit_step(run, part="first-half")
    assert half.part == "first-half" and "first half" in half.describe()
    steps = engine_steps(run)
    cut = np.median(steps.end_s[steps.busy])
    assert half.gaps == int((steps.busy & (steps.end_s <= cut)).sum()) < full.gaps
    assert (half.step.alpha_us, half.step.beta_us, half.step.gamma_us) == pytest.approx((ALPHA, BETA, GAMMA),
                                                                                         rel=1e-6)


@pytest.mark.parametrize("part", ["bogus", "", "ALL", "second-half"])
def test_an_unknown_part_is_one_input_error(part):
    data, _, _ = random_run()
    with pytest.raises(InputError, match=r"^step fit part must be one of all, first-half$") as err:
        fit_step(parse_bench_run(data), part=part)
    assert one_line(err.value)


def test_coefficients_are_never_negative():
    """Steps that get faster with more decoding requests (beta = -300 us): plain least squares says beta < 0, the
    bounded fit keeps it at 0 and every coefficient >= 0."""
    data, _, _ = random_run(alpha=12000.0, beta=-300.0, gamma=35.0)
    run = parse_bench_run(data)
    steps = engine_steps(run)
    use = steps.busy
    cols = np.stack([np.ones(use.sum()), steps.n_decode[use], steps.prefill_tokens[use]], axis=1)
    plain = np.linalg.lstsq(cols, steps.duration_s[use] * 1e6, rcond=None)[0]
    assert plain[1] == pytest.approx(-300.0, rel=1e-6)
    fit = fit_step(run)
    assert fit.step.alpha_us >= 0 and fit.step.beta_us == 0.0 and fit.step.gamma_us >= 0
    assert fit.step.gamma_us == pytest.approx(35.0, rel=0.05)


def test_regress_by_hand():
    """y = [1, 2, 3, 5] on batch [0, 1, 2, 3]: least squares beta = Sxy / Sxx = 6.5 / 5 = 1.3, alpha = 2.75 - 1.3 x
    1.5 = 0.8; fit [0.8, 2.1, 3.4, 4.7], SSE 0.30, SST 8.75, R^2 = 1 - 0.3 / 8.75; relative residuals
    [-0.2, 0.05, 0.4 / 3, -0.06]."""
    coef, r2, rms = _regress(np.array([1.0, 2.0, 3.0, 5.0]), np.array([0.0, 1.0, 2.0, 3.0]), np.zeros(4))
    assert coef == pytest.approx((0.8, 1.3, 0.0), abs=1e-9)
    assert r2 == pytest.approx(1 - 0.3 / 8.75)
    assert rms == pytest.approx(math.sqrt((0.04 + 0.0025 + (0.4 / 3) ** 2 + 0.0036) / 4))


def test_regress_bounds_a_negative_slope_at_zero():
    """y = 100 - 10 batch: with beta held at 0 the best fit is the mean, alpha = 85."""
    batch = np.array([0.0, 1.0, 2.0, 3.0])
    coef, r2, _ = _regress(100 - 10 * batch, batch, np.zeros(4))
    assert coef == pytest.approx((85.0, 0.0, 0.0), abs=1e-9)
    assert r2 == pytest.approx(0.0, abs=1e-12)


def test_regress_constant_steps_have_r2_one():
    coef, r2, rms = _regress(np.full(5, 40.0), np.arange(5.0), np.zeros(5))
    assert coef == pytest.approx((40.0, 0.0, 0.0), abs=1e-9) and r2 == 1.0 and rms == pytest.approx(0.0, abs=1e-12)


def test_too_few_steps_fall_back_to_the_gaps():
    """Two requests sent together, three steps, two of them busy: fit_step regresses the 4 inter-token gaps."""
    data, _, _ = simulate([0.0, 0.0], [20, 30], [3, 3])
    run = parse_bench_run(data)
    assert engine_steps(run).busy.sum() == 2
    fit = fit_step(run)
    assert fit.unit == "inter-token gaps" and fit.lag_s is None and fit.front_end_s == 0.0
    assert min(fit.step.alpha_us, fit.step.beta_us, fit.step.gamma_us) >= 0


def test_fewer_than_three_gaps_is_one_input_error():
    data, _, _ = simulate([0.0], [20], [3])
    with pytest.raises(InputError, match="fewer than 3 inter-token gaps") as err:
        fit_step(parse_bench_run(data, name="tiny.json"))
    assert one_line(err.value) and "tiny.json" in str(err.value)


# --- prefill_per_step by hand --------------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [None, 256, 110])
def test_whole_prompts_stay_in_their_first_token_step_when_they_fit(budget):
    steps = steps_of([0, 1, 2, 2], [100, 0, 50, 0], [0, 2])
    used, first = prefill_per_step(steps, np.array([100.0, 50.0]), budget)
    assert used.tolist() == [100, 0, 50, 0] and first.tolist() == [0, 2]
    first[0] = 99  # a copy, not the steps' own array
    assert steps.first_step.tolist() == [0, 2]


@pytest.mark.parametrize("k, expected", [
    (0, [10, 90, 255, 255]),   # room 256 - 1 = 255 per step with one request decoding: 255 + 255 + 90 = 600
    (2, [10, 94, 253, 253]),   # room 256 - 1 x 3 = 253
    (3, [10, 96, 252, 252]),   # room 256 - 1 x 4 = 252
])
def test_a_long_prompt_is_chunked_backwards_from_its_first_token_step(k, expected):
    """r0 (10 tokens) first token in step 0, then decoding; r1 (600 tokens) first token in step 3, budget 256."""
    steps = steps_of([0, 1, 1, 1], [10, 0, 0, 600], [0, 3])
    used, first = prefill_per_step(steps, np.array([10.0, 600.0]), 256, k)
    assert used.tolist() == expected and first.tolist() == [0, 1]


def test_the_runs_first_step_takes_what_is_left():
    """Budget 128: r1 gets 127 in steps 3, 2, 1; the 219 tokens left go to step 0 whatever its room."""
    steps = steps_of([0, 1, 1, 1], [10, 0, 0, 600], [0, 3])
    used, first = prefill_per_step(steps, np.array([10.0, 600.0]), 128)
    assert used.tolist() == [10 + 219, 127, 127, 127] and first.tolist() == [0, 0]


def test_chunking_is_fcfs_in_first_token_order():
    """r1 (300 tokens, first token step 2) before r0 (100 tokens, first token step 3), budget 256, one request
    decoding from step 2: r1 takes 255 of step 2 and 45 of step 1; r0 fits its own step."""
    steps = steps_of([0, 0, 1, 1], [0, 0, 300, 100], [3, 2])
    used, first = prefill_per_step(steps, np.array([100.0, 300.0]), 256)
    assert used.tolist() == [0, 45, 255, 100] and first.tolist() == [3, 1]


def test_a_step_with_no_room_takes_nothing():
    """Step 1's 200 decoding requests x (1 + K = 2) exceed the budget: the chunk skips it."""
    steps = steps_of([0, 200, 0, 0], [0, 0, 0, 600], [3])
    used, first = prefill_per_step(steps, np.array([600.0]), 256, 1)
    assert used.tolist() == [88, 0, 256, 256] and first.tolist() == [0]


def test_chunked_prefill_conserves_every_prompt_token():
    data, _, _ = random_run(seed=4)
    run = parse_bench_run(data)
    steps = engine_steps(run)
    for budget in (64, 128, 256, 512):
        used, first = prefill_per_step(steps, run.input_lens, budget, 2)
        assert used.sum() == pytest.approx(run.input_lens.sum())
        assert (first <= steps.first_step).all() and (first >= 0).all()


# --- the budget on synthetic and real runs ------------------------------------------------------------------------

def test_a_chunked_engines_budget_is_inferred():
    rng = np.random.default_rng(2)
    sends = np.sort(rng.uniform(0, 0.6, 12)).tolist()
    data, _, _ = simulate(sends, [600] * 12, [20] * 12, budget=256)
    run = parse_bench_run(data)
    budget, source = infer_budget(engine_steps(run), run, 0)
    assert budget == 256 and source.startswith("inferred max_num_batched_tokens 256: prompts chunked at 256 tokens")


def test_real_run_with_budget_256_infers_256():
    name = "cap8-mnbt256-in600"
    prov = json.loads((RUNS / f"{name}.provenance.json").read_text())
    assert prov["server_flags"]["max-num-batched-tokens"] == 256
    run = load_bench_run(RUNS / f"{name}.json")
    k = spec_tokens(name)
    budget, source = infer_budget(engine_steps(run), run, k)
    assert budget == 256 and source.startswith("inferred max_num_batched_tokens 256")
    fit = fit_step(run, spec_tokens=k)
    assert fit.budget == 256 and fit.budget_source == source and fit.unit == "engine steps"
    given_fit = fit_step(run, budget=256, spec_tokens=k)
    assert given_fit.budget_source == "max_num_batched_tokens 256 (given)"
    assert given_fit.step == fit.step  # the same regression: the inferred budget is the given one


def test_real_run_without_a_binding_budget_infers_none():
    name = "cap8-inf-r1"
    run = load_bench_run(RUNS / f"{name}.json")
    fit = fit_step(run, spec_tokens=spec_tokens(name))
    assert fit.budget is None and fit.budget_source.startswith("max_num_batched_tokens not seen (>= ")
    # a given budget over every step's tokens is the same regression, said to be given
    given_fit = fit_step(run, budget=2048)
    assert given_fit.budget == 2048 and given_fit.budget_source == "max_num_batched_tokens 2048 (given)"
    assert (given_fit.step.alpha_us, given_fit.step.beta_us, given_fit.step.gamma_us) == pytest.approx(
        (fit.step.alpha_us, fit.step.beta_us, fit.step.gamma_us), rel=1e-12)
    assert given_fit.gaps == fit.gaps


# --- the front end -------------------------------------------------------------------------------------------------

def front_end_run() -> dict:
    """r0 sent at 0 to an idle engine; r1 sent at 15 ms while r0 decodes (first token with r0's third chunk);
    r2 sent at 100 ms to an idle engine again.

      r0 (200 tokens): 0.012, 0.022, 0.032, 0.042
      r1 (100 tokens):               0.032, 0.042
      r2 (300 tokens):                             0.115, 0.125
    """
    return {"duration": 0.125, "request_rate": "inf", "input_lens": [200, 100, 300], "output_lens": [4, 2, 2],
            "ttfts": [0.012, 0.017, 0.015], "itls": [[0.010] * 3, [0.010], [0.010]],
            "start_times": [700.0, 700.015, 700.100]}


def test_front_end_by_hand():
    """Step model 5000 us + 10 us per prompt token. r0: its step (not busy) started 7 ms before its end 0.012, at
    0.005: lag 5 ms. r1: its first step (2, busy) started at the end of step 1, 0.022; seen half a step (10 ms)
    before, 0.017: lag 2 ms. r2, alone to an idle engine: its step started 8 ms before 0.115, at 0.107: lag
    7 ms = start of its prefill step - its send."""
    run = parse_bench_run(front_end_run())
    steps = engine_steps(run)
    assert steps.busy.tolist() == [False, True, True, True, False, True]
    assert steps.first_step.tolist() == [0, 2, 4]
    assert not infer_server(run).binds
    lag, seen = front_end(steps, run, StepModel(5000.0, 0.0, 10.0), prefill_per_step(steps, run.input_lens, None, 0))
    assert lag == pytest.approx([0.005, 0.002, 0.007], abs=1e-9)
    assert seen == pytest.approx([0.005, 0.017, 0.107], abs=1e-9)


def test_front_end_lag_of_requests_sent_to_an_idle_engine_is_measured_exactly():
    """Groups of 1-4 requests every 0.5 s, the engine seeing each 1-5 ms after its send: the first of a group
    reaches an idle engine, whose prefill step starts when it is seen - its lag comes out as simulated; the others
    arrive during a step and are placed mid-way into it, within half that step of when the engine saw them."""
    rng = np.random.default_rng(7)
    sends, lags, lone = [], [], []
    for g in range(10):
        for j, offset in enumerate((0.0, 0.006, 0.021, 0.040)[: 1 + g % 4]):
            sends.append(0.5 * g + offset)
            lags.append(float(rng.uniform(0.001, 0.005)))
            lone.append(j == 0)
    n = len(sends)
    data, truth, admitted = simulate(sends, rng.integers(16, 300, n).tolist(), rng.integers(5, 12, n).tolist(),
                                     lags=lags)
    run = parse_bench_run(data)
    assert not infer_server(run).binds
    fit = fit_step(run)
    assert fit.step.alpha_us == pytest.approx(ALPHA, rel=1e-6)
    lone, lags = np.array(lone), np.array(lags)
    assert admitted[lone] - np.array(sends)[lone] == pytest.approx(lags[lone], abs=1e-12)
    assert fit.lag_s[lone] == pytest.approx(lags[lone], abs=1e-7)
    assert fit.front_end_s == pytest.approx(float(np.median(fit.lag_s)))
    # the others, where the step before theirs was busy: seen by the engine in (start of that step, start of theirs]
    steps = engine_steps(run)
    k = steps.first_step
    check = ~lone & steps.busy[np.maximum(k - 1, 0)] & (k > 0)
    assert check.sum() >= 5
    half = np.array([(truth[j - 1, 1] - truth[j - 1, 0]) / 2 for j in k])
    assert (np.abs(fit.lag_s - lags)[check] <= half[check] + 1e-7).all()


def idle_then_busy_run() -> dict:
    """r0 alone (steps 0, 1); r1 sent at 100 ms to an idle engine (its prefill step 2 ends at 0.115); r2 sent at
    109 ms, during step 2, first token in step 3.

      r0 (100 tokens): 0.011, 0.021
      r1 (300 tokens):               0.115, 0.125, 0.135
      r2 (200 tokens):                      0.125, 0.135
    """
    return {"duration": 0.135, "request_rate": "inf", "input_lens": [100, 300, 200], "output_lens": [2, 3, 2],
            "ttfts": [0.011, 0.015, 0.016], "itls": [[0.010], [0.010, 0.010], [0.010]],
            "start_times": [300.0, 300.100, 300.109]}


def test_front_end_middle_of_a_step_that_followed_an_idle_engine():
    """Step model 5000 us + 10 us per prompt token: step 2 (r1's 300 tokens, after an idle engine) ran from
    0.115 - 0.008 = 0.107 to 0.115; r2, first prefilled in step 3, was seen inside (0.107, 0.115], at the middle
    0.111: lag 0.111 - 0.109 = 2 ms (it was 0.115 - 0.5 x (0.115 - 0.021) = 0.068, before its send: lag 0)."""
    run = parse_bench_run(idle_then_busy_run())
    steps = engine_steps(run)
    assert steps.busy.tolist() == [False, True, False, True, True] and steps.first_step.tolist() == [0, 2, 3]
    assert not infer_server(run).binds
    lag, seen = front_end(steps, run, StepModel(5000.0, 0.0, 10.0), prefill_per_step(steps, run.input_lens, None, 0))
    assert lag[:2] == pytest.approx([0.005, 0.007], abs=1e-9)  # r0, r1: to an idle engine, start of their step
    assert lag[2] == pytest.approx(0.002, abs=1e-9)
    assert seen[2] == pytest.approx(0.111, abs=1e-9)


@pytest.mark.parametrize("name", REAL)
def test_front_end_on_the_real_runs(name):
    run = load_bench_run(RUNS / f"{name}.json")
    k = spec_tokens(name)
    fit = fit_step(run, spec_tokens=k)
    lag, seen = fit.lag_s, fit.seen_s
    sent = run.start_times_s - run.start_times_s.min()
    assert lag.shape == seen.shape == (run.n,)
    assert np.isfinite(lag).all() and (lag >= 0).all() and np.isfinite(seen).all()
    assert (seen >= sent - 1e-12).all()
    first = prefill_per_step(engine_steps(run), run.input_lens, fit.budget, k)[1]
    order = np.lexsort((sent, first))  # the engine's admission order: first prefill step, then send time
    assert (np.diff(seen[order]) >= 0).all()
    assert fit.front_end_s == pytest.approx(float(np.median(lag)))
    assert min(fit.step.alpha_us, fit.step.beta_us, fit.step.gamma_us) >= 0


# --- the step jitter -----------------------------------------------------------------------------------------------

def test_jitter_of_nothing_is_empty():
    assert _jitter(np.array([])) == ()


@pytest.mark.parametrize("size", [1, 7, 512, 5000])
def test_jitter_is_centred_bounded_and_above_minus_099(size):
    rel = np.random.default_rng(size).lognormal(0.0, 0.3, size) - 1.0  # > -1, skewed, mean ~ +0.05
    jit = _jitter(rel)
    assert len(jit) == min(size, NOISE_QUANTILES) and all(isinstance(x, float) for x in jit)
    assert abs(np.mean(jit)) < 1e-12  # the kept quantiles' factors are scaled to mean 1
    assert min(jit) > -1.0  # every factor 1 + e > 0


def test_jitter_of_up_to_512_residuals_is_their_factors_scaled_to_mean_one():
    rel = np.array([0.3, -0.1, 0.1, -0.2, 0.4])  # factors 1 + e: mean 1.1
    assert _jitter(rel) == pytest.approx(list(np.sort(1.0 + rel) / 1.1 - 1.0), abs=1e-12)


def test_jitter_never_lets_a_step_take_negative_time():
    jit = _jitter(np.array([-1.0, 3.0, 8.0]))  # factors 0 (floored at 0.01), 4, 9: scaled by 1 / 4.3367
    assert len(jit) == 3 and min(jit) == pytest.approx(0.01 / (13.01 / 3) - 1.0)
    assert all(1 + x > 0 for x in jit)


def test_jitter_stays_centred_where_it_clips():
    jit = _jitter(np.array([-0.9, 0.5, 1.5]))  # factors 0.1, 1.5, 2.5: scaled to mean 1, none below 0
    assert min(jit) > -1.0
    assert np.mean(jit) == pytest.approx(0.0, abs=1e-9)  # additive centring then clipping gave +0.092


# --- fuzzing -------------------------------------------------------------------------------------------------------

GAP = st.one_of(st.sampled_from([0.0, 0.0001, 0.005, 0.01, 0.0101, 0.02]), st.floats(0.0, 0.1))


@st.composite
def small_runs(draw):
    n = draw(st.integers(1, 10))
    itls = [draw(st.lists(GAP, max_size=8)) for _ in range(n)]
    data = {"duration": draw(st.floats(0.001, 100.0)),
            "request_rate": draw(st.sampled_from(["inf", 1.0, 50.0])),
            "input_lens": draw(st.lists(st.integers(0, 3000), min_size=n, max_size=n)),
            "output_lens": [len(g) + draw(st.integers(0, 2)) or 1 for g in itls],
            "ttfts": draw(st.lists(st.one_of(st.sampled_from([0.0, 0.01, 0.02]), st.floats(0.0, 2.0)),
                                   min_size=n, max_size=n)),
            "itls": itls,
            "start_times": draw(st.lists(st.one_of(st.sampled_from([0.0, 0.005, 0.01]), st.floats(0.0, 5.0)),
                                         min_size=n, max_size=n))}
    if draw(st.booleans()):
        data["max_concurrency"] = draw(st.integers(1, 4))
    return data


@settings(max_examples=40, deadline=None)
@given(small_runs(), st.one_of(st.none(), st.integers(1, 4096)), st.integers(0, 5),
       st.sampled_from(["all", "first-half"]))
def test_fuzz_steps_and_fit_return_finite_or_refuse_in_one_line(data, budget, k, part):
    run = parse_bench_run(data)
    steps = engine_steps(run)
    assert steps is not None and steps.count >= 1
    assert np.isfinite(steps.end_s).all() and (np.diff(steps.end_s) >= 0).all()
    assert steps.n_decode.sum() + steps.first.sum() == run.n + run.itl_count.sum()
    assert steps.first.sum() == run.n and (steps.first_step <= steps.last_step).all()
    try:
        fit = fit_step(run, budget=budget, spec_tokens=k, part=part)
    except InputError as exc:
        assert one_line(exc)
        return
    coef = (fit.step.alpha_us, fit.step.beta_us, fit.step.gamma_us)
    assert all(math.isfinite(c) and c >= 0 for c in coef)
    assert math.isfinite(fit.r2) and math.isfinite(fit.rms_rel) and math.isfinite(fit.front_end_s)
    assert all(math.isfinite(x) and x > -1.0 for x in fit.step.noise_rel + fit.step.noise_prefill_rel)
    if fit.lag_s is not None:
        assert np.isfinite(fit.lag_s).all() and (fit.lag_s >= 0).all() and np.isfinite(fit.seen_s).all()


# --- bounded work --------------------------------------------------------------------------------------------------

def big_run(n: int, seed: int = 3):
    """n requests of 21 output tokens (20 gaps), Poisson arrivals at 190/s, prompts 16..199 tokens."""
    rng = np.random.default_rng(seed)
    sends = np.cumsum(rng.exponential(1 / 190, n)).tolist()
    return simulate(sends, rng.integers(16, 200, n).tolist(), [21] * n, 2000.0, 100.0, 20.0)[0]


def test_twenty_thousand_requests_parse_and_fit():
    data = big_run(20_000)
    run = parse_bench_run(data)
    assert run.n == 20_000 and run.gaps_s.size == 400_000
    fit = fit_step(run, budget=2048)  # the bundled runs' server budget: no prompt chunks
    assert fit.unit == "engine steps" and fit.gaps > 10_000
    assert (fit.step.alpha_us, fit.step.beta_us, fit.step.gamma_us) == pytest.approx((2000.0, 100.0, 20.0), rel=1e-6)
    assert np.isfinite(fit.lag_s).all()


def test_budget_inference_work_is_bounded_by_the_chunks(monkeypatch):
    """prefill_per_step walks back only through steps with room: a union-find skips full steps, so its pointer hops
    stay O(steps + requests) - here 2,000 steps with no room and 500 ten-token prompts that all end in the last step,
    where a step-by-step walk would take ~10^6 hops."""
    n_steps, n_req = 2000, 500
    made = []

    class Counting(prefill._Rooms):
        def __init__(self, room):
            super().__init__(room)
            made.append(self)

    monkeypatch.setattr(prefill, "_Rooms", Counting)
    steps = EngineSteps(end_s=np.arange(n_steps, dtype=float), n_decode=np.full(n_steps, 300),
                        first=np.r_[np.zeros(n_steps - 1, dtype=int), n_req],
                        prefill_tokens=np.r_[np.zeros(n_steps - 1), 10.0 * n_req], busy=np.ones(n_steps, bool),
                        first_step=np.full(n_req, n_steps - 1), last_step=np.full(n_req, n_steps - 1))
    used, first = prefill_per_step(steps, np.full(n_req, 10.0), 256)
    assert used.sum() == pytest.approx(10.0 * n_req) and used[0] == pytest.approx(10.0 * n_req)
    assert (first == 0).all()
    assert made and made[0].finds <= 4 * (n_steps + n_req)


