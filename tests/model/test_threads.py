"""Strategies priced on worker threads (costmodel.model.threads) give the numbers one thread gives, bit for bit -
every component, total, flag and priced call - on random scenarios over every field, engine and profile kind."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from costmodel import Scenario, predict
from costmodel.io.errors import InputError
from costmodel.model import strategies, threads
from costmodel.model.strategies import THREAD_ORDER, build_components
from costmodel.profiles.store import load_profile
from tests.model.test_speed_equivalence import random_scenarios

PROFILES = ("h200-sxm-nvlink", "b300-hgx-nvlink", "cpu-gloo")


def _same_value(a, b, where: str) -> None:
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same_value(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same_value(x, y, f"{where}[{i}]")
    elif hasattr(a, "__dataclass_fields__"):
        assert type(a) is type(b), where
        for f in a.__dataclass_fields__:
            _same_value(getattr(a, f), getattr(b, f), f"{where}.{f}")
    elif isinstance(a, (np.ndarray, np.generic, float, int, bool)) and not isinstance(a, str):
        x, y = np.asarray(a), np.asarray(b)
        assert x.shape == y.shape and x.dtype == y.dtype, where
        if x.dtype.kind == "f":  # bit for bit: the same bytes (NaN, -0.0 included)
            assert x.tobytes() == y.tobytes(), where
        else:
            np.testing.assert_array_equal(x, y, err_msg=where)
    else:
        assert a == b, where


@pytest.fixture
def small_threshold(monkeypatch):
    monkeypatch.setattr(threads, "MIN_SCENARIOS", 1)


def _with_engines(sc: Scenario, seed: int) -> Scenario:
    rng = np.random.default_rng(seed)
    n = sc.size
    return Scenario(**{**{f: getattr(sc, f) for f in sc.__dataclass_fields__},
                       "engine": rng.choice(["none", "vllm", "vllm-v2", "sglang", "trtllm", "tokenspeed"], n),
                       "serving_term": rng.random(n) < 0.7,
                       "host_op_us": np.where(rng.random(n) < 0.5, 3.0, 6.5)})


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("workers", [2, 3, 5])
def test_threads_give_one_threads_numbers_bit_for_bit(profile, workers, small_threshold):
    prof = load_profile(profile)
    sc = _with_engines(random_scenarios(3000, seed=workers), seed=workers)
    one = predict(sc, prof, workers=1)
    many = predict(sc, prof, workers=workers)
    _same_value(many.strategies, one.strategies, profile)
    np.testing.assert_array_equal(many.best(), one.best())


def test_a_two_dimensional_grid_and_a_strategy_subset(small_threshold):
    prof = load_profile("h100-sxm-nvlink")
    sc = Scenario(vocab=128256, tp=np.array([[1], [2], [4], [8]]), batch=np.arange(1, 65, dtype=float),
                  num_spec_tokens=3, engine="vllm")
    names = ("local_argmax_pairs", "packed_allreduce_max")
    one, many = predict(sc, prof, names, workers=1), predict(sc, prof, names, workers=2)
    assert list(many.strategies) == ["full_all_gather", *names]  # the baseline first, as on one thread
    _same_value(many.strategies, one.strategies, "grid")


def test_the_threads_really_run_and_start_in_thread_order(small_threshold, monkeypatch):
    """The first two strategies wait for each other at a barrier: that passes only if two threads run them at once
    (one pool thread would pick up both in turn and time out), so the check does not depend on scheduling."""
    started, seen = [], set()
    lock = threading.Lock()
    both_running = threading.Barrier(2, timeout=30)

    def spy(builder):
        def wrapped(ctx):
            with lock:
                started.append(builder.__name__)
                seen.add(threading.get_ident())
                first_two = len(started) <= 2
            if first_two:
                both_running.wait()
            return builder(ctx)
        return wrapped
    monkeypatch.setattr(strategies, "BUILDERS", {k: spy(v) for k, v in strategies.BUILDERS.items()})
    build_components(random_scenarios(500, seed=1), load_profile("h200-sxm-nvlink"), workers=2)
    assert len(seen) == 2 and threading.get_ident() not in seen
    assert set(started[:2]) == set(THREAD_ORDER[:2]) and sorted(started) == sorted(THREAD_ORDER)


def test_worker_count():
    assert threads.worker_count(10, 5) == 1  # small arrays: this thread
    n = threads.MIN_SCENARIOS
    assert threads.worker_count(n, 5, 1) == 1 and threads.worker_count(n, 5, 4) == 4
    assert threads.worker_count(n, 2, 4) == 2  # no more threads than strategies
    assert threads.worker_count(n, 50, 100) == threads.MAX_WORKERS
    assert threads.worker_count(n, 5) == min(threads.available_cpus(), 5)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InputError, match="workers: must be an integer >= 1"):
            predict(Scenario(), workers=bad)


def test_an_error_in_a_thread_reaches_the_caller(small_threshold, monkeypatch):
    def broken(ctx):
        raise InputError("gather_to_rank0: broken on purpose")
    monkeypatch.setitem(strategies.BUILDERS, "gather_to_rank0", broken)
    with pytest.raises(InputError, match="broken on purpose"):
        predict(random_scenarios(300, seed=2), load_profile("h200-sxm-nvlink"), workers=2)
