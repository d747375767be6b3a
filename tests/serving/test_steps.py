"""The engine steps a serving run shows (costmodel/serving/steps.py): `chunk_times`, `_split` and `engine_steps` on
hand-built runs whose every streamed chunk time is computed here by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from costmodel.serving.run import parse_bench_run
from costmodel.serving.steps import SPLIT_SHARE, EngineSteps, _split, chunk_times, engine_steps

CLOCK = 1000.0  # start_times are a client clock (perf_counter), not zero-based: the steps are on the run's own clock


def bench(start, ttfts, itls, inputs, outputs=None) -> dict:
    """A `vllm bench serve --save-result --save-detailed` dict (the fields engine_steps reads)."""
    outputs = outputs if outputs is not None else [len(g) + 1 for g in itls]
    return {"duration": 1.0, "request_rate": "inf", "input_lens": inputs, "output_lens": outputs,
            "ttfts": ttfts, "itls": itls, "start_times": [CLOCK + s for s in start]}


def three_requests() -> dict:
    """r0 and r1 overlap (steps ~10 ms apart, r1's chunks 0.1 ms after r0's), then an idle gap, then r2 alone.

    chunk arrivals (run clock, s):
      r0: sent 0,     ttft 10 ms:   0.010, 0.020,  0.030,  0.040
      r1: sent 0.005, ttft 15.1 ms:        0.0201, 0.0301, 0.0400
      r2: sent 0.100, ttft 20 ms:                                  0.120, 0.130
    """
    return bench(start=[0.0, 0.005, 0.100], ttfts=[0.010, 0.0151, 0.020],
                 itls=[[0.010, 0.010, 0.010], [0.010, 0.0099], [0.010]], inputs=[100, 200, 50])


def test_chunk_times_are_send_plus_ttft_plus_the_gaps_so_far_sorted():
    t, req, first = chunk_times(parse_bench_run(three_requests()))
    assert t == pytest.approx([0.010, 0.020, 0.0201, 0.030, 0.0301, 0.040, 0.040, 0.120, 0.130], abs=1e-9)
    assert req[:5].tolist() == [0, 0, 1, 0, 1] and sorted(req[5:7].tolist()) == [0, 1] and req[7:].tolist() == [2, 2]
    assert first.tolist() == [True, False, True, False, False, False, False, True, False]
    assert (np.diff(t) >= 0).all()


def test_engine_steps_of_a_hand_built_run():
    run = parse_bench_run(three_requests())
    steps = engine_steps(run)
    assert isinstance(steps, EngineSteps)
    # median gap 10 ms -> split at 3 ms: r1's chunks 0.1 ms after r0's share its steps; the idle gap starts a new one
    assert steps.count == 6
    assert steps.end_s == pytest.approx([0.010, 0.0201, 0.0301, 0.040, 0.120, 0.130], abs=1e-9)
    assert steps.n_decode.tolist() == [0, 1, 2, 2, 0, 1]
    assert steps.first.tolist() == [1, 1, 0, 0, 1, 0]
    assert steps.prefill_tokens.tolist() == [100, 200, 0, 0, 50, 0]
    # step 4 (r2's prefill) follows an idle engine: nothing was decoding across step 3's end, so it is not busy
    assert steps.busy.tolist() == [False, True, True, True, False, True]
    assert steps.first_step.tolist() == [0, 1, 4]
    assert steps.last_step.tolist() == [3, 3, 5]
    assert math.isnan(steps.duration_s[0])
    assert steps.duration_s[1:] == pytest.approx([0.0101, 0.010, 0.0099, 0.080, 0.010], abs=1e-9)


def test_steps_are_on_the_runs_clock_not_the_clients():
    shifted = three_requests()
    shifted["start_times"] = [s + 12345.0 for s in shifted["start_times"]]
    a, b = engine_steps(parse_bench_run(three_requests())), engine_steps(parse_bench_run(shifted))
    assert a.end_s == pytest.approx(b.end_s, abs=1e-8) and a.busy.tolist() == b.busy.tolist()


def test_split_threshold_is_a_share_of_the_median_gap():
    """Two requests whose chunks are 2 ms apart: one step each at a 10 ms median gap (split 3 ms), two steps at a
    5 ms median gap (split 1.5 ms)."""
    near = bench(start=[0.0, 0.0], ttfts=[0.010, 0.012], itls=[[0.010, 0.010], [0.010, 0.010]], inputs=[8, 8])
    assert SPLIT_SHARE * 0.010 > 0.002
    assert engine_steps(parse_bench_run(near)).count == 3
    far = bench(start=[0.0, 0.0], ttfts=[0.010, 0.012], itls=[[0.005, 0.005], [0.005, 0.005]], inputs=[8, 8])
    assert SPLIT_SHARE * 0.005 < 0.002
    steps = engine_steps(parse_bench_run(far))
    assert steps.count == 6 and steps.end_s == pytest.approx([0.010, 0.012, 0.015, 0.017, 0.020, 0.022], abs=1e-9)


def test_a_request_never_appears_twice_in_one_step():
    """r1's second chunk comes 0.5 ms after its first, inside one gap-cluster (split 3 ms): it opens a new step.

      r0: 0.010, 0.020,  0.030, 0.040, 0.050, 0.060
      r1: 0.0105, 0.011, 0.0205
    """
    data = bench(start=[0.0, 0.0], ttfts=[0.010, 0.0105], itls=[[0.010] * 5, [0.0005, 0.0095]], inputs=[30, 40])
    run = parse_bench_run(data)
    steps = engine_steps(run)
    assert steps.count == 7
    assert steps.end_s == pytest.approx([0.0105, 0.011, 0.0205, 0.030, 0.040, 0.050, 0.060], abs=1e-9)
    assert steps.first.tolist() == [2, 0, 0, 0, 0, 0, 0]
    assert steps.n_decode.tolist() == [0, 1, 2, 1, 1, 1, 1]
    assert steps.prefill_tokens.tolist() == [70, 0, 0, 0, 0, 0, 0]
    assert steps.first_step.tolist() == [0, 0] and steps.last_step.tolist() == [6, 2]
    # step 1 ends 0.5 ms after step 0, inside the split window: chunks read late, not an engine step - left out
    assert steps.busy.tolist() == [False, False, True, True, True, True, True]
    t, req, _ = chunk_times(run)
    sid = _split(t, req, SPLIT_SHARE * float(np.median(run.gaps_s)))
    pairs = list(zip(sid.tolist(), req.tolist()))
    assert len(pairs) == len(set(pairs))


def test_split_by_hand():
    t = np.array([0.0, 0.0001, 0.0002, 0.0100, 0.0101])
    # fast path: every request once per gap-cluster
    assert _split(t, np.array([0, 1, 2, 0, 1]), 0.001).tolist() == [0, 0, 0, 1, 1]
    # r0 twice in the first cluster: its second chunk opens step 1, which r1's next chunk joins; the gap opens step 2
    assert _split(t, np.array([0, 1, 0, 1, 0]), 0.001).tolist() == [0, 0, 1, 2, 2]
    assert _split(t, np.array([0, 1, 0, 2, 0]), 0.001).tolist() == [0, 0, 1, 2, 2]
    # split 0: every distinct time is a step, equal times share one
    assert _split(np.array([0.0, 0.0, 1.0]), np.array([0, 1, 0]), 0.0).tolist() == [0, 0, 1]


def test_single_token_requests_start_and_end_in_one_step():
    data = bench(start=[0.0, 0.0, 0.0], ttfts=[0.010, 0.010, 0.020], itls=[[], [0.010, 0.010], []], inputs=[5, 6, 7])
    steps = engine_steps(parse_bench_run(data))
    assert steps.count == 3
    # step 0: r0 (its only token) and r1 first; step 1: r1 decodes, r2 first (its only token); step 2: r1 decodes
    assert steps.first.tolist() == [2, 1, 0] and steps.n_decode.tolist() == [0, 1, 1]
    assert steps.prefill_tokens.tolist() == [11, 7, 0]
    assert steps.first_step.tolist() == [0, 0, 1] and steps.last_step.tolist() == [0, 2, 1]
    # step 1: r1 decoding across step 0's end; step 2: r1 still decoding across step 1's end
    assert steps.busy.tolist() == [False, True, True]


def test_chunks_of_a_step_one_fraction_of_a_ms_apart_join_it():
    """Three requests whose chunks of one step arrive within 0.3 ms of each other (an API server reading them out)."""
    data = bench(start=[0.0, 0.0, 0.0], ttfts=[0.0100, 0.0102, 0.0103],
                 itls=[[0.0100, 0.0101], [0.0099, 0.0100], [0.0098, 0.0101]], inputs=[10, 20, 30])
    steps = engine_steps(parse_bench_run(data))
    assert steps.count == 3
    assert steps.first.tolist() == [3, 0, 0] and steps.n_decode.tolist() == [0, 3, 3]
    assert steps.prefill_tokens.tolist() == [60, 0, 0]
    assert steps.end_s == pytest.approx([0.0103, 0.0201, 0.0302], abs=1e-9)
    assert steps.busy.tolist() == [False, True, True]


def test_no_steps_without_start_times():
    data = three_requests()
    del data["start_times"]
    run = parse_bench_run(data)
    assert run.start_times_s is None
    assert chunk_times(run) is None and engine_steps(run) is None


def test_no_steps_without_itls():
    data = three_requests()
    del data["itls"]
    data["output_lens"] = [1, 1, 1]
    run = parse_bench_run(data)
    assert chunk_times(run) is None and engine_steps(run) is None
