"""The per-request bench JSON reader of `simulate` (costmodel/serving/run.py): the example run, every kind of
bad input as one InputError line, the bounds, and fuzzing."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.io.errors import InputError
from costmodel.io.safe_io import loads_json
from costmodel.serving.ab import MAX_CELLS, MAX_WORK
from costmodel.serving.replay import MAX_STEPS
from costmodel.serving.run import (
    MAX_BENCH_BYTES,
    MAX_GAPS,
    MAX_REQUESTS,
    MAX_VALUES,
    load_bench_run,
    parse_bench_run,
    parse_bench_text,
    sharegpt_lengths,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "examples" / "vllm-cpu-spec-k3.json"


def good() -> dict:
    return {"duration": 1.0, "completed": 2, "max_concurrency": 2, "request_rate": "inf",
            "input_lens": [10, 20], "output_lens": [3, 1], "ttfts": [0.1, 0.2], "itls": [[0.01, 0.02], []]}


def test_example_run_is_read_per_request():
    run = load_bench_run(EXAMPLE)
    data = json.loads(EXAMPLE.read_text())
    assert run.n == 128 and run.max_concurrency is None and math.isinf(run.request_rate)
    assert run.itl_sum_s[0] == pytest.approx(sum(data["itls"][0]))
    assert run.itl_count[0] == len(data["itls"][0]) and run.gaps_s.size == sum(len(x) for x in data["itls"])
    assert run.start_times_s.tolist() == data["start_times"]
    # the acceptance length vLLM's bench wrote (the server's counters), not tokens per chunk
    assert run.acceptance_length == data["spec_decode_acceptance_length"]
    assert run.acceptance_source == "the file's spec_decode_acceptance_length"
    tokens = sum(n - 1 for n in data["output_lens"])
    assert tokens / sum(len(x) for x in data["itls"]) == pytest.approx(2.33, abs=0.01)  # per chunk: not the same
    assert run.reported["mean_itl_ms"] == data["mean_itl_ms"]


def test_small_run_by_hand():
    run = parse_bench_run(good())
    assert run.itl_sum_s.tolist() == pytest.approx([0.03, 0.0]) and run.itl_count.tolist() == [2, 0]
    assert run.acceptance_length == pytest.approx(2 / 2)  # (3 - 1 + 0) tokens over 2 chunks
    assert run.has_timeline


@pytest.mark.parametrize(("change", "words"), [
    ({"output_lens": None}, "needs per-request input_lens and output_lens"),
    ({"input_lens": [10]}, "input_lens has 1 entries but output_lens has 2"),
    ({"ttfts": [0.1, 0.2, 0.3]}, "ttfts has 3 entries"),
    ({"itls": [[0.01]]}, "itls has 1 entries"),
    ({"completed": 5}, "completed has 5 entries"),
    ({"ttfts": [-0.1, 0.2]}, "ttfts must hold finite numbers"),
    ({"itls": [[0.01, -1.0], []]}, "itls must hold finite numbers"),
    ({"itls": [0.01, 0.02]}, "itls must be a list of per-request lists"),
    ({"output_lens": [3, 0]}, "output_lens must be >= 1"),
    ({"input_lens": [10.5, 20]}, "whole numbers"),
    ({"output_lens": [1, 1]}, "more inter-token gaps than output tokens"),
    ({"duration": -1}, "duration must be a finite number"),
    ({"request_rate": "fast"}, "request_rate must be"),
    ({"request_rate": 0}, "request_rate must be"),
    ({"max_concurrency": 1.5}, "max_concurrency must be a whole number"),
    ({"output_lens": [], "input_lens": [], "ttfts": [], "itls": [], "completed": None}, "no requests"),
])
def test_bad_input_is_one_line(change, words):
    data = {**good(), **change}
    with pytest.raises(InputError, match=words) as exc:
        parse_bench_run(data, "x.json")
    assert "\n" not in str(exc.value)


def test_not_an_object_and_nan_refused(tmp_path):
    with pytest.raises(InputError, match="JSON object"):
        parse_bench_run([1, 2])
    bad = tmp_path / "nan.json"
    bad.write_text(json.dumps(good()).replace("0.1", "NaN"))
    with pytest.raises(InputError, match="not valid JSON"):
        load_bench_run(bad)


def test_ten_million_requests_refused_fast():
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=f"more than {MAX_REQUESTS}"):
        parse_bench_run({**good(), "output_lens": [1] * 10**7})
    assert time.perf_counter() - t0 < 1.0  # refused on the length, before any conversion


def test_ten_million_values_refused_before_parsing():
    """A 19 MiB file of 10^7 output lengths fits the byte limit; the comma count refuses it without parsing."""
    text = '{"duration": 1, "output_lens": [' + ",".join(["1"] * 10**7) + "]}"
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=f"more than {MAX_VALUES} values"):
        parse_bench_text(text, "big.json")
    assert time.perf_counter() - t0 < 1.0


def test_fifty_megabyte_file_refused_before_reading(tmp_path):
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(50 * 10**6)  # sparse: nothing is written or read
    with pytest.raises(InputError, match="larger than the 20 MiB limit"):
        load_bench_run(big)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["duration", "completed", "max_concurrency", "request_rate", "input_lens",
                                        "output_lens", "ttfts", "itls", "mean_itl_ms", "acceptance_length"]),
                       st.recursive(st.none() | st.booleans() | st.floats() | st.integers(-10**20, 10**20)
                                    | st.text(max_size=5), lambda c: st.lists(c, max_size=4), max_leaves=12)))
def test_fuzz_parser_returns_or_refuses(data):
    """Any JSON-like object: a BenchRun with sane arrays, or one InputError line - never another exception."""
    try:
        run = parse_bench_run(data)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert run.n >= 1 and (run.output_lens >= 1).all() and np.isfinite(run.input_lens).all()
    assert run.input_lens.size == run.n


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 30000), st.binary(min_size=1, max_size=8))
def test_fuzz_mutated_example_text(at, junk):
    """Bytes spliced into the example file: parsed or refused with InputError, nothing else."""
    raw = EXAMPLE.read_bytes()
    text = raw[:at] + junk + raw[at + len(junk):]
    try:
        parse_bench_run(loads_json(text, "bench x"), "x")
    except InputError as exc:
        assert "\n" not in str(exc)


def test_limits_doc_states_the_bounds_the_code_enforces():
    text = (Path(__file__).resolve().parents[2] / "docs" / "limits.md").read_text()
    section = text[text.index("## `simulate`"):]
    assert f"{MAX_BENCH_BYTES // 2**20} MiB" in section and f"{MAX_VALUES:,}" in section
    assert f"{MAX_REQUESTS:,}" in section and f"{MAX_GAPS:,}" in section and f"{MAX_CELLS:,}" in section
    assert f"{MAX_STEPS:,}" in section and MAX_WORK == 4 * 10**8 and "4 x 10^8" in section


def test_sharegpt_lengths_by_hand():
    """ceil(characters / 4) of the first two turns; items without two string turns are skipped."""
    text = json.dumps([{"conversations": [{"from": "human", "value": "x" * 9}, {"from": "gpt", "value": "y" * 4}]},
                       {"conversations": [{"value": "only one turn"}]}, "junk",
                       {"conversations": [{"value": ""}, {"value": "z" * 401}, {"value": "ignored"}]}])
    inp, out = sharegpt_lengths(text)
    assert inp.tolist() == [3, 1] and out.tolist() == [1, 101]


@pytest.mark.parametrize(("text", "words"), [("{}", "JSON list of conversations"), ("[1, 2]", "no two-turn"),
                                             ("[{", "not valid JSON")])
def test_sharegpt_refusals(text, words):
    with pytest.raises(InputError, match=words):
        sharegpt_lengths(text, "p.json")


def test_a_bench_json_with_a_utf8_bom_is_read_as_a_bom_csv_is(tmp_path):
    """issue 43: a BOM bench JSON (as Windows editors save it) was refused while a BOM CSV was read."""
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + EXAMPLE.read_bytes())
    assert load_bench_run(path).n == load_bench_run(EXAMPLE).n == 128
    assert loads_json(b"\xef\xbb\xbf" + json.dumps(good()).encode(), "t") == good()  # the dashboard's upload bytes
