"""The scheduler simulation (costmodel/serving/replay.py): hand-computed runs, an M/D/1 queue, the acceptance
draw, and the monotonicity properties (a faster step never raises a latency; throughput grows with the saving)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.serving.replay import (
    ITL_BINS,
    ITL_EDGES_US,
    StepModel,
    _draws,
    acceptance_rate,
    arrivals,
    hist_percentile,
    metrics,
    simulate_runs,
)


def run_one(inp, out, *, tau_us=1000.0, length=1.0, k=3, slots=4, capped=False, send=None, delta=None, seeds=1,
            step=None, budget=8192):
    inp, out = np.asarray(inp), np.asarray(out)
    send = np.zeros((seeds, inp.size)) if send is None else send
    seed_of = np.arange(send.shape[0]) if delta is None else np.zeros(len(delta), dtype=int)
    delta = np.zeros((seed_of.size, slots + 1)) if delta is None else np.asarray(delta, dtype=float)
    return simulate_runs(inp, out, send, seed_of, step or StepModel(tau_us), delta, k=k, acceptance_length=length,
                         slots=slots, client_cap=slots if capped else None, max_batched_tokens=budget)


def test_one_request_constant_step():
    """Prefill step emits token 1 (TTFT = tau), then one token per decode step: E2EL = O x tau, ITL = TPOT = tau."""
    res = run_one([100], [10])
    assert res.ttft_s[0, 0] == pytest.approx(1e-3) and res.e2el_s[0, 0] == pytest.approx(10e-3)
    assert res.itl_count[0, 0] == 9 and res.itl_sum_s[0, 0] == pytest.approx(9e-3)
    m = metrics(res, [100], [10])
    assert m["mean_tpot_ms"][0] == pytest.approx(1.0) and m["mean_itl_ms"][0] == pytest.approx(1.0)
    assert m["output_throughput"][0] == pytest.approx(10 / 10e-3) and m["request_throughput"][0] == pytest.approx(100)
    assert m["total_token_throughput"][0] == pytest.approx(110 / 10e-3)


def test_every_draft_accepted():
    """L = K + 1 = 4: after the prefill token, 9 tokens take chunks of 4, 4, 1: E2EL = 4 tau, 3 chunks."""
    res = run_one([100], [10], length=4.0)
    assert res.e2el_s[0, 0] == pytest.approx(4e-3) and res.itl_count[0, 0] == 3


def test_chunked_prefill_takes_steps():
    """A 2500-token prompt under a 1000-token budget: 3 prefill steps before the first token."""
    res = run_one([2500], [2], budget=1000)
    assert res.ttft_s[0, 0] == pytest.approx(3e-3) and res.e2el_s[0, 0] == pytest.approx(4e-3)


def test_capped_batch_ttft_is_pure_queueing():
    """5 requests at t = 0, one slot, 4 tokens each (4 steps of tau): request i waits 4 i tau, TTFT_i = (4 i + 1)
    tau; by Little's law the mean number in the system, sum(E2EL) / duration, is (5 + 4 + 3 + 2 + 1) / 5 = 3."""
    res = run_one([10] * 5, [4] * 5, slots=1)
    assert res.ttft_s[0].tolist() == pytest.approx([(4 * i + 1) * 1e-3 for i in range(5)])
    assert res.e2el_s[0].sum() / res.duration_s[0] == pytest.approx(3.0)


def test_client_cap_starts_the_clock_at_send():
    """The client sends when a slot frees: no queueing in TTFT, every TTFT is one step."""
    res = run_one([10] * 5, [4] * 5, slots=1, capped=True)
    assert res.ttft_s[0] == pytest.approx(1e-3)
    assert res.duration_s[0] == pytest.approx(20e-3)


def test_client_cap_above_the_servers_queues_only_the_excess():
    """Client cap 3 over one server slot, 6 requests of 4 steps at rate inf: the client sends 0, 1, 2 at once and
    request i >= 3 when request i - 3 completes (at 4 (i - 2) tau); the server runs one at a time, so request i
    starts its prefill at 4 i tau: TTFT_0..2 = 1, 5, 9 tau, then every later one waits two requests: 9 tau."""
    inp, out = np.full(6, 10), np.full(6, 4)
    res = simulate_runs(inp, out, np.zeros((1, 6)), np.zeros(1, dtype=int), StepModel(1000.0), np.zeros((1, 2)), k=0,
                        acceptance_length=1.0, slots=1, client_cap=3, max_batched_tokens=8192)
    assert res.ttft_s[0].tolist() == pytest.approx([1e-3, 5e-3, 9e-3, 9e-3, 9e-3, 9e-3])
    assert res.e2el_s[0].tolist() == pytest.approx([4e-3, 8e-3, 12e-3, 12e-3, 12e-3, 12e-3])
    assert res.duration_s[0] == pytest.approx(24e-3)


