"""`validate --engine-figures` (costmodel/evidence/engine_figures.py): the issue's "done when" figures as reproduced."""

from __future__ import annotations

import json

import numpy as np
import pytest

from costmodel.cli.main import main
from costmodel.evidence.engine_figures import LOOP_FILE, _loop_per_call, _topk_paths, engine_figure_rows
from costmodel.evidence.ensemble import ensemble
from costmodel.model.collectives import collective_time_us
from costmodel.model.engines import DEFAULT_HOST, host_costs
from costmodel.model.predict import predict
from costmodel.model.scenario import Scenario
from costmodel.profiles.presets import preset
from costmodel.profiles.store import load_profile


@pytest.fixture(scope="module")
def rows():
    return engine_figure_rows().set_index("figure")


def test_the_host_figure_is_the_median_eager_loop_figure_at_1_to_256_kib():
    sweep = json.loads(LOOP_FILE.read_text())["size_sweep"]
    eager = sorted(r["eager_us"] for r in sweep if 1024 <= r["bytes"] <= 262144)
    assert len(eager) == 9 and round(eager[4], 1) == DEFAULT_HOST["c10d_call_us"] == 23.4
    assert host_costs(load_profile("h100-sxm-nvlink")).c10d_call_us == 23.4  # the bundled profiles carry it too


def test_one_eager_call_in_a_loop_costs_max_of_host_and_gpu(rows):
    # hand-computed: 200 calls of host 23.4 / GPU 14.2 us -> 23.4 + 14.2 / 200 per call
    assert float(_loop_per_call(23.4, 14.2)) == pytest.approx(23.4 + 14.2 / 200)
    assert float(_loop_per_call(10.0, 30.0)) == pytest.approx(30.0 + 10.0 / 200)
    # the torch eager all_reduce loop within 25% at 1 KiB-256 KiB, but for the 8 KiB outlier (2x its neighbours)
    for b in (1024, 2048, 4096, 16384, 32768, 65536, 131072, 262144):
        r = rows.loc[f"torch-eager-loop-{b}B"]
        assert abs(r.rel_error) <= 0.25 and r.check == "in-sample", b
    assert not rows.loc["torch-eager-loop-8192B"].within_target


def test_the_serving_figures_are_in_sample_and_within_30_percent(rows):
    for name in ("vllm-55021-logits-all-gather", "sglang-32551-logits-all-gather", "sglang-32461-draft-all-reduce",
                 "sglang-37106-packed-path-h20"):
        r = rows.loc[name]
        assert r.check == "in-sample" and abs(r.rel_error) <= 0.30 and r.covered, name


def test_vllm_55961_packed_top_k_saving_as_the_model_prices_it(rows):
    """Saving of one packed all-gather: within 30% at 8 rows; 2x too large at 32 / 128 rows (the B300 profile's
    small all-gather, derived, is ~15 us where the figure implies ~6-8 us) - stated, not hidden."""
    assert rows.loc["vllm-55961-saving-rows-8"].within_target
    for n in (32, 128):
        r = rows.loc[f"vllm-55961-saving-rows-{n}"]
        assert r.predicted_us > 0 and not r.within_target


def test_sglang_37106_rows_are_predict_at_tp2_and_reproduce_the_pr(rows):
    """SGLang #37106 ran on 2x H20 (its author's comment): each row is predict's sglang pricing of DeepSeek-V3 at
    TP 2 - the saving's sign at rows 1/8/16, the speedup total(baseline) / total(local) at 32/64/128 - and, with
    the baseline's split-vocab argmax (draft_topk1_postprocess, no softmax, at top-k 1 on CUDA), all six hold."""
    h20 = load_profile("h20-hgx-nvlink")
    for b in (1, 8, 16, 32, 64, 128):
        pred = predict(Scenario(**preset("deepseek-v3"), tp=2, batch=b, engine="sglang"), h20)
        local, base = float(pred.total_us("local_argmax_pairs")), float(pred.total_us("full_all_gather"))
        if b <= 16:
            r = rows.loc[f"sglang-37106-saving-sign-{b}-rows"]
            assert r.predicted_us == pytest.approx(base - local) and r.predicted_us < 0 and r.check == "held-out"
        else:
            r = rows.loc[f"sglang-37106-speedup-{b}-rows (x)"]
            assert r.predicted_us == pytest.approx(base / local) and r.within_target and r.covered
        if b == 1:
            assert rows.loc["sglang-37106-packed-path-h20"].predicted_us == pytest.approx(local)


def test_intervals_are_the_ensemble_members_percentiles(rows):
    """The graph-loop row's band = p5..p95 of the ensemble members' all_reduce x their "all_reduce" factor."""
    h100 = load_profile("h100-sxm-nvlink")
    reps, factors, _ = ensemble(h100)
    vals = [float(collective_time_us(m, "all_reduce", 1024, 4, 1, "graph")) * f["all_reduce"]
            for m, f in zip(reps, factors)]
    r = rows.loc["torch-graph-loop-1024B"]
    assert (r.low_us, r.high_us) == pytest.approx(tuple(np.percentile(vals, [5, 95])))


def test_vllm_55961_prices_both_whole_paths():
    """Hand-composed at 8 rows, k 16, B300: separate = AG(256 B) + AG(1024 B) + widen([8, 128] bf16 -> fp32);
    packed = cast + int32 + cat + AG(1024 B); each small kernel t0 + 2 R b / BW_copy."""
    b300 = load_profile("b300-hgx-nvlink")
    t0, bw = b300.graph_kernel_us, b300.kernel_ops["relayout_copy"].bw_gbps

    def ag(n):
        return float(collective_time_us(b300, "all_gather", n, 8, 1, "graph"))

    def kern(b):
        return t0 + 2 * 8 * b / bw * 1e-3

    sep, packed = _topk_paths(b300, 8)
    assert sep == pytest.approx(ag(256) + ag(1024) + kern(8 * 16 * 3))
    assert packed == pytest.approx(kern(16 * 3) + kern(16 * 6) + kern(2 * 16 * 4) + ag(1024))


def test_validate_engine_figures_prints_the_set_and_fails_on_a_miss(capsys):
    assert main(["validate", "--engine-figures"]) == 1  # some figures miss their target (see above)
    out = capsys.readouterr().out
    assert out.startswith("engine figures") and "within target" in out.splitlines()[-1]
