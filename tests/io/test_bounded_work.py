"""Issue 22 item 1: work bounded by limits stated and checked before the work starts - curves and points per fit
and a time budget, the combined size / rows of a multi-file upload, result and Rank lines of an nccl-tests log,
and a header check before every untrusted CSV is parsed. Each limit is in docs/limits.md."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from calibration.fitting import fit as fit_module
from calibration.fitting.fit import MAX_FIT_CURVES, MAX_FIT_POINTS, bin_repeats, fit_measurements, fit_plan
from calibration.logs import import_nccl_tests
from calibration.logs.import_nccl_tests import _lines, parse_nccl_tests_text, reference_from_manifest
from costmodel.cli import options
from costmodel.evidence.reference import load_reference
from costmodel.io.errors import InputError
from costmodel.io.measurements import read_measurements, validate_measurements
from dashboard import multi_upload
from tests.calibration.test_import_nccl_tests import AG_POINTS, nccl_log

from .test_hardening import one_error_line

ROOT = fit_module.REPO_ROOT


def curves(spec: list[tuple[str, str, int, int]]) -> pd.DataFrame:
    """Rows of curves (op, mode, world_size, k distinct sizes 64 B x 1..k), t = 10 us + b / 1 GB/s."""
    rows = [{"op": op, "mode": mode, "world_size": p, "bytes_per_rank": 64 * i, "median_us": 10 + 64e-3 * i}
            for op, mode, p, k in spec for i in range(1, k + 1)]
    return pd.DataFrame(rows)


@pytest.fixture
def no_fitting(monkeypatch):
    """Fail the test if any curve is fitted: the limits must refuse before the work starts."""
    def boom(*_a, **_k):
        raise AssertionError("a curve was fitted before the limit was checked")
    monkeypatch.setattr(fit_module, "_fit_group", boom)


# -- fit: curves, points, time ------------------------------------------------------------------------------------
def test_fit_plan_of_the_bundled_cpu_calibration():
    """8 per-p curves (82 + 86 + 43 x 4 + 82 + 86 = 508 sizes) and 4 generic ones (all_gather / gather over p = 2, 4:
    total sizes 2 b and 4 b, 98 distinct each; all_reduce / broadcast: S = b, 43 each): 12 curves, 790 points."""
    frame = bin_repeats(read_measurements(ROOT / "data/calibration/cpu-gloo/collectives.csv"))
    plan = fit_plan(frame)
    assert len(plan) == 12 <= MAX_FIT_CURVES
    assert dict(plan)["all_gather any p eager"] == 98 and dict(plan)["broadcast any p eager"] == 43
    assert sum(k for _, k in plan) == 790 <= MAX_FIT_POINTS


def test_more_curves_than_the_limit_are_refused_before_any_fit(no_fitting):
    # broadcast at 65 world sizes, 3 sizes each: 65 per-p curves (+ 1 generic) > 64
    frame = curves([("broadcast", "eager", p, 3) for p in range(2, 2 + MAX_FIT_CURVES + 1)])
    with pytest.raises(InputError, match=f"66 collective curves to fit, more than the limit of {MAX_FIT_CURVES}"):
        fit_measurements(frame, name="x", bootstrap=0)


def test_more_points_than_the_limit_are_refused_before_any_fit(no_fitting):
    # 11 curves x 187 sizes = 2057 points > 2048 (gather at p = 2, 3: the generic curve has 374 sizes, not fitted)
    spec = [(op, mode, p, 187) for op in ("gather", "all_gather") for mode in ("eager", "graph") for p in (2, 3)]
    spec += [("broadcast", "eager", 2, 187), ("broadcast", "graph", 2, 187), ("all_reduce", "eager", 2, 187)]
    frame = curves(spec)
    assert len(fit_plan(validate_measurements(frame, source="t"))) == 11
    with pytest.raises(InputError, match=f"2057 measured sizes over 11 collective curves, more than the limit of "
                                         f"{MAX_FIT_POINTS} points"):
        fit_measurements(frame, name="x", bootstrap=0)


def test_the_time_budget_stops_the_fit_with_how_far_it_got(monkeypatch):
    frame = curves([("broadcast", "eager", 2, 6), ("broadcast", "graph", 2, 6)])
    clock = iter(np.arange(0.0, 1000.0, 10.0))  # every look at the clock is 10 s later
    monkeypatch.setattr(fit_module.time, "monotonic", lambda: float(next(clock)))
    # start 0, before curve 1: 10 s <= 15 (fitted); before curve 2: 20 s > 15
    with pytest.raises(InputError, match=r"time budget of 15 s spent after 1 of 2 curves \(20 s\); pass "
                                         r"--time-budget-s"):
        fit_measurements(frame, name="x", bootstrap=0, time_budget_s=15)


def test_a_fit_inside_its_budget_is_unchanged():
    frame = curves([("broadcast", "eager", 2, 6)])
    a = fit_measurements(frame, name="x", bootstrap=0, time_budget_s=None)
    b = fit_measurements(frame, name="x", bootstrap=0, time_budget_s=1000)
    assert a["collectives"] == b["collectives"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e9"])
def test_bad_time_budget_is_one_line(value, tmp_path, capsys):
    src = tmp_path / "m.csv"
    curves([("broadcast", "eager", 2, 6)]).to_csv(src, index=False)
    code = fit_module.main([str(src), "--out", str(tmp_path / "p.json"), "--time-budget-s", value])
    assert code == 2
    assert "--time-budget-s must be in (0, 86400]" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "p.json").exists()


# -- multi-file upload --------------------------------------------------------------------------------------------
def test_a_multi_file_upload_over_the_combined_size_is_refused_before_parsing(monkeypatch):
    def boom(*_a, **_k):
        raise AssertionError("parsed before the combined size was checked")
    monkeypatch.setattr(multi_upload, "read_measurement_file", boom)
    monkeypatch.setattr(multi_upload, "parse_upload", boom)
    each = multi_upload.MAX_COMBINED_BYTES // 16 + 1  # sixteen files, each under the per-file limit
    files = [(f"f{i}.csv", b"x" * each) for i in range(16)]
    with pytest.raises(InputError, match=f"upload: 16 files of {16 * each:,} bytes together, more than the limit"):
        multi_upload.parse_uploads(files, base=None)


def test_a_multi_file_upload_stops_parsing_at_the_file_over_the_combined_row_limit(monkeypatch):
    parsed = []

    def read(name, data):
        parsed.append(name)
        return curves([("broadcast", "eager", 2, 3)])

    monkeypatch.setattr(multi_upload, "read_measurement_file", read)
    monkeypatch.setattr(multi_upload, "MAX_UPLOAD_ROWS", 5)
    with pytest.raises(InputError, match="a.csv, b.csv, c.csv: 6 rows, more than the limit of 5 rows"):
        multi_upload.fit_together([("a.csv", b"1"), ("b.csv", b"1"), ("c.csv", b"1")], base=None)
    assert parsed == ["a.csv", "b.csv"]


# -- nccl-tests logs ------------------------------------------------------------------------------------------------
def test_log_lines_split_exactly_as_splitlines():
    text = "a\r\nb\rc\nd\x0be\x0cf\x1cg\x1dh\x1ei\x85j\u2028k\u2029l\n\nm\r\n"
    assert list(_lines(text)) == text.splitlines()
    assert list(_lines("")) == [] and list(_lines("x")) == ["x"] and list(_lines("\n")) == [""]


def test_a_log_over_the_result_row_limit_is_refused_naming_the_line(monkeypatch):
    text = nccl_log("all_gather_perf", ["h"], 8, AG_POINTS) * 2  # 2 runs x 4 rows
    monkeypatch.setattr(import_nccl_tests, "MAX_LOG_ROWS", 6)
    with pytest.raises(InputError, match=r"^ag\.log:\d+: more than 6 result rows in one log \(the limit\)"):
        parse_nccl_tests_text(text, "ag.log")
    monkeypatch.setattr(import_nccl_tests, "MAX_LOG_ROWS", 8)
    assert len(parse_nccl_tests_text(text, "ag.log")) == 8


def test_a_log_over_the_rank_line_limit_is_refused(monkeypatch):
    monkeypatch.setattr(import_nccl_tests, "MAX_RANK_LINES", 7)
    with pytest.raises(InputError, match=r"more than 7 '#\s+Rank' lines in one log"):
        parse_nccl_tests_text(nccl_log("all_gather_perf", ["h"], 8, AG_POINTS), "ag.log")


# -- header checks before pandas -------------------------------------------------------------------------------------
def test_a_reference_csv_with_too_many_columns_is_refused_before_parsing(tmp_path, monkeypatch):
    def boom(*_a, **_k):
        raise AssertionError("pandas parsed the file before its header was checked")
    monkeypatch.setattr(pd, "read_csv", boom)
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{i}" for i in range(300)) + "\n" + ",".join("1" * 300) + "\n")
    with pytest.raises(InputError, match="300 columns in the header, more than 256"):
        load_reference([wide])
    with pytest.raises(InputError, match="300 columns in the header, more than 256"):
        reference_from_manifest(wide)
    long = tmp_path / "long.csv"
    long.write_text("op," + "x" * 70000 + "\n")
    with pytest.raises(InputError, match="header line longer than 65536 characters"):
        load_reference([long])


SWEEP_BOUND = re.compile(r"peak RSS <= (\d+) MiB \+ ([\d.]+) KiB per scenario")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_sweep_stays_inside_the_memory_bound_docs_limits_states(tmp_path, fmt):
    """issue 43: a sweep at its 2,000,000-scenario cap peaked at 5.0 GB, no bound stated. docs/limits.md states
    peak RSS <= A MiB + B KiB per scenario; a 98,304-scenario sweep (a fresh process, ru_maxrss) stays inside it,
    and so does the full-size measurement the row reports."""
    lines = (ROOT / "docs" / "limits.md").read_text().splitlines()
    row = next(line for line in lines if line.startswith("| `sweep` |"))
    base_mib, per_kib = (float(x) for x in SWEEP_BOUND.search(row).groups())
    measured_kib = int(re.search(r"ru_maxrss ([\d,]+) KiB", row).group(1).replace(",", ""))
    full = int(re.search(r"measured at ([\d,]+) scenarios", row).group(1).replace(",", ""))
    assert full <= options.MAX_SWEEP_SCENARIOS and measured_kib <= base_mib * 1024 + per_kib * full
    grid = ["--batch", "1:2048", "--vocab", "32000,128256,202048", "--num-spec-tokens", "1:4", "--mode",
            "graph,eager", "--drafting", "serial,parallel", "--tp", "8"]
    scenarios = 2048 * 3 * 4 * 2 * 2
    # the sweep process's own peak (Linux VmHWM, KiB): not ru_maxrss, which Linux carries over fork + exec from the
    # parent - a pytest worker already at 1.2 GB made every child "peak" at 1.2 GB (seen on a loaded full run)
    code = ("import re, sys; from costmodel.cli.main import main; rc = main(sys.argv[1:]); "
            "print(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "sweep", *grid, "--format", fmt, "--out",
                           str(tmp_path / f"s.{fmt}")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak_kib = int(proc.stdout.split()[-1])  # Linux: KiB
    assert peak_kib <= base_mib * 1024 + per_kib * scenarios, (peak_kib, scenarios)