def test_front_end_overhead_delays_admission_not_the_clock():
    """overhead 2.5 tau: a lone request is seen at 2.5 tau, prefilled in the step [2.5, 3.5] tau: TTFT 3.5 tau."""
    res = simulate_runs(np.array([10]), np.array([3]), np.zeros((1, 1)), np.zeros(1, dtype=int), StepModel(1000.0),
                        np.zeros((1, 2)), k=0, acceptance_length=1.0, slots=1, client_cap=None,
                        max_batched_tokens=8192, front_end_s=2.5e-3)
    assert res.ttft_s[0, 0] == pytest.approx(3.5e-3) and res.e2el_s[0, 0] == pytest.approx(5.5e-3)


def test_md1_queue_matches_pollaczek_khinchine():
    """Poisson arrivals (lambda = 5/s), one slot, deterministic service D = 10 steps x 10 ms = 0.1 s (rho = 0.5):
    M/D/1 waits Wq = rho D / (2 (1 - rho)) = 0.05 s, so mean TTFT = Wq + one step = 0.06 s."""
    n, seeds = 3000, 4
    send = arrivals(n, 5.0, seeds, np.random.default_rng(1))
    res = run_one(np.full(n, 10), np.full(n, 10), tau_us=10_000.0, slots=1, send=send, seeds=seeds)
    assert res.ttft_s.mean() == pytest.approx(0.06, rel=0.1)


def test_acceptance_rate_inverts_the_mean_length():
    for k, length in ((3, 2.58), (5, 3.0), (1, 1.5)):
        p = acceptance_rate(length, k)
        assert sum(p ** j for j in range(k + 1)) == pytest.approx(length, rel=1e-9)
        draws = _draws(np.random.default_rng(0), (200_000,), p, k)
        assert 1 + draws.mean() == pytest.approx(length, rel=0.01) and draws.max() <= k
    assert acceptance_rate(1.0, 3) == 0.0 and acceptance_rate(4.0, 3) == 1.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 40)), min_size=1, max_size=6),
       st.integers(1, 4), st.booleans(), st.floats(100, 5e4), st.floats(0, 500), st.floats(0, 5),
       st.floats(1.0, 4.0), st.lists(st.floats(0, 2e4), min_size=5, max_size=5))
def test_faster_step_never_raises_a_latency(reqs, slots, capped, alpha, beta, gamma, length, extra):
    """Two replicas of one seed, the second's draft step slower at every batch: every request's TTFT, E2EL, TPOT,
    and the mean ITL are no smaller, and throughput no larger (all requests sent at once)."""
    inp, out = np.array([r[0] for r in reqs]), np.array([r[1] for r in reqs])
    delta = np.zeros((2, slots + 1))
    delta[1] = np.asarray(extra)[: slots + 1] if slots + 1 <= 5 else 0.0
    res = run_one(inp, out, length=length, slots=slots, capped=capped, delta=delta,
                  step=StepModel(alpha, beta, gamma), budget=2048)
    tol = 1e-9
    assert (res.ttft_s[0] <= res.ttft_s[1] + tol).all() and (res.e2el_s[0] <= res.e2el_s[1] + tol).all()
    m = metrics(res, inp, out)
    for key in ("mean_tpot_ms", "mean_itl_ms", "mean_ttft_ms", "mean_e2el_ms", "p99_e2el_ms", "median_tpot_ms"):
        assert m[key][0] <= m[key][1] + 1e-6
    assert m["output_throughput"][0] >= m["output_throughput"][1] - 1e-6


def test_throughput_monotone_in_the_saving():
    """The same 200 requests and seed with a draft-step saving of 0, 500, 1000, 2000 us: throughput rises."""
    savings = np.array([0.0, 500.0, 1000.0, 2000.0])
    delta = np.repeat(-savings[:, None], 17, axis=1)
    delta[:, 0] = 0.0
    rng = np.random.default_rng(3)
    inp, out = rng.integers(100, 2000, 200), rng.integers(20, 200, 200)
    res = run_one(inp, out, tau_us=20_000.0, length=2.5, slots=16, capped=True, delta=delta)
    thr = metrics(res, inp, out)["output_throughput"]
    assert (np.diff(thr) > 0).all()


