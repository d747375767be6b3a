"""The fast path (costmodel.model.dedup: each unique kernel point priced once; one gpu_kernels.memo block per
evaluation) returns the same numbers as the straightforward path (every point priced, nothing reused) and
as pricing each scenario alone, on random scenarios over every scenario field and several profiles."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import Scenario, predict
from costmodel.model import dedup, kernels, strategies
from costmodel.model.collectives import collective_time_us
from costmodel.profiles.store import load_profile

PROFILES = {name: load_profile(name) for name in ("h200-sxm-nvlink", "h100-sxm-nvlink", "cpu-gloo")}
VOCABS = np.array([32000, 128256, 151936, 202048, 262208])


def random_scenarios(n: int, seed: int) -> Scenario:
    """Random scenarios touching every field, with many repeats (what the dedup exploits) and some
    fractional batches (the crossover search's continuous rows)."""
    rng = np.random.default_rng(seed)
    vocab = rng.choice(VOCABS, n)
    d2t = rng.random(n) < 0.2
    draft = np.where(d2t, 32000, vocab)
    tp = rng.choice([1, 2, 4, 8], n)
    batch = rng.integers(1, 129, n).astype(float)
    batch = np.where(rng.random(n) < 0.03, batch + rng.random(n), batch)
    return Scenario(vocab=vocab, draft_vocab=draft, d2t=d2t, hidden=rng.choice([4096, 5120, 7168], n),
                    dtype=rng.choice(["bf16", "fp16", "fp32"], n), tp=tp, nodes=1, batch=batch,
                    num_spec_tokens=rng.integers(1, 8, n), drafting=rng.choice(["serial", "parallel"], n),
                    mode=rng.choice(["graph", "eager"], n), impl=rng.choice(["torch", "fused"], n),
                    engine=rng.choice(["none", "vllm", "sglang", "trtllm"], n), softcap=rng.random(n) < 0.3,
                    logit_scale=rng.random(n) < 0.3, top_k=rng.choice([1, 1, 1, 4], n),
                    collective=rng.choice(["nccl", "oneshot", "multimem"], n))


@contextlib.contextmanager
def straightforward():
    """Every point priced, nothing reused: no dedup, no memo block."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kernels, "DEDUP", False)
        m.setattr(strategies, "kernel_memo", contextlib.nullcontext)
        yield


def assert_same(fast, slow, rtol=1e-12):
    assert fast.strategies.keys() == slow.strategies.keys()
    for name, a in fast.strategies.items():
        b = slow.strategies[name]
        assert a.components_us.keys() == b.components_us.keys(), name
        for comp, value in a.components_us.items():
            np.testing.assert_allclose(value, b.components_us[comp], rtol=rtol, atol=0, err_msg=f"{name}.{comp}")
        np.testing.assert_allclose(a.total_us, b.total_us, rtol=rtol, atol=0, err_msg=name)
        np.testing.assert_array_equal(a.extrapolated, b.extrapolated, err_msg=name)
        np.testing.assert_array_equal(a.valid, b.valid, err_msg=name)
        np.testing.assert_array_equal(a.wire_bytes_per_rank, b.wire_bytes_per_rank, err_msg=name)
    np.testing.assert_array_equal(fast.best(), slow.best())


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_fast_path_equals_straightforward_path(profile, monkeypatch):
    sc = random_scenarios(6000, seed=len(profile))  # above dedup.MIN_POINTS, so the dedup runs
    deduplicated = []
    real = dedup.unique_points
    monkeypatch.setattr(dedup, "unique_points", lambda *a, **kw: deduplicated.append(real(*a, **kw)) or
                        deduplicated[-1])
    fast = predict(sc, PROFILES[profile])
    monkeypatch.undo()
    if PROFILES[profile].kernel_model is not None:  # GPU profiles: the fast path really ran
        assert any(d is not None and len(d[0][0]) < 0.8 * sc.size for d in deduplicated)
    with straightforward():
        slow = predict(sc, PROFILES[profile])
    assert_same(fast, slow)


def test_fast_path_equals_pricing_each_scenario_alone():
    sc = random_scenarios(2500, seed=7)
    prof = PROFILES["h200-sxm-nvlink"]
    fast = predict(sc, prof)
    for i in np.random.default_rng(0).choice(sc.size, 40, replace=False):
        one = predict(sc.item(int(i)), prof)
        for name, res in one.strategies.items():
            np.testing.assert_allclose(fast.strategies[name].total_us[i], res.total_us, rtol=1e-12, atol=0,
                                       err_msg=f"scenario {i} {name}")


def test_dedup_really_deduplicates(monkeypatch):
    """The fast path prices far fewer kernel points than scenarios on a repetitive grid."""
    sizes = []
    real = kernels._model_estimate
    monkeypatch.setattr(kernels, "_model_estimate",
                        lambda *a, **kw: sizes.append(np.size(kw["rows"])) or real(*a, **kw))
    sc = Scenario(vocab=np.tile(VOCABS, 2000), tp=8, batch=np.repeat(np.arange(1.0, 101.0), 100))
    predict(sc, PROFILES["h200-sxm-nvlink"])
    assert sizes and max(sizes) <= 5 * 100  # 5 vocabularies x 100 batches, not 10,000 points


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from([0.0, 1.5, -2.0, np.inf, np.nan]), st.booleans(),
                          st.integers(-(2**40), 2**40)), min_size=1, max_size=300),
       st.sampled_from([4, 64, dedup.DENSE_RANGE]), st.integers(0, 4))
def test_unique_points_reconstructs_every_argument(rows, dense_range, shared):
    cols = [np.array(c) for c in zip(*rows)]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dedup, "DENSE_RANGE", dense_range)  # small: forces the compaction and np.unique paths
        m.setattr(dedup, "MAX_UNIQUE_FRACTION", 1.0)  # dedup even all-distinct arguments
        uniq, inverse = dedup.unique_points(cols, shared=shared)
    for col, u in zip(cols, uniq):
        np.testing.assert_array_equal(u[inverse], col)
    combos = {tuple(np.asarray(u[i]).item() for u in uniq) for i in range(len(uniq[0]))}
    assert len(combos) == len(uniq[0]) <= len(rows)


def test_unique_points_reuses_a_shared_prefix_inside_a_memo_store():
    """Calls sharing leading argument objects (rows, dtype) reuse their combined key; results stay exact."""
    rng = np.random.default_rng(3)
    rows, dtype = rng.integers(1, 500, 5000).astype(float), rng.integers(0, 3, 5000)
    store: dict = {}
    assert dedup.unique_points([rows, rng.random(5000)]) is None  # all distinct already: priced directly
    for cols in (rng.choice(VOCABS, 5000), rng.choice([4000, 16032], 5000), rng.integers(0, 2000, 5000) * 10**6):
        for cache in (store, None):
            uniq, inverse = dedup.unique_points([rows, dtype, cols], cache, shared=2)
            for col, u in zip((rows, dtype, cols), uniq):
                np.testing.assert_array_equal(u[inverse], col)
    assert any(k[0] == "dedup.prefix" for k in store)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_grouped_collectives_equal_pricing_each_point_alone(profile):
    """collective_time_us sorts points by (world size, nodes, mode) group once; each point priced alone
    (one group, nothing sorted) gives the same number."""
    prof = PROFILES[profile]
    rng = np.random.default_rng(11)
    n = 300
    b = rng.choice([8.0, 4096.0, 2.0**20, 2.0**27], n) * rng.random(n)
    p = rng.choice([1, 2, 4, 8], n)
    nodes = np.where((p >= 2) & (rng.random(n) < 0.3), 2, 1)
    mode = rng.choice(["graph", "eager"], n)
    for op in ("all_gather", "all_reduce", "gather", "broadcast"):
        with dedup.memo():  # the cached plan too
            fast = collective_time_us(prof, op, b, p, nodes, mode)
            again = collective_time_us(prof, op, b, p, nodes, mode)
        alone = [float(collective_time_us(prof, op, b[i], p[i], nodes[i], mode[i])) for i in range(n)]
        np.testing.assert_array_equal(fast, alone, err_msg=op)
        np.testing.assert_array_equal(again, alone, err_msg=op)
