"""calibration.fitting.fit / .segmented: parameter recovery, regime choice, CV, bootstrap, profile round trip."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import lsq_linear

from calibration.fitting.fit import fit_measurements, fit_report_table, main
from calibration.fitting.segmented import best_split, range_fits, solve_bounded
from costmodel import collective_time_us, kernel_time_us
from costmodel.io.errors import InputError
from costmodel.model.collectives import bus_factor, curve_time_us, total_bytes
from costmodel.model.kernels import kernel_bytes, roofline_us
from costmodel.profiles.compact import expand_document
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.parse_curves import curve_from_dict
from costmodel.profiles.store import default_profile

ROOT = Path(__file__).resolve().parents[2]
BYTES = 2 ** np.arange(8, 28)  # bytes_per_rank 256 B .. 128 MiB, 20 sizes


def true_time_us(op, b, p, regimes):
    """Noise-free synthetic time: regimes = [(max_S or None, alpha_us, alpha_per_peer_us, busbw_gbps)]."""
    size = total_bytes(op, b, p)
    x = size * bus_factor(op, p) * 1e-3
    out = np.full(np.shape(size), np.nan)
    lower = 0.0
    for max_s, alpha, per_peer, bw in regimes:
        upper = np.inf if max_s is None else max_s
        mask = (size > lower) & (size <= upper)
        out = np.where(mask, alpha + per_peer * (p - 1) + x / bw, out)
        lower = upper
    return out


def collective_rows(op, p, mode, regimes, *, noise=0.05, seed=0, gpu="cpu", sizes=BYTES, reps=1):
    rng = np.random.default_rng(seed)
    b = np.repeat(sizes, reps)
    t = true_time_us(op, b.astype(float), np.full(b.shape, float(p)), regimes)
    t = t * (1 + noise * rng.standard_normal(t.shape))
    return pd.DataFrame({"op": op, "mode": mode, "world_size": p, "nodes": 1, "bytes_per_rank": b, "rows": 0,
                         "cols": 0, "dtype": "fp32", "median_us": t, "gpu": gpu})


ONE = [(None, 30.0, 0.0, 20.0)]
TWO = [(2 ** 20, 10.0, 0.0, 5.0), (None, 150.0, 0.0, 50.0)]  # all_gather p=2: S = 2b, jump up after b = 512 KiB


def curve_of(profile, op, ws, mode):
    """The fitted curve; an eager-only fit prices graph mode too, so its curves carry mode null."""
    (curve,) = [c for c in profile["collectives"] if (c["op"], c["world_size"]) == (op, ws)
                and c["provenance"] == "measured" and c["mode"] in (mode, None)]
    return curve


def report_of(profile, op, ws, mode):
    (row,) = [r for r in profile["fit_report"] if r["kind"] == "collective"
              and (r["op"], r["world_size"], r["mode"]) == (op, ws, mode)]
    return row


@pytest.fixture(scope="module")
def two_regime_profile():
    frame = collective_rows("all_gather", 2, "eager", TWO, seed=1)
    return frame, fit_measurements(frame, name="two", seed=1)


# -- the solver --------------------------------------------------------------------------------------------
def test_bounded_solver_matches_scipy_lsq_linear():
    rng = np.random.default_rng(7)
    for _ in range(30):
        a = np.abs(rng.standard_normal((12, 3))) * rng.uniform(0.01, 10, 3)
        target_theta = rng.standard_normal(3)  # often negative: bounds active
        b = a @ target_theta + 0.1 * rng.standard_normal(12)
        lower = np.array([0.0, 0.0, 1e-3])
        # scale rows so the target is 1, as in relative least squares
        rows = a / b[:, None] if np.all(b > 0) else a
        target = np.ones(12) if np.all(b > 0) else b
        ref = lsq_linear(rows, target, bounds=(lower, np.inf), tol=1e-12).x
        gram, rhs = rows.T @ rows, rows.T @ target
        theta, sse = solve_bounded(gram, rhs, float(target @ target), lower)
        assert np.all(theta >= lower)
        assert sse == pytest.approx(np.sum((rows @ ref - target) ** 2), rel=1e-6, abs=1e-9)


def test_dynamic_programming_finds_exact_split_on_noise_free_data():
    sizes = 2.0 ** np.arange(10, 22)
    t = np.where(sizes <= 2 ** 15, 5 + sizes * 1e-3 / 2, 50 + sizes * 1e-3 / 20)
    a = np.stack([np.ones_like(sizes), sizes * 1e-3], axis=1) / t[:, None]
    split = best_split(range_fits(a, np.arange(12), 12, np.ones((1, 12)), [0, 1e-9], min_sizes=3), 2)
    assert split.valid[0] and list(split.starts[0]) == [0, 6]
    assert split.theta[0, 0] == pytest.approx([5, 0.5], rel=1e-6)
    assert split.theta[0, 1] == pytest.approx([50, 0.05], rel=1e-6)


# -- collectives -------------------------------------------------------------------------------------------
def test_single_regime_parameters_recovered_and_bic_picks_one():
    for seed in range(4):
        frame = collective_rows("all_reduce", 4, "graph", ONE, seed=seed)
        profile = fit_measurements(frame, name="one", bootstrap=0)
        curve = curve_of(profile, "all_reduce", 4, "graph")
        assert len(curve["regimes"]) == 1, f"seed {seed}: {curve['regimes']}"
        (regime,) = curve["regimes"]
        assert regime["max_bytes"] is None
        assert regime["alpha_base_us"] == pytest.approx(30.0, rel=0.10)
        assert regime["busbw_gbps"] == pytest.approx(20.0, rel=0.10)


def test_planted_breakpoint_found_and_parameters_recovered(two_regime_profile):
    _, profile = two_regime_profile
    curve = curve_of(profile, "all_gather", 2, "eager")
    assert [r["name"] for r in curve["regimes"]] == ["R1", "R2"]
    first, second = curve["regimes"]
    # planted between S = 1 MiB (last size of R1) and S = 2 MiB (first size of R2)
    assert 2 ** 20 <= first["max_bytes"] < 2 ** 21
    assert second["max_bytes"] is None
    for fitted, (_, alpha, _, bw) in zip(curve["regimes"], TWO):
        assert fitted["alpha_base_us"] == pytest.approx(alpha, rel=0.10)
        assert fitted["busbw_gbps"] == pytest.approx(bw, rel=0.10)
    row = report_of(profile, "all_gather", 2, "eager")
    assert row["n_regimes"] == 2 and row["breakpoints_bytes"] == [first["max_bytes"]]


def test_leave_one_size_out_reported_and_not_better_than_in_sample(two_regime_profile):
    _, profile = two_regime_profile
    row = report_of(profile, "all_gather", 2, "eager")
    assert row["n_points"] == 20 and row["n_sizes"] == 20 and row["cv_folds"] == 20
    assert 0 < row["in_median_rel_err"] < 0.06
    assert row["cv_median_rel_err"] >= row["in_median_rel_err"]
    assert row["cv_p90_rel_err"] >= row["in_p90_rel_err"]


def test_bootstrap_intervals_contain_truth_and_replicates_are_stored(two_regime_profile):
    _, profile = two_regime_profile
    curve = curve_of(profile, "all_gather", 2, "eager")
    for fitted, (_, alpha, _, bw) in zip(curve["regimes"], TWO):
        lo, hi = fitted["ci90"]["alpha_base_us"]
        assert lo <= alpha <= hi
        lo, hi = fitted["ci90"]["busbw_gbps"]
        assert lo <= bw <= hi
    lo, hi = curve["regimes"][0]["ci90"]["max_bytes"]
    assert lo <= curve["regimes"][0]["max_bytes"] <= hi
    assert report_of(profile, "all_gather", 2, "eager")["n_bootstrap"] == 200
    reps = profile["bootstrap"]
    assert len(reps) == 100
    # every stored replicate is a valid curve set with the same structure (plus the base's members' curves for
    # what the base prices: issue 18, base_parts "Uncertainty of the kept parts")
    for rep in reps[:10]:
        (c,) = [c for c in rep["collectives"] if not c.get("from_base")]
        assert (c["op"], c["world_size"], c["mode"], len(c["regimes"])) == ("all_gather", 2, None, 2)
    profile_from_dict({**profile, "collectives": reps[0]["collectives"]})


def test_bootstrap_coverage_over_data_sets():
    """90% intervals over 10 independent data sets: >= 14 of the 20 (alpha, bw) intervals cover the truth.

    (Measured with 60 data sets: alpha 91%, bw 79% - a row bootstrap of 20 medians under-covers the
    bandwidth, which only the few largest sizes determine.)
    """
    hits = 0
    for seed in range(10):
        frame = collective_rows("broadcast", 2, "eager", ONE, seed=100 + seed)
        profile = fit_measurements(frame, name="cov", bootstrap=100, seed=seed)
        ci = curve_of(profile, "broadcast", 2, "eager")["regimes"][0]["ci90"]
        hits += ci["alpha_base_us"][0] <= 30.0 <= ci["alpha_base_us"][1]
        hits += ci["busbw_gbps"][0] <= 20.0 <= ci["busbw_gbps"][1]
    assert hits >= 14


def test_profile_loads_and_reproduces_noise_free_curve(two_regime_profile):
    frame, profile = two_regime_profile
    loaded = profile_from_dict(profile)
    assert loaded.provenance.kind == "mixed" and loaded.provenance.gpu == "cpu"
    b = np.concatenate([BYTES, np.sqrt(BYTES[:-1] * BYTES[1:])])
    b = b[(2 * b <= 2 ** 20) | (2 * b >= 2 ** 21)]  # sizes and midpoints, not inside the planted switch gap
    truth = true_time_us("all_gather", b, np.full(b.shape, 2.0), TWO)
    pred = collective_time_us(loaded, "all_gather", b, 2, mode="eager")
    assert np.max(np.abs(pred / truth - 1)) < 0.10


def test_generic_curve_extrapolates_world_size():
    regimes = [(None, 20.0, 4.0, 25.0)]  # alpha = 20 + 4 (p - 1)
    frames = [collective_rows("all_gather", p, "graph", regimes, seed=p) for p in (2, 4)]
    profile = fit_measurements(pd.concat(frames, ignore_index=True), name="gen", bootstrap=50)
    generic = curve_of(profile, "all_gather", None, "graph")
    (regime,) = generic["regimes"]
    assert regime["alpha_base_us"] == pytest.approx(20.0, rel=0.10)
    assert regime["alpha_per_peer_us"] == pytest.approx(4.0, rel=0.10)
    assert regime["busbw_gbps"] == pytest.approx(25.0, rel=0.10)
    assert "alpha_per_peer_us" in regime["ci90"]
    row = report_of(profile, "all_gather", None, "graph")
    assert "extrapolated" in row["note"] and row["n_points"] == 40
    loaded = profile_from_dict(profile)
    truth = true_time_us("all_gather", BYTES.astype(float), np.full(BYTES.shape, 8.0), regimes)
    pred = collective_time_us(loaded, "all_gather", BYTES, 8, mode="graph")
    assert np.max(np.abs(pred / truth - 1)) < 0.10


def test_groups_with_too_few_sizes_or_mixed_nodes_are_skipped():
    good = collective_rows("all_reduce", 2, "eager", ONE)
    few = collective_rows("broadcast", 2, "eager", ONE, sizes=BYTES[:2])
    multi = collective_rows("all_reduce", 2, "eager", ONE).assign(nodes=2)
    profile = fit_measurements(pd.concat([good, few, multi], ignore_index=True), name="skip", bootstrap=0)
    status = {(r["op"], r["nodes"]): r["status"] for r in profile["fit_report"] if r["kind"] == "collective"}
    assert status[("all_reduce", 1)] == "fitted"
    assert status[("all_reduce", 2)].startswith("skipped") and "nodes" in status[("all_reduce", 2)]
    assert status[("broadcast", 1)].startswith("skipped") and "2 distinct size" in status[("broadcast", 1)]
    with pytest.raises(InputError, match="nothing fittable"):
        fit_measurements(few, name="none", bootstrap=0)


# -- kernels -----------------------------------------------------------------------------------------------
KERNEL_TRUTH = {"local_argmax": (1.0, 2000.0), "argmax": (0.5, 3000.0)}  # fixed_us, bw_gbps
PER_KERNEL = {"graph": 2.0, "eager": 8.0}


def kernel_rows(noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    base = default_profile()
    rows = []
    for op, (fixed, bw) in KERNEL_TRUTH.items():
        launches = base.kernel_ops[op].launches
        for mode, k in PER_KERNEL.items():
            for r in (1, 4, 16, 64):
                for c in (1000, 10000, 100000):
                    t = launches * k + fixed + float(kernel_bytes(op, r, c, 1, 2)) / bw * 1e-3
                    rows.append({"op": op, "mode": mode, "world_size": 1, "nodes": 1, "bytes_per_rank": 0,
                                 "rows": r, "cols": c, "dtype": "bf16",
                                 "median_us": t * (1 + noise * rng.standard_normal()), "gpu": "cpu"})
    return pd.DataFrame(rows)


def test_kernel_tables_and_roofline_round_trip():
    frame = kernel_rows()
    profile = fit_measurements(frame, name="kern", bootstrap=0)
    loaded = profile_from_dict(profile)
    assert {t.op for t in loaded.kernel_tables} == set(KERNEL_TRUTH)
    assert len(loaded.kernel_tables) == 4  # (op, mode) grids, bf16, p = 1
    for op in KERNEL_TRUTH:
        assert loaded.kernel_ops[op].provenance == "measured"
        sub = frame[frame["op"] == op]
        est = kernel_time_us(loaded, op, rows=sub["rows"].to_numpy(), cols=sub["cols"].to_numpy(),
                             mode=sub["mode"].to_numpy(), dtype="bf16")
        np.testing.assert_allclose(est.time_us, sub["median_us"], rtol=1e-5)
        assert not est.extrapolated.any()
        roof = roofline_us(loaded, op, sub["rows"].to_numpy(), sub["cols"].to_numpy(), 1, 2, sub["mode"].to_numpy())
        np.testing.assert_allclose(roof, sub["median_us"], rtol=1e-4)
        assert loaded.kernel_ops[op].bw_gbps == pytest.approx(KERNEL_TRUTH[op][1], rel=1e-4)
    assert loaded.eager_launch_us - loaded.graph_kernel_us == pytest.approx(6.0, rel=1e-4)
    rows = [r for r in profile["fit_report"] if r["kind"] == "kernel"]
    assert len(rows) == 4 and all(r["in_p90_rel_err"] < 1e-4 and r["cv_folds"] == 12 for r in rows)


def test_eager_only_kernels_set_graph_cost_equal_to_eager():
    frame = kernel_rows(noise=0.05, seed=2)
    frame = frame[frame["mode"] == "eager"]
    profile = fit_measurements(frame, name="cpu", bootstrap=0)
    assert profile["kernels"]["graph_kernel_us"] == profile["kernels"]["eager_launch_us"]
    rows = {r["op"]: r for r in profile["fit_report"] if r["kind"] == "kernel"}
    for op in KERNEL_TRUTH:
        assert rows[op]["cv_median_rel_err"] >= rows[op]["in_median_rel_err"] * 0.5
        assert rows[op]["in_median_rel_err"] < 0.06


def test_provenance_kind_measured_only_when_nothing_comes_from_the_base_profile():
    base = profile_from_dict({
        "schema_version": 1, "name": "tiny", "provenance": {"kind": "derived", "source": "test", "gpu": "x"},
        "collectives": [{"op": "broadcast", "world_size": None, "mode": None, "regimes": [
            {"name": "S", "max_bytes": None, "alpha_base_us": 5.0, "busbw_gbps": 10.0}]}],
        "kernels": {"graph_kernel_us": 1.0, "eager_launch_us": 4.0,
                    "ops": {op: {"launches": 1, "fixed_us": 0.0, "bw_gbps": 100.0} for op in KERNEL_TRUTH}}})
    frames = [collective_rows("broadcast", p, m, ONE, seed=p) for p in (2, 4) for m in ("graph", "eager")]
    measured = fit_measurements(pd.concat(frames + [kernel_rows()], ignore_index=True), name="m",
                                base_profile=base, bootstrap=0)
    assert measured["provenance"]["kind"] == "measured"
    assert all(c["provenance"] == "measured" for c in measured["collectives"])
    graph_only = fit_measurements(pd.concat([frames[0], frames[2], kernel_rows()], ignore_index=True), name="g",
                                  base_profile=base, bootstrap=0)
    assert graph_only["provenance"]["kind"] == "mixed"  # eager broadcast still priced by the base curve
    assert [c["provenance"] for c in graph_only["collectives"]].count("derived") == 1


# -- refusals ----------------------------------------------------------------------------------------------
def test_refusals_name_the_field():
    frame = collective_rows("all_reduce", 2, "eager", ONE)
    mixed = frame.assign(gpu=np.where(np.arange(len(frame)) % 2, "NVIDIA A100", "NVIDIA H100"))
    with pytest.raises(InputError, match="gpu"):
        fit_measurements(mixed, name="x")
    nan = frame.copy()
    nan.loc[3, "median_us"] = np.nan
    with pytest.raises(InputError, match="median_us"):
        fit_measurements(nan, name="x")
    negative = frame.assign(median_us=-frame["median_us"])
    with pytest.raises(InputError, match="median_us"):
        fit_measurements(negative, name="x")
    with pytest.raises(InputError, match="world_size"):
        fit_measurements(frame.drop(columns=["world_size"]), name="x")
    unknown_ok = frame.assign(gpu=np.where(np.arange(len(frame)) % 2, "unknown", "cpu"))
    assert fit_measurements(unknown_ok, name="x", bootstrap=0)["provenance"]["gpu"] == "cpu"


# -- CLI ---------------------------------------------------------------------------------------------------
def test_cli_round_trip(tmp_path, capsys):
    bench = tmp_path / "bench"
    bench.mkdir()
    frames = [collective_rows("all_gather", 2, "eager", TWO, seed=5), kernel_rows(noise=0.02)]
    pd.concat(frames, ignore_index=True).to_csv(bench / "measurements.csv", index=False)
    (bench / "provenance.json").write_text(json.dumps({"software": {"torch": "2.x"}, "gpus_per_node": 4}))
    out = tmp_path / "out" / "fitted.json"
    assert main([str(bench), "--out", str(out), "--bootstrap", "30", "--seed", "4"]) == 0
    printed = capsys.readouterr().out
    assert "all_gather" in printed and "CV |err| med" in printed  # the readable fit report
    profile = json.loads(out.read_text())
    loaded = profile_from_dict(profile)
    assert loaded.name == "fitted" and loaded.provenance.software == {"torch": "2.x"}
    assert loaded.provenance.gpus_per_node == 4
    assert loaded.provenance.files == (str(bench / "measurements.csv"),)
    assert "fitted by calibration.fit from" in loaded.provenance.source
    table = fit_report_table(profile)
    assert {"in_median_rel_err", "cv_p90_rel_err", "breakpoints_bytes"} <= set(table.columns)


def test_cli_reports_the_bootstrap_it_was_asked_for(tmp_path, capsys):
    """Issue 43 item 6: the last line said "100 bootstrap replicates" whatever --bootstrap N was (the stored
    ensemble: the base's 100 members, or the first 100); it now says N per curve and what was stored."""
    csv = tmp_path / "m.csv"
    collective_rows("all_gather", 2, "eager", TWO, seed=5).to_csv(csv, index=False)
    for asked in (7, 130):
        out = tmp_path / f"fit{asked}.json"
        assert main([str(csv), "--out", str(out), "--bootstrap", str(asked)]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        stored = len(expand_document(json.loads(out.read_text())).get("bootstrap", []))
        assert f"--bootstrap {asked}: {asked} replicates per curve" in last, last
        assert f"{stored} ensemble members stored" in last or f"the first {stored} stored" in last, last
    assert main([str(csv), "--out", str(tmp_path / "none.json"), "--bootstrap", "0"]) == 0
    assert "no bootstrap (--bootstrap 0)" in capsys.readouterr().out


def test_cli_bad_input_in_a_subprocess(tmp_path):
    """The real entry point: exit 2, one line on stderr naming the field, nothing written."""
    bad = tmp_path / "bad.csv"
    collective_rows("broadcast", 2, "eager", ONE).drop(columns=["median_us"]).to_csv(bad, index=False)
    out = tmp_path / "q.json"
    run = subprocess.run([sys.executable, "-m", "calibration.fit", str(bad), "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error:") and "median_us" in run.stderr
    assert not out.exists()


def test_cli_bad_flags_and_paths(tmp_path, capsys):
    good = tmp_path / "good.csv"
    collective_rows("broadcast", 2, "eager", ONE).to_csv(good, index=False)
    for argv in ([str(good), "--out", str(tmp_path / "p.json"), "--bootstrap", "-1"],
                 [str(good), "--out", str(tmp_path / "p.json"), "--max-regimes", "x"],
                 [str(tmp_path / "missing.csv"), "--out", str(tmp_path / "p.json")],
                 [str(good), "--out", str(tmp_path / "p.json"), "--base-profile", "no-such-profile"]):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse errors
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and err.startswith("error:"), (argv, err)
    assert not (tmp_path / "p.json").exists()


def test_fitter_does_not_import_torch():
    code = "import sys, calibration.fitting.fit, calibration.fitting.segmented; print('torch' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "False", run.stderr


def test_eager_only_fit_prices_graph_mode_from_its_own_curves():
    profile = fit_measurements(collective_rows("all_gather", 2, "eager", ONE, seed=0), name="cpu", bootstrap=0)
    loaded = profile_from_dict(profile)
    b = np.geomspace(8, 1e6, 20)
    graph = collective_time_us(loaded, "all_gather", b, 2, mode="graph")
    assert np.allclose(graph, collective_time_us(loaded, "all_gather", b, 2, mode="eager"))
    assert loaded.curve("all_gather", 2, "graph").provenance == "measured"


# -- number of regimes by cross-validation (issue 9, item 7) -------------------------------------------------------
def _every_other_size(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    sizes = np.sort(frame["bytes_per_rank"].unique())
    train = frame["bytes_per_rank"].isin(sizes[::2])
    return frame[train], frame[~train]


def _held_out_p90(profile: dict, test: pd.DataFrame, op: str, p: int) -> float:
    pred = collective_time_us(profile_from_dict(profile), op, test["bytes_per_rank"].to_numpy(float), p, 1,
                              test["mode"].to_numpy().astype(str))
    return float(np.percentile(np.abs(pred - test["median_us"].to_numpy()) / test["median_us"].to_numpy(), 90))


def _bic_only(monkeypatch) -> None:
    """The fitter as it was: cross-validation never overrides BIC, no ramps."""
    import calibration.fitting.fit as fit_module

    monkeypatch.setattr(fit_module, "CV_TOLERANCE", float("inf"))
    _no_ramps(monkeypatch)


def _no_ramps(monkeypatch) -> None:
    import calibration.fitting.fit as fit_module

    monkeypatch.setattr(fit_module, "RAMPS", False)


def _scores(choice: str) -> dict[str, float]:
    """{'1': 0.51, '2': 0.529, ...} from a regime_choice text's 'by K: ...' list."""
    listed = choice.split("by K: ")[1].split(")")[0]
    return {k: float(v) for k, v in (kv.split() for kv in listed.split(", "))}


@pytest.fixture(scope="module")
def h100_all_gather_table() -> pd.DataFrame:
    ref = pd.read_csv(ROOT / "data/reference/nccl-tests.csv")
    table = ref[ref["table"] == "h100x8-all_gather-ring"]
    return table[["op", "mode", "world_size", "nodes", "bytes_per_rank", "dtype", "gpu", "median_us"]]


def test_cross_validation_picks_regimes_on_a_published_all_gather_table(h100_all_gather_table, monkeypatch):
    # every other size of the published 8x H100 all_gather table (the only published H100 all_gather table
    # bundled; the 4x table is not public here): BIC picks 2 regimes, CV 1, and the held-out sizes agree
    train, test = _every_other_size(h100_all_gather_table)
    _no_ramps(monkeypatch)
    after = fit_measurements(train, name="cv", bootstrap=0)
    row = report_of(after, "all_gather", 8, "eager")
    assert row["n_regimes"] == 1 and row["regime_choice"].startswith("1 by cv (BIC: 2, CV: 1;")
    p90_after = _held_out_p90(after, test, "all_gather", 8)
    _bic_only(monkeypatch)
    before = fit_measurements(train, name="bic", bootstrap=0)
    assert report_of(before, "all_gather", 8, "eager")["n_regimes"] == 2
    p90_before = _held_out_p90(before, test, "all_gather", 8)
    assert p90_after < p90_before  # 0.102 vs 0.114 when written
    # the report's CV score of the chosen K is its leave-one-size-out p90
    assert row["cv_p90_rel_err"] == pytest.approx(_scores(row["regime_choice"])["1"], rel=1e-2)


def test_ramps_chosen_by_cross_validation_on_the_published_all_gather_table(h100_all_gather_table, monkeypatch):
    # the same every-other-size check with ramp variants: 3 regimes with ramps across their breakpoints beat
    # the plain choice (1 regime) on leave-one-size-out by more than RAMP_TOLERANCE, and on the held-out sizes
    train, test = _every_other_size(h100_all_gather_table)
    fitted = fit_measurements(train, name="ramps", bootstrap=0)
    row = report_of(fitted, "all_gather", 8, "eager")
    assert row["regime_choice"].startswith("1 by cv (BIC: 2, CV: 1;") and "ramps: 3+ramps by cv" in row["regime_choice"]
    ramps = {k: float(v) for k, v in (kv.split() for kv in row["regime_choice"].split("ramps by cv (")[1]
                                      .rstrip(")").split(", "))}
    assert row["cv_p90_rel_err"] == pytest.approx(ramps["3+ramps"], rel=1e-2)
    curve = curve_of(fitted, "all_gather", 8, "eager")
    assert [r["name"] for r in curve["regimes"]] == ["R1", "R1-R2 ramp", "R2", "R2-R3 ramp", "R3"]
    with_ramps = _held_out_p90(fitted, test, "all_gather", 8)
    _no_ramps(monkeypatch)
    plain = _held_out_p90(fit_measurements(train, name="plain", bootstrap=0), test, "all_gather", 8)
    assert with_ramps < 0.6 * plain  # 0.047 vs 0.102 when written


def test_ramp_regime_joins_the_neighbouring_fits_continuously():
    from calibration.fitting.fit import _Rows, _with_ramps

    rows = _Rows("all_reduce", "graph", 2, 1, np.array([1.0]), np.array([2.0]), np.array([1.0]))
    f = float(bus_factor("all_reduce", np.asarray(2.0))) * 1e-3  # S = b for all_reduce

    def regime(name, alpha, bw, max_bytes=None):
        return {"name": name, "max_bytes": max_bytes, "alpha_base_us": alpha, "alpha_per_peer_us": 0.0,
                "alpha_per_node_us": 0.0, "busbw_gbps": bw}

    base = {"op": "all_reduce", "world_size": 2, "mode": "graph", "nodes": 1, "launch_us": 0.0,
            "eager_overhead_us": 0.0, "provenance": "measured"}
    # gentle: f = 1e-3 us per byte at 1 GB/s (p = 2); T1(1000) = 10 + 1000 f / 1 = 11, T2(3000) = 12 + 3000 f / 20
    # = 12.15 -> the line between them
    gentle = _with_ramps(rows, {**base, "regimes": [regime("R1", 10.0, 1.0, 1500), regime("R2", 12.0, 20.0)]},
                         np.array([1000.0]), np.array([3000.0]))
    r1, ramp, r2 = gentle["regimes"]
    assert (r1["max_bytes"], ramp["max_bytes"], r2["max_bytes"]) == (1000, 2999, None)
    slope = (12.15 - 11.0) / (2000 * f)
    assert ramp["busbw_gbps"] == pytest.approx(1 / slope, rel=1e-5)
    assert ramp["alpha_base_us"] == pytest.approx(11.0 - slope * 1000 * f, rel=1e-5)
    curve = curve_from_dict(gentle)
    t = curve_time_us(curve, np.array([1000.0, 2000.0, 2999.0, 3000.0]), 2.0)
    assert t == pytest.approx([11.0, 11.575, 12.15 - slope * f, 12.15], rel=1e-4)
    # a cliff (T2(hi) = 1000 x T1(lo)): the line would need alpha < 0, so it runs through the origin and
    # T2(hi): the jump at lo shrinks to T2(hi) lo / hi, then a linear rise to T2(hi)
    cliff = _with_ramps(rows, {**base, "regimes": [regime("R1", 10.0, 1.0, 1500), regime("R2", 11000.0, 20.0)]},
                        np.array([1000.0]), np.array([3000.0]))
    assert cliff["regimes"][1]["alpha_base_us"] == 0.0
    b = np.linspace(1000.0, 3000.0, 201)
    t = curve_time_us(curve_from_dict(cliff), b, 2.0)
    t_hi = 11000.0 + 3000 * f / 20
    assert t[0] == pytest.approx(11.0) and np.all(np.diff(t) >= 0) and t[-1] == pytest.approx(t_hi)
    assert t[1] == pytest.approx(t_hi * 1010 / 3000, rel=1e-4)  # the jump is a third of the cliff (lo / hi)
    # T2(hi) <= T1(lo): a flat ramp at T1(lo)
    flat = _with_ramps(rows, {**base, "regimes": [regime("R1", 10.0, 1.0, 1500), regime("R2", 5.0, 20.0)]},
                       np.array([1000.0]), np.array([3000.0]))
    assert flat["regimes"][1]["alpha_base_us"] == pytest.approx(11.0) and flat["regimes"][1]["busbw_gbps"] == 1e6


def test_ramped_fit_has_consistent_replicates_and_loads(h100_all_gather_table):
    from costmodel.profiles.consistency import check_replicates

    train, _ = _every_other_size(h100_all_gather_table)
    fitted = fit_measurements(train, name="ramps", bootstrap=60)
    curve = curve_of(fitted, "all_gather", 8, "eager")
    assert len(curve["regimes"]) == 5 and all("ci90" in r for r in curve["regimes"])
    for rep in fitted["bootstrap"]:
        (c,) = [c for c in rep["collectives"] if c["op"] == "all_gather" and c["world_size"] == 8]
        assert [r["max_bytes"] for r in c["regimes"]] == [r["max_bytes"] for r in curve["regimes"]]
    check_replicates(fitted, "ramps")
    profile_from_dict(fitted)


def test_cross_validation_rescues_the_published_all_reduce_table(monkeypatch):
    # every other size of the published 8x H100 all_reduce ring table: BIC's 2 regimes put the switch where
    # the held-out sizes miss it by ~60% (p90); leave-one-size-out CV prefers 1 regime (held-out p90 ~7%)
    ref = pd.read_csv(ROOT / "data/reference/nccl-tests.csv")
    table = ref[ref["table"] == "h100x8-all_reduce-ring"][["op", "mode", "world_size", "nodes", "bytes_per_rank",
                                                            "dtype", "gpu", "median_us"]]
    train, test = _every_other_size(table)
    after = _held_out_p90(fit_measurements(train, name="cv", bootstrap=0), test, "all_reduce", 8)
    _bic_only(monkeypatch)
    before = _held_out_p90(fit_measurements(train, name="bic", bootstrap=0), test, "all_reduce", 8)
    assert after < 0.15 < 0.4 < before  # 0.072 vs 0.590 when written


def test_gloo_cliff_cross_validation_keeps_what_generalises(monkeypatch):
    # the bundled gloo all_gather at 4 ranks (cliff at 8-16 MiB per rank), fitted on every other size: a third
    # regime for the cliff has 3 noisy sizes and a leave-one-size-out p90 above 1, so CV rejects it; 1 vs 2
    # regimes are within the tolerance, so BIC's 2 stand and the held-out error equals the BIC-only fit's
    frame = pd.read_csv(ROOT / "data/calibration/cpu-gloo/collectives.csv")
    frame = frame[(frame["op"] == "all_gather") & (frame["world_size"] == 4)]
    train, test = _every_other_size(frame)
    after = fit_measurements(train, name="cv", bootstrap=0)
    choice = report_of(after, "all_gather", 4, "eager")["regime_choice"]
    scores = {int(k): v for k, v in _scores(choice).items()}
    assert scores[3] > 2 * scores[2] and abs(scores[1] - scores[2]) < 0.05 * scores[2]
    assert report_of(after, "all_gather", 4, "eager")["n_regimes"] == 2
    assert "ramps: none" in choice  # a ramp across the cliff does not generalise better on held-out sizes
    p90_after = _held_out_p90(after, test, "all_gather", 4)
    _bic_only(monkeypatch)
    p90_before = _held_out_p90(fit_measurements(train, name="bic", bootstrap=0), test, "all_gather", 4)
    assert p90_after == pytest.approx(p90_before)


def test_cv_overrides_bic_only_when_clearly_better():
    from calibration.fitting.fit import CV_TOLERANCE, _choose_regimes

    def cand(k, bic_score, errors):
        return (k, None, None, bic_score, np.asarray(errors, dtype=float), 10)

    one, two = cand(1, -5.0, [0.1] * 10), cand(2, -6.0, [0.1 * (1 - CV_TOLERANCE / 2)] * 10)
    chosen, text = _choose_regimes([one, two], 10, two)
    assert chosen is two and "by bic = cv" in text
    chosen, text = _choose_regimes([one, two], 10, one)  # CV 2.5% better only: BIC's K stands
    assert chosen is one and "within tolerance" in text
    better = cand(2, -6.0, [0.05] * 10)
    chosen, text = _choose_regimes([one, better], 10, one)
    assert chosen is better and text.startswith("2 by cv (BIC: 1, CV: 2;")
    few_folds = (2, None, None, -6.0, np.asarray([0.01]), 2)  # under half of the 10 folds: not scored
    chosen, text = _choose_regimes([one, few_folds], 10, one)
    assert chosen is one


# -- impl-tagged curves get replicates like NCCL's (issue 11 residual) ---------------------------------------------
def test_impl_curves_get_bootstrap_replicates(tmp_path):
    from calibration.fitting.fit import impl_dirs, load_inputs
    from costmodel.profiles.consistency import check_replicates

    nccl = collective_rows("all_gather", 4, "graph", ONE, seed=3)
    (tmp_path / "oneshot").mkdir()
    nccl.to_csv(tmp_path / "collectives.csv", index=False)
    oneshot = collective_rows("all_gather", 4, "graph", [(None, 6.0, 0.0, 10.0)], seed=4)
    oneshot.to_csv(tmp_path / "oneshot" / "collectives.csv", index=False)
    frame, files = load_inputs([tmp_path])
    profile = fit_measurements(frame, name="impl", bootstrap=60, files=files, impl_frames=impl_dirs([tmp_path]))
    reps = profile["bootstrap"]
    assert len(reps) == 100  # the 60 repeated over the base's 100 members (base_parts module doc)
    tagged = [[c for c in rep["collectives"] if c.get("impl") == "oneshot"] for rep in reps]
    assert all(len(t) == 1 and t[0]["world_size"] == 4 for t in tagged)
    point = next(c for c in profile["collectives"] if c.get("impl") == "oneshot")
    bws = np.array([t[0]["regimes"][0]["busbw_gbps"] for t in tagged])
    alphas = np.array([t[0]["regimes"][0]["alpha_base_us"] for t in tagged])
    # the replicates vary (5% noise) around the point fit, which lies inside their range
    assert bws.std() > 0 and alphas.std() > 0
    assert bws.min() <= point["regimes"][0]["busbw_gbps"] <= bws.max()
    check_replicates(profile, "impl")  # point vs replicates consistent (what loading checks)
    nccl_bw = [next(c for c in rep["collectives"] if c.get("impl") is None and not c.get("from_base"))
               ["regimes"][0]["busbw_gbps"] for rep in reps]
    assert not np.allclose(nccl_bw, bws)  # own random streams, not a copy of NCCL's
    assert "ci90" in point["regimes"][0]


# -- the GPU kernel model from a user's CUDA kernel table (issue 9 item 2, through calibration.fit) ----------------
H200_KERNELS = ROOT / "data/calibration/h200-2026-11-30/kernels.csv"


def _flat_numbers(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat_numbers(v, f"{prefix}{k}."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[prefix + k] = float(v)
    return out


def test_fit_cli_fits_the_gpu_kernel_model_on_the_bundled_h200_table(tmp_path, capsys):
    out = tmp_path / "h200.json"
    assert main([str(H200_KERNELS), "--out", str(out), "--base-profile", "h200-sxm-nvlink", "--bootstrap", "0"]) == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    bundled = json.loads((ROOT / "data/profiles/h200-sxm-nvlink.json").read_text())["kernels"]
    got, want = _flat_numbers(doc["kernels"]["model"]), _flat_numbers(bundled["model"])
    assert set(got) == set(want)
    for key, value in want.items():  # the same fit (scripts/derive_profiles.py) within rounding
        assert got[key] == pytest.approx(value, rel=1e-3, abs=1e-9), key
    assert doc["kernels"]["model"]["provenance"] == "measured"
    cv = {(r["held_out"], r["op"], r["mode"]): r for r in doc["kernels"]["model_cv"]}
    for r in bundled["model_cv"]:
        mine = cv[(r["held_out"], r["op"], r["mode"])]
        assert mine["n"] == r["n"] and mine["p90_abs_rel_error"] == pytest.approx(r["p90_abs_rel_error"], abs=2e-3)
    rows = [r for r in doc["fit_report"] if r["kind"] == "kernel_model"]
    assert {(r["op"], r["mode"]) for r in rows} >= {("argmax", "graph"), ("pair_reduce", "eager")}
    assert "kernel_model" in printed and "leave-one-vocab-out" in rows[0]["note"]
    prof = profile_from_dict(doc)  # loads, and the model prices kernels
    assert prof.kernel_model is not None and prof.kernel_model.sm_count == 132


def test_fit_cli_falls_back_with_a_note_when_the_cuda_table_has_too_few_shapes(tmp_path, capsys):
    frame = pd.read_csv(H200_KERNELS)
    few = frame[(frame["batch"] == 32) & (frame["vocab"] == 128256)]  # one batch, one vocab
    path = tmp_path / "few.csv"
    few.to_csv(path, index=False)
    out = tmp_path / "few.json"
    assert main([str(path), "--out", str(out), "--base-profile", "h200-sxm-nvlink", "--bootstrap", "0"]) == 0
    err = capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert "model" not in doc["kernels"] and "model_cv" not in doc["kernels"]
    (row,) = [r for r in doc["fit_report"] if r["kind"] == "kernel_model"]
    assert row["status"].startswith("skipped: GPU kernel model not fitted") and "roofline" in row["status"]
    assert "warning: kernel_model" in err and "GPU kernel model not fitted" in err


# -- raw samples per size (issue 9 item 6) ---------------------------------------------------------------------------
def test_fitted_curves_store_their_samples_per_size_and_the_report_shows_residuals_against_them():
    from calibration.fitting.fit import format_fit_report, sample_residuals

    frame = collective_rows("all_gather", 2, "graph", ONE, seed=5, reps=4)
    frame["p10_us"] = frame["median_us"] * 0.9
    frame["p90_us"] = frame["median_us"] * 1.2
    profile = fit_measurements(frame, name="s", bootstrap=0)
    smp = curve_of(profile, "all_gather", 2, "graph")["samples"]
    assert smp["bytes_per_rank"] == [int(b) for b in BYTES] and smp["n"] == [4] * len(BYTES)
    first = np.sort(frame[frame["bytes_per_rank"] == BYTES[0]]["median_us"].to_numpy())
    assert smp["raw_us"][0] == pytest.approx(first, rel=1e-5)
    assert smp["median_us"][0] == pytest.approx(np.median(first), rel=1e-5)
    assert smp["p10_us"][0] == pytest.approx(np.median(0.9 * first), rel=1e-5)
    assert smp["p90_us"][0] == pytest.approx(np.median(1.2 * first), rel=1e-5)
    parsed = profile_from_dict(profile)
    (curve,) = [c for c in parsed.collectives if c.provenance == "measured" and c.world_size == 2]
    assert curve.samples is not None and curve.samples.n[0] == 4
    table = sample_residuals(profile)  # from the profile alone: the stored curve against the stored medians
    pred = collective_time_us(parsed, "all_gather", BYTES.astype(float), 2, 1, "graph")
    assert table["rel_err"].to_numpy() == pytest.approx(pred / np.asarray(smp["median_us"]) - 1, rel=1e-9)
    assert (table["raw_min_rel_err"] <= table["rel_err"] + 1e-12).all()
    assert (table["raw_max_rel_err"] >= table["rel_err"] - 1e-12).all()
    assert "against their stored samples" in format_fit_report(profile)


def _bad_samples(change) -> dict:
    frame = collective_rows("all_gather", 2, "graph", ONE, seed=5, reps=2, sizes=BYTES[:6])
    profile = fit_measurements(frame, name="s", bootstrap=0)
    change(curve_of(profile, "all_gather", 2, "graph")["samples"])
    return profile


@pytest.mark.parametrize("change, message", [
    (lambda s: s["bytes_per_rank"].reverse(), "sizes must increase"),
    (lambda s: s["p10_us"].__setitem__(0, s["median_us"][0] * 2), "p10_us <= median_us <= p90_us"),
    (lambda s: s["raw_us"][0].extend([1.0, 2.0]), "raw samples"),
    (lambda s: s["median_us"].pop(), "entries for"),
    (lambda s: s["raw_us"].__setitem__(1, [0.0]), "raw_us"),
    (lambda s: s["raw_us"].__setitem__(1, [1.0] * 17), "raw_us"),
    (lambda s: s["n"].__setitem__(0, 1.5), "n"),
])
def test_profile_refuses_inconsistent_samples_in_one_line(change, message):
    with pytest.raises(InputError, match=message) as info:
        profile_from_dict(_bad_samples(change), source="p")
    assert "\n" not in str(info.value)


def test_bootstrap_resamples_within_size_when_every_size_has_repeats():
    # repeats identical within each size (no within-size spread) but 5% noise across sizes: the within-size
    # bootstrap can only redraw each size's own times, so every replicate equals the point fit exactly,
    # while the residual bootstrap (one row per size) spreads
    one = collective_rows("all_gather", 2, "graph", ONE, seed=6)
    rep3 = pd.concat([one] * 3, ignore_index=True)
    rep3["label"] = np.repeat(["a", "b", "c"], len(one))  # three measured points per size, not binned
    within = fit_measurements(rep3, name="w", bootstrap=50)
    residual = fit_measurements(one, name="r", bootstrap=50)
    assert "bootstrap: within-size" in report_of(within, "all_gather", 2, "graph")["note"]
    assert "bootstrap: residual" in report_of(residual, "all_gather", 2, "graph")["note"]

    def bws(profile):
        return np.array([rep["collectives"][0]["regimes"][0]["busbw_gbps"] for rep in profile["bootstrap"]])

    point = curve_of(within, "all_gather", 2, "graph")["regimes"][0]["busbw_gbps"]
    assert bws(within) == pytest.approx(point, rel=1e-5)
    assert bws(residual).std() / bws(residual).mean() > 1e-3


def test_heldout_check_names_a_bad_variant_in_one_line(capsys):
    from calibration.fitting.heldout import main as heldout_main

    assert heldout_main(["--variants", "bic,nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --variants: unknown nope")


def test_bundled_cpu_gloo_profile_carries_samples_and_its_bootstrap_method():
    doc = json.loads((ROOT / "data/profiles/cpu-gloo.json").read_text())
    measured = [c for c in doc["collectives"] if c["provenance"] == "measured" and c["world_size"] is not None]
    assert measured and all("samples" in c for c in measured)
    frame = pd.read_csv(ROOT / "data/calibration/cpu-gloo/collectives.csv")
    for c in measured:  # the stored samples are the bundled measurements
        rows = frame[(frame["op"] == c["op"]) & (frame["world_size"] == c["world_size"])]
        assert sum(c["samples"]["n"]) == len(rows)
        assert c["samples"]["bytes_per_rank"] == sorted(int(b) for b in rows["bytes_per_rank"].unique())
    assert "within each size" in doc["bootstrap_method"] and len(expand_document(doc)["bootstrap"]) >= 50


def test_fitted_gpu_kernel_model_gets_case_bootstrap_replicates(tmp_path):
    from costmodel.profiles.replicates import replicate_profiles
    from costmodel.profiles.store import load_profile

    out = tmp_path / "h200.json"
    assert main([str(H200_KERNELS), "--out", str(out), "--base-profile", "h200-sxm-nvlink", "--bootstrap", "6"]) == 0
    doc = json.loads(out.read_text())
    assert doc["ensemble"]["method"] == "columns-v1"  # written compactly (costmodel.replicates)
    models = [rep["kernels"]["model"] for rep in expand_document(doc)["bootstrap"]]
    # the 6 refits, repeated over the base's 100 members (its collectives keep their spread: base_parts module doc)
    assert len(models) == 100 and all(m["sm_count"] == 132 for m in models)
    assert models[6:] == [models[j % 6] for j in range(6, 100)]
    rates = [m["reduce_ops"]["argmax"]["elems_per_us"] for m in models]
    assert len(set(rates)) > 1  # resampled rows, refitted: the replicates differ
    point = doc["kernels"]["model"]["reduce_ops"]["argmax"]["elems_per_us"]
    assert min(rates) < point * 1.2 and max(rates) > point / 1.2
    members = replicate_profiles(load_profile(str(out)))  # what the 90% intervals price with
    assert [m.kernel_model.reduce_ops["argmax"].elems_per_us for m in members] == pytest.approx(rates)


def test_ramps_are_dropped_when_their_replicates_would_be_refused(h100_all_gather_table, monkeypatch):
    import calibration.fitting.fit as fit_module

    def refuse(data, source="profile"):
        raise InputError("replicates contradict")

    monkeypatch.setattr(fit_module, "check_replicates", refuse)
    train, _ = _every_other_size(h100_all_gather_table)
    fitted = fit_measurements(train, name="dropped", bootstrap=20)
    row = report_of(fitted, "all_gather", 8, "eager")
    assert "ramps dropped" in row["regime_choice"] and row["regime_choice"].startswith("1 by cv")
    curve = curve_of(fitted, "all_gather", 8, "eager")  # the plain choice, with its own bootstrap
    assert len(curve["regimes"]) == row["n_regimes"] == 1 and "ci90" in curve["regimes"][0]
    for rep in fitted["bootstrap"]:
        (c,) = [c for c in rep["collectives"] if c["op"] == "all_gather" and c["world_size"] == 8]
        assert len(c["regimes"]) == len(curve["regimes"])
