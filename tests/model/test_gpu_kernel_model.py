"""The mechanistic GPU kernel model (costmodel.model.gpu_kernels): ATen's launch rules, hand-computed times on both
sides of the block-split threshold, views cost 0, measured tables win inside their range, cross-validated
error on the bundled H200 tables, derived GPUs, lm_head context."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from costmodel import load_profile
from costmodel.evidence.gpu_kernel_fit import (
    CV_PRIOR_WEIGHT,
    GPU_SPECS,
    GRAPH_PARAMS,
    H200_BASE,
    cross_validate,
    derive_model,
    errors_table,
    fit_model,
    load_kernel_frame,
    predict_frame,
)
from costmodel.model.gpu_kernels import REGIME_EDGES_COLS, graph_time_us, reduce_launch, reduce_time_us
from costmodel.model.kernels import kernel_time_us, lm_head_time_us
from costmodel.profiles.kernel_params import GpuKernelModel, ReduceOp, model_from_dict

H200 = load_profile("h200-sxm-nvlink")
FRAME = load_kernel_frame()
# hand-checkable parameters: 3 us floor, 0.1 us per value per thread, 2 us per wave, 4 us global reduce,
# 1e6 elements per us, no byte cap
TOY = GpuKernelModel(gpu="toy", sm_count=132, hbm_gbps=4800.0, reduce_gbps=1e9, value_us=0.1, wave_us=2.0,
                     global_reduce_us=4.0, reduce_ops={"max": ReduceOp(3.0, 1e6), "argmax": ReduceOp(3.0, 1e6)})


def _launch(rows, cols):
    launch = reduce_launch(rows, cols, 132)
    return tuple(float(getattr(launch, k)) for k in ("threads", "values_per_thread", "ctas_per_output", "blocks"))


def test_launch_configuration_follows_aten_rules():
    # B = 1: one 512-thread block; below 512 * 256 columns one block does the row ...
    assert _launch(1, 126976) == (512, 248, 1, 1)
    # ... above it the row is split over ctas = max(min(528 / 1, ceil(264 / 16)), ceil(264 / 256)) = 17 blocks
    assert _launch(1, 135168) == (512, 16, 17, 17)
    assert REGIME_EDGES_COLS == (8192, 131072)
    # B = 32, s = 8000: 250 values per lane < min(16 * 16, 256): each warp owns a row, 16 rows per block
    assert _launch(32, 8000) == (512, 250, 1, 2)
    # s = 16000: 500 >= 256 -> the row is split across the 16 warps: 16000 / 512 = 32 values, 32 blocks
    assert _launch(32, 16000) == (512, 32, 1, 32)
    # grid 2048 > 528 resident blocks: no block split
    assert _launch(2048, 202048) == (512, 395, 1, 2048)


def test_reduction_time_hand_computed_both_sides_of_the_split():
    below = float(reduce_time_us(TOY, "max", 1, 126976, 2))  # 3 + (2 + max(248 * 0.1, 512 * 248 / 1e6))
    assert below == pytest.approx(3 + 2 + 24.8)
    above = float(reduce_time_us(TOY, "max", 1, 135168, 2))  # 3 + 4 + (2 + max(16 * 0.1, 17 * 512 * 16 / 1e6))
    assert above == pytest.approx(3 + 4 + 2 + 1.6)
    assert above < below / 2  # the drop the H200 shows when a row is long enough to split
    per_block = 512 * 395 / 1e6  # 2048 blocks: 3 full waves of 528 + 464, element-rate bound
    big = float(reduce_time_us(TOY, "max", 2048, 202048, 2))
    assert big == pytest.approx(3 + 3 * (2 + 528 * per_block) + (2 + 464 * per_block))
    # element-rate bound: the same time in bf16 and fp32 while bytes are not the cap
    assert float(reduce_time_us(TOY, "max", 2048, 202048, 4)) == pytest.approx(big)


def test_views_cost_nothing_b1_and_p1():
    m = H200.kernel_model
    assert float(graph_time_us(m, "relayout_copy", rows=1, cols=25256, world_size=8)) == 0.0
    assert float(graph_time_us(m, "relayout_copy", rows=64, cols=202048, world_size=1)) == 0.0
    copy = float(graph_time_us(m, "relayout_copy", rows=64, cols=25256, world_size=8, dtype="bf16"))
    assert copy == pytest.approx(m.copy_floor_us + 2 * 64 * 8 * 25256 * 2 / m.copy_gbps["bf16"] * 1e-3)
    for rows, p in ((1, 8), (64, 1)):
        est = kernel_time_us(H200, "relayout_copy", rows=rows, cols=25256, world_size=p)
        assert float(est.time_us) == 0.0


def test_measured_tables_win_inside_their_range_model_outside():
    measured = FRAME[(FRAME["op"] == "local_max") & (FRAME["mode"] == "graph") & (FRAME["dtype"] == "bf16")]
    for rec in measured.to_dict("records"):
        est = kernel_time_us(H200, "local_max", rows=rec["rows"], cols=rec["cols"], dtype="bf16")
        assert float(est.time_us) == pytest.approx(rec["median_us"], rel=1e-3)
        assert not bool(est.extrapolated)
    outside = kernel_time_us(H200, "local_max", rows=4096, cols=202048, dtype="bf16")
    model = graph_time_us(H200.kernel_model, "local_max", rows=4096, cols=202048, elem_bytes=2)
    assert bool(outside.extrapolated) and float(outside.time_us) == pytest.approx(float(model))
    # between measured points the model's shape (a split edge between s = 128256 and 202048), not a log-log line
    mid = float(kernel_time_us(H200, "local_max", rows=1, cols=135168, dtype="bf16").time_us)
    assert mid < 0.6 * float(kernel_time_us(H200, "local_max", rows=1, cols=126976, dtype="bf16").time_us)


def test_fit_reproduces_the_bundled_model_and_in_sample_errors():
    fitted = fit_model(FRAME, H200_BASE)
    bundled = H200.kernel_model
    assert fitted.value_us == pytest.approx(bundled.value_us, rel=1e-3)
    assert fitted.copy_gbps["bf16"] == pytest.approx(bundled.copy_gbps["bf16"], rel=1e-3)
    table = errors_table(FRAME, predict_frame(fitted, FRAME))
    graph = table[table["mode"] == "graph"]
    assert (graph["median_abs_rel_error"] < 0.07).all() and (graph["p90_abs_rel_error"] < 0.15).all()


@pytest.mark.parametrize("by", ["batch", "vocab"])
def test_cross_validated_error_per_op_meets_targets(by):
    cv = cross_validate(FRAME, H200_BASE, by, full=H200.kernel_model)
    graph = cv[cv["mode"] == "graph"].set_index("op")
    assert set(graph.index) == {"argmax", "local_max", "local_pack", "pair_reduce", "relayout_argmax"}
    assert (graph["median_abs_rel_error"] <= 0.10).all(), graph
    assert (graph["p90_abs_rel_error"] <= 0.25).all(), graph
    eager = cv[cv["mode"] == "eager"]  # the probe's eager repeats agree only within +-25%
    assert (eager["median_abs_rel_error"] <= 0.15).all(), eager


def test_a_fold_without_a_parameters_data_keeps_it_at_its_prior_and_cv_does_not_depend_on_the_start():
    """Without V = 202,048 no row informs global_reduce_us: the fold's refit (with the CV_PRIOR_WEIGHT term) keeps it
    at its prior - plain least squares left it at its bound (77.6 us, 20 x 4) on one CPU's BLAS and near its start on
    another - while a parameter the fold's rows determine stays at the full fit's value; and the cross-validated
    errors are the same from the prior and from the full fit as start."""
    held = (FRAME["vocab"] == 202048).to_numpy()
    assert held.any() and not held.all()
    fold = fit_model(FRAME[~held], H200_BASE, start=H200.kernel_model, prior_weight=CV_PRIOR_WEIGHT)
    assert fold.global_reduce_us == pytest.approx(dict(GRAPH_PARAMS)["global_reduce_us"], rel=0.1)
    assert fold.copy_gbps["bf16"] == pytest.approx(H200.kernel_model.copy_gbps["bf16"], rel=0.02)
    from_full = cross_validate(FRAME, H200_BASE, "vocab", full=H200.kernel_model)
    from_prior = cross_validate(FRAME, H200_BASE, "vocab", full=H200_BASE)
    np.testing.assert_allclose(from_full["p90_abs_rel_error"], from_prior["p90_abs_rel_error"], atol=2e-3)
    np.testing.assert_allclose(from_full["median_abs_rel_error"], from_prior["median_abs_rel_error"], atol=2e-3)


def test_derived_gpus_scale_rates_by_sms_clock_and_hbm():
    m = H200.kernel_model
    sm, hbm, clk, _tf, _cite = GPU_SPECS["a100"]
    a100 = derive_model(m, gpu="A100", sm_count=sm, hbm_gbps=hbm, sm_clock_ratio=clk / 1980.0, source="t")
    assert a100.reduce_ops["max"].elems_per_us == pytest.approx(m.reduce_ops["max"].elems_per_us * 108 / 132
                                                                * 1410 / 1980)
    assert a100.copy_gbps["bf16"] == pytest.approx(m.copy_gbps["bf16"] * 2039 / 4800)
    bundled = load_profile("a100-sxm-nvlink").kernel_model
    assert bundled.sm_count == 108 and bundled.copy_gbps["bf16"] == pytest.approx(a100.copy_gbps["bf16"], rel=1e-3)
    big = dict(rows=2048, cols=202048, elem_bytes=2)
    assert float(graph_time_us(bundled, "argmax", **big)) > 1.5 * float(graph_time_us(m, "argmax", **big))


def test_model_dict_round_trip_and_bad_fields():
    m = H200.kernel_model
    assert model_from_dict(m.to_dict()) == m
    with pytest.raises(Exception, match="kernels.model.value_us"):
        model_from_dict({**m.to_dict(), "value_us": -1.0})
    with pytest.raises(Exception, match="kernels.model.sm_count"):
        model_from_dict({**m.to_dict(), "sm_count": 0})


def test_lm_head_context_near_the_probe():
    raw = pd.read_csv("data/calibration/h200-2026-11-30/lm_head.csv")
    rec = raw[(raw["hidden"] == 5120) & (raw["vocab"] == 202048) & (raw["world_size"] == 8) & (raw["rows"] == 1)]
    got = float(lm_head_time_us(H200, 1, 5120, 202048 // 8))
    assert got == pytest.approx(float(rec["median_us"].iloc[0]), rel=0.1)
    assert lm_head_time_us(H200, 1, None, 100) is None
    # weight-read bound: flat in rows until the GEMM becomes compute bound
    t = lm_head_time_us(H200, np.array([1, 8, 4096]), 5120, 25256)
    assert t[0] == t[1] < t[2]


def test_memo_reuses_identical_reductions_without_changing_results():
    from costmodel import Scenario, predict
    from costmodel.model.kernels import kernel_memo

    sc = Scenario(vocab=np.array([32000, 128256, 202048]), tp=np.array([2, 4, 8]), batch=np.array([1.0, 64.0, 2048.0]))
    plain = predict(sc, H200)
    with kernel_memo():
        cached = predict(sc, H200)
    for name, res in plain.strategies.items():
        np.testing.assert_array_equal(res.total_us, cached.strategies[name].total_us)


def test_memo_prices_repeated_kernel_calls_once(monkeypatch):
    from costmodel import Scenario, predict
    from costmodel.model import gpu_kernels
    from costmodel.model.kernels import kernel_memo

    calls = []
    real = gpu_kernels._reduce_time_us
    monkeypatch.setattr(gpu_kernels, "_reduce_time_us", lambda *a: calls.append(a[1]) or real(*a))
    sc = Scenario(vocab=np.array([32000, 202048]), tp=np.array([2, 8]), batch=np.array([1.0, 512.0]))
    import contextlib

    from costmodel.model import strategies

    with monkeypatch.context() as m:  # predict opens a memo block itself (strategies.build_components)
        m.setattr(strategies, "kernel_memo", contextlib.nullcontext)
        predict(sc, H200)
    plain = len(calls)
    calls.clear()
    with kernel_memo():
        predict(sc, H200)
    assert 0 < len(calls) < plain


def test_converter_reproduces_the_bundled_tables_from_the_raw_files(tmp_path):
    import subprocess
    import sys

    data = "data/calibration/h200-2026-11-30"
    proc = subprocess.run([sys.executable, "scripts/convert_h200_probe.py", "--src", f"{data}/raw", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for name in ("kernels.csv", "lm_head.csv", "c10d_world1.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / name), pd.read_csv(f"{data}/{name}"))
    raw = pd.read_csv(f"{data}/raw/kernels.csv")
    conv = pd.read_csv(f"{data}/kernels.csv")
    # argmax_only over [p*B, s] -> op argmax with rows = p * B
    row = raw[(raw["dtype"] == "bfloat16") & (raw["vocab"] == 202048) & (raw["tp"] == 8) & (raw["batch"] == 32)]
    hit = conv[(conv["probe_column"] == "argmax_only_graph_us") & (conv["vocab"] == 202048) & (conv["batch"] == 32)
               & (conv["dtype"] == "bf16") & (conv["cols"] == 202048 // 8)]
    assert len(hit) == 1 and int(hit["rows"].iloc[0]) == 8 * 32 and int(hit["world_size"].iloc[0]) == 1
    assert float(hit["median_us"].iloc[0]) == pytest.approx(float(row["argmax_only_graph_us"].iloc[0]))
    bad = subprocess.run([sys.executable, "scripts/convert_h200_probe.py", "--src", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and len(bad.stderr.strip().splitlines()) == 1
