"""Reference strategies: building blocks by hand, every strategy on simulated ranks vs torch.argmax."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration.reference import strategies as ref
from costmodel.io.errors import InputError
from costmodel.model.scenario import padded_vocab

INF, NAN = float("inf"), float("nan")


def _all_strategies_agree(full: torch.Tensor, head: ref.DraftHead, pad_fill: float = INF) -> None:
    padded = ref.pad_logits(full, head.layout.padded_vocab, pad_fill)
    expected = ref.expected_ids(full, head)
    for name, fn in ref.STRATEGY_FUNCS.items():
        for rank, got in enumerate(ref.simulate(fn, padded, head)):
            assert got.dtype == torch.int64
            assert torch.equal(got, expected), (name, rank, got.tolist(), expected.tolist())


# -- layout and pre-step ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("vocab,p,v_pad,shard", [(1000, 4, 1024, 256), (32003, 8, 32064, 4008),
                                                 (128256, 8, 128256, 16032), (151936, 2, 151936, 75968),
                                                 (70, 8, 128, 16)])
def test_layout_pads_to_64_and_splits_evenly(vocab, p, v_pad, shard):
    lay = ref.vocab_layout(vocab, p)
    assert (lay.padded_vocab, lay.shard) == (v_pad, shard)
    assert lay.padded_vocab == int(padded_vocab(vocab))
    assert sum(lay.valid_cols(r) for r in range(p)) == vocab


def test_layout_rejects_p_not_dividing_padded_vocab():
    with pytest.raises(InputError, match="does not divide the padded vocab 1024"):
        ref.vocab_layout(1000, 3)


def test_softcap_then_scale_hand_values():
    x = torch.tensor([0.0, 30.0, -60.0])
    out = ref.apply_softcap_scale(x, softcap=30.0, scale=2.0)
    want = [0.0, 2 * 30 * math.tanh(1.0), 2 * 30 * math.tanh(-2.0)]
    assert out.tolist() == pytest.approx(want, rel=1e-6)
    assert ref.apply_softcap_scale(x, None, 1.0) is x  # identity: no copy


@pytest.mark.parametrize("scale", [0.0, -1.0, -0.5, NAN, INF])
def test_non_positive_or_non_finite_scale_is_rejected(scale):
    with pytest.raises(ValueError) as info:
        ref.apply_softcap_scale(torch.zeros(2), scale=scale)
    assert "\n" not in str(info.value) and "scale" in str(info.value)
    head = ref.DraftHead(ref.vocab_layout(64, 1), scale=scale)  # bypass draft_head validation
    for fn in ref.STRATEGY_FUNCS.values():
        with pytest.raises(ValueError):
            ref.run_threads(1, lambda comm, fn=fn: fn(torch.zeros(1, 64), comm, head))
    with pytest.raises(ValueError):
        ref.draft_head(64, 1, scale=scale)


def test_non_positive_softcap_is_rejected():
    with pytest.raises(InputError, match="soft-cap"):
        ref.draft_head(64, 1, softcap=0.0)


# -- building blocks -------------------------------------------------------------------------------------------------
def test_local_argmax_masks_padding_and_offsets_ids():
    local = torch.tensor([[1.0, 5.0, 5.0, 9.0], [NAN, 2.0, NAN, INF]])
    vals, ids = ref.local_argmax(local, rank=1, shard=4, vocab=7)  # rank 1 holds ids 4..7, id 7 is padding
    assert ids.tolist() == [5, 4]  # first max (5.0 at local 1); first NaN (local 0); the +inf is padding
    assert vals[0].item() == 5.0 and math.isnan(vals[1].item())
    vals, ids = ref.local_argmax(local, rank=2, shard=4, vocab=7)  # all padding
    assert ids.tolist() == [8, 8] and vals.tolist() == [-INF, -INF]
    pairs = ref.local_argmax_pack(local.bfloat16(), 1, 4, 7)
    assert pairs.dtype == torch.float32 and pairs[0].tolist() == [5.0, 5.0]


def test_local_argmax_does_not_write_its_input():
    local = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    before = local.clone()
    ref.local_argmax_pack(local, 0, 4, 2)
    ref.key_pack(local, 0, 4, 2)
    assert torch.equal(local, before)


def test_relayout_is_vllm_concat_to_row_major():
    gathered = torch.tensor([[1, 2], [3, 4], [5, 6], [7, 8]])  # rank 0: rows 0-1, rank 1: rows 2-3
    assert ref.relayout(gathered, 2).tolist() == [[1, 2, 5, 6], [3, 4, 7, 8]]


def test_chunked_argmax_lowest_rank_wins_and_padding_never_wins():
    # p=2, B=2, s=3, vocab 5: rank 1 column 2 (id 5) is padding
    gathered = torch.tensor([[1.0, 7.0, 0.0],   # rank 0, row 0
                             [0.0, 0.0, 0.0],   # rank 0, row 1
                             [7.0, 2.0, 99.],   # rank 1, row 0
                             [0.0, 3.0, 99.]])  # rank 1, row 1
    ids, vals = ref.chunked_argmax(gathered, 2, 5)
    assert ids.tolist() == [1, 4] and vals.tolist() == [7.0, 3.0]


def test_pair_reduce_ties_pick_lowest_rank_and_nan_wins():
    rank0 = torch.tensor([[5.0, 10.0], [1.0, 3.0], [NAN, 7.0]])
    rank1 = torch.tensor([[5.0, 20.0], [2.0, 40.0], [NAN, 70.0]])
    ids, vals = ref.pair_reduce(torch.cat([rank0, rank1]), 2)
    assert ids.tolist() == [10, 40, 7] and ids.dtype == torch.int64
    assert vals[:2].tolist() == [5.0, 2.0]


def test_key_hand_values():
    keys = ref.make_keys(torch.tensor([1.0, -1.0, -0.0, NAN]), torch.tensor([5, 5, 9, 2]))
    low = (1 << 32) - 1
    ord_neg1 = 0xC07FFFFF - (1 << 32)  # 0xBF800000 ^ 0x7FFFFFFF as signed int32
    assert keys.tolist() == [0x3F800000 * (1 << 32) + low - 5, ord_neg1 * (1 << 32) + low - 5,
                             0 * (1 << 32) + low - 9, 0x7FC00000 * (1 << 32) + low - 2]
    assert ref.key_unpack(keys).tolist() == [5, 5, 9, 2]


def test_key_order_is_value_then_lowest_id():
    tiny = torch.finfo(torch.float32).tiny
    big = torch.finfo(torch.float32).max
    values = [-INF, -big, -1.0, -tiny, -tiny / 4, 0.0, tiny / 4, tiny, 1.0, big, INF]
    keys = ref.make_keys(torch.tensor(values), torch.full((len(values),), 7))
    assert all(a < b for a, b in zip(keys.tolist(), keys[1:].tolist()))
    nan_keys = ref.make_keys(torch.tensor([NAN, -NAN, INF]), torch.tensor([3, 1, 0]))
    assert nan_keys[1] > nan_keys[0] > nan_keys[2]  # every NaN above +inf, lower id first
    zeros = ref.make_keys(torch.tensor([-0.0, 0.0]), torch.tensor([4, 2]))
    assert zeros[1] > zeros[0]  # equal values: the lower id wins, whatever the sign
    ids = torch.tensor([0, 1, (1 << 32) - 1, 123456789])
    assert ref.key_unpack(ref.make_keys(torch.zeros(4), ids)).tolist() == ids.tolist()
    assert ref.key_is_neg_inf(ref.make_keys(torch.tensor([-INF, -big]), torch.tensor([0, 0]))).tolist() == \
        [True, False]


def test_d2t_scatter_and_lookup_hand_values():
    d2t = torch.tensor([1, 1, 3])  # draft 0,1,2 -> target 1,2,5
    out = ref.d2t_scatter(torch.tensor([[0.5, 2.0, 1.0]]), d2t, 6)
    assert out.tolist() == [[-INF, 0.5, 2.0, -INF, -INF, 1.0]]
    assert ref.d2t_lookup(torch.tensor([2, 0]), d2t).tolist() == [5, 1]
    assert ref.d2t_lookup(torch.tensor([2, 0]), d2t, torch.tensor([False, True])).tolist() == [5, 0]


def test_d2t_must_be_increasing_and_inside_the_target_vocab():
    with pytest.raises(InputError, match="strictly increasing"):
        ref.draft_head(3, 1, d2t=torch.tensor([2, 0, 0]), target_vocab=8)
    with pytest.raises(InputError, match="outside the target vocab"):
        ref.draft_head(3, 1, d2t=torch.tensor([0, 0, 9]), target_vocab=8)


def test_pairs_refuse_ids_beyond_fp32():
    head = ref.draft_head(2**24 + 1, 1)
    with pytest.raises(InputError, match="2\\^24"):
        ref.local_argmax_pairs(torch.empty(1, 1), None, head)


# -- every strategy, simulated ranks -----------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2, 4, 8])
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_every_strategy_matches_argmax_on_adversarial_rows(p, dtype):
    vocab = 1000
    x = torch.randn(8, vocab, generator=torch.Generator().manual_seed(p)).to(ref.TORCH_DTYPES[dtype])
    x[0] = -INF  # all -inf: id 0
    x[1, 300], x[1, 900] = NAN, NAN  # first NaN
    x[2, 100], x[2, 600], x[2, 999] = 9.0, 9.0, 9.0  # cross-shard tie
    x[3] = 2.0  # everything ties: id 0
    x[4] = -1.0
    x[4, 40], x[4, 700] = -0.0, 0.0  # signed zeros tie
    x[5, 10], x[5, 700] = INF, NAN  # NaN beats +inf
    x[6] = torch.finfo(x.dtype).min
    _all_strategies_agree(x, ref.draft_head(vocab, p), pad_fill=INF)
    _all_strategies_agree(x, ref.draft_head(vocab, p), pad_fill=NAN)


def test_ranks_holding_only_padding():
    # V=70 -> V_pad 128, p=8 -> s=16: rank 4 is partial, ranks 5-7 hold padding only
    x = torch.randn(3, 70, generator=torch.Generator().manual_seed(1))
    x[1] = -INF
    x[2, 69] = 50.0
    _all_strategies_agree(x, ref.draft_head(70, 8), pad_fill=1e9)


def test_eagle3_d2t_paths_match_the_scatter_baseline():
    g = torch.Generator().manual_seed(3)
    targets = (torch.randperm(4095, generator=g)[:1000] + 1).sort().values  # d2t[0] > 0
    d2t = targets - torch.arange(1000)
    x = torch.randn(5, 1000, generator=g).bfloat16()
    x[0] = -INF
    x[1, 7], x[1, 800] = NAN, NAN
    x[2, 5], x[2, 905] = 30.0, 30.0
    plain = ref.draft_head(1000, 4, d2t=d2t, target_vocab=4096)
    assert ref.expected_ids(x, plain)[0].item() == 0  # all -inf: target 0, not target(draft 0) = d2t[0]
    _all_strategies_agree(x, plain)
    capped = ref.draft_head(1000, 4, d2t=d2t, target_vocab=4096, softcap=10.0, scale=0.5)
    # the soft-cap maps -inf to -cap: the row is a 1000-way tie, won by draft 0 -> target(0)
    assert ref.expected_ids(x, capped)[0].item() == int(targets[0])
    _all_strategies_agree(x, capped)


def test_strategies_on_a_real_gloo_group_of_one(gloo_group_of_one):
    comm = ref.TorchComm()
    x = torch.randn(4, 1000).bfloat16()
    x[1, 3], x[1, 500] = NAN, NAN
    head = ref.draft_head(1000, 1)
    local = ref.pad_logits(x, 1024, INF)
    want = ref.expected_ids(x, head)
    for fn in ref.STRATEGY_FUNCS.values():
        assert torch.equal(fn(local, comm, head), want)


# -- properties --------------------------------------------------------------------------------------------------------
_SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, INF, -INF, NAN, 1e-40, -1e-40, 65504.0, -3e38]


@st.composite
def problems(draw):
    vocab = draw(st.integers(1, 300))
    p = draw(st.sampled_from([1, 2, 4, 8]))
    batch = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(["bf16", "fp16", "fp32"]))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    pool = torch.tensor(_SPECIAL + draw(st.lists(st.floats(-10, 10, width=16), min_size=1, max_size=4)))
    if draw(st.booleans()):  # few distinct values: lots of ties
        values = pool[torch.randint(0, len(pool), (batch, vocab), generator=g)]
    else:
        values = torch.randn(batch, vocab, generator=g)
        spots = torch.randint(0, vocab, (batch, 3), generator=g)
        values.scatter_(1, spots, pool[torch.randint(0, len(pool), (batch, 3), generator=g)])
    x = values.to(ref.TORCH_DTYPES[dtype])
    pad_fill = draw(st.sampled_from([INF, NAN, 1e4, 0.0]))
    d2t = target = None
    if draw(st.booleans()):
        target = vocab + draw(st.integers(0, 200))
        d2t = torch.randperm(target, generator=g)[:vocab].sort().values - torch.arange(vocab)
    softcap = draw(st.sampled_from([None, 1.0, 30.0]))
    scale = draw(st.sampled_from([1.0, 0.25, 3.0]))
    head = ref.draft_head(vocab, p, d2t=d2t, target_vocab=target, softcap=softcap, scale=scale)
    return x, head, pad_fill


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_property_every_strategy_equals_argmax(problem):
    x, head, pad_fill = problem
    _all_strategies_agree(x, head, pad_fill)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.sampled_from([1, 2, 4, 8]), st.integers(1, 3), st.integers(0, 2**16))
def test_property_chunked_and_relayout_argmax_agree(vocab, p, batch, seed):
    lay = ref.vocab_layout(vocab, p)
    g = torch.Generator().manual_seed(seed)
    full = torch.randint(-2, 3, (batch, lay.padded_vocab), generator=g).float()
    full[:, vocab:] = 100.0  # padding maxima
    gathered = torch.cat([ref.shard_of(full, r, lay) for r in range(p)], dim=0)
    want = full[:, :vocab].argmax(-1)
    assert torch.equal(ref.full_argmax(ref.relayout(gathered, p)[:, :vocab]), want)
    assert torch.equal(ref.chunked_argmax(gathered, p, vocab)[0], want)
    pairs = torch.cat([ref.local_argmax_pack(ref.shard_of(full, r, lay), r, lay.shard, vocab) for r in range(p)])
    assert torch.equal(ref.pair_reduce(pairs, p)[0], want)
    keys = torch.stack([ref.key_pack(ref.shard_of(full, r, lay), r, lay.shard, vocab) for r in range(p)])
    assert torch.equal(ref.key_unpack(keys.amax(0)), want)
