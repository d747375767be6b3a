"""costmodel.serving.server.infer_server: the server's max_num_seqs read from a run's own timeline (issue 42
item 2) - hand-built timelines, the bundled real vLLM runs (exact where the cap binds), bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from costmodel.serving.run import load_bench_run, parse_bench_run
from costmodel.serving.server import infer_server
from tests.conftest import ROOT

RUNS = ROOT / "data" / "serving-runs"


def run_of(sent, ttft, latency):
    n = len(ttft)
    return parse_bench_run({"input_lens": [8] * n, "output_lens": [4] * n, "ttfts": ttft, "latencies": latency,
                            "start_times": sent, "itls": [[0.1, 0.1, 0.1]] * n, "duration": 10.0}, "hand.json")


def test_two_slots_binding_by_hand():
    """Four requests sent at t = 0 into 2 slots: requests 0 and 1 decode over [0.1, 1.1), 2 and 3 wait and decode
    over [1.1, 2.1). Decode window [0.1, 2.1): 2 decoding all the time (held 100%); requests waiting over
    [0.1, 1.1) while 2 decode: 50% -> the cap binds at 2."""
    got = infer_server(run_of([0, 0, 0, 0], [0.1, 0.1, 1.1, 1.1], [1.1, 1.1, 2.1, 2.1]))
    assert (got.peak, got.max_num_seqs) == (2, 2)
    assert got.held == pytest.approx(1.0) and got.waiting == pytest.approx(0.5)
    assert got.describe().startswith("inferred max_num_seqs 2: peak decode concurrency 2, held 100% of the run")


def test_client_capped_run_does_not_show_the_cap():
    """A client that sends the next request only when one finishes: never a request waiting at the peak."""
    got = infer_server(run_of([0, 0, 1.1, 1.1], [0.1, 0.1, 0.1, 0.1], [1.0, 1.0, 1.0, 1.0]))
    assert got.peak == 2 and not got.binds and got.waiting == 0.0
    assert got.describe().startswith("max_num_seqs not seen (>= 2)")


def test_no_timeline_no_inference():
    data = json.loads((ROOT / "data" / "examples" / "vllm-cpu-spec-k3.json").read_text())
    data.pop("start_times", None)
    assert infer_server(parse_bench_run(data, "x.json")) is None


def test_timeline_arrays_are_checked():
    with pytest.raises(Exception, match="start_times has 3 entries but output_lens has 4"):
        run_of([0, 0, 0], [0.1] * 4, [1.0] * 4)
    with pytest.raises(Exception, match="latencies must hold finite numbers"):
        run_of([0, 0, 0, 0], [0.1] * 4, [1.0, -1.0, 1.0, 1.0])


def real_runs():
    return sorted(p for p in RUNS.glob("*.json") if not p.name.endswith(".provenance.json"))


@pytest.mark.parametrize("path", real_runs(), ids=lambda p: p.stem)
def test_real_runs_cap_inferred_exactly_where_it_binds(path):
    """Every bundled real run: where requests queued for a slot (the cap bound: more requests in flight than the
    server's max_num_seqs, and no client cap below it), the inferred max_num_seqs is the server's flag exactly;
    otherwise the inference says it did not see the cap and its lower bound is at most the server's cap."""
    prov = json.loads(path.with_name(path.stem + ".provenance.json").read_text())
    cap = int(prov["server_flags"]["max-num-seqs"])
    got = infer_server(load_bench_run(path))
    assert got is not None
    client = json.loads(path.read_text()).get("max_concurrency")
    binds = (client is None or client > cap) and "cap-binds" in prov.get("tags", [])
    if binds:
        assert got.max_num_seqs == cap, got.describe()
    else:
        assert got.peak <= cap and (got.max_num_seqs in (None, cap)), got.describe()


def test_bounded_on_a_large_timeline():
    n = 50_000
    rng = np.random.default_rng(0)
    sent = np.sort(rng.uniform(0, 100, n))
    got = infer_server(run_of(sent.tolist(), [0.01] * n, (0.01 + rng.uniform(0.1, 1, n)).tolist()))
    assert got.peak >= 1
