"""Workload parsers on hostile input (issue 22): a result or one InputError naming the problem, never a misread."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.answers.workload import MAX_CSV_COLUMNS
from costmodel.io.errors import InputError
from costmodel.serving.workload import load_workload, parse_workload


@pytest.mark.parametrize("text, needle", [
    ("batch,weight\n8,1,3,4\n", "row 2: 4 fields, the header has 2"),  # not batch 3 with 8,1 as an index
    ("batch,Batch,weight\n1,2,3\n", "column 'batch' given twice"),
    (",".join(f"c{i}" for i in range(MAX_CSV_COLUMNS + 1)) + ",batch,weight\n", "columns, more than"),
    ("batch,weight\n" + "1," + "9" * 5000 + "\n", "longer than"),
    ("batch,weight\n", "no rows under the header"),
    ("# TYPE x\n", "not Prometheus text format"),
    # issue 43: a sample without a metric name was refused as "(ValueError)"; now the line and what is wrong
    ('# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n{a="b"} 1\n',
     r"""not Prometheus text format \(line 3: cannot read this sample line: '\{a="b"\} 1'\)$"""),
    ("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running abc\n",
     r"not Prometheus text format \(line 2: could not convert string to float: 'abc'"),
])
def test_bad_tables_are_one_line_errors(text, needle):
    with pytest.raises(InputError, match=needle) as info:
        parse_workload(text, "w.csv")
    assert "\n" not in str(info.value)


def test_comments_blank_lines_and_huge_weights_keep_their_shares():
    w = parse_workload("batch,weight # header\n1,2 # two\n\n3,4\n", "w.csv")
    assert w.batch.tolist() == [1, 3] and np.allclose(w.weight, [1 / 3, 2 / 3])
    huge = parse_workload("batch,weight\n1,1e308\n2,1e308\n", "w.csv")
    assert huge.weight.tolist() == [0.5, 0.5]


TWO = {"input_lens": [8, 8], "output_lens": [3, 3]}  # a bench file has both per-request lengths


@pytest.mark.parametrize("data, needle", [
    ({"duration": 10, **TWO, "output_lens": ["a", None], "mean_tpot_ms": 5}, "output_lens must be a list of numbers"),
    ({"duration": 10, **TWO, "output_lens": [[1, 2]], "mean_tpot_ms": 5}, "output_lens must be a list of numbers"),
    ({"duration": 10, **TWO, "output_lens": [1e308, 1], "mean_tpot_ms": 5}, "output_lens must hold finite numbers"),
    ({"duration": 10, **TWO, "output_lens": [10, 20], "mean_tpot_ms": -10}, "mean_tpot_ms must be a finite number"),
    ({"duration": 10, **TWO, "itls": [[1e300, 1e300]] * 2}, "itls must hold finite numbers"),
    ({"duration": 10, **TWO, "itls": [["0.1", None]]}, "itls must be a list of numbers"),
    ({"duration": 0, **TWO, "itls": [[0.1]] * 2}, "duration must be a finite number > 0"),
])
def test_bad_bench_results_are_one_line_errors(data, needle):
    with pytest.raises(InputError, match=needle):
        parse_workload(json.dumps(data), "bench.json")


def test_a_missing_path_reads_the_bundled_example_only_by_its_bare_or_documented_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_workload("chat-diurnal.csv").source == "csv"
    assert load_workload("data/examples/chat-diurnal.csv").source == "csv"
    with pytest.raises(InputError, match="no such file"):
        load_workload("/nonexistent/dir/chat-diurnal.csv")


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers(-10**30, 10**30)
                    | st.text(max_size=5), lambda kids: st.lists(kids, max_size=4), max_leaves=12))
def test_any_json_values_in_the_bench_fields_give_a_result_or_one_line(value):
    for key in ("output_lens", "itls", "mean_tpot_ms", "duration", "completed", "max_concurrency"):
        data = {"duration": 10.0, "input_lens": [8, 8], "output_lens": [5, 7], "mean_tpot_ms": 5.0, key: value}
        try:
            text = json.dumps(data)
        except (ValueError, OverflowError):
            continue
        try:
            w = parse_workload(text, "bench.json")
        except InputError as exc:
            assert "\n" not in str(exc)
        else:
            assert np.isfinite(w.weight).all() and math.isclose(w.weight.sum(), 1.0)
