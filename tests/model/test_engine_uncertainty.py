"""Engine execution model, strategy details as engines run them, and honest prediction intervals."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import STRATEGIES, InputError, Scenario, load_profile, predict
from costmodel.cli.main import main
from costmodel.evidence.discrepancy import discrepancy
from costmodel.evidence.intervals import propagate
from costmodel.evidence.point_intervals import point_intervals
from costmodel.model.engines import PLANS, Stage, host_costs, step_time_us
from costmodel.profiles.compact import expand_document
from costmodel.profiles.consistency import check_replicates
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.replicates import constrain
from costmodel.profiles.store import PROFILE_DIR

H200 = load_profile("h200-sxm-nvlink")


# -- the step model, hand-computed ------------------------------------------------------------------------------
def test_step_model_gpu_bound_hides_the_host_behind_a_head_start():
    # one op, host 8 us, GPU 100 us: without a head start the GPU waits for the launch (8 + 100) ...
    assert float(step_time_us([Stage(8.0, 100.0)])) == pytest.approx(108.0)
    # ... with 50 us of GPU work queued before it, the launch is hidden: the step is the GPU time
    assert float(step_time_us([Stage(8.0, 100.0)], head_start_us=50.0)) == pytest.approx(100.0)


def test_step_model_host_bound_is_host_plus_the_last_op():
    # three ops of host 10 us and GPU 1 us each: the GPU idles between launches -> 30 + 1
    stages = [Stage(10.0, 1.0)] * 3
    assert float(step_time_us(stages)) == pytest.approx(31.0)
    # a component of 4 ops (host 40, GPU 8): the last op is launched at 40, then runs 8/4 = 2 us
    assert float(step_time_us([Stage(40.0, 8.0, ops=4)])) == pytest.approx(42.0)
    # GPU-bound component of 4 ops: the first launch (10/4 = 2.5 us), then all 100 us of GPU work
    assert float(step_time_us([Stage(10.0, 100.0, ops=4)])) == pytest.approx(102.5)


def test_step_model_sync_makes_host_and_gpu_add():
    no_sync = float(step_time_us([Stage(10.0, 30.0), Stage(10.0, 30.0)]))
    sync = float(step_time_us([Stage(10.0, 30.0, sync_after=True), Stage(10.0, 30.0)]))
    assert no_sync == pytest.approx(10 + 30 + 30)  # second launch overlaps the first op's GPU time
    assert sync == pytest.approx((10 + 30) + (10 + 30))  # the host waits, then launches: host + GPU per segment


@settings(max_examples=60, deadline=None)
@given(h=st.lists(st.floats(0, 200), min_size=1, max_size=6), g=st.lists(st.floats(0, 500), min_size=6, max_size=6),
       n=st.lists(st.integers(1, 20), min_size=6, max_size=6))
def test_step_model_lies_between_max_and_sum(h, g, n):
    stages = [Stage(a, b, ops=k) for a, b, k in zip(h, g, n, strict=False)]
    t = float(step_time_us(stages))
    host, gpu = sum(s.host_us for s in stages), sum(s.gpu_us for s in stages)
    assert max(host, gpu) - 1e-9 <= t <= host + gpu + 1e-9


# -- engine plans on real strategies ---------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(vocab=st.sampled_from([32000, 128256, 151936, 202048]), p=st.sampled_from([1, 2, 4, 8]),
       batch=st.integers(1, 4096), dtype=st.sampled_from(["bf16", "fp32"]))
def test_graph_is_never_slower_than_eager_for_the_same_work(vocab, p, batch, dtype):
    sc = Scenario(vocab=vocab, tp=p, batch=batch, dtype=dtype, mode=np.array(["graph", "eager"]))
    pred = predict(sc, H200)
    for name in STRATEGIES:
        graph, eager = pred.total_us(name)
        assert graph <= eager + 1e-9
        # the eager step carries the host launches the GPU waits for, nothing else
        gpu = sum(v[1] for k, v in pred.strategies[name].components_us.items() if k != "host_exposed")
        assert eager == pytest.approx(gpu + pred.strategies[name].components_us["host_exposed"][1])


def test_vllm_small_batch_is_host_bound_large_batch_gpu_bound():
    hc = host_costs(H200)
    small = predict(Scenario(vocab=202048, tp=8, batch=1, engine="vllm"), H200).strategies["local_argmax_pairs"]
    gpu_small = sum(float(v) for k, v in small.components_us.items() if k != "host_exposed")
    # host-bound: the step is longer than the GPU work, and at least every launch of the chain
    host_ops = 4 + 1 + 5  # local_argmax, rank_offset, pair_reduce torch ops (strategies.TORCH_OPS)
    assert float(small.total_us) > gpu_small
    assert float(small.total_us) >= host_ops * hc.torch_op_us + hc.c10d_call_us
    big = predict(Scenario(vocab=202048, tp=8, batch=4096, engine="vllm"), H200).strategies["full_all_gather"]
    gpu_big = sum(float(v) for k, v in big.components_us.items() if k != "host_exposed")
    # GPU-bound: only the first launch (one c10d call) is exposed
    assert float(big.components_us["host_exposed"]) <= hc.c10d_call_us + 1e-9
    assert float(big.total_us) == pytest.approx(gpu_big + float(big.components_us["host_exposed"]))


def test_captured_engines_price_like_graph_mode_and_vllm_like_eager():
    """Without the serving term, each engine is graph / eager mode plus only what its recipe changes:
    SGLang's split-vocab argmax in its baseline at top-k 1 (cheaper than ATen's at 32 rows x 151936), TensorRT-LLM's
    compiled pair path (cheaper than ten torch ops)."""
    base = dict(vocab=151936, tp=4, batch=32)
    graph = predict(Scenario(**base, mode="graph"), H200)
    eager = predict(Scenario(**base, mode="eager"), H200)
    for engine, ref in (("sglang", graph), ("trtllm", graph), ("vllm-v2", graph), ("vllm", eager)):
        got = predict(Scenario(**base, engine=engine, hidden=None, serving_term=False), H200)
        for name in STRATEGIES:
            r = got.strategies[name]
            t = float(r.total_us)
            if engine == "vllm":  # vLLM also gets the lm_head head start (0 without a hidden size)
                assert t <= float(ref.total_us(name)) + 1e-9
            elif (engine, name) in (("trtllm", "local_argmax_pairs"), ("sglang", "full_all_gather"),
                                    ("sglang", "gather_to_rank0")):  # both end in the baseline selection
                assert t < float(ref.total_us(name))
            else:
                assert t == pytest.approx(float(ref.total_us(name)))
        assert "softmax" not in got.strategies["full_all_gather"].components_us
    assert PLANS["trtllm"].default_strategy == "local_argmax_pairs"


def test_engine_and_mode_together_is_one_error_line(capsys):
    assert main(["predict", "--engine", "vllm", "--mode", "eager"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --engine")


def test_predict_json_names_the_engine(capsys):
    assert main(["predict", "--preset", "llama3-8b", "--tp", "4", "--batch", "8", "--engine", "vllm", "--json",
                 "--no-intervals"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"]["name"] == "vllm" and "eagle.py" in out["engine"]["source"]
    assert out["scenario"]["engine"] == "vllm"
    assert "host_exposed" in out["strategies"]["full_all_gather"]["components"]


# -- strategy details --------------------------------------------------------------------------------------------
def test_no_relayout_copy_at_batch_1_or_tp_1():
    def relayout(**kw):
        return float(predict(Scenario(vocab=202048, **kw), H200).strategies["full_all_gather"]
                     .components_us["relayout_copy"])

    assert relayout(tp=8, batch=1) == 0.0
    assert relayout(tp=1, batch=64) == 0.0
    assert relayout(tp=8, batch=2) > 0.0
    # parallel drafting: one call of B*K rows - a real copy even at B = 1
    assert relayout(tp=8, batch=1, num_spec_tokens=4, drafting="parallel") > 0.0


def test_padding_mask_only_when_the_vocab_is_padded():
    def mask(vocab):
        return float(predict(Scenario(vocab=vocab, tp=8, batch=16), H200).strategies["local_argmax_pairs"]
                     .components_us["pad_mask"])

    assert mask(128256) == 0.0  # 128256 = 2004 x 64: V_pad == V
    assert mask(32003) > 0.0  # V_pad = 32064: 61 padded rows in the last shard


def test_tp1_local_path_is_a_plain_argmax():
    pred = predict(Scenario(vocab=128256, tp=1, batch=64), H200)
    argmax = float(pred.strategies["full_all_gather"].components_us["argmax"])
    for name in ("local_argmax_pairs", "packed_allreduce_max", "full_all_gather_no_relayout"):
        assert float(pred.total_us(name)) == pytest.approx(argmax)


def test_softcap_costs_the_full_width_on_the_baseline_and_the_shard_locally():
    sc = Scenario(vocab=256000, tp=8, batch=64, softcap=True)
    pred = predict(sc, H200)
    bw = H200.kernel_ops["relayout_copy"].bw_gbps
    k = H200.graph_kernel_us

    def expected(cols):  # 3 element-wise passes (x / cap, tanh, * cap), read + write bf16
        return 3 * (k + 2 * 64 * cols * 2 / bw * 1e-3)

    assert float(pred.strategies["full_all_gather"].components_us["softcap"]) == pytest.approx(expected(256000))
    assert float(pred.strategies["local_argmax_pairs"].components_us["softcap"]) == pytest.approx(expected(32000))
    plain = predict(sc.with_(softcap=False), H200)
    assert float(plain.saving_us("local_argmax_pairs")) < float(pred.saving_us("local_argmax_pairs"))


# -- replicate consistency, constraints ------------------------------------------------------------------------
def _doc(name: str) -> dict:
    return json.loads((PROFILE_DIR / f"{name}.json").read_text())


def test_profile_with_inconsistent_replicates_is_refused():
    data = expand_document(_doc("cpu-gloo"))  # the verbose bootstrap list (the file stores it compactly)
    check_replicates(data, "cpu-gloo")  # the bundled fit is consistent
    bad = copy.deepcopy(data)
    point = bad["collectives"][0]["regimes"][0]["alpha_base_us"]
    for rep in bad["bootstrap"]:  # every replicate's latency above twice the point estimate
        for curve in rep["collectives"]:
            if (curve["op"], curve["world_size"], curve["mode"]) == (bad["collectives"][0]["op"],
                                                                     bad["collectives"][0]["world_size"],
                                                                     bad["collectives"][0]["mode"]):
                curve["regimes"][0]["alpha_base_us"] = 2 * point + 5
    with pytest.raises(InputError, match="contradict the point estimate") as info:
        profile_from_dict(bad, source="bad.json")
    assert "\n" not in str(info.value) and "alpha_base_us" in str(info.value)


def test_constraints_keep_lower_protocols_below_simple_bandwidth():
    data = {"collectives": [{"op": "all_gather", "regimes": [
        {"name": "LL", "busbw_gbps": 500.0, "alpha_base_us": -1.0},
        {"name": "LL128", "busbw_gbps": 400.0, "alpha_base_us": 5.0},
        {"name": "Simple", "busbw_gbps": 350.0, "alpha_base_us": 8.0}]}],
        "kernels": {"hbm_gbps": 4800.0, "ops": {"argmax": {"bw_gbps": 9e3}}}}
    out = constrain(data)
    bws = [r["busbw_gbps"] for r in out["collectives"][0]["regimes"]]
    assert bws == [350.0, 350.0, 350.0]
    assert out["collectives"][0]["regimes"][0]["alpha_base_us"] == 0.0
    assert out["kernels"]["ops"]["argmax"]["bw_gbps"] == 4800.0
    assert data["collectives"][0]["regimes"][0]["busbw_gbps"] == 500.0  # the input is not modified


# -- honest intervals ---------------------------------------------------------------------------------------------
def _synthetic(sizes, reps, sigma, seed):
    """all_gather over 2 ranks from a known two-regime model, log-normal noise of sd `sigma`."""
    from tests.calibration.test_fit import true_time_us

    regimes = [(2 ** 20, 10.0, 0.0, 5.0), (None, 150.0, 0.0, 50.0)]
    rng = np.random.default_rng(seed)
    b = np.repeat(np.asarray(sizes), reps)
    t = true_time_us("all_gather", b.astype(float), np.full(b.shape, 2.0), regimes)
    t = t * np.exp(sigma * rng.standard_normal(b.shape))
    return pd.DataFrame({"op": "all_gather", "mode": "graph", "world_size": 2, "nodes": 1, "bytes_per_rank": b,
                         "rows": 0, "cols": 0, "dtype": "fp32", "median_us": t, "gpu": "cpu"})


def test_interval_coverage_on_synthetic_data_is_90_percent():
    """Fit a profile on noisy data from a known model, then score its 90% intervals on fresh draws at
    new sizes: pooled over 6 independent fits (seeds 0-5) the coverage is 90% +- 5%."""
    fit = pytest.importorskip("calibration.fitting.fit")
    from tests.calibration.test_fit import BYTES

    covered = []
    test_sizes = np.unique(np.round(np.geomspace(BYTES[0], BYTES[-1], 60)).astype(np.int64))
    for seed in range(6):
        prof = profile_from_dict(fit.fit_measurements(_synthetic(BYTES, 4, 0.1, seed), name="syn", bootstrap=50,
                                                      seed=seed))
        test = _synthetic(test_sizes, 5, 0.1, 1000 + seed)
        lo, hi = point_intervals(test, prof)
        assert np.all(lo < hi)
        covered.append((test["median_us"] >= lo) & (test["median_us"] <= hi))
    coverage = float(np.mean(np.concatenate(covered)))
    assert 0.85 <= coverage <= 0.95, coverage


def test_without_discrepancy_the_bootstrap_alone_under_covers():
    """Parameter uncertainty alone is not a prediction interval: the discrepancy term widens the interval."""
    sc = Scenario(vocab=202048, tp=8, batch=64)
    prof = load_profile("cpu-gloo")
    full = propagate(sc, prof, with_crossover=False)["local_argmax_pairs"].saving_us
    boot = propagate(sc, prof, with_crossover=False, with_discrepancy=False)["local_argmax_pairs"].saving_us
    assert full.high - full.low > boot.high - boot.low


def test_discrepancy_sources_fitted_vs_prior():
    fitted = discrepancy(load_profile("cpu-gloo"))
    assert "fit report" in fitted.describe("all_gather")
    assert fitted.sigma("all_gather") > 0
    bare = discrepancy(profile_from_dict({k: v for k, v in _doc("cpu-gloo").items()
                                          if k not in ("fit_report", "bootstrap", "ensemble")}, source="bare"))
    assert "prior" in bare.describe("argmax")
    h200 = discrepancy(H200)  # the GPU kernel model's own cross-validation, on the GPU it was measured on
    assert "kernel model" in h200.describe("argmax") and 0.02 < h200.sigma("argmax") < 0.2
    assert "kernel model" not in discrepancy(load_profile("h100-sxm-nvlink")).describe("argmax")


def test_predict_points_intervals_columns(tmp_path):
    """predict-points --intervals on a profile fitted from synthetic data: p05 < predicted < p95 per row."""
    fit = pytest.importorskip("calibration.fitting.fit")
    from tests.calibration.test_fit import BYTES

    prof_path = tmp_path / "syn.json"
    prof_path.write_text(json.dumps(fit.fit_measurements(_synthetic(BYTES, 4, 0.1, 0), name="syn", bootstrap=50)))
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _synthetic([4096, 2 ** 20, 2 ** 24], 1, 0.0, 0).to_csv(src, index=False)
    assert main(["predict-points", "--profile", str(prof_path), "--in", str(src), "--out", str(out),
                 "--intervals"]) == 0
    got = pd.read_csv(out)
    assert (got["predicted_p05_us"] < got["predicted_us"]).all()
    assert (got["predicted_us"] < got["predicted_p95_us"]).all()
    # about +-1.645 sigma around the point: the fit's noise was sigma = 0.1 in log
    ratio = np.log(got["predicted_p95_us"] / got["predicted_p05_us"])
    assert ((ratio > 2 * 1.645 * 0.05) & (ratio < 2 * 1.645 * 0.25)).all()


def test_predict_points_engine_prices_rows_as_the_engine_runs_them(tmp_path):
    """sglang / trtllm capture the op: graph price; vllm launches it: max(h/n + g, h + g/n) >= graph price."""
    rows = pd.DataFrame({"op": ["local_pack", "relayout_argmax", "all_gather"], "mode": "eager",
                         "world_size": [1, 8, 8], "nodes": 1, "bytes_per_rank": [0, 0, 65536], "rows": [64, 64, 0],
                         "cols": [25256, 25256, 0],
                         "dtype": "bf16", "gpu": "NVIDIA H200"})
    src = tmp_path / "in.csv"
    rows.to_csv(src, index=False)
    got = {}
    for engine in ("sglang", "vllm"):
        out = tmp_path / f"{engine}.csv"
        assert main(["predict-points", "--in", str(src), "--out", str(out), "--engine", engine]) == 0
        got[engine] = pd.read_csv(out)
    assert (got["sglang"]["mode"] == "graph").all() and (got["vllm"]["mode"] == "eager").all()
    hc = host_costs(H200)
    g = got["sglang"]["predicted_us"].to_numpy()
    v = got["vllm"]["predicted_us"].to_numpy()
    assert v[2] == pytest.approx(hc.c10d_call_us + g[2])  # one c10d call: launch, then the GPU work
    assert (v >= g + min(hc.torch_op_us, hc.c10d_call_us) / 14 - 1e-9).all()


def test_coverage_is_scored_leave_one_set_out():
    """Each reference set's intervals use a discrepancy estimated from the other sets only."""
    from costmodel.evidence.coverage import coverage_summary, interval_coverage
    from costmodel.evidence.reference import reference_set

    prof = load_profile("h100-sxm-nvlink")
    rng = np.random.default_rng(0)
    sizes = 2.0 ** np.arange(16, 28)
    frames = []
    for name, spread in (("tight", 0.02), ("loose", 0.5)):  # the 'loose' set is 25x noisier
        rows = pd.DataFrame({"op": "all_gather", "mode": "graph", "world_size": 8, "nodes": 1,
                             "bytes_per_rank": sizes, "gpu": "H100", "source": "synthetic", "table": name,
                             "dtype": "fp32", "rows": 0, "cols": 0, "file": "syn.csv", "used_in_profile": False,
                             "profile": prof.name})
        pred = predict_points_frame(rows, prof)
        rows["median_us"] = pred * np.exp(spread * rng.standard_normal(len(rows)))
        rows["predicted_us"] = pred
        frames.append(rows)
    table = pd.concat(frames, ignore_index=True).assign(profile_used=prof.name)
    assert list(reference_set(table).unique()) == ["tight", "loose"]
    covered = interval_coverage(table)
    summ = coverage_summary(covered).set_index("reference_set")
    # 'tight' is scored with the loose set's sigma (wide: everything covered); 'loose' with the tight one's
    assert summ.loc["tight", "coverage_90"] == 1.0
    assert summ.loc["loose", "coverage_90"] < 0.5
    assert summ.loc["tight", "median_width_ratio"] > summ.loc["loose", "median_width_ratio"]
    assert covered["covered"].dtype == bool and {"predicted_p05_us", "predicted_p95_us"} <= set(covered.columns)


