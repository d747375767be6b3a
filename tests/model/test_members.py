"""costmodel.model.members: every ensemble member priced in ONE stacked evaluation gives, bit for bit, what one
`predict` per member gives; propagate and the interval table (which now price through it) equal a
straightforward member-by-member reference computed here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from costmodel import BASELINE, STRATEGIES, Scenario, load_profile, predict
from costmodel.evidence.ensemble import ensemble
from costmodel.evidence.interval_table import interval_table
from costmodel.evidence.intervals import propagate
from costmodel.model.crossover import grid_roots
from costmodel.model.members import predict_members, stack_profiles

FOCUS = "local_argmax_pairs"
BATCHES = np.geomspace(1, 65536, 97)
PROFILES = {name: load_profile(name) for name in ("h200-sxm-nvlink", "h100-sxm-nvlink", "cpu-gloo")}
SCENARIOS = {  # the paths the stack covers: d2t + vLLM host model, eager + fused + soft-cap, 2 nodes, parallel
    "default": dict(vocab=202048, tp=4),
    "d2t-vllm": dict(vocab=151936, draft_vocab=32000, d2t=True, tp=8, engine="vllm", hidden=4096),
    "eager-fused": dict(vocab=128256, tp=2, mode="eager", impl="fused", softcap=True, logit_scale=True),
    "two-nodes": dict(vocab=202048, tp=16, nodes=2, drafting="parallel", num_spec_tokens=3),
    "top-k": dict(vocab=151936, draft_vocab=32000, d2t=True, tp=4, top_k=4, engine="vllm", hidden=4096),
    "tokenspeed": dict(vocab=202048, tp=8, engine="tokenspeed"),  # its recipe's multimem all-gather and fused argmax
}


def one_by_one(scenario, members, strategies, factors):
    """The straightforward way: one predict per member."""
    return [predict(scenario, rep, strategies, factors=fac) for rep, fac in zip(members, factors, strict=True)]


@pytest.mark.parametrize("profile_name, case", [(p, c) for p in ("h200-sxm-nvlink", "h100-sxm-nvlink") for c in
                                                sorted(SCENARIOS)] + [("cpu-gloo", "default"),
                                                                      ("cpu-gloo", "eager-fused")])
def test_stacked_members_equal_one_predict_per_member_exactly(profile_name, case):
    """GPU profiles (kernel model + measured tables, NCCL-rule curves) and cpu-gloo (fitted breakpoint curves,
    roofline kernels with measured tables), one predict per member vs one stacked evaluation."""
    profile = PROFILES[profile_name]
    sc = Scenario(batch=BATCHES, **SCENARIOS[case])
    members, factors, _ = ensemble(profile, nodes=int(sc.nodes))
    priced = predict_members(sc, members, STRATEGIES, factors)
    assert priced.stacked  # the one-evaluation path really ran
    for m, pred in enumerate(one_by_one(sc, members, STRATEGIES, factors)):
        for s in STRATEGIES:
            np.testing.assert_array_equal(priced.total_us[s][m], pred.total_us(s), err_msg=f"member {m} {s}")
            assert np.isfinite(pred.total_us(s)).all()
            np.testing.assert_array_equal(priced.saving_per_decode_step_us(s)[m], pred.saving_per_decode_step_us(s))


def test_members_the_stack_does_not_cover_are_priced_one_by_one():
    """Fitted curves whose breakpoints differ between members, a scenario varying more than the batch, a one-shot
    collective, or members that differ in structure: the member-by-member path, with the same numbers."""
    gloo = PROFILES["cpu-gloo"]
    members, factors, _ = ensemble(gloo)
    curve = members[1].collectives[0]
    moved = dataclasses.replace(curve, regimes=(dataclasses.replace(curve.regimes[0],
                                                                    max_bytes=curve.regimes[0].max_bytes * 2),
                                                *curve.regimes[1:]))
    members = [members[0], dataclasses.replace(members[1], collectives=(moved, *members[1].collectives[1:])),
               *members[2:]]
    assert curve.select == "breakpoints" and stack_profiles(members) is None
    sc = Scenario(vocab=202048, tp=4, batch=BATCHES[:9])
    priced = predict_members(sc, members, (BASELINE, FOCUS), factors)
    assert not priced.stacked
    for m, pred in enumerate(one_by_one(sc, members, (BASELINE, FOCUS), factors)):
        np.testing.assert_array_equal(priced.saving_us(FOCUS)[m], pred.saving_us(FOCUS))
    h200 = PROFILES["h200-sxm-nvlink"]
    members, factors, _ = ensemble(h200)
    for sc in (Scenario(vocab=202048, tp=np.array([2, 4, 8]), batch=8.0), Scenario(vocab=202048, tp=4, batch=8.0,
                                                                                 collective="oneshot")):
        assert not predict_members(sc, members[:3], (BASELINE, FOCUS), factors[:3]).stacked
    odd = dataclasses.replace(members[1], kernel_tables=members[1].kernel_tables[1:])  # one table fewer
    assert stack_profiles([members[0], odd]) is None
    assert stack_profiles(members[:2]) is not None


def reference_propagate(sc, profile, strategies, level=0.9, grid_points=257):
    """propagate's definition, member by member: 5th..95th percentile of each member's saving at the batch and
    of each member's first grid root (linear in log batch)."""
    members, factors, _ = ensemble(profile, nodes=int(sc.nodes))
    grid = np.geomspace(1.0, 65536.0, grid_points)
    swept = sc.item(0).with_(batch=np.append(grid, sc.batch))
    out = {}
    preds = one_by_one(swept, members, (BASELINE, *strategies), factors)
    for s in strategies:
        saving = np.array([float(p.saving_us(s)[-1]) for p in preds])
        decode = np.array([float(p.saving_per_decode_step_us(s)[-1]) for p in preds])
        roots = [r[0] for r in (grid_roots(grid, p.saving_us(s)[:-1]) for p in preds) if r]
        tail = (1 - level) / 2 * 100
        out[s] = (np.percentile(saving, [tail, 100 - tail]), np.percentile(decode, [tail, 100 - tail]),
                  np.percentile(roots, [tail, 100 - tail]) if roots else None, len(roots) / len(members))
    return out


