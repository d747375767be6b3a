"""The on-disk interval table (`cached_interval_table`): a hit gives the very numbers `interval_table` computes, a
different scenario / profile text / batch set misses, and a damaged file is recomputed."""

from __future__ import annotations

import numpy as np
import pytest

from costmodel import Scenario, load_profile
from costmodel.evidence import interval_table as it

BATCHES = np.array([1.0, 3.0, 64.0, 200.0])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    return tmp_path


def _same(a: it.IntervalTable, b: it.IntervalTable) -> None:
    assert a.strategy == b.strategy and a.level == b.level
    for name in ("batches", "members_saving_us", "members_decode_us"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()  # the same bits
    assert a.crossover == b.crossover and a.crossover_found_fraction == b.crossover_found_fraction
    assert a.at(64.0) == b.at(64.0)


def test_hit_returns_interval_tables_numbers_and_prices_nothing(cache, monkeypatch):
    profile = load_profile("h200-sxm-nvlink")
    sc = Scenario(tp=8, batch=1.0, num_spec_tokens=3)
    fresh = it.interval_table(sc, profile, "local_argmax_pairs", BATCHES)
    first = it.cached_interval_table(sc, profile, "local_argmax_pairs", BATCHES, profile_key="h200 text")
    _same(first, fresh)
    assert len(list(cache.glob("interval-table-*.npz"))) == 1
    monkeypatch.setattr(it, "interval_table", lambda *a, **k: pytest.fail("a hit must not price the ensemble"))
    _same(it.cached_interval_table(sc, profile, "local_argmax_pairs", BATCHES, profile_key="h200 text"), fresh)


def test_key_follows_scenario_profile_text_and_batches(cache):
    sc = Scenario(tp=8, batch=1.0, num_spec_tokens=3)
    args = ("local_argmax_pairs", BATCHES, 0.9, (1.0, 65536.0), 257)
    base = it.table_cache_key(sc, "text", *args)
    assert base == it.table_cache_key(Scenario(tp=8, batch=1.0, num_spec_tokens=3), "text", *args)
    assert base != it.table_cache_key(sc.with_(tp=4), "text", *args)
    assert base != it.table_cache_key(sc.with_(engine="vllm"), "text", *args)
    assert base != it.table_cache_key(sc, "other text", *args)
    assert base != it.table_cache_key(sc, "text", "local_argmax_pairs", BATCHES[:-1], 0.9, (1.0, 65536.0), 257)
    assert base != it.table_cache_key(sc, "text", "packed_allreduce_max", *args[1:])


def test_damaged_file_is_recomputed(cache):
    profile = load_profile("cpu-gloo")
    sc = Scenario(tp=2, batch=1.0, vocab=32000)
    first = it.cached_interval_table(sc, profile, "local_argmax_pairs", BATCHES, profile_key="cpu")
    (path,) = cache.glob("interval-table-*.npz")
    path.write_bytes(b"not a zip file")
    _same(it.cached_interval_table(sc, profile, "local_argmax_pairs", BATCHES, profile_key="cpu"), first)


def test_no_table_is_stored_when_the_pool_was_priced_while_an_input_changed(cache, monkeypatch):
    """Keyed by the fingerprint of the inputs the process's pool was priced from (discrepancy.bundled_pool_fingerprint):
    None there - a profile rewritten while the pool was priced - prices the table and stores nothing."""
    import costmodel.evidence.discrepancy as unc

    profile = load_profile("cpu-gloo")
    sc = Scenario(tp=2, batch=1.0, vocab=32000)
    pool = unc.bundled_pool()
    monkeypatch.setattr(unc, "_POOL", [(pool, None)])
    got = it.cached_interval_table(sc, profile, "local_argmax_pairs", BATCHES, profile_key="cpu")
    _same(got, it.interval_table(sc, profile, "local_argmax_pairs", BATCHES))
    assert not list(cache.glob("interval-table-*.npz"))
    monkeypatch.setattr(unc, "_POOL", [(pool, "f" * 64)])  # a pool priced from stable inputs: stored
    it.cached_interval_table(sc, profile, "local_argmax_pairs", BATCHES, profile_key="cpu")
    assert len(list(cache.glob("interval-table-*.npz"))) == 1
