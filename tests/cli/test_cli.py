"""CLI round trips and clean failures."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pandas as pd
import pytest

from costmodel import STRATEGIES, load_profile
from costmodel.cli.main import main
from costmodel.cli.scenario_args import parse_int_list
from tests.conftest import ROOT


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "costmodel", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_predict_json_done_when_command():
    proc = run_cli("predict", "--preset", "llama4-maverick", "--tp", "8", "--batch", "64", "--num-spec-tokens", "5",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out["strategies"]) == set(STRATEGIES)
    # no --engine: vLLM's whole draft step is the answer (issue 35), the logits path per call its context
    assert out["question"]["engine"] == "vllm" and out["question"]["quantity"].startswith("whole draft step under vllm")
    for name, s in out["strategies"].items():
        assert s["total_us"] == pytest.approx(sum(s["components"].values()))
        assert s["saving_per_decode_step_us"] == pytest.approx(5 * s["saving_per_draft_call_us"])
        whole = out["whole_draft_step"]["strategies"][name]
        assert s["saving_per_decode_step_us"] == whole["saving_per_decode_step_us"]
        assert "crossover_batch" in s and "logits_path_saving_per_call_us" in s["per_call"]
    assert out["scenario"]["vocab"] == 202048 and out["scenario"]["tp"] == 8
    assert out["crossover_batch"] == out["strategies"]["local_argmax_pairs"]["crossover_batch"]
    assert out["profile"]["kind"] == load_profile(None).provenance.kind


def test_predict_table_and_impact(capsys):
    assert main(["predict", "--preset", "llama3-8b-eagle3", "--tp", "4", "--batch", "32", "--num-spec-tokens", "3",
                 "--itl-ms", "12", "--acceptance-length", "2.5"]) == 0
    text = capsys.readouterr().out
    assert "local_argmax_pairs" in text and "ITL 12.000 ->" in text and "d2t on" in text


def test_predict_crossover_null_when_none(capsys):
    assert main(["predict", "--vocab", "202048", "--tp", "8", "--batch", "64", "--json", "--max-batch", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["strategies"]["gather_to_rank0"]["crossover_batch"] is None


def test_sweep_is_tidy_and_complete(tmp_path):
    out = tmp_path / "sweep.csv"
    assert main(["sweep", "--batch", "1:16", "--vocab", "32000,128256,202048", "--tp", "2,4,8",
                 "--mode", "graph,eager", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert len(frame) == 16 * 3 * 3 * 2 * len(STRATEGIES)
    assert not frame.duplicated(["vocab", "tp", "batch", "mode", "strategy"]).any()
    row = frame[(frame.vocab == 128256) & (frame.tp == 4) & (frame.batch == 16) & (frame["mode"] == "graph")]
    one = json.loads(subprocess.run([sys.executable, "-m", "costmodel", "predict", "--vocab", "128256", "--tp", "4",
                                     "--batch", "16", "--mode", "graph", "--json"], cwd=ROOT, capture_output=True,
                                    text=True).stdout)
    for _, r in row.iterrows():
        assert r.total_us == pytest.approx(one["strategies"][r.strategy]["total_us"])


def test_sweep_presets_with_lists(capsys):
    assert main(["sweep", "--preset", "llama4-maverick,qwen3-8b-eagle3", "--batch", "1:4096@8", "--tp", "2,8"]) == 0
    frame = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    assert set(frame.vocab) == {202048, 151936} and frame.batch.nunique() == 8


def test_predict_points_round_trip(tmp_path):
    points = pd.DataFrame({
        "op": ["all_gather", "all_reduce", "gather", "broadcast", "argmax", "pair_reduce"],
        "mode": ["graph", "eager", "graph", "graph", "graph", "eager"],
        "world_size": [8, 4, 2, 8, 1, 4], "nodes": [1, 1, 1, 1, 1, 1],
        "bytes_per_rank": [40960, 8, 1 << 20, 512, 0, 0], "rows": [0, 0, 0, 0, 64, 64],
        "cols": [0, 0, 0, 0, 202048, 0], "dtype": ["bf16", "fp32", "bf16", "fp32", "bf16", "fp32"],
        "median_us": [21.0, 23.0, 30.0, 15.0, 11.0, 9.0], "extra_note": list("abcdef"),
    })
    src, dst = tmp_path / "points.csv", tmp_path / "pred.csv"
    points.to_csv(src, index=False)
    proc = run_cli("predict-points", "--profile", "h200-sxm-nvlink", "--in", str(src), "--out", str(dst))
    assert proc.returncode == 0, proc.stderr
    out = pd.read_csv(dst)
    assert list(out.columns[: len(points.columns)]) == list(points.columns)
    assert (out["extra_note"] == points["extra_note"]).all()
    assert (out["predicted_us"] > 0).all()
    expected_ag = 4 + 6.6 + 0.6 * 7 + 40960 * 8 * 7 / 8 / 141e3
    assert out.loc[0, "predicted_us"] == pytest.approx(expected_ag)


def test_profiles_lists_provenance(capsys):
    assert main(["profiles", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {r["name"] for r in rows}
    assert {"h100-sxm-nvlink", "h200-sxm-nvlink", "a100-sxm-nvlink"} <= names
    assert sum(r["default"] for r in rows) == 1


@pytest.mark.parametrize("args, needle", [
    (["predict", "--vocab", "202048", "--tp", "3"], "tp"),
    (["predict", "--batch", "abc"], "--batch"),
    (["predict", "--dtype", "fp8"], "--dtype"),
    (["predict", "--preset", "nope"], "preset"),
    (["predict", "--profile", "missing.json"], "missing.json"),
    (["predict", "--batch", "1,2"], "--batch"),
    (["predict", "--itl-ms", "-1", "--acceptance-length", "2"], "itl-ms"),
    (["sweep", "--batch", "0,4", "--vocab", "202048"], "batch"),
    (["predict", "--itl-ms", "25"], "--acceptance-length"),
    (["predict", "--num-spec-tokens", "3", "--itl-ms", "25", "--acceptance-length", "4.5"], "1..K+1"),
    (["sweep", "--format", "xlsx"], "--format"),
    (["predict-points", "--in", "nope.csv", "--out", "x.csv"], "nope.csv"),
    (["frobnicate"], "invalid choice"),
    (["sweep", "--out", "/nonexistent-dir/sweep.csv"], "nonexistent-dir"),
    (["predict", "--acceptance-length", "2"], "--itl-ms"),
])
def test_bad_input_fails_cleanly(args, needle, tmp_path):
    proc = run_cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_profile_and_points_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = run_cli("predict", "--profile", str(bad))
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    pts = tmp_path / "pts.csv"
    pts.write_text("op,mode,world_size,bytes_per_rank\nall_gather,graph,8,NaN\n")
    proc = run_cli("predict-points", "--in", str(pts), "--out", str(tmp_path / "o.csv"))
    assert proc.returncode == 2 and "bytes_per_rank" in proc.stderr
    pts.write_text("op,mode,world_size,bytes_per_rank\nall_to_all,graph,8,64\n")
    proc = run_cli("predict-points", "--in", str(pts), "--out", str(tmp_path / "o.csv"))
    assert proc.returncode == 2 and "all_to_all" in proc.stderr


def test_parse_int_list_forms():
    assert parse_int_list("8", "x") == [8]
    assert parse_int_list("1,2,4", "x") == [1, 2, 4]
    assert parse_int_list("1:5", "x") == [1, 2, 3, 4, 5]
    assert parse_int_list("5:15:5", "x") == [5, 10, 15]
    assert parse_int_list("1:1000@4", "x") == [1, 10, 100, 1000]


# -- issue 12: CLI fixes -----------------------------------------------------------------------------------
def test_sweep_marks_impossible_tp_invalid_instead_of_aborting(tmp_path):
    out = tmp_path / "s.csv"
    assert main(["sweep", "--tp", "2,3,4", "--batch", "1,64", "--vocab", "202048", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert len(frame) == 3 * 2 * len(STRATEGIES)
    bad = frame[frame.tp == 3]
    assert (~bad.valid).all() and bad.total_us.isna().all()
    assert (bad.invalid_reason == "TP size 3 does not divide the padded draft vocab 202048").all()
    good = frame[frame.tp != 3]
    assert good.valid.all() and good.total_us.notna().all() and good.invalid_reason.isna().all()  # empty cells
    one = json.loads(run_cli("predict", "--vocab", "202048", "--tp", "4", "--batch", "64", "--json",
                             "--no-intervals").stdout)
    for _, r in good[(good.tp == 4) & (good.batch == 64)].iterrows():
        assert r.total_us == pytest.approx(one["strategies"][r.strategy]["total_us"])


def test_sweep_csv_carries_the_scenario_columns_and_parquet_matches(tmp_path):
    csv, parquet = tmp_path / "s.csv", tmp_path / "s.parquet"
    grid = ["sweep", "--preset", "llama3-8b-eagle3", "--batch", "1:8", "--num-spec-tokens", "2,5", "--tp", "4"]
    assert main([*grid, "--out", str(csv)]) == 0
    assert main([*grid, "--out", str(parquet), "--format", "parquet"]) == 0
    a, b = pd.read_csv(csv), pd.read_parquet(parquet)
    for column in ("profile", "vocab", "draft_vocab", "d2t", "tp", "nodes", "dtype", "num_spec_tokens", "mode",
                   "drafting", "impl", "batch", "strategy"):
        assert column in a.columns and column in b.columns, column
    assert len(a) == len(b) == 8 * 2 * len(STRATEGIES)
    assert (a.vocab == 128256).all() and (a.draft_vocab == 32000).all() and a.d2t.all()
    assert (a.profile == load_profile(None).name).all()
    assert a.total_us.to_numpy() == pytest.approx(b.total_us.to_numpy())
    k5 = a[(a.num_spec_tokens == 5)]
    assert k5.saving_per_decode_step_us.to_numpy() == pytest.approx(5 * k5.saving_per_draft_call_us.to_numpy())


def test_sweep_text_cells_are_formula_safe(tmp_path):
    data = json.loads((ROOT / "data" / "profiles" / "cpu-gloo.json").read_text())
    data["name"] = "=HYPERLINK(1)"
    prof = tmp_path / "evil.json"
    prof.write_text(json.dumps(data))
    out = tmp_path / "s.csv"
    assert main(["sweep", "--profile", str(prof), "--tp", "2", "--batch", "1", "--out", str(out)]) == 0
    assert set(pd.read_csv(out).profile) == {"'=HYPERLINK(1)"}


def test_predict_defaults_equal_the_dashboards_and_help_shows_them(capsys):
    from dashboard.state import Inputs

    d = Inputs()
    assert main(["predict", "--json", "--no-intervals"]) == 0
    sc = json.loads(capsys.readouterr().out)["scenario"]
    assert (sc["vocab"], sc["draft_vocab"], sc["d2t"], sc["tp"], sc["nodes"], sc["batch"], sc["num_spec_tokens"],
            sc["drafting"], sc["dtype"], sc["engine"], sc["mode"], sc["impl"]) == (
        d.vocab, d.draft_vocab, d.d2t, d.tp, d.nodes, d.batch, d.k, d.drafting, d.dtype, d.engine, "engine", d.impl)
    assert d.engine == "vllm"  # the switch is vLLM's: both faces answer in its terms by default (issue 35)
    proc = run_cli("predict", "--help")
    text = " ".join(proc.stdout.split())
    assert f"(default: {d.batch})" in text and f"(default: {d.k})" in text and "(default: None)" not in text
    assert "ms per decode step" in text and "1..K+1" in text


def test_every_option_has_help():
    from costmodel.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        for action in p._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"{name} {action.option_strings}"


def test_validate_summary_only_prints_just_the_summary():
    proc = run_cli("validate", "--summary-only")
    assert proc.returncode == 0, proc.stderr
    assert "Empty DataFrame" not in proc.stdout and "Columns:" not in proc.stdout
    lines = proc.stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["file", "check", "n"] and any(line.split()[0] == "all" for line in lines[1:])


def test_predict_impact_sign_convention(capsys):
    assert main(["predict", "--preset", "llama4-maverick", "--tp", "8", "--batch", "64", "--num-spec-tokens", "5",
                 "--itl-ms", "25", "--acceptance-length", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["strategies"]["local_argmax_pairs"]
    im = s["impact"]
    lo, hi = (s["interval"]["saving_per_decode_step_us"][k] / 1000 for k in ("low", "high"))
    gain = im["output_throughput_gain_pct_interval"]
    assert (gain["low"], gain["high"]) == pytest.approx((100 * (25 / (25 - lo) - 1), 100 * (25 / (25 - hi) - 1)))
    saving_ms = s["saving_per_decode_step_us"] / 1000
    assert im["itl_after_ms"] == pytest.approx(25 - saving_ms)
    assert im["itl_reduction_pct"] == pytest.approx(100 * saving_ms / 25)
    assert im["output_throughput_gain_pct"] == pytest.approx(100 * (25 / (25 - saving_ms) - 1))
    assert im["tpot_after_ms"] == pytest.approx((25 - saving_ms) / 3)
    assert (im["itl_reduction_pct"] > 0) == (s["saving_per_decode_step_us"] > 0)


def test_readme_calibrate_step4_after_a_two_rank_calibration(tmp_path):
    """Fit a profile from a 2-rank calibration (TP 2 curves only), then README step 4 at TP 8 with intervals."""
    measured = pd.read_csv(ROOT / "data" / "calibration" / "cpu-gloo" / "collectives.csv")
    two = measured[(measured.world_size == 2) & measured.op.isin(["all_gather", "all_reduce"])]
    assert len(two) > 20
    calib = tmp_path / "calib"
    calib.mkdir()
    two.to_csv(calib / "collectives.csv", index=False)
    out = tmp_path / "my-cluster.json"
    fit = subprocess.run([sys.executable, "-m", "calibration.fit", str(calib), "--out", str(out), "--name",
                          "my-cluster", "--bootstrap", "10"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert fit.returncode == 0, fit.stderr
    # the fit report is a table for people: no pandas NaN / <NA> cells, errors in %, base curves summarised
    report = fit.stdout.splitlines()
    assert report[0].split()[:3] == ["kind", "op", "p"]
    assert "NaN" not in fit.stdout and "<NA>" not in fit.stdout and "%" in report[1]
    assert any(line.startswith("not measured, from base profile") for line in report)
    proc = run_cli("predict", "--profile", str(out), "--preset", "llama4-maverick", "--tp", "8", "--batch", "64",
                   "--num-spec-tokens", "5")
    assert proc.returncode == 0, proc.stderr
    assert "90% interval" in proc.stdout and "profile my-cluster" in proc.stdout


def test_version_and_a_short_dashboard_help(capsys):
    """issue 18: no --version; `argmax-tp dashboard --help` printed Streamlit's 5,000-line help."""
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("argmax-tp 0.")
    assert main(["dashboard", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: argmax-tp dashboard") and len(out.splitlines()) < 10


def test_launched_tools_name_the_argmax_tp_command_in_their_usage(capsys):
    """issue 18: usage lines said `python -m calibration.*` when run as `argmax-tp fit` etc."""
    assert main(["fit", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: argmax-tp fit ")
    assert main(["kernel-report", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: argmax-tp kernel-report ")


@pytest.mark.parametrize("extra", [(), ("--engine", "vllm", "--forward-us", "300")])
def test_no_crossover_interval_where_the_point_has_no_crossover(capsys, extra):
    """Issue 43 item 6: "wins at every batch in range" / "never wins in range" rows were followed by "90% interval:
    ..., crossover 1.0..3.9" (the range of the minority of members that do cross); the interval line now says the
    point has none and how many members cross, and a crossover interval stands only under a point crossover."""
    args = ["predict", "--preset", "llama3-8b", "--tp", "2", "--batch", "8", "--no-placements", *extra]
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    lone = [n for n, s in result["strategies"].items()
            if s.get("crossover_batch") is None and (s.get("interval") or {}).get("crossover_batch")]
    assert lone, "the case: a strategy with no point crossover whose crossing members have an interval"
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [(above, line) for above, line in zip(lines, lines[1:]) if "90% interval:" in line]
    assert len(rows) >= 4
    for above, line in rows:
        no_point = "wins at every batch in range" in above or "never wins in range" in above
        if no_point:
            assert ", crossover " not in line, (above, line)
    for name in lone:
        above, line = next((a, b) for a, b in rows if a.startswith(name + " "))
        frac = result["strategies"][name]["interval"]["crossover_found_fraction"]
        assert f"no crossover at the point ({frac:.0%} of members cross in range)" in line, line