@pytest.mark.parametrize("profile_name, tp, extra", [("h200-sxm-nvlink", 8, {}),
                                                     ("h100-sxm-nvlink", 4, {"draft_vocab": 32000, "d2t": True})])
def test_propagate_and_interval_table_equal_the_member_by_member_reference(profile_name, tp, extra):
    profile = PROFILES[profile_name]
    sc = Scenario(vocab=202048, tp=tp, num_spec_tokens=3, batch=64, **extra)
    names = tuple(s for s in STRATEGIES if s != BASELINE)
    expected = reference_propagate(sc, profile, names)
    got = propagate(sc, profile, strategies=names)
    for s in names:
        saving, decode, cross, found = expected[s]
        np.testing.assert_allclose([got[s].saving_us.low, got[s].saving_us.high], saving, rtol=1e-12, atol=0)
        np.testing.assert_allclose([got[s].saving_per_decode_step_us.low, got[s].saving_per_decode_step_us.high],
                                   decode, rtol=1e-12, atol=0)
        assert (got[s].crossover_batch is None) == (cross is None)
        if cross is not None:
            np.testing.assert_allclose([got[s].crossover_batch.low, got[s].crossover_batch.high], cross, rtol=1e-12)
        assert got[s].crossover_found_fraction == found
    assert any(expected[s][2] is not None for s in names)  # a crossover interval is really compared
    table = interval_table(sc, profile, FOCUS, np.array([1.0, 64.0, 4096.0]))
    at = table.at(64.0)
    np.testing.assert_allclose([at.saving_us.low, at.saving_us.high], expected[FOCUS][0], rtol=1e-12, atol=0)
    np.testing.assert_allclose([at.saving_per_decode_step_us.low, at.saving_per_decode_step_us.high],
                               expected[FOCUS][1], rtol=1e-12, atol=0)
    if expected[FOCUS][2] is not None:
        np.testing.assert_allclose([table.crossover.low, table.crossover.high], expected[FOCUS][2], rtol=1e-12)
    assert table.crossover_found_fraction == expected[FOCUS][3]


def test_stacked_ratio_grids_equal_each_members_own():
    """The measured/model ratio grid of every H200 table, priced once with the stacked kernel model, equals
    costmodel.model.kernel_ratios.ratio_grid under each member's own model, bit for bit."""
    from costmodel.model.kernel_ratios import member_ratio_grids, ratio_grid

    members, _, _ = ensemble(PROFILES["h200-sxm-nvlink"])
    stacked = stack_profiles(members)
    assert stacked.kernel_tables
    for table in stacked.kernel_tables:
        expected = np.stack([np.ravel(ratio_grid(m.kernel_model, table)[2]) for m in members])
        np.testing.assert_array_equal(member_ratio_grids(stacked, table), expected, err_msg=table.op)


