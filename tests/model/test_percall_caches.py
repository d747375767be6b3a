"""The per-call caches shared by ensemble members (dedup.content_key / ContentCache) never change a number.

An ensemble prices one scenario under 100 replicate profiles; a reduction's launch configuration
(gpu_kernels._launch) and a measured table's interpolation geometry (kernel_ratios.table_geometry) depend only
on the scenario's arrays, so they are cached by content. Every result here is compared with the same
computation on emptied caches.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from costmodel.evidence.interval_table import interval_table
from costmodel.model import dedup, gpu_kernels, kernel_ratios, kernels
from costmodel.model.components import BASELINE
from costmodel.model.predict import predict
from costmodel.model.scenario import Scenario
from costmodel.profiles.replicates import replicate_profiles
from costmodel.profiles.store import load_profile


def _clear() -> None:
    kernel_ratios.GEOMETRY._data.clear()
    gpu_kernels._LAUNCHES._data.clear()


def test_content_key_tells_apart_values_dtypes_and_shapes():
    a = np.arange(6, dtype=float)
    assert dedup.content_key(a, 2) == dedup.content_key(a.copy(), 2)
    b = a.copy()
    b[5] += 1e-9
    assert dedup.content_key(a) != dedup.content_key(b)
    assert dedup.content_key(a) != dedup.content_key(a.astype(np.int64))
    assert dedup.content_key(a) != dedup.content_key(a.reshape(2, 3))
    assert dedup.content_key(a, 3) != dedup.content_key(a, 4)
    assert dedup.content_key(np.zeros(dedup.SMALL_POINTS)) is not None
    assert dedup.content_key(np.zeros(dedup.SMALL_POINTS), 1.0) is None  # too many points in all: not keyed


def test_content_cache_drops_its_oldest_entry_when_full():
    cache = dedup.ContentCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (None, 2, 3)


def test_cached_launch_equals_reduce_launch_for_other_inputs_of_the_same_shape():
    rng = np.random.default_rng(3)
    _clear()
    for _ in range(5):
        rows = rng.integers(1, 4096, 64).astype(float)
        cols = rng.integers(1, 262144, 64).astype(float)
        got = gpu_kernels._launch(rows, cols, 132, 2048)
        again = gpu_kernels._launch(rows.copy(), cols.copy(), 132, 2048)
        assert again is got  # a hit by content
        want = gpu_kernels.reduce_launch(rows, cols, 132, 2048)
        for f in dataclasses.fields(want):
            np.testing.assert_array_equal(getattr(got, f.name), getattr(want, f.name))
    other_sm = gpu_kernels._launch(rows, cols, 78, 2048)  # the GPU is part of the key
    np.testing.assert_array_equal(other_sm.target_grid, gpu_kernels.reduce_launch(rows, cols, 78).target_grid)


@pytest.mark.parametrize("op", ["local_argmax", "argmax", "pair_reduce"])
def test_kernel_times_with_warm_caches_equal_cold_ones(op):
    profile = load_profile("h200-sxm-nvlink")
    rng = np.random.default_rng(7)
    sets = []
    for _ in range(3):  # same shapes, new values each time: a stale hit would show
        sets.append(dict(rows=rng.integers(1, 8192, 300).astype(float),
                         cols=rng.choice([16384.0, 25256.0, 50512.0, 101024.0, 202048.0], 300),
                         world_size=rng.choice([1, 2, 4, 8], 300), dtype="bf16", elem_bytes=2))
    cold = []
    for args in sets:
        _clear()
        cold.append(kernels.kernel_time_us(profile, op, **args))
    _clear()
    for args, want in zip(sets * 2, cold * 2, strict=True):  # in a row: later sets meet earlier sets' entries
        got = kernels.kernel_time_us(profile, op, **args)
        np.testing.assert_array_equal(got.time_us, want.time_us)
        np.testing.assert_array_equal(got.extrapolated, want.extrapolated)
    assert kernel_ratios.GEOMETRY._data  # the calls went through the cache (the op has measured tables)


def test_ensemble_members_priced_in_a_row_equal_each_priced_on_cold_caches():
    profile = load_profile("h200-sxm-nvlink")
    reps = replicate_profiles(profile)[:4]
    sc = Scenario(vocab=202048, tp=4, num_spec_tokens=3, batch=np.geomspace(1, 4096, 40))
    warm = [predict(sc, rep, (BASELINE, "local_argmax_pairs")).saving_us("local_argmax_pairs") for rep in reps]
    for rep, got in zip(reps, warm, strict=True):
        _clear()
        np.testing.assert_array_equal(got, predict(sc, rep, (BASELINE, "local_argmax_pairs"))
                                      .saving_us("local_argmax_pairs"))
    table = interval_table(sc.item(0), profile, "local_argmax_pairs", np.array([8.0, 64.0, 512.0]))
    _clear()
    again = interval_table(sc.item(0), profile, "local_argmax_pairs", np.array([8.0, 64.0, 512.0]))
    np.testing.assert_array_equal(table.members_saving_us, again.members_saving_us)