def predict_points_frame(rows, profile):
    from costmodel.model.points import predict_points

    return predict_points(rows, profile)["predicted_us"].to_numpy(float)


def test_fitted_kernels_carry_bootstrap_replicates_around_the_point():
    fit = pytest.importorskip("calibration.fitting.fit")
    from tests.calibration.test_fit import kernel_rows

    data = fit.fit_measurements(kernel_rows(noise=0.05, seed=3), name="kern", bootstrap=40, seed=0)
    prof = profile_from_dict(data)  # loads: the replicates pass the consistency check
    point = data["kernels"]["ops"]["argmax"]["bw_gbps"]
    boot = [rep["kernels"]["ops"]["argmax"]["bw_gbps"] for rep in data["bootstrap"]]
    # the 40 refits, repeated over the base's 100 members (calibration.fitting.base_parts: its spread is kept)
    assert len(boot) == 100 and boot[40:] == [boot[j % 40] for j in range(40, 100)]
    boot = boot[:40]
    assert min(boot) < point < max(boot)
    assert 0.7 * point < np.percentile(boot, 5) and np.percentile(boot, 95) < 1.3 * point  # 5% noise, 24 rows
    assert len(prof.bootstrap) == 100


def test_engines_vectorized_equal_scalar_and_explanations_add_up():
    from costmodel.answers.explain import explain

    sc = Scenario(vocab=128256, draft_vocab=32000, d2t=True, tp=np.array([1, 2, 4, 8]), batch=np.array([1, 8, 64, 512]),
                  hidden=4096, engine=np.array(["vllm", "sglang", "vllm", "none"]), impl="fused", softcap=True,
                  logit_scale=True)
    pred = predict(sc, H200)
    for i in range(4):
        one = predict(sc.item(i), H200)
        items = explain(one)
        for name in STRATEGIES:
            assert float(one.total_us(name)) == pytest.approx(pred.total_us(name)[i])
            assert sum(e.time_us for e in items if e.strategy == name) == pytest.approx(float(one.total_us(name)))