def test_a_profile_without_replicates_and_parameter_only_intervals_stack_too():
    """No bootstrap: the ensemble is the point profile 100 times with different discrepancy factors (one shared
    parameter set, (M, 1) factors); with_discrepancy=False: replicates without factors. Both equal the
    member-by-member reference."""
    h200 = PROFILES["h200-sxm-nvlink"]
    point = dataclasses.replace(h200, bootstrap=())
    sc = Scenario(vocab=202048, tp=8, batch=BATCHES[::8])
    for profile, with_discrepancy in ((point, True), (h200, False)):
        members, factors, _ = ensemble(profile, with_discrepancy=with_discrepancy)
        assert (len(set(map(id, members))) == 1) == (profile is point)
        priced = predict_members(sc, members, (BASELINE, FOCUS), factors)
        assert priced.stacked
        for m, pred in enumerate(one_by_one(sc, members, (BASELINE, FOCUS), factors)):
            np.testing.assert_array_equal(priced.saving_us(FOCUS)[m], pred.saving_us(FOCUS))


def test_stacked_members_price_measured_topk_tables_exactly():
    """Top-k 8 with measured local_topk / topk_merge tables in every member (the per-op factor applied after
    the table lookup): stacked = one predict per member, bit for bit."""
    from costmodel.profiles.types import KernelTable

    local = KernelTable("local_topk", "bf16", "graph", 1, (16.0, 256.0), (12000.0, 50000.0),
                        ((40.0, 60.0), (80.0, 120.0)), "test", k=8)
    merge = KernelTable("topk_merge", "fp32", "graph", 8, (16.0, 256.0), (64.0,), ((7.0,), (11.0,)), "test", k=8)
    members, factors, _ = ensemble(PROFILES["h200-sxm-nvlink"])
    members = [dataclasses.replace(m, kernel_tables=(*m.kernel_tables, local, merge)) for m in members[:20]]
    sc = Scenario(vocab=202048, tp=8, top_k=8, batch=np.geomspace(8, 512, 9))
    priced = predict_members(sc, members, STRATEGIES, factors[:20])
    assert priced.stacked
    for m, pred in enumerate(one_by_one(sc, members, STRATEGIES, factors[:20])):
        assert "local_topk" in pred.strategies[FOCUS].components_us
        for s in STRATEGIES:
            np.testing.assert_array_equal(priced.total_us[s][m], pred.total_us(s), err_msg=f"member {m} {s}")


@pytest.mark.parametrize("profile_name", ["h200-sxm-nvlink", "cpu-gloo"])
def test_recommend_and_decode_step_intervals_equal_the_member_by_member_reference(profile_name):
    """recommend's ensemble expectations and verification.decode_step_intervals price through predict_members:
    the same numbers as one predict per member (draft + verification scenario), computed here."""
    from costmodel.answers.recommend import _ensemble_expectations
    from costmodel.evidence.decode_intervals import decode_step_intervals
    from costmodel.evidence.intervals import _interval
    from costmodel.model.verification import verification_scenario

    profile = PROFILES[profile_name]
    weight = np.array([0.5, 0.3, 0.2])
    sc = Scenario(batch=np.array([1.0, 24.0, 512.0]), vocab=151936, tp=4, num_spec_tokens=4)
    ver_sc = verification_scenario(sc, None)
    members, factors, _ = ensemble(profile, nodes=1)
    got, _ = _ensemble_expectations(sc, profile, weight, True, ver_sc, 0.7)
    one = Scenario(batch=24.0, vocab=151936, tp=4, num_spec_tokens=4)
    one_ver = verification_scenario(one, None)
    intervals = decode_step_intervals(one, profile, verify=True, greedy_fraction=0.7)
    draft, ver = one_by_one(sc, members, STRATEGIES, factors), one_by_one(ver_sc, members, STRATEGIES, factors)
    d1, v1 = one_by_one(one, members, STRATEGIES, factors), one_by_one(one_ver, members, STRATEGIES, factors)
    for s in STRATEGIES[1:]:
        expected = [float(np.dot(weight, d.saving_per_decode_step_us(s) + 0.7 * (v.total_us(BASELINE) - v.total_us(s))))
                    for d, v in zip(draft, ver, strict=True)]
        np.testing.assert_allclose(got[s], expected, rtol=1e-12, atol=1e-9)
        group = np.array([0.7 * float(v.total_us(BASELINE) - v.total_us(s)) for v in v1])
        total = np.array([float(d.saving_per_decode_step_us(s)) for d in d1]) + group
        for key, values in (("verify_saving_us", group), ("decode_step_saving_us", total)):
            ref = _interval(values, 0.9)
            assert intervals[s][key]["low"] == pytest.approx(ref.low, rel=1e-12, abs=1e-9)
            assert intervals[s][key]["high"] == pytest.approx(ref.high, rel=1e-12, abs=1e-9)
