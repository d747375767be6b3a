"""costmodel.model.members.draft_step_members: every ensemble member's whole draft step priced in ONE stacked
`draft_step` gives, bit for bit, what one `draft_step` per member gives; `propagate_draft_step` and recommend's
whole-step member savings (which price through it) equal a member-by-member reference computed here."""

from __future__ import annotations

import numpy as np
import pytest

from costmodel import BASELINE, STRATEGIES, Scenario, load_profile
from costmodel.answers.whole_step import whole_step_member_savings
from costmodel.evidence.ensemble import ensemble
from costmodel.evidence.intervals import propagate_draft_step
from costmodel.model.crossover import grid_roots
from costmodel.model.draft_step import draft_step, parse_placement
from costmodel.model.drafter import DraftArch
from costmodel.model.members import draft_step_members
from costmodel.profiles.presets import preset_draft

ARCH = DraftArch.from_fields({**preset_draft("llama4-maverick"), "vocab": 202048})
BATCHES = np.append(np.geomspace(1, 65536, 17), 16.0)
CASES = {  # engines with and without a host sync / whole-chain capture, 2 nodes, eager, user-measured forward
    "vllm": (dict(engine="vllm", tp=8), "target", None),
    "sglang-tp4": (dict(engine="sglang", tp=4), "target", None),
    "trtllm": (dict(engine="trtllm", tp=8), "target", None),
    "vllm-2-nodes": (dict(engine="vllm", tp=8, nodes=2), "target", None),
    "none-eager-dp": (dict(engine="none", tp=8, mode="eager"), "dp", None),
    "vllm-tp1-forward-us": (dict(engine="vllm", tp=8), "tp1", 120.0),
    "tokenspeed": (dict(engine="tokenspeed", tp=8), "target", None),  # multimem all-gather, fused CuTe argmax
}


def _scenario(fields: dict) -> Scenario:
    return Scenario(vocab=202048, batch=BATCHES, num_spec_tokens=5, hidden=ARCH.hidden, **fields)


@pytest.mark.parametrize("profile_name", ["h200-sxm-nvlink", "mi300x-xgmi", "cpu-gloo"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_stacked_draft_step_equals_one_draft_step_per_member_exactly(profile_name, case):
    fields, placement, forward_us = CASES[case]
    sc = _scenario(fields)
    members, factors, _ = ensemble(load_profile(profile_name), nodes=int(sc.nodes))
    pl = parse_placement(placement, int(sc.tp))
    priced = draft_step_members(sc, members, pl, ARCH, STRATEGIES, factors, forward_us=forward_us)
    assert priced.stacked  # the one-evaluation path really ran
    for m, (rep, fac) in enumerate(zip(members, factors, strict=True)):
        one = draft_step(sc, rep, pl, ARCH, strategies=STRATEGIES, factors=fac, forward_us=forward_us)
        for s in STRATEGIES:
            np.testing.assert_array_equal(priced.total_us[s][m], np.broadcast_to(one.total_us[s], sc.shape),
                                          err_msg=f"member {m} {s}")
            assert np.isfinite(priced.total_us[s][m]).all()


def test_tokenspeed_is_stacked_with_the_same_numbers():
    """tokenspeed's recipe picks multimem where the profile has NVLS (a gate every member shares) and prices it with
    each member's NVLS / all-gather bandwidths: stacked, row m = member m's draft_step, on a TP 4 B200 too."""
    sc = _scenario(dict(engine="tokenspeed", tp=4))
    members, factors, _ = ensemble(load_profile("b200-hgx-nvlink"))
    pl = parse_placement("target", 4)
    priced = draft_step_members(sc, members, pl, ARCH, STRATEGIES, factors)
    assert priced.stacked
    for m in range(len(members)):
        one = draft_step(sc, members[m], pl, ARCH, strategies=STRATEGIES, factors=factors[m])
        np.testing.assert_array_equal(priced.saving_us("local_argmax_pairs")[m],
                                      one.total_us[BASELINE] - one.total_us["local_argmax_pairs"])


def test_propagate_draft_step_equals_a_member_by_member_reference():
    sc = Scenario(vocab=202048, batch=16.0, num_spec_tokens=5, hidden=ARCH.hidden, engine="vllm", tp=8)
    profile = load_profile("h200-sxm-nvlink")
    got = propagate_draft_step(sc, profile, ARCH, grid_points=17)
    members, factors, _ = ensemble(profile, nodes=1)
    grid = np.geomspace(1.0, 65536.0, 17)
    swept = sc.with_(batch=np.append(grid, 16.0))
    pl = parse_placement("target", 8)
    steps = [draft_step(swept, r, pl, ARCH, factors=f) for r, f in zip(members, factors, strict=True)]
    tail = (1 - 0.9) / 2 * 100  # the interval's quantiles, as intervals._interval takes them
    for s in STRATEGIES[1:]:
        values = np.stack([st.total_us[BASELINE] - st.total_us[s] for st in steps])
        lo, hi = np.percentile(values[:, -1], [tail, 100 - tail])
        assert (got[s].saving_per_decode_step_us.low, got[s].saving_per_decode_step_us.high) == (lo, hi)
        roots = [r[0] for r in (grid_roots(grid, row) for row in values[:, :-1]) if r]
        assert got[s].crossover_found_fraction == len(roots) / len(members)
        if roots:
            low, high = np.percentile(np.asarray(roots), [tail, 100 - tail])
            assert (got[s].crossover_batch.low, got[s].crossover_batch.high) == (low, high)


def test_recommend_member_savings_equal_a_member_by_member_reference():
    sc = Scenario(vocab=202048, batch=np.array([1.0, 8.0, 64.0, 512.0]), num_spec_tokens=5, hidden=ARCH.hidden,
                  engine="vllm", tp=8)
    w = np.array([0.1, 0.4, 0.3, 0.2])
    profile = load_profile("h200-sxm-nvlink")
    got = whole_step_member_savings(sc, profile, ARCH, w)
    members, factors, _ = ensemble(profile, nodes=1)
    pl = parse_placement("target", 8)
    for m, (rep, fac) in enumerate(zip(members, factors, strict=True)):
        one = draft_step(sc, rep, pl, ARCH, factors=fac)
        for s in STRATEGIES[1:]:
            assert got[s][m] == float(w @ (one.total_us[BASELINE] - one.total_us[s]))
