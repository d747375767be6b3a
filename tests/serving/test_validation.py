"""`validate --serving` (issue 38 item 6): each bench run's own metrics against the baseline strategy's replay."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from costmodel.cli.main import main
from costmodel.profiles.store import load_profile
from costmodel.serving.ab import vllm_batch_defaults
from costmodel.serving.validation import AB_PAIRS, PAIR_TARGET_PCT, TARGET_PCT, bundled_runs, noise_rows
from tests.conftest import ROOT

EXAMPLE = ROOT / "data" / "examples" / "vllm-cpu-spec-k3.json"


def test_bundled_real_runs_are_replayed_within_the_issues_bounds(capsys, tmp_path):
    """The default runs are the bundled real vLLM runs (data/serving-runs/); the CSV holds every metric's row, the
    text one line per run, and the error is the same replay `simulate --json` reports."""
    out, pairs = tmp_path / "serving.csv", tmp_path / "pairs.csv"
    assert main(["validate", "--serving", "--out", str(out), "--pairs-out", str(pairs)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("serving: each run's own metrics vs the baseline strategy's replay")
    rows = pd.read_csv(out)
    names = {p.name for p in bundled_runs()}
    assert set(rows["run"]) == names and len(names) >= 16 and set(rows["kind"]) == {"measured"}
    assert rows["error_pct"].tolist() == pytest.approx(
        (100 * (rows["replayed"] - rows["measured"]) / rows["measured"]).tolist())
    # issue 42's bounds, held on every run (docs/accuracy.md): throughput, median TTFT, mean E2EL within 5%, p99 TTFT
    # and p99 ITL within 10%, with nothing given but the run
    for metric, bound in TARGET_PCT.items():
        errs = rows[rows["metric"] == metric]["error_pct"].abs()
        assert len(errs) == len(names) and errs.max() <= bound, (metric, errs.max())
    assert "within issue 42's bounds: output_throughput 23/23 (<= 5%), median_ttft_ms 23/23" in text
    # the real A/B pairs: run A and the per-step difference predict B's throughput and mean ITL within 5%
    ab = pd.read_csv(pairs)
    assert len(set(ab["pair"])) == len(AB_PAIRS)
    for metric, bound in PAIR_TARGET_PCT.items():
        assert ab[ab["metric"] == metric]["error_pct"].abs().max() <= bound, metric
    # the same replay as `simulate --json`'s baseline reproduction error
    one = ROOT / "data" / "serving-runs" / "spec1l-k3-r1.json"
    assert main(["simulate", "--bench", str(one), "--preset", "llama4-maverick", "--tp", "8", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["baseline_reproduction_error_pct"]
    assert rows[rows["run"] == one.name].set_index("metric")["error_pct"].to_dict() == pytest.approx(got)


def test_first_half_fit_holds_out_the_second_half(capsys):
    """--serving-fit first-half: the step model sees only the steps of the run's first half; the text says so."""
    one = str(ROOT / "data" / "serving-runs" / "cap8-poisson16.json")
    assert main(["validate", "--serving", one, "--serving-fit", "first-half"]) == 0
    text = capsys.readouterr().out
    assert "first half's busy steps (second half held out)" in text and "A/B pairs" not in text
    line = next(x for x in text.splitlines() if x.startswith("cap8-poisson16"))
    assert abs(float(line.split()[1].rstrip("%"))) < 5  # output throughput


def test_a_run_with_a_note_is_synthetic(capsys, tmp_path):
    doc = json.loads(EXAMPLE.read_text())
    doc["note"] = "hand-made"
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "rows.csv"
    assert main(["validate", "--serving", str(path), "--out", str(out)]) == 0
    assert "  mine.json: hand-made" in capsys.readouterr().out
    assert set(pd.read_csv(out)["kind"]) == {"synthetic"}


@pytest.mark.parametrize("argv, words", [
    (["--serving", "--serving-fit", "second-half"], "invalid choice: 'second-half'"),
    (["--serving", "--pairs-out", ""], "--pairs-out"),
    (["--serving-fit", "first-half"], "--serving-fit / --pairs-out: only with --serving"),
    (["--pairs-out", "p.csv"], "--serving-fit / --pairs-out: only with --serving"),
    (["--serving", str(EXAMPLE), "--pairs-out", "p.csv"], "the A/B pairs are the bundled runs'"),
])
def test_bad_serving_flags_are_one_line(capsys, argv, words):
    assert main(["validate", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_a_bad_run_is_one_line(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"duration": 1}')
    assert main(["validate", "--serving", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bench bad.json: ") and err.count("\n") == 1


@pytest.mark.parametrize("profile, want", [("h200-sxm-nvlink", (1024, 8192)), ("h100-sxm-nvlink", (1024, 8192)),
                                           ("a100-sxm-nvlink", (256, 2048)), ("l40s-pcie", (256, 2048))])
def test_simulate_takes_vllms_batch_defaults_for_the_gpu(profile, want):
    """vllm/engine/arg_utils.py EngineArgs.get_batch_defaults (API server): >= 70 GiB and not an A100 -> 1024 /
    8192, else 256 / 2048."""
    assert vllm_batch_defaults(load_profile(profile)) == want


@pytest.mark.parametrize("engine, reference, shown", [
    ("vllm", "full_all_gather", ["full_all_gather", "local_argmax_pairs"]),  # the default and the switch
    ("trtllm", "local_argmax_pairs", ["local_argmax_pairs"]),  # always the pairs: nothing to A/B
    ("tokenspeed", "packed_allreduce_max", ["packed_allreduce_max", "full_all_gather"]),
    ("none", "full_all_gather", ["full_all_gather", "full_all_gather_no_relayout", "gather_to_rank0",
                                 "local_argmax_pairs", "packed_allreduce_max"]),
])
def test_simulate_replays_what_the_engine_ran_and_can_run(capsys, engine, reference, shown):
    """The baseline run ran the engine's default strategy (the reference of every change), and only the strategies
    the engine can run are replayed (issue 38: "every strategy the engine can run")."""
    assert main(["simulate", "--bench", str(EXAMPLE), "--engine", engine, "--json"]) == 0
    ab = json.loads(capsys.readouterr().out)
    assert ab["reference"] == reference and list(ab["strategies"]) == shown
    assert set(ab["changes_pct"]) == set(shown) - {reference}


def test_noise_rows_by_hand():
    """Repeats named SETTING-rN: the predicted SD is the mean of the runs' detectability SD, the measured one the
    sample SD of their values over the mean; a setting seen once has no row."""
    from types import SimpleNamespace

    def answer(name, value, sd):
        run = SimpleNamespace(name=f"{name}.json", reported={"output_throughput": value})
        return run, {"metrics": ["output_throughput"], "detectable": {"noise": {"output_throughput": {"sd_pct": sd}}}}

    rows = noise_rows([answer("a-r1", 99.0, 1.0), answer("a-r2", 101.0, 3.0), answer("b-r1", 5.0, 1.0)])
    assert len(rows) == 1 and rows[0]["setting"] == "a" and rows[0]["runs"] == 2
    assert rows[0]["predicted_sd_pct"] == pytest.approx(2.0)
    assert rows[0]["measured_sd_pct"] == pytest.approx(100 * np.std([99.0, 101.0], ddof=1) / 100.0)
    assert rows[0]["ratio"] == pytest.approx(2.0 / rows[0]["measured_sd_pct"])
