"""End to end on CPU: torchrun (gloo, world 4 -> TP 2 and 4) -> CSV -> fit -> profile -> predict-points.

One world-4 run serves both the benchmark's own checks (every point of the grid at TP 2 and 4, one summary line,
the provenance record) and the fit / predict chain on its output: a world-4 torchrun on 2 cores costs ~15 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from calibration.bench.collectives import PROVENANCE_NAME
from costmodel import collective_time_us
from costmodel.profiles.store import load_profile
from tests.calibration.test_collectives_bench import GRID, _env, check_complete_run, torchrun
from tests.conftest import ROOT

pytestmark = pytest.mark.torchrun


def test_world4_run_covers_tp2_and_tp4_then_fits_and_predicts(tmp_path):
    out = tmp_path / "calib"
    out.mkdir()
    kernels_record = {"tool": "calibration.kernels", "status": "ok"}  # both tools ran into this folder
    (out / PROVENANCE_NAME).write_text(json.dumps(kernels_record))
    proc = torchrun(4, out, *GRID, "--note", "test run", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_complete_run(out, 4)
    done = [line for line in proc.stderr.splitlines() if line.startswith("done: ")]  # one summary line (issue 18)
    assert len(done) == 1 and "0 already in the file" in done[0] and "world sizes 2, 4" in done[0], proc.stderr[-2000:]
    prov = json.loads((out / PROVENANCE_NAME).read_text())
    assert "test run" in prov["notes"]
    assert prov["previous_runs"] == [kernels_record]
    if (os.cpu_count() or 1) < 4:
        assert any("oversubscribed" in note for note in prov["notes"])
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
