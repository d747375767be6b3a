"""Cost model core: hand-computed components, properties, validation."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import STRATEGIES, InputError, Scenario, collective_time_us, crossover, impact, load_profile, predict
from costmodel.model.collectives import bus_factor, link_floor_us, total_bytes
from costmodel.model.kernels import kernel_bytes, kernel_time_us
from costmodel.model.scenario import padded_vocab
from costmodel.profiles.parse import profile_from_dict

H200 = load_profile("h200-sxm-nvlink")


def _roofline_profile():
    """H200 without its GPU kernel model and tables, roofline parameters set by hand (graph 2 us, eager 8 us
    per kernel, copies at 3840 GB/s): the path CPU profiles and fused ops take."""
    data = copy.deepcopy({k: v for k, v in H200.raw.items() if k not in ("bootstrap", "ensemble")})
    kern = data["kernels"]
    kern.pop("model", None)
    kern.update(graph_kernel_us=2.0, eager_launch_us=8.0, tables=[])
    kern["ops"]["relayout_copy"] = {"launches": 1, "fixed_us": 0.0, "bw_gbps": 3840.0}
    return profile_from_dict(data)


ROOFLINE = _roofline_profile()


def test_padding_and_shard_follow_vllm():
    assert padded_vocab(202048) == 202048
    assert padded_vocab(32003) == 32064
    assert padded_vocab(1) == 64
    sc = Scenario(vocab=151936, tp=8)
    assert int(sc.shard) == 151936 // 8
    assert int(Scenario(vocab=1000, tp=8).shard) == 1024 // 8


@pytest.mark.parametrize("kwargs, field", [
    ({"vocab": 202048, "tp": 3}, "tp"),
    ({"vocab": 128256, "tp": 8, "nodes": 3}, "nodes"),
    ({"vocab": 128256, "draft_vocab": 32000, "d2t": False}, "draft_vocab"),
    ({"vocab": 32000, "draft_vocab": 64000, "d2t": True}, "draft_vocab"),
    ({"batch": 0}, "batch"),
    ({"dtype": "int8"}, "dtype"),
    ({"mode": "compiled"}, "mode"),
])
def test_scenario_rejects_what_vllm_rejects(kwargs, field):
    with pytest.raises(InputError) as info:
        Scenario(**kwargs)
    assert str(info.value).startswith(field)
    assert "\n" not in str(info.value)


def test_all_gather_matches_hand_computation_per_regime():
    # p = 8, 40 KiB per rank -> S = 327,680 B, LL regime (S below the 4.5 MB breakpoint):
    # T = launch 4 + 6.6 + 0.6 * 7 + S * 7/8 / 141 GB/s
    per_rank = 40 * 1024
    expected = 4.0 + 6.6 + 0.6 * 7 + 327680 * 7 / 8 / 141.0 * 1e-3
    got = float(collective_time_us(H200, "all_gather", per_rank, 8, 1, "graph"))
    assert got == pytest.approx(expected, rel=1e-12)
    # Simple regime at 256 MiB per rank: S = 2 GiB, with the ramp s_half (busbw x S / (S + s_half)); eager +9 us
    per_rank = 256 * 2**20
    S = 8 * per_rank
    (simple,) = [r for r in H200.curve("all_gather", 8, "graph").regimes if r.name == "Simple"]
    assert simple.s_half_bytes > 0
    expected = 4.0 + 8.4 + 3.4 * 7 + (S + simple.s_half_bytes) * 7 / 8 / 361.4 * 1e-3 + 9.0
    assert float(collective_time_us(H200, "all_gather", per_rank, 8, 1, "eager")) == pytest.approx(expected)
    # across 2 nodes: + alpha_per_node (NET - NVLink hop); every protocol's busbw scaled by inter / 361.4 GB/s,
    # inter = the profile's network bus bandwidth (NICs x NIC bandwidth x 0.9; 360 GB/s for 8 x 400 Gb/s)
    inter = H200.curve("all_gather", 8, "graph", 2).inter_node_busbw_gbps
    assert inter == pytest.approx(8 * 50.0 * 0.9)
    expected_2n = 4.0 + 8.4 + 3.4 * 7 + (14.0 - 3.4) + (S + simple.s_half_bytes) * 7 / 8 / inter * 1e-3
    assert float(collective_time_us(H200, "all_gather", per_rank, 8, 2)) == pytest.approx(expected_2n)


def test_bus_factors_and_total_bytes():
    assert float(bus_factor("all_gather", 4)) == 0.75
    assert float(bus_factor("all_reduce", 4)) == 1.5
    assert float(bus_factor("broadcast", 4)) == 1.0
    assert float(total_bytes("all_gather", 100, 4)) == 400
    assert float(total_bytes("all_reduce", 100, 4)) == 100


def test_kernel_roofline_hand_computed():
    # relayout copy of B=64 rows x p=8 x s=25256 bf16: 2 * 64 * 8 * 25256 * 2 bytes at 3840 GB/s + 1 kernel * 2 us
    nbytes = 2 * 64 * 8 * 25256 * 2
    assert float(kernel_bytes("relayout_copy", 64, 25256, 8, 2)) == nbytes
    est = kernel_time_us(ROOFLINE, "relayout_copy", rows=64, cols=25256, world_size=8, dtype="bf16", elem_bytes=2)
    assert float(est.time_us) == pytest.approx(2.0 + nbytes / 3840.0 * 1e-3)
    eager = kernel_time_us(ROOFLINE, "relayout_copy", rows=64, cols=25256, world_size=8, elem_bytes=2, mode="eager")
    assert float(eager.time_us) - float(est.time_us) == pytest.approx(8.0 - 2.0)


def test_strategy_totals_are_sums_of_components_and_match_hand_values():
    sc = Scenario(vocab=202048, tp=8, batch=64, num_spec_tokens=5)
    pred = predict(sc, H200)
    for name in STRATEGIES:
        r = pred.strategies[name]
        assert float(r.total_us) == pytest.approx(sum(float(v) for v in r.components_us.values()))
    full = pred.strategies["full_all_gather"].components_us
    per_rank = 64 * 25256 * 2
    assert float(full["all_gather"]) == pytest.approx(float(collective_time_us(H200, "all_gather", per_rank, 8)))
    pairs = pred.strategies["local_argmax_pairs"]
    assert float(pairs.wire_bytes_per_rank) == 64 * 8
    assert float(pairs.components_us["all_gather"]) == pytest.approx(4 + 6.6 + 0.6 * 7 + 64 * 8 * 8 * 7 / 8 / 141e3)
    # per decode step = K x per draft call for serial drafting
    assert float(pred.saving_per_decode_step_us("local_argmax_pairs")) == pytest.approx(
        5 * float(pred.saving_us("local_argmax_pairs")))
    par = predict(sc.with_(drafting="parallel"), H200)
    assert float(par.scenario.rows) == 320
    assert float(par.saving_per_decode_step_us("local_argmax_pairs")) == pytest.approx(
        float(par.saving_us("local_argmax_pairs")))


def test_d2t_adds_scatter_to_baseline_and_lookup_to_local():
    sc = Scenario(vocab=202048, draft_vocab=32000, d2t=True, tp=8, batch=16)
    pred = predict(sc, H200)
    assert float(pred.strategies["full_all_gather"].components_us["d2t_scatter"]) > 0
    assert float(pred.strategies["local_argmax_pairs"].components_us["d2t_lookup"]) > 0
    plain = predict(sc.with_(d2t=False, draft_vocab=202048), H200)
    assert float(plain.strategies["full_all_gather"].components_us["d2t_scatter"]) == 0


def test_tp1_has_no_communication():
    pred = predict(Scenario(vocab=128256, tp=1, batch=np.array([1, 64, 4096])), H200)
    for r in pred.strategies.values():
        for comp in ("all_gather", "all_reduce", "gather", "broadcast", "relayout_copy", "pair_reduce"):
            if comp in r.components_us:
                assert np.all(r.components_us[comp] == 0), comp
        assert np.all(r.wire_bytes_per_rank == 0)


def test_fp32_ids_invalid_above_2_pow_24():
    pred = predict(Scenario(vocab=2**24 + 64, tp=8), H200)
    assert not bool(pred.strategies["local_argmax_pairs"].valid)
    assert bool(pred.strategies["packed_allreduce_max"].valid)
    assert str(pred.best()) != "local_argmax_pairs"


def test_vectorized_equals_scalar():
    batches = np.array([1, 7, 64, 999])
    vec = predict(Scenario(vocab=151936, tp=4, batch=batches, mode="eager"), H200)
    for i, b in enumerate(batches):
        one = predict(Scenario(vocab=151936, tp=4, batch=int(b), mode="eager"), H200)
        for name in STRATEGIES:
            assert vec.total_us(name)[i] == pytest.approx(float(one.total_us(name)))


def test_to_frame_is_tidy():
    frame = predict(Scenario(batch=np.array([1, 2, 3]), tp=np.array([[2], [8]])), H200).to_frame()
    assert len(frame) == 6 * len(STRATEGIES)
    assert {"strategy", "total_us", "saving_us", "all_gather_us", "batch", "tp"} <= set(frame.columns)


# -- properties ------------------------------------------------------------------------
def _shuffled_profile(breaks: list[float]) -> dict:
    data = copy.deepcopy(H200.raw)
    data["collectives"][0]["select"] = "breakpoints"  # the fitted-curve path: bracket + monotone envelope
    regimes = data["collectives"][0]["regimes"]
    for r, b in zip(regimes, sorted(breaks) + [None], strict=False):
        r["max_bytes"] = b
    return data


@settings(max_examples=60, deadline=None)
@given(p=st.sampled_from([2, 4, 8, 16]), nodes=st.sampled_from([1, 2]),
       mode=st.sampled_from(["graph", "eager"]),
       breaks=st.lists(st.floats(1e3, 1e9), min_size=2, max_size=2, unique=True),
       op=st.sampled_from(["all_gather", "all_reduce", "gather", "broadcast"]))
def test_collective_time_is_non_decreasing_in_bytes(p, nodes, mode, breaks, op):
    prof = profile_from_dict(_shuffled_profile(breaks)) if op == "all_gather" else H200
    sizes = np.geomspace(8, 2**31, 400)
    t = collective_time_us(prof, op, sizes, p, nodes if p % nodes == 0 else 1, mode)
    assert np.all(np.diff(t) >= -1e-9)


@settings(max_examples=60, deadline=None)
@given(p=st.sampled_from([2, 4, 8]), size=st.floats(8, 2**32), profile=st.sampled_from(
    ["h100-sxm-nvlink", "h200-sxm-nvlink", "a100-sxm-nvlink"]))
def test_all_gather_never_beats_the_link_floor(p, size, profile):
    prof = load_profile(profile)
    t = float(collective_time_us(prof, "all_gather", size, p))
    assert t >= float(link_floor_us(prof, "all_gather", size, p)) - 1e-9


@settings(max_examples=40, deadline=None)
@given(v1=st.integers(1000, 300000), v2=st.integers(1000, 300000), batch=st.integers(1, 4096),
       p=st.sampled_from([2, 4, 8]))
def test_local_strategies_wire_bytes_independent_of_vocab(v1, v2, batch, p):
    v1, v2 = (int(padded_vocab(v)) for v in (v1, v2))
    a = predict(Scenario(vocab=v1, tp=p, batch=batch), H200)
    b = predict(Scenario(vocab=v2, tp=p, batch=batch), H200)
    for name in ("local_argmax_pairs", "packed_allreduce_max"):
        assert float(a.strategies[name].wire_bytes_per_rank) == float(b.strategies[name].wire_bytes_per_rank)
        assert float(a.strategies[name].wire_bytes_per_rank) == batch * 8
    assert float(a.strategies["full_all_gather"].wire_bytes_per_rank) == batch * v1 // p * 2


@settings(max_examples=25, deadline=None)
@given(vocab=st.sampled_from([32000, 128256, 151936, 202048, 262208]), p=st.sampled_from([2, 4, 8]),
       mode=st.sampled_from(["graph", "eager"]), strategy=st.sampled_from(STRATEGIES[1:]),
       profile=st.sampled_from(["h100-sxm-nvlink", "h200-sxm-nvlink", "a100-sxm-nvlink"]))
def test_saving_changes_sign_at_the_reported_crossover(vocab, p, mode, strategy, profile):
    prof = load_profile(profile)
    sc = Scenario(vocab=vocab, tp=p, mode=mode)
    cross = crossover(sc, strategy, prof)
    grid = np.geomspace(1, 65536, 300)
    saving = predict(sc.with_(batch=grid), prof).saving_us(strategy)
    if cross.batch is None:
        assert np.all(saving > 0) if cross.status == "wins_everywhere" else np.all(saving <= 0)
        return
    b = cross.batch
    below = float(predict(sc.with_(batch=max(b * 0.999, 1.0)), prof).saving_us(strategy))
    above = float(predict(sc.with_(batch=b * 1.001), prof).saving_us(strategy))
    assert below * above <= 0 or abs(below) < 1e-6 or abs(above) < 1e-6
    if cross.direction == "wins_above":
        assert above >= 0
    else:
        assert above <= 0


def test_crossover_no_root_in_range():
    # small batches: gather + broadcast of the ids costs more than the all-gather
    cross = crossover(Scenario(vocab=202048, tp=8), "gather_to_rank0", H200, batch_range=(1, 64))
    assert cross.batch is None and cross.status == "loses_everywhere"
    cross = crossover(Scenario(vocab=202048, tp=8), "local_argmax_pairs", H200, batch_range=(100, 200))
    assert cross.batch is None and cross.status == "wins_everywhere"


def test_impact_formula():
    im = impact(500.0, itl_ms=20.0, acceptance_length=2.5)
    assert im.itl_after_ms == pytest.approx(19.5)
    assert im.tpot_before_ms == pytest.approx(8.0)
    assert im.tpot_after_ms == pytest.approx(7.8)
    assert im.speedup_pct == pytest.approx(2.5)
    with pytest.raises(InputError, match="acceptance-length"):
        impact(1.0, 20.0, 0.5)


# -- profile validation -------------------------------------------------------------------
@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("provenance"), "provenance"),
    (lambda d: d.__setitem__("schema_version", 7), "schema_version"),
    (lambda d: d["collectives"][0]["regimes"][0].__setitem__("busbw_gbps", -1), "busbw_gbps"),
    (lambda d: (d["collectives"][0].__setitem__("select", "breakpoints"),
                d["collectives"][0]["regimes"][1].__setitem__("max_bytes", 10)), "max_bytes"),
    (lambda d: d["collectives"][0].__setitem__("select", "fastest"), "select"),
    (lambda d: d["collectives"][0].__setitem__("op", "all_to_all"), "op"),
    (lambda d: d["kernels"]["ops"]["argmax"].__setitem__("bw_gbps", "fast"), "bw_gbps"),
    (lambda d: d["collectives"][0]["regimes"][0].__setitem__("alpha_base_us", float("nan")), "alpha_base_us"),
    (lambda d: d["provenance"].__setitem__("kind", "guessed"), "kind"),
])
def test_profile_validation_names_the_field(mutate, field):
    data = copy.deepcopy(H200.raw)
    mutate(data)
    with pytest.raises(InputError) as info:
        profile_from_dict(json.loads(json.dumps(data, allow_nan=True)))
    assert field in str(info.value)
    assert "\n" not in str(info.value)


def test_bundled_profiles_say_derived():
    for name in ("h100-sxm-nvlink", "a100-sxm-nvlink"):
        prov = load_profile(name).provenance
        assert prov.kind == "derived"
        assert "not measured" in prov.source
        assert prov.citations
    prov = H200.provenance  # kernels measured on one H200 (the probe), collectives derived
    assert prov.kind == "mixed"
    assert prov.source.startswith("mixed: kernels measured on one H200 (standalone probe, 2026-11-30), "
                                  "collectives derived")
    assert "not measured" in prov.source and prov.citations


def test_curve_lookup_ranks_world_size_then_nodes_then_mode():
    data = copy.deepcopy(H200.raw)
    data.pop("ensemble")  # the replicates (compact: costmodel.replicates)
    flat = {"name": "flat", "max_bytes": None, "alpha_base_us": 0.0, "busbw_gbps": 1.0}
    data["collectives"] += [
        {"op": "all_gather", "world_size": 8, "nodes": 2, "mode": None, "regimes": [{**flat, "alpha_base_us": 111.0}]},
        {"op": "all_gather", "world_size": None, "nodes": 2, "mode": "eager",
         "regimes": [{**flat, "alpha_base_us": 222.0}]},
    ]
    prof = profile_from_dict(data)
    t = collective_time_us(prof, "all_gather", np.array([1.0, 1.0, 1.0, 1.0]), np.array([8, 8, 4, 4]),
                           np.array([2, 1, 2, 2]), np.array(["graph", "graph", "eager", "graph"]))
    expected_ws8_1node = float(collective_time_us(H200, "all_gather", 1.0, 8, 1, "graph"))
    expected_ws4_2node_graph = float(collective_time_us(H200, "all_gather", 1.0, 4, 2, "graph"))
    assert t[0] == pytest.approx(111.0 + 8 * 7 / 8 * 1e-3)
    assert t[1] == pytest.approx(expected_ws8_1node)
    assert t[2] == pytest.approx(222.0 + 4 * 3 / 4 * 1e-3)
    assert t[3] == pytest.approx(expected_ws4_2node_graph)


def test_dtype_free_kernel_tables_apply_to_every_logits_dtype():
    data = copy.deepcopy(ROOFLINE.raw)
    data["kernels"]["tables"] = [{"op": op, "dtype": "fp32", "mode": "graph", "world_size": 8, "rows": [1, 1024],
                                  "cols": [1], "median_us": [[3.0], [30.0]]} for op in ("pair_reduce", "argmax")]
    prof = profile_from_dict(data)
    pair = kernel_time_us(prof, "pair_reduce", rows=32, cols=0, world_size=8, dtype="bf16")
    assert float(pair.time_us) == pytest.approx(float(np.exp(np.interp(np.log(32), np.log([1, 1024]),
                                                                       np.log([3.0, 30.0])))))
    arg = kernel_time_us(prof, "argmax", rows=32, cols=1, world_size=8, dtype="bf16")  # dtype-specific: roofline
    assert float(arg.time_us) != pytest.approx(float(pair.time_us))


def test_serial_crossover_does_not_depend_on_k():
    """The dashboard caches crossovers per draft call: with serial drafting K only scales the decode step."""
    for k in (2, 7):
        for name in ("local_argmax_pairs", "full_all_gather_no_relayout"):
            one = crossover(Scenario(vocab=151936, tp=4, num_spec_tokens=1), name, H200)
            many = crossover(Scenario(vocab=151936, tp=4, num_spec_tokens=k), name, H200)
            assert many.batch == pytest.approx(one.batch)
    par = crossover(Scenario(vocab=151936, tp=4, num_spec_tokens=4, drafting="parallel"), "local_argmax_pairs", H200)
    one = crossover(Scenario(vocab=151936, tp=4, num_spec_tokens=1), "local_argmax_pairs", H200)
    assert par.batch == pytest.approx(one.batch / 4, rel=1e-3)  # parallel: B*K rows per call
