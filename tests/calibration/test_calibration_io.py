"""Shared calibration I/O: torn-tail recovery of result CSVs, provenance chaining, one-line errors, timing rule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibration.bench.timing import CHECK_EVERY, check_due, converged, median_ci95
from calibration.logs.provenance import with_previous_runs
from calibration.logs.results import RowWriter, drop_torn_tail, existing_keys, point_key
from costmodel.io.errors import InputError, OneLineParser, first_line
from costmodel.io.measurements import DTYPES, ELEM_BYTES, MEASUREMENT_COLUMNS, read_measurements


def _row(rows: int, median: float) -> dict:
    return {"op": "argmax", "backend": "none", "device": "cpu", "gpu": "cpu", "dtype": "fp32", "mode": "eager",
            "world_size": 1, "nodes": 1, "bytes_per_rank": 0, "rows": rows, "cols": 1000, "iters": 10,
            "median_us": median, "p10_us": median, "p90_us": median, "min_us": median, "max_us": median}


# -- torn tail ---------------------------------------------------------------------------------------------------
def test_drop_torn_tail_cuts_after_the_last_newline(tmp_path):
    path = tmp_path / "r.csv"
    assert drop_torn_tail(path) is False  # missing
    path.write_bytes(b"")
    assert drop_torn_tail(path) is False and path.read_bytes() == b""
    path.write_bytes(b"a,b\n1,2\n")
    assert drop_torn_tail(path) is False and path.read_bytes() == b"a,b\n1,2\n"
    path.write_bytes(b"a,b\n1,2\n3,")
    assert drop_torn_tail(path) is True and path.read_bytes() == b"a,b\n1,2\n"
    path.write_bytes(b"a,b")  # a torn header
    assert drop_torn_tail(path) is True and path.read_bytes() == b""


def test_resume_after_a_torn_row_neither_counts_it_nor_appends_onto_it(tmp_path, capsys):
    path = tmp_path / "kernels.csv"
    with RowWriter(path) as writer:
        writer.write(_row(1, 5.0))
        writer.write(_row(2, 7.25))
    full = path.read_text()
    torn = full[: full.rindex("\n", 0, len(full) - 1) + 1] + full.splitlines()[-1][:-2]  # row 2 minus its tail
    assert torn.splitlines()[-1].count(",") == len(MEASUREMENT_COLUMNS) - 1  # median_us is there: looks complete
    path.write_text(torn)

    keys = existing_keys(path)  # what --resume skips
    assert keys == {point_key({k: str(v) for k, v in _row(1, 5.0).items()})}
    assert "dropped a torn last line" in capsys.readouterr().err
    with RowWriter(path) as writer:  # the torn point is measured again
        writer.write(_row(2, 7.5))
    frame = read_measurements(path)
    assert list(frame["rows"]) == [1, 2] and list(frame["median_us"]) == [5.0, 7.5]


# -- provenance --------------------------------------------------------------------------------------------------
def test_with_previous_runs_chains_earlier_records(tmp_path):
    path = tmp_path / "provenance.json"
    assert with_previous_runs(path, {"tool": "a"}) == {"tool": "a"}
    first = {"tool": "calibration.collectives", "status": "ok"}
    path.write_text(json.dumps(first))
    second = with_previous_runs(path, {"tool": "calibration.kernels"})
    assert second == {"tool": "calibration.kernels", "previous_runs": [first]}
    path.write_text(json.dumps(second))
    third = with_previous_runs(path, {"tool": "x"})
    assert third["previous_runs"] == [first, {"tool": "calibration.kernels"}]


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b"\xff\xfe", b"3"])
def test_with_previous_runs_survives_unreadable_or_non_object_json(tmp_path, content):
    path = tmp_path / "provenance.json"
    path.write_bytes(content)
    out = with_previous_runs(path, {"tool": "k"})
    assert out == {"tool": "k", "previous_runs": [{"unreadable": str(path)}]}


def test_with_previous_runs_wraps_a_non_list_previous_runs(tmp_path):
    path = tmp_path / "provenance.json"
    path.write_text(json.dumps({"status": "ok", "previous_runs": {"status": "failed"}}))
    assert with_previous_runs(path, {})["previous_runs"] == [{"status": "failed"}, {"status": "ok"}]


# -- one-line errors ---------------------------------------------------------------------------------------------
def test_one_line_parser_raises_input_error():
    parser = OneLineParser(prog="x")
    parser.add_argument("--n", type=int, required=True)
    with pytest.raises(InputError, match="unrecognized arguments: --bogus"):
        parser.parse_args(["--n", "1", "--bogus"])
    with pytest.raises(InputError, match="invalid int value"):
        parser.parse_args(["--n", "one"])


def test_first_line():
    assert first_line(RuntimeError("")) == "RuntimeError"
    assert first_line(RuntimeError("  boom\nstack\nmore")) == "boom"
    gloo = RuntimeError("[../gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:1234. "
                        "This is typically caused by a crash\nnext")
    assert first_line(gloo) == "Connection closed by peer [10.0.0.2]:1234"
    long = first_line(ValueError("x" * 500), limit=20)
    assert len(long) == 20 and long.endswith("...")


# -- dtypes ------------------------------------------------------------------------------------------------------
def test_one_table_of_element_sizes():
    assert ELEM_BYTES == {"bf16": 2, "fp16": 2, "fp32": 4, "int64": 8, "uint8": 1, "int8": 1,
                          # nccl-tests' other data types (collectives only, calibration.import_nccl_tests)
                          "int32": 4, "uint32": 4, "uint64": 8, "fp64": 8, "fp8_e4m3": 1, "fp8_e5m2": 1}
    assert DTYPES == {k: ELEM_BYTES[k] for k in ("bf16", "fp16", "fp32")}


# -- stopping rule -----------------------------------------------------------------------------------------------
def test_converged_matches_the_median_ci_rule():
    rng = np.random.default_rng(0)
    for n in (9, 10, 11, 40, 41):
        for spread in (0.001, 0.05):
            x = list(100 * (1 + spread * rng.standard_normal(n)))
            lo, hi = median_ci95(x)
            med = float(np.median(x))
            want = n >= 10 and med - lo <= 0.02 * med and hi - med <= 0.02 * med
            assert converged(x, 0.02, 10) == want
    assert converged([100.0] * 10) and not converged([100.0] * 9)


def test_check_due_every_eighth_sample_after_min_iters():
    due = [n for n in range(40) if check_due(n, 10)]
    assert CHECK_EVERY == 8 and due == [10, 18, 26, 34]


def test_drop_torn_tail_reads_backwards_past_a_long_torn_row(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(b"a,b\n1,2\n" + b"x" * 200_000)  # the torn row spans several 64 KiB blocks
    assert drop_torn_tail(path) is True and path.read_bytes() == b"a,b\n1,2\n"
    path.write_bytes(b"y" * 150_000)  # no newline at all: a torn header
    assert drop_torn_tail(path) is True and path.read_bytes() == b""


def test_results_path_that_is_a_fifo_is_refused_not_read(tmp_path):
    import os

    fifo = tmp_path / "kernels.csv"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        existing_keys(fifo)


def test_resume_drops_garbage_and_torn_rows_naming_their_lines(tmp_path, capsys):
    path = tmp_path / "collectives.csv"
    with RowWriter(path) as w:
        for b in (1024, 2048, 4096):
            w.write({"op": "all_gather", "backend": "gloo", "device": "cpu", "dtype": "bf16", "mode": "eager",
                     "world_size": 2, "nodes": 1, "bytes_per_rank": b, "median_us": 10.0 + b / 1024})
    lines = path.read_text().splitlines(keepends=True)
    torn = lines[2][: len(lines[2]) // 2] + "\n"  # a row cut mid-way that a later append completed with a newline
    garbage = lines[3].replace("14.0", "nan")
    path.write_text(lines[0] + lines[1] + torn + garbage + "all_gather,\x00junk\n")
    keys = existing_keys(path)
    err = capsys.readouterr().err
    assert "dropped 3 torn or garbage row(s)" in err and "line 3, 4, 5" in err
    assert keys == {point_key({"op": "all_gather", "backend": "gloo", "device": "cpu", "dtype": "bf16",
                               "mode": "eager", "world_size": "2", "nodes": "1", "bytes_per_rank": "1024"})}
    assert path.read_text() == lines[0] + lines[1]  # only the good rows are kept; the others are measured again
    assert existing_keys(path) == keys and capsys.readouterr().err == ""  # nothing more to drop


@pytest.mark.parametrize("cell", ["", "NA", "nan"])
@pytest.mark.parametrize("column", ["world_size", "median_us"])
def test_a_missing_value_in_a_fit_row_is_named_missing_not_nan(tmp_path, cell, column):
    """issue 43: an empty cell of a fit row was reported as "row 2 is nan"."""
    from calibration.fitting.fit import main as fit_main

    values = {"op": "all_reduce", "mode": "graph", "world_size": "8", "bytes_per_rank": "8", "median_us": "20"}
    values[column] = cell
    path = tmp_path / "m.csv"
    path.write_text(",".join(values) + "\n" + ",".join(values.values()) + "\n")
    with pytest.raises(InputError) as info:
        read_measurements(path)
    message = str(info.value)
    assert f"column {column} row 2 has no value (empty, NA or NaN)" in message and "is nan" not in message
    assert fit_main([str(path), "--out", str(tmp_path / "p.json")]) == 2
