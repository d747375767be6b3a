"""Engine recipes (costmodel/model/recipes.py), their derived kernels, the serving term and the host overrides."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.io.errors import InputError
from costmodel.model import engine_kernels as ek
from costmodel.model.collective_impls import collective_us
from costmodel.model.engines import ENGINES, PLANS, Stage, host_costs, step_time_us, with_overrides
from costmodel.model.predict import predict
from costmodel.model.recipes import RECIPES, describe
from costmodel.model.scenario import Scenario
from costmodel.model.serving import SERVING_CALL_US
from costmodel.profiles.store import load_profile

H200 = load_profile("h200-sxm-nvlink")
BASE = dict(vocab=131072, tp=8, num_spec_tokens=3)  # shard 16384: every tokenspeed gate open


def _comps(pred, name):
    return pred.strategies[name].components_us


def test_every_engine_has_a_recipe_and_a_plan_and_cites_its_source():
    assert set(RECIPES) == set(ENGINES)
    for engine in ENGINES[1:]:
        assert engine in PLANS and RECIPES[engine].source and PLANS[engine].source
        for name in ("full_all_gather", "local_argmax_pairs"):
            text = describe(engine, name)
            assert text.startswith(f"{engine} recipe: ") and RECIPES[engine].source in text


@pytest.mark.parametrize("top_k, profile", [(2, "h200-sxm-nvlink"), (1, "mi300x-xgmi")])
def test_sglang_baseline_adds_the_softmax_over_b_v_above_top_k_1_and_on_rocm(top_k, profile):
    """eagle_worker_v2.draft_forward: the top-k 1 branch is `not _is_hip`; elsewhere renorm_draft_probs (a softmax
    over [B, V]) + fast_topk - the reference selection plus the softmax, by its formula."""
    prof = load_profile(profile)
    graph = predict(Scenario(**BASE, batch=16, top_k=top_k), prof)
    sg = predict(Scenario(**BASE, batch=16, top_k=top_k, engine="sglang", serving_term=False), prof)
    c = _comps(sg, "full_all_gather")
    t0, read = prof.graph_kernel_us, prof.kernel_ops["argmax"].bw_gbps
    copy = prof.kernel_ops["relayout_copy"].bw_gbps
    nbytes = 16 * 131072 * 2
    assert float(c["softmax"]) == pytest.approx(t0 + nbytes / read * 1e-3 + 2 * nbytes / copy * 1e-3)
    assert float(sg.total_us("full_all_gather")) == pytest.approx(float(graph.total_us("full_all_gather"))
                                                                  + float(c["softmax"]))
    # the local path does not pay it
    assert "softmax" not in _comps(sg, "local_argmax_pairs")


def test_sglang_top_k_1_on_cuda_selects_with_the_split_vocab_argmax_and_no_softmax():
    """draft_topk1_postprocess: one partial-argmax kernel reading every logit + a finalize launch:
    t0 + R V e / BW_read + t0, in place of ATen's argmax; everything else as the reference recipe."""
    graph = predict(Scenario(**BASE, batch=16), H200)
    sg = predict(Scenario(**BASE, batch=16, engine="sglang", serving_term=False), H200)
    c, ref = _comps(sg, "full_all_gather"), _comps(graph, "full_all_gather")
    t0, read = H200.graph_kernel_us, H200.kernel_ops["argmax"].bw_gbps
    assert "softmax" not in c
    assert float(c["argmax"]) == pytest.approx(2 * t0 + 16 * 131072 * 2 / read * 1e-3)
    assert float(c["argmax"]) < float(ref["argmax"])  # ATen's reduce at 16 rows x 131072 is not bandwidth-bound
    assert float(sg.total_us("full_all_gather")) == pytest.approx(
        float(graph.total_us("full_all_gather")) - float(ref["argmax"]) + float(c["argmax"]))


def test_tokenspeed_multimem_gather_up_to_128_rows_then_nccl_and_relayout():
    for batch, multimem in ((64, True), (256, False)):
        ts = predict(Scenario(**BASE, batch=batch, engine="tokenspeed", serving_term=False), H200)
        c = _comps(ts, "full_all_gather")
        assert (float(c["relayout_copy"]) == 0.0) == multimem
        want, _ = collective_us(H200, "multimem" if multimem else "nccl", "all_gather", batch * 16384 * 2, 8)
        assert float(c["all_gather"]) == pytest.approx(float(want))
        # the CuTe argmax reads the logits once at the profile's read rate
        assert float(c["argmax"]) == pytest.approx(float(ek.argmax_bw_us(H200, batch, 131072, 2)))


