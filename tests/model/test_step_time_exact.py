"""engines.step_time_us (clock buffers updated in place, exact shortcuts) and engines.stack_paths give the same
floats, shapes and types as the stage-by-stage formula written out plainly - on random chains of scalar and array
stages: zero and non-zero host times, one or many ops, syncs, head starts, NaN and infinite times."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.model.engines import Stage, stack_paths, step_time_us


def plain_step_time_us(stages, head_start_us=0.0):
    """The module doc's recurrence, one stage at a time, every operation written out (no shortcut, no buffer):
    a = h / n, F' = max(max(F, H + a) + g, (H + h) + g / n), H' = H + h, max(H', F') after a sync; E - S."""
    head = np.asarray(head_start_us, dtype=float)
    host, gpu = np.zeros(()), head
    for s in stages:
        h, g = np.asarray(s.host_us, dtype=float), np.asarray(s.gpu_us, dtype=float)
        n = np.maximum(np.asarray(s.ops, dtype=float), 1.0)
        new_host = host + h
        new_gpu = np.maximum(np.maximum(gpu, host + h / n) + g, new_host + g / n)
        if np.any(s.sync_after):
            new_host = np.where(s.sync_after, np.maximum(new_host, new_gpu), new_host)
        active = np.asarray(s.active, dtype=bool)
        host, gpu = np.where(active, new_host, host), np.where(active, new_gpu, gpu)
    return gpu - head


TIMES = st.sampled_from([0.0, 0.0, 1.0, 2.5, 7.3, 13.0, 100.0, 1e-3, 1e6, 0.1 + 0.2])


@st.composite
def values(draw, size, special=False):
    """A scalar, a (size,) or a (2, 1) array of times (NaN / inf / a negative time now and then when `special`)."""
    pool = st.one_of(TIMES, st.sampled_from([np.nan, np.inf, -2.0])) if special and draw(st.booleans()) else TIMES
    shape = draw(st.sampled_from([(), (), (size,), (size,), (2, 1)]))
    if not shape:
        return draw(pool)
    return np.array(draw(st.lists(pool, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))).reshape(shape)


@st.composite
def chains(draw, size=3):
    special = draw(st.integers(0, 4)) == 0
    out = []
    for _ in range(draw(st.integers(0, 9))):
        ops = draw(st.one_of(st.sampled_from([1, 1, 1, 2, 3, 0.5]),
                             st.lists(st.sampled_from([1, 1, 4]), min_size=size, max_size=size).map(np.array)))
        sync = draw(st.one_of(st.just(False), st.booleans(),
                              st.lists(st.booleans(), min_size=size, max_size=size).map(np.array)))
        out.append(Stage(draw(values(size, special)), draw(values(size, special)), ops, sync))
    return out


def assert_same(fast, plain):
    assert type(fast) is type(plain) and np.shape(fast) == np.shape(plain)
    np.testing.assert_array_equal(fast, plain)
    assert np.array_equal(np.signbit(fast), np.signbit(plain))


@settings(max_examples=200, deadline=None)
@given(chains(), st.sampled_from([0.0, 0.0, 5.0, np.array([0.0, 3.0, 50.0])]), st.booleans())
def test_step_time_equals_the_plain_recurrence(stages, head, repeat):
    if repeat and stages:  # the same stage objects listed again (draft_step repeats each call's stages)
        stages = stages + stages[::2]
    assert_same(step_time_us(stages, head), plain_step_time_us(stages, head))


@settings(max_examples=120, deadline=None)
@given(chains(), st.lists(chains(), min_size=1, max_size=5), chains(), st.integers(1, 3))
def test_stacked_paths_price_each_path_as_its_own_chain(before, paths, after, calls):
    """Paths of different lengths (padded with inactive stages), repeated `calls` times as draft_step repeats
    each call's logits path; negative times (no shortcut for the padding) and NaN / inf included."""
    shape = np.broadcast_shapes(*(np.shape(x) for s in before + after + [s for p in paths for s in p]
                                  for x in (s.host_us, s.gpu_us, s.ops, s.sync_after)))
    stacked = step_time_us(before + stack_paths(paths, shape) * calls + after)
    for i, path in enumerate(paths):
        alone = plain_step_time_us(before + path * calls + after)
        np.testing.assert_array_equal(np.broadcast_to(stacked[i], np.shape(stacked)[1:]),
                                      np.broadcast_to(alone, np.shape(stacked)[1:]))
