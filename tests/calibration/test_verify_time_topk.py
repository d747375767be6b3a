"""`calibration.verify --time --top-k K` times the top-k outputs the verifier checked (one gloo rank)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from calibration.reference import strategies as ref  # noqa: E402
from calibration.reference import verify  # noqa: E402
from costmodel import Scenario, load_profile  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _timed(stdout: str) -> dict[str, list[str]]:
    return {line.split()[2]: line.split()[3:] for line in stdout.splitlines() if line.split()[:2] == ["2", "1000"]}


def test_time_at_top_k_leaves_argmax_only_strategies_out_and_prices_at_k():
    cmd = [sys.executable, "-m", "calibration.verify", "--backend", "gloo", "--top-k", "4", "--cases",
           "random-fp32-V1000", "--time", "--time-points", "2x1000", "--repeats", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "top-k 4" in proc.stdout and "bf16, top-4, p=1" in proc.stdout
    timed = _timed(proc.stdout)
    expected = {n for n in ref.STRATEGY_FUNCS if not verify.topk_skip(n, 4)}
    assert set(timed) == expected and "packed_allreduce_max" not in timed
    # the predicted column is the model at k = 4, not at k = 1
    prof = load_profile(None)
    at = {k: verify.predicted_us(Scenario(vocab=1000, tp=1, batch=2, dtype="bf16", mode="eager", top_k=k), prof,
                                 sorted(expected)) for k in (1, 4)}
    for name in expected:
        assert float(timed[name][1]) == pytest.approx(at[4][name], abs=0.051)
    assert any(abs(at[4][n] - at[1][n]) > 0.1 for n in expected)
