"""Validation against reference points, uncertainty propagation, explanations, sensitivity."""

from __future__ import annotations

import copy
import re

import numpy as np
import pandas as pd
import pytest

from costmodel import STRATEGIES, Scenario, collective_time_us, load_profile, predict
from costmodel.answers.explain import explain, format_explanation
from costmodel.answers.sensitivity import elasticities
from costmodel.cli.main import main
from costmodel.evidence.intervals import propagate
from costmodel.evidence.reference import load_reference
from costmodel.evidence.validate import format_table_errors, summary, validate
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.replicates import replicate_profiles

H200 = load_profile("h200-sxm-nvlink")


def _reference(tmp_path):
    frame = pd.DataFrame({
        "id": ["t", "bw"], "gpu": ["NVIDIA H200 SXM"] * 2, "profile": ["h200-sxm-nvlink"] * 2,
        "op": ["all_gather", "all_reduce"], "mode": ["graph", "eager"], "world_size": [8, 8], "nodes": [1, 1],
        "bytes_per_rank": [40960, 1 << 20], "median_us": [20.0, np.nan], "busbw_gbps": [np.nan, 40.0],
        "used_in_profile": [False, True], "source": ["test time", "test busbw"],
    })
    path = tmp_path / "ref.csv"
    frame.to_csv(path, index=False)
    return path


def test_validate_small_reference(tmp_path):
    ref = load_reference([_reference(tmp_path)])
    # busbw -> time: S * 2(p-1)/p / busbw
    assert ref.loc[1, "median_us"] == pytest.approx((1 << 20) * 1.75 / 40.0 * 1e-3)
    table = validate(ref)
    expected = float(collective_time_us(H200, "all_gather", 40960, 8, 1, "graph"))
    assert table.loc[0, "predicted_us"] == pytest.approx(expected)
    assert table.loc[0, "rel_error"] == pytest.approx((expected - 20.0) / 20.0)
    summ = summary(table)
    held = summ[(summ["file"] == "ref.csv") & (summ["check"] == "held-out")].iloc[0]
    assert held["n"] == 1 and held["median_abs_rel_error"] == pytest.approx(abs(table.loc[0, "rel_error"]))


def test_validate_cli_threshold(tmp_path, capsys):
    path = _reference(tmp_path)
    out = tmp_path / "val.csv"
    assert main(["validate", "--reference", str(path), "--out", str(out)]) == 0
    worst = pd.read_csv(out)["rel_error"].abs().max()
    assert main(["validate", "--reference", str(path), "--max-error", str(worst * 1.01)]) == 0
    assert main(["validate", "--reference", str(path), "--max-error", str(worst * 0.99)]) == 1
    assert "exceeds --max-error" in capsys.readouterr().err


def test_bundled_reference_validates():
    ref = load_reference(sorted((pytest.importorskip("costmodel.evidence.reference").REFERENCE_DIR).glob("*.csv")))
    table = validate(ref)
    assert table["predicted_us"].notna().all() and (table["predicted_us"] > 0).all()
    assert set(table["source"].str.len() > 0) == {True}


# -- uncertainty ---------------------------------------------------------------------------
def _jittered_profile(n: int, spread: float, seed: int = 0):
    """A profile whose replicates scale every busbw and latency by 1 +- spread (symmetric)."""
    rng = np.random.default_rng(seed)
    data = {k: v for k, v in H200.raw.items() if k not in ("bootstrap", "ensemble")}
    reps = []
    for _ in range(n):
        curves = copy.deepcopy(data["collectives"])
        for c in curves:
            c["launch_us"] *= 1 + rng.uniform(-spread, spread)
            for r in c["regimes"]:
                r["busbw_gbps"] *= 1 + rng.uniform(-spread, spread)
        reps.append({"collectives": curves})
    return profile_from_dict({**data, "bootstrap": reps})


def test_intervals_contain_point_estimate_and_shrink():
    sc = Scenario(vocab=202048, tp=8, batch=64)
    # parameter uncertainty alone (the per-op discrepancy term does not shrink with the jitter)
    wide = propagate(sc, _jittered_profile(60, 0.2), with_crossover=True, with_discrepancy=False)
    narrow = propagate(sc, _jittered_profile(60, 0.05), with_crossover=True, with_discrepancy=False)
    point = predict(sc, H200)
    for name in STRATEGIES[1:]:
        s = float(point.saving_us(name))
        assert wide[name].saving_us.low <= s <= wide[name].saving_us.high
        width_wide = wide[name].saving_us.high - wide[name].saving_us.low
        width_narrow = narrow[name].saving_us.high - narrow[name].saving_us.low
        assert width_narrow < width_wide or width_wide < 1e-9  # ~0: the jittered collectives cancel out
    assert wide["local_argmax_pairs"].verdict == "faster"


def test_uncertain_verdict_when_interval_straddles_zero():
    # near the crossover the derived ensemble cannot tell the strategies apart
    cross = float(__import__("costmodel").crossover(Scenario(vocab=202048, tp=4), "local_argmax_pairs", H200).batch)
    unc = propagate(Scenario(vocab=202048, tp=4, batch=round(cross)), H200, with_crossover=False)
    assert unc["local_argmax_pairs"].verdict == "uncertain"
    assert unc["local_argmax_pairs"].saving_us.straddles_zero()


