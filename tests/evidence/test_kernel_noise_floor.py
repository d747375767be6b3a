"""scripts/kernel_cv.py noise_floor: spread of identical-work rows, hand-computed."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kernel_cv():
    spec = importlib.util.spec_from_file_location("kernel_cv", ROOT / "scripts" / "kernel_cv.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(times, mode="eager", batch=1, tp=8):
    return [{"op": "pair_reduce", "mode": mode, "batch": batch, "world_size": tp, "logits_dtype": "bf16",
             "vocab": v, "median_us": t} for v, t in zip((32000, 128256, 202048), times, strict=True)]


def test_noise_floor_hand_computed(kernel_cv):
    # set 1: 50, 50, 100 -> median 50 -> spreads 0, 0, 1.0 (an outlier set); set 2: 10, 11, 12 -> 1/11, 0, 1/11
    frame = pd.DataFrame(_rows((50.0, 50.0, 100.0)) + _rows((10.0, 11.0, 12.0), batch=32)
                         + _rows((7.0, 7.0, 7.0), mode="graph"))
    out = kernel_cv.noise_floor(frame).set_index("mode")
    eager = out.loc["eager"]
    assert eager["n"] == 6 and eager["groups"] == 2 and eager["outlier_groups"] == 1
    spreads = pd.Series([0, 0, 1.0, 1 / 11, 0, 1 / 11])
    assert eager["median_abs_rel_spread"] == pytest.approx(spreads.median())
    assert eager["p90_abs_rel_spread"] == pytest.approx(spreads.quantile(0.9))
    assert out.loc["graph", "p90_abs_rel_spread"] == 0.0 and out.loc["graph", "outlier_groups"] == 0


def test_noise_floor_other_ops_ignored(kernel_cv):
    frame = pd.DataFrame(_rows((1.0, 2.0, 3.0))).assign(op="local_pack")
    assert kernel_cv.noise_floor(frame).empty
