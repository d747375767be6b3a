"""draft_step prices every strategy's chain in one `step_time_us` over a strategy axis (`draft_step._chain_totals`,
`engines.stack_paths`): the totals are, bit for bit and at the same shapes, those of one `step_time_us` per
strategy over its own chain (the chain the module doc describes), for engines with and without whole-chain
capture, eager mode, EAGLE-3's once-per-step fc, dp's token all-gather, K = 1 and stacked ensemble members."""

from __future__ import annotations

import numpy as np
import pytest

from costmodel import STRATEGIES, Scenario, load_profile
from costmodel.evidence.ensemble import ensemble
from costmodel.model import draft_step as ds
from costmodel.model.drafter import DraftArch
from costmodel.model.engines import step_time_us
from costmodel.model.members import draft_step_members
from costmodel.profiles.presets import preset_draft

MAVERICK = DraftArch.from_fields({**preset_draft("llama4-maverick"), "vocab": 202048})
EAGLE3 = DraftArch.from_fields({**preset_draft("llama3-8b-eagle3"), "vocab": 32000})
CASES = {  # (scenario fields, placement, draft architecture)
    "vllm": (dict(engine="vllm", tp=8, num_spec_tokens=5), "target", MAVERICK),
    "sglang-topk4": (dict(engine="sglang", tp=4, num_spec_tokens=3, top_k=4), "target", MAVERICK),
    "trtllm-k1": (dict(engine="trtllm", tp=8, num_spec_tokens=1), "target", MAVERICK),
    "none-eager-dp": (dict(engine="none", tp=8, mode="eager", num_spec_tokens=3), "dp", MAVERICK),
    "vllm-eagle3": (dict(engine="vllm", tp=4, vocab=128256, draft_vocab=32000, d2t=True, num_spec_tokens=4),
                    "target", EAGLE3),
    "tokenspeed-tp1": (dict(engine="tokenspeed", tp=8, num_spec_tokens=2), "tp1", MAVERICK),
}


def one_chain_per_strategy(paths, lead, forwards, lm, tail, calls):
    """The chain of each strategy priced alone: lead, then per call its forward, the lm_head and its logits
    path, then tail."""
    out = {}
    for name, path in paths.items():
        stages = list(lead)
        for k in range(calls):
            stages += [forwards[0] if k == 0 else forwards[1], lm, *path]
        out[name] = step_time_us(stages + list(tail))
    return out


def assert_same_totals(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert type(a[name]) is type(b[name]) and np.shape(a[name]) == np.shape(b[name]), name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize("stack_max", [ds.STACK_MAX_ENTRIES, 0])  # stacked, and one step_time_us per strategy
@pytest.mark.parametrize("batch", [64.0, np.array([1.0, 3.0, 17.5, 300.0, 65536.0])])
@pytest.mark.parametrize("case", sorted(CASES))
def test_stacked_chains_equal_one_chain_per_strategy(case, batch, stack_max, monkeypatch):
    monkeypatch.setattr(ds, "STACK_MAX_ENTRIES", stack_max)
    fields, placement, arch = CASES[case]
    sc = Scenario(batch=batch, hidden=arch.hidden, **{"vocab": 202048, **fields})
    profile = load_profile("h200-sxm-nvlink")
    pl = ds.parse_placement(placement, int(sc.tp))
    stacked = ds.draft_step(sc, profile, pl, arch)
    monkeypatch.setattr(ds, "_chain_totals", one_chain_per_strategy)
    assert_same_totals(stacked.total_us, ds.draft_step(sc, profile, pl, arch).total_us)


@pytest.mark.parametrize("stack_max", [10**6, 0])
def test_stacked_chains_equal_one_chain_per_strategy_over_stacked_members(stack_max, monkeypatch):
    """Members stacked as (M, 1) parameters over (1, n) batches (`draft_step_members`): the same floats."""
    monkeypatch.setattr(ds, "STACK_MAX_ENTRIES", stack_max)
    sc = Scenario(vocab=202048, batch=np.geomspace(1, 65536, 9), hidden=MAVERICK.hidden, engine="vllm", tp=8,
                  num_spec_tokens=3)
    members, factors, _ = ensemble(load_profile("h200-sxm-nvlink"))
    pl = ds.parse_placement("target", 8)
    stacked = draft_step_members(sc, members[:12], pl, MAVERICK, STRATEGIES, factors[:12])
    monkeypatch.setattr(ds, "_chain_totals", one_chain_per_strategy)
    alone = draft_step_members(sc, members[:12], pl, MAVERICK, STRATEGIES, factors[:12])
    assert stacked.stacked and alone.stacked
    assert_same_totals(stacked.total_us, alone.total_us)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_strategy_subset_prices_each_strategy_as_the_full_set_does(case):
    """`whole_step_answer`'s Brent steps price only the baseline and the strategies whose brackets are open: each
    strategy's total is its own, whichever others are priced with it."""
    fields, placement, arch = CASES[case]
    sc = Scenario(batch=np.array([1.0, 7.25, 64.0, 1500.0]), hidden=arch.hidden, **{"vocab": 202048, **fields})
    profile = load_profile("mi300x-xgmi")
    pl = ds.parse_placement(placement, int(sc.tp))
    full = ds.draft_step(sc, profile, pl, arch).total_us
    for subset in (("full_all_gather", "local_argmax_pairs"), ("full_all_gather", "packed_allreduce_max"),
                   ("full_all_gather", "gather_to_rank0", "packed_allreduce_max"), ("local_argmax_pairs",)):
        alone = ds.draft_step(sc, profile, pl, arch, strategies=subset).total_us
        assert_same_totals(alone, {name: full[name] for name in subset})