def test_replicates_of_derived_profiles_load():
    reps = replicate_profiles(H200)
    assert len(reps) == 100
    assert len({r.graph_kernel_us for r in reps}) > 50


def test_predict_json_carries_intervals(capsys):
    import json

    assert main(["predict", "--vocab", "202048", "--tp", "8", "--batch", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    iv = out["strategies"]["local_argmax_pairs"]["interval"]
    assert iv["saving_per_draft_call_us"]["low"] <= iv["saving_per_draft_call_us"]["high"]
    assert out["strategies"]["local_argmax_pairs"]["verdict"] in ("faster", "slower", "uncertain")


# -- explanations ----------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {"vocab": 202048, "tp": 8, "batch": 64},
    {"vocab": 128256, "draft_vocab": 32000, "d2t": True, "tp": 4, "batch": 3, "mode": "eager"},
    {"vocab": 151936, "tp": 2, "nodes": 2, "batch": 2048, "dtype": "fp32"},
    {"vocab": 32000, "tp": 1, "batch": 16},
    {"vocab": 202048, "tp": 8, "batch": 4, "impl": "fused", "mode": "eager"},
])
def test_explanations_sum_to_totals(kwargs):
    pred = predict(Scenario(**kwargs), H200)
    items = explain(pred)
    for name in STRATEGIES:
        parts = [i for i in items if i.strategy == name]
        assert sum(i.time_us for i in parts) == pytest.approx(float(pred.total_us(name)), rel=1e-9)
        for i in parts:  # the printed number is the value
            printed = float(re.findall(r"= ([0-9.]+) us$", i.text)[0])
            assert printed == pytest.approx(i.time_us, abs=6e-4)
    assert "regime" in format_explanation(pred) or kwargs["tp"] == 1


# -- sensitivity ------------------------------------------------------------------------------
def test_elasticity_of_graph_kernel_cost_matches_analytic():
    # the roofline kernel path (no GPU kernel model): every launch costs graph_kernel_us
    kernels = {k: v for k, v in H200.raw["kernels"].items() if k not in ("model", "tables")}
    roof = profile_from_dict({**{k: v for k, v in H200.raw.items() if k not in ("bootstrap", "ensemble")},
                              "kernels": kernels})
    sc = Scenario(vocab=202048, tp=8, batch=64)
    table = elasticities(sc, roof)
    row = table[table["parameter"] == "kernels graph_kernel_us"].iloc[0]
    pred = predict(sc, roof)
    saving = float(pred.saving_us("local_argmax_pairs"))
    ops = roof.kernel_ops
    launches_full = ops["relayout_copy"].launches + ops["argmax"].launches
    # + the rank-offset add (p > 1); V = V_pad = 202048, so no padding-mask kernel
    launches_pairs = ops["local_argmax"].launches + ops["pair_reduce"].launches + 1
    analytic = (launches_full - launches_pairs) * roof.graph_kernel_us / saving
    assert row["elasticity"] == pytest.approx(analytic, rel=1e-6)
    assert table["elasticity"].abs().is_monotonic_decreasing


def test_intervals_shrink_with_more_bootstrap_data():
    """Profiles fitted from 8x more measurements give narrower 90% intervals of the saving (widths summed
    over three data sets: one 20-point set's interval width is itself noisy; 1/sqrt(8) = 0.35 expected)."""
    fit = pytest.importorskip("calibration.fitting.fit")
    from tests.calibration.test_fit import collective_rows

    regimes = [(None, 12.0, 0.0, 100.0)]
    sc = Scenario(vocab=128256, tp=2, batch=256)
    widths = {1: 0.0, 8: 0.0}
    for seed in (7, 8, 9):
        for reps in (1, 8):
            frame = pd.concat([collective_rows(op, 2, "graph", regimes, noise=0.2, seed=seed, reps=reps)
                               for op in ("all_gather", "all_reduce")], ignore_index=True)
            prof = profile_from_dict(fit.fit_measurements(frame, name=f"n{reps}", bootstrap=100, seed=1))
            # the bootstrap part: the discrepancy term (leave-one-out error) does not shrink with more data
            unc = propagate(sc, prof, with_crossover=False, strategies=("local_argmax_pairs",),
                            with_discrepancy=False)
            iv = unc["local_argmax_pairs"].saving_us
            point = float(predict(sc, prof).saving_us("local_argmax_pairs"))
            assert iv.low <= point <= iv.high
            widths[reps] += iv.high - iv.low
    assert widths[8] < 0.6 * widths[1]


def test_a_table_without_held_out_rows_reads_as_such_not_nan():
    """issue 22: validate printed NaN for a table whose rows were all used to build the profile."""
    rows = pd.DataFrame({"op": ["all_gather"] * 2, "bytes_per_rank": [1 << 20] * 2, "file": ["t.csv"] * 2,
                         "profile_used": ["p"] * 2, "used_in_profile": [True, True], "rel_error": [0.1, -0.2]})
    text = format_table_errors(rows)
    assert "nan" not in text.lower() and "no held-out row" in text