def test_itl_percentiles_from_the_histogram():
    """Constant 1 ms steps: every gap is 1000 us, so median and p99 ITL are 1 ms within a bin (0.4%); by hand, a
    histogram with 3 gaps in bin 10 and 1 in bin 20 has its median in bin 10 and its p99 in bin 20."""
    res = simulate_runs(np.array([10, 10]), np.array([20, 5]), np.zeros((1, 2)), np.array([0]), StepModel(1000.0),
                        np.zeros((1, 3)), k=3, acceptance_length=1.0, slots=2, client_cap=None,
                        max_batched_tokens=8192, itl_hist=True)
    assert res.itl_hist.sum() == 19 + 4
    m = metrics(res, [10, 10], [20, 5])
    assert m["median_itl_ms"][0] == pytest.approx(1.0, rel=0.004)
    assert m["p99_itl_ms"][0] == pytest.approx(1.0, rel=0.004)
    hist = np.zeros((1, ITL_BINS), dtype=np.int64)
    hist[0, 10], hist[0, 20] = 3, 1
    centre = np.sqrt(ITL_EDGES_US[:-1] * ITL_EDGES_US[1:])
    assert hist_percentile(hist, 50)[0] == centre[10] and hist_percentile(hist, 99)[0] == centre[20]
    assert hist_percentile(np.zeros((1, ITL_BINS)), 50)[0] == 0.0


def test_the_engine_sees_requests_when_the_run_shows_it():
    """seen_s (no client cap): request 1, sent at 0 with request 0, is seen at 2.5 tau; with two slots it is
    prefilled in the first step starting after that, [3, 4] tau (steps of tau from 0): TTFT 4 tau from its send."""
    res = simulate_runs(np.array([10, 10]), np.array([6, 6]), np.zeros((1, 2)), np.zeros(1, dtype=int),
                        StepModel(1000.0), np.zeros((1, 3)), k=0, acceptance_length=1.0, slots=2, client_cap=None,
                        max_batched_tokens=8192, seen_s=np.array([0.0, 2.5e-3]))
    assert res.ttft_s[0].tolist() == pytest.approx([1e-3, 4e-3])


def test_a_lag_per_request_keeps_the_order():
    """front_end_s per request: ready_i = max(sent_i + lag_i, ready_{i-1}): request 1's lag 0 cannot overtake
    request 0's 2 tau (FCFS), both prefilled together in [2, 3] tau."""
    res = simulate_runs(np.array([10, 10]), np.array([2, 2]), np.zeros((1, 2)), np.zeros(1, dtype=int),
                        StepModel(1000.0), np.zeros((1, 3)), k=0, acceptance_length=1.0, slots=2, client_cap=None,
                        max_batched_tokens=8192, front_end_s=np.array([2e-3, 0.0]))
    assert res.ttft_s[0].tolist() == pytest.approx([3e-3, 3e-3])


def test_step_jitter_scales_decode_and_prefill_steps_apart():
    """noise_rel (0.5,) on decode-only steps, noise_prefill_rel (1.0,) on steps with prefill tokens: the prefill
    step takes 2 tau, each decode step 1.5 tau."""
    step = StepModel(1000.0, noise_rel=(0.5,), noise_prefill_rel=(1.0,))
    res = simulate_runs(np.array([10]), np.array([3]), np.zeros((1, 1)), np.zeros(1, dtype=int), step,
                        np.zeros((1, 2)), k=0, acceptance_length=1.0, slots=1, client_cap=None, max_batched_tokens=8192)
    assert res.ttft_s[0, 0] == pytest.approx(2e-3) and res.e2el_s[0, 0] == pytest.approx(5e-3)


def test_acceptance_rate_per_request_is_the_scalar_one_each():
    lengths = np.array([0.5, 1.0, 1.6, 2.5, 4.0, 9.0])
    got = acceptance_rate(lengths, 3)
    assert got.tolist() == pytest.approx([acceptance_rate(float(x), 3) for x in lengths])
    assert got[0] == 0.0 and got[1] == 0.0 and got[-2] == 1.0 and got[-1] == 1.0
    assert sum(got[3] ** j for j in range(4)) == pytest.approx(2.5, abs=1e-9)


def test_draws_with_a_rate_per_request():
    """p = 0, 1 and 0.5 for three requests: none, every one (K = 3), and P(a >= 1) = 0.5 over many draws."""
    a = _draws(np.random.default_rng(0), (1, 3, 20_000), np.array([0.0, 1.0, 0.5])[None, :, None], 3)
    assert (a[0, 0] == 0).all() and (a[0, 1] == 3).all()
    assert (a[0, 2] >= 1).mean() == pytest.approx(0.5, abs=0.02)
    assert (a[0, 2] >= 2).mean() == pytest.approx(0.25, abs=0.02)


def test_a_request_that_accepts_every_draft_finishes_first():
    """Two requests, K 3, acceptance 4 (every draft) and 1 (none): 9 tokens after the first take 3 decode steps
    against 9."""
    res = simulate_runs(np.array([10, 10]), np.array([10, 10]), np.zeros((1, 2)), np.zeros(1, dtype=int),
                        StepModel(1000.0), np.zeros((1, 3)), k=3, acceptance_length=np.array([4.0, 1.0]), slots=2,
                        client_cap=None, max_batched_tokens=8192)
    assert res.itl_count[0].tolist() == [3, 9] and res.e2el_s[0].tolist() == pytest.approx([4e-3, 10e-3])
