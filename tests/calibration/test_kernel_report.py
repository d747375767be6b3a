"""calibration.kernel_report: bandwidth and batch-1 summaries, hand-computed."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from calibration.fitting.kernel_report import bandwidth_table, batch1_table, main, with_bandwidth
from costmodel.io.measurements import read_measurements, validate_measurements

ROOT = Path(__file__).resolve().parents[2]


def frame():
    rows = [
        # op, dtype, mode, p, rows, cols, median_us
        ("relayout_copy", "bf16", "graph", 8, 1024, 25256, 100.0),   # 2*1024*8*25256*2 B / 100 us
        ("local_argmax", "bf16", "graph", 1, 2048, 25256, 50.0),
        ("local_argmax", "bf16", "graph", 1, 1, 25256, 10.0),
        ("local_argmax_fused", "bf16", "graph", 1, 1, 25256, 4.0),
        ("pair_reduce", "fp32", "eager", 8, 1, 0, 30.0),
        ("pair_reduce_fused", "fp32", "eager", 8, 1, 0, 12.0),
    ]
    df = pd.DataFrame(rows, columns=["op", "dtype", "mode", "world_size", "rows", "cols", "median_us"])
    return validate_measurements(df)


def test_bandwidth_fraction_of_copy():
    bw = bandwidth_table(frame(), min_mib=32)
    copy_gbps = 2 * 1024 * 8 * 25256 * 2 / 100.0 * 1e-3
    (row,) = bw.itertuples()
    assert row.op == "local_argmax"
    expected = (2048 * 25256 * 2 + 2 * 2048 * 8) / 50.0 * 1e-3
    assert row.gbps == pytest.approx(expected)
    assert row.fraction_of_copy == pytest.approx(expected / copy_gbps)


def test_batch1_speedups(tmp_path, capsys):
    b1 = batch1_table(frame()).set_index("base_op")
    assert b1.loc["local_argmax", "speedup"] == pytest.approx(2.5)
    assert b1.loc["pair_reduce", "speedup"] == pytest.approx(2.5)
    path = tmp_path / "k.csv"
    frame().to_csv(path, index=False)
    assert main([str(path), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "batch1.csv").exists() and (tmp_path / "bandwidth.csv").exists()
    assert "speed-up" in capsys.readouterr().out


def test_bad_flag_is_one_error_line_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "k.csv"), "--bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "--bogus" in err and "\n" not in err


def test_unwritable_out_is_one_error_line_exit_2(tmp_path, capsys):
    path = tmp_path / "k.csv"
    frame().to_csv(path, index=False)
    assert main([str(path), "--out", str(path)]) == 2  # --out names a file, not a folder
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --out") and "\n" not in err and "Traceback" not in err


def test_probe_comparison_matches_shapes_and_divides(tmp_path, capsys):
    from calibration.fitting.kernel_report import probe_comparison

    mine = frame()
    probe = validate_measurements(pd.DataFrame(
        [("local_argmax", "bf16", "graph", 1, 1, 25256, 5.0), ("argmax", "bf16", "graph", 1, 1, 25256, 7.0)],
        columns=["op", "dtype", "mode", "world_size", "rows", "cols", "median_us"]))
    cmp = probe_comparison(mine, probe)
    assert list(cmp["op"]) == ["local_argmax"] and cmp["ratio"].iloc[0] == pytest.approx(10.0 / 5.0)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    mine.to_csv(a, index=False)
    probe.to_csv(b, index=False)
    assert main([str(a), "--probe", str(b), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "probe_comparison.csv").exists()
    only = probe[probe["op"] == "argmax"]
    only.to_csv(b, index=False)
    assert main([str(a), "--probe", str(b)]) == 2
    assert "no shape in common" in capsys.readouterr().err


def test_top_k_rows_of_a_kernel_benchmark_get_a_byte_count():
    """calibrate-kernels writes local_topk / topk_merge rows; kernel-report used to refuse them (issue 18)."""
    frame = pd.DataFrame({"op": ["local_topk", "topk_merge"], "dtype": ["bf16", "fp32"], "mode": ["graph"] * 2,
                          "world_size": [8, 8], "rows": [4, 4], "cols": [25256, 64], "k": [8, 8],
                          "median_us": [10.0, 5.0]})
    out = with_bandwidth(frame)
    assert out["bytes"].tolist() == [4 * 25256 * 2 + 4 * 8 * 8, 4 * 64 * 8 + 4 * 8 * 8]  # hand-computed
    assert (out["gbps"] > 0).all()


def test_a_run_with_no_large_shape_says_so_instead_of_an_empty_series(tmp_path, capsys):
    path = tmp_path / "k.csv"
    frame().to_csv(path, index=False)
    assert main([str(path), "--min-mib", "4096"]) == 0
    out = capsys.readouterr().out
    assert "no shape of >= 4096 MiB" in out and "Series" not in out


def test_kernel_report_on_a_quick_run_reports_its_shapes_and_what_it_cannot_show(tmp_path, capsys):
    """issue 35: on `calibrate-kernels --quick` output kernel-report printed one line (no shape of >= 32 MiB) and
    nothing else. It reports every op's shapes and times, and says what a quick run cannot show."""
    out = tmp_path / "k"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ops = "local_argmax,relayout_copy,pair_reduce"
    proc = subprocess.run([sys.executable, "-m", "calibration.kernels", "--quick", "--device", "cpu", "--ops", ops,
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert main([str(out / "kernels.csv"), "--out", str(tmp_path / "r")]) == 0
    text = capsys.readouterr().out
    for op in ops.split(","):
        assert op in text
    assert "--quick" in text and "cannot show" in text  # what a smoke test's numbers are not
    assert "*_fused" in text  # and why there is no batch-1 speed-up
    shapes = pd.read_csv(tmp_path / "r" / "shapes.csv")
    frame = read_measurements(out / "kernels.csv")
    assert set(shapes["op"]) == set(ops.split(",")) and shapes["shapes"].sum() == len(frame)
    row = shapes[(shapes["op"] == "local_argmax")].iloc[0]
    assert row["rows"] == "1, 16" and row["cols"] == "4000, 16032"  # the quick grid
    assert row["min_us"] == frame.loc[frame["op"] == "local_argmax", "median_us"].min()
