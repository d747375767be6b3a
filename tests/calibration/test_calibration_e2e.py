"""End to end on CPU: torchrun (gloo, world 4 -> TP 2 and 4) -> CSV -> fit -> profile -> predict-points."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from costmodel import collective_time_us
from costmodel.profiles.store import load_profile
from tests.calibration.test_collectives_bench import _env, torchrun
from tests.conftest import ROOT

pytestmark = pytest.mark.torchrun


def test_gloo_calibration_fit_predict_points(tmp_path):
    out = tmp_path / "calib"
    proc = torchrun(4, out, "--max-bytes", "65536", "--presets", "llama3-8b-eagle3", "--batches", "1,16",
                    "--max-iters", "20", "--point-time-s", "0.1", "--no-progress", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = pd.read_csv(out / "collectives.csv")
    assert set(rows["world_size"]) == {2, 4}

    profile_path = tmp_path / "cluster.json"
    fit = subprocess.run([sys.executable, "-m", "calibration.fit", str(out), "--out", str(profile_path),
                          "--name", "e2e", "--bootstrap", "20"], cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=300)
    assert fit.returncode == 0, fit.stderr
    assert "CV |err| med" in fit.stdout  # the held-out report is printed
    profile = json.loads(profile_path.read_text())
    report = [r for r in profile["fit_report"] if r["kind"] == "collective" and r["status"] == "fitted"]
    assert {(r["op"], r["world_size"]) for r in report} >= {("all_gather", 2), ("all_gather", 4)}
    assert all(np.isfinite(r["cv_median_rel_err"]) for r in report)

    pred_path = tmp_path / "pred.csv"
    pp = subprocess.run([sys.executable, "-m", "costmodel", "predict-points", "--profile", str(profile_path),
                         "--in", str(out / "collectives.csv"), "--out", str(pred_path)], cwd=ROOT, env=_env(),
                        capture_output=True, text=True, timeout=120)
    assert pp.returncode == 0, pp.stderr
    pred = pd.read_csv(pred_path)
    assert len(pred) == len(rows) and (pred["predicted_us"] > 0).all()
    loaded = load_profile(str(profile_path))
    first = pred.iloc[0]
    assert first["predicted_us"] == pytest.approx(float(collective_time_us(
        loaded, first["op"], first["bytes_per_rank"], first["world_size"], first["nodes"], first["mode"])))
    # the fitted model tracks its own measurements: median |error| well under 2x on this noisy CPU
    err = (pred["predicted_us"] / pred["median_us"] - 1).abs()
    assert err.median() < 1.0

    verify = subprocess.run([sys.executable, "-m", "costmodel", "predict", "--profile", str(profile_path),
                             "--tp", "4", "--batch", "16", "--json", "--no-intervals"], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stderr
    assert json.loads(verify.stdout)["profile"]["name"] == "e2e"