def test_tokenspeed_fused_distributed_argmax_only_where_its_gates_hold():
    ok = predict(Scenario(**BASE, batch=8, engine="tokenspeed", serving_term=False), H200)
    c = _comps(ok, "packed_allreduce_max")
    assert float(c["all_reduce"]) == 0.0 and float(c["key_unpack"]) == 0.0  # inside the one kernel
    exchange, _ = collective_us(H200, "multimem", "all_reduce", 8 * 8, 8)
    assert float(c["key_pack"]) == pytest.approx(float(ek.fused_dist_argmax_us(H200, 8, 16384, 2, exchange)))
    # Llama 4's 202048 / 8 = 25256 is not a multiple of 32: the CuTe kernel refuses it, the torch path prices it
    no = predict(Scenario(vocab=202048, tp=8, batch=8, engine="tokenspeed", serving_term=False), H200)
    ref = predict(Scenario(vocab=202048, tp=8, batch=8, mode="graph"), H200)
    assert float(no.total_us("packed_allreduce_max")) == pytest.approx(float(ref.total_us("packed_allreduce_max")))


@pytest.mark.parametrize("name", ["mi300x-xgmi", "l40s-pcie", "a100-sxm-nvlink"])
def test_tokenspeed_off_hopper_blackwell_nvls_falls_back_to_nccl_aten_and_torch_ops(name):
    """No NVLS multicast (xGMI, PCIe, A100 NVLink 3) and no sm 9.x / 10.x: NCCL + relayout, ATen argmax, torch ops -
    the reference recipe - where on the H200 every tokenspeed gate is open (the tests above)."""
    prof = load_profile(name)
    ts = predict(Scenario(**BASE, batch=64, engine="tokenspeed", serving_term=False), prof)
    ref = predict(Scenario(**BASE, batch=64, mode="graph"), prof)
    for strategy in ("full_all_gather", "packed_allreduce_max"):
        assert float(ts.total_us(strategy)) == pytest.approx(float(ref.total_us(strategy)))
    assert float(_comps(ts, "full_all_gather")["relayout_copy"]) > 0.0


def test_trtllm_compiled_pair_path_is_two_fused_kernels_and_the_gather():
    tr = predict(Scenario(**BASE, batch=32, engine="trtllm", serving_term=False), H200)
    c = _comps(tr, "local_argmax_pairs")
    assert float(c["local_argmax"]) == pytest.approx(float(ek.argmax_bw_us(H200, 32, 16384, 2)))
    assert float(c["pair_reduce"]) == pytest.approx(float(ek.small_us(H200, 32, 8 * 8)))
    assert float(c["rank_offset"]) == 0.0
    graph = predict(Scenario(**BASE, batch=32), H200)
    assert float(c["all_gather"]) == pytest.approx(float(_comps(graph, "local_argmax_pairs")["all_gather"]))
    assert float(tr.total_us("local_argmax_pairs")) < float(graph.total_us("local_argmax_pairs"))


def test_serving_term_is_per_collective_call_and_switchable():
    on = predict(Scenario(**BASE, batch=4, engine="vllm-v2"), H200)
    off = predict(Scenario(**BASE, batch=4, engine="vllm-v2", serving_term=False), H200)
    calls = {"full_all_gather": 1, "local_argmax_pairs": 1, "gather_to_rank0": 2, "packed_allreduce_max": 1}
    for name, n in calls.items():
        assert float(_comps(on, name)["serving"]) == pytest.approx(n * SERVING_CALL_US)
        assert float(on.total_us(name)) == pytest.approx(float(off.total_us(name)) + n * SERVING_CALL_US)
    # no engine (synchronized-microbenchmark pricing) and p = 1 (no collective) pay none
    assert "serving" not in _comps(predict(Scenario(**BASE, batch=4), H200), "full_all_gather")
    one = predict(Scenario(vocab=131072, tp=1, batch=4, engine="sglang"), H200)
    assert "serving" not in _comps(one, "full_all_gather")


def test_host_overrides_replace_the_profiles_host_costs():
    hc = host_costs(H200)
    assert with_overrides(hc) is hc
    got = with_overrides(hc, 2.0, np.array([np.nan, 5.0]))
    assert got.torch_op_us == 2.0 and list(got.c10d_call_us) == [hc.c10d_call_us, 5.0]
    fast = predict(Scenario(**BASE, batch=1, engine="vllm", host_op_us=0.0, host_collective_us=0.0), H200)
    slow = predict(Scenario(**BASE, batch=1, engine="vllm", host_op_us=50.0, host_collective_us=100.0), H200)
    for name in ("full_all_gather", "local_argmax_pairs"):
        assert float(_comps(fast, name).get("host_exposed", 0.0)) == 0.0
        assert float(slow.total_us(name)) > float(fast.total_us(name))
    with pytest.raises(InputError, match="host_op_us"):
        Scenario(**BASE, host_op_us=-1.0)


@settings(max_examples=40, deadline=None)
@given(h=st.floats(0.0, 100.0), g=st.floats(0.0, 100.0), n=st.integers(1, 400))
def test_back_to_back_loop_per_call_is_max_of_host_and_gpu_plus_a_tail(h, g, n):
    """engines.step_time_us of n equal calls (no sync): n max(h, g) <= E <= n max(h, g) + min(h, g)."""
    e = float(step_time_us([Stage(h * n, g * n, n)]))
    assert n * max(h, g) - 1e-9 <= e <= n * max(h, g) + min(h, g) + 1e-9
