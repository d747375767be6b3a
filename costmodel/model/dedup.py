"""Evaluate an element-wise pricing function once per unique combination of its arguments (pure numpy).

Scenario grids repeat a lot: a million scenarios over 5 vocabularies, TP 1-8 and batch 1-4096 hold
~15,700 distinct row counts and 20 distinct shards, so one kernel op sees ~140,000-370,000 distinct
(rows, cols, world size, dtype) points, not 1,000,000. `unique_points` finds them and the inverse index:

    value_i = uniques_i[codes_i]                          (per argument: `factorize`)
    key     = (..((codes_0) * n_1 + codes_1) * n_2 ..)     (mixed radix, exact in int64)
    f(args)[j] = f(unique args)[inverse[j]]               (f element-wise: the same numbers, fewer of them)

Integer-valued arguments in a range below DENSE_RANGE factorize through a presence table (no sort);
anything else through np.unique. Factorizations of one array object are reused inside a
`gpu_kernels.memo()` block (the store is passed in), where callers promise not to mutate their arrays.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Sequence

import numpy as np

DENSE_RANGE = 1 << 22  # integer values spanning fewer than this factorize through a lookup table
MIN_POINTS = 2048  # below this many points, deduplicating costs more than it saves
MAX_UNIQUE_FRACTION = 0.5  # an argument with more distinct values than this share of points: no dedup
_MAX_KEY = 1 << 62
_SPACE_PER_POINT = 4  # a presence table may span this many entries per point before the key is compacted


def _dense(flat_int: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of integers in [lo, hi] through a presence table (touches only present entries)."""
    idx = flat_int - lo if lo else flat_int
    present = np.zeros(hi - lo + 1, dtype=bool)
    present[idx] = True
    found = np.flatnonzero(present)
    kind = np.int32 if found.size < 2**31 else np.int64  # int32 codes: half the memory traffic
    rank = np.empty(hi - lo + 1, dtype=kind)  # only the present entries are written and read
    rank[found] = np.arange(found.size, dtype=kind)
    return rank[idx], found + lo


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of a flat array: `uniques` ascending and distinct, `values == uniques[codes]`."""
    flat = np.asarray(values).reshape(-1)
    if flat.dtype.kind == "b":
        codes, uniq = _dense(flat.astype(np.int64), 0, 1)
        return codes, uniq.astype(bool)
    if flat.size and flat.dtype.kind in "iuf":
        as_int = flat if flat.dtype.kind in "iu" else None
        if as_int is None:
            with np.errstate(invalid="ignore"):
                cand = flat.astype(np.int64)
            if np.array_equal(cand, flat):  # integral, finite (NaN / inf never compare equal to an int64)
                as_int = cand
        if as_int is not None:
            lo, hi = int(as_int.min()), int(as_int.max())
            if hi - lo < DENSE_RANGE:
                codes, uniq = _dense(as_int.astype(np.int64, copy=False), lo, hi)
                return codes, uniq.astype(flat.dtype)
    uniq, codes = np.unique(flat, return_inverse=True)
    return codes.reshape(-1).astype(np.int64, copy=False), uniq


def _factorize_cached(values: np.ndarray, cache: dict | None) -> tuple[np.ndarray, np.ndarray]:
    if cache is None:
        return factorize(values)
    key = ("dedup.factorize", id(values))
    hit = cache.get(key)
    if hit is not None and hit[0] is values:
        return hit[1]
    out = factorize(values)
    cache[key] = (values, out)  # keeps `values` alive, so its id stays unique inside the block
    return out


def unique_points(arrays: Sequence[np.ndarray], cache: dict | None = None, shared: int = 0
                  ) -> tuple[list[np.ndarray], np.ndarray] | None:
    """(unique combinations, one flat array per argument; flat inverse index) of same-shape arrays.

    `[a[inverse] for a in unique] == arrays` element by element. None when the mixed-radix key would
    not fit in int64 or one argument is mostly distinct values already (then evaluate directly).
    `shared`: the first `shared` arguments recur in later calls (same objects): their key is compacted
    and, with a `cache`, kept for those calls.
    """
    whole = ("dedup.points", shared, *map(id, arrays))  # the same argument objects again (key_pack after
    if cache is not None:                                  # local_argmax): the same points, the same objects
        hit = cache.get(whole)
        if hit is not None and all(a is b for a, b in zip(hit[0], arrays)) and len(hit[0]) == len(arrays):
            return hit[1]
    found = _unique_points(arrays, cache, shared)
    if cache is not None:
        cache[whole] = (tuple(arrays), found)  # keeps the arguments alive, so their ids stay unique inside the block
    return found


def _unique_points(arrays: Sequence[np.ndarray], cache: dict | None, shared: int
                   ) -> tuple[list[np.ndarray], np.ndarray] | None:
    """unique_points without the cache of whole results."""
    facts = [_factorize_cached(a, cache) for a in arrays]
    n = facts[0][0].size
    if any(len(uniq) > n * MAX_UNIQUE_FRACTION for _codes, uniq in facts):
        return None  # (nearly) all distinct already: nothing to gain
    limit = max(DENSE_RANGE, _SPACE_PER_POINT * n)
    # mixed radix over the arguments, compacted to the combinations present whenever the key space would
    # outgrow a presence table (correlated arguments - elem_bytes follows dtype, shard follows TP - keep the
    # present combinations far below the product of the per-argument counts)
    def compact(key: np.ndarray, space: int) -> tuple[np.ndarray, np.ndarray]:
        if space <= limit:
            return _dense(key, 0, space - 1)
        ukeys, inverse = np.unique(key, return_inverse=True)
        return inverse.reshape(-1), ukeys

    key, space, radices, stages = None, 1, [], []
    start = 0
    if cache is not None:  # the longest prefix of arguments already combined in this memo block
        for i in range(len(arrays), 0, -1):
            hit = cache.get(("dedup.prefix", *map(id, arrays[:i])))
            if hit is not None and all(a is b for a, b in zip(hit[0], arrays[:i])):
                key, space, radices, stages = hit[1]
                radices, stages, start = list(radices), list(stages), i
                break
    for j, (codes, uniq) in enumerate(facts[start:], start):
        m = max(len(uniq), 1)
        if key is not None and radices and space * m > limit:
            stages.append((radices, *compact(key, space)))
            key, space, radices = stages[-1][1], len(stages[-1][2]), []
        if key is not None and key.dtype != np.int64 and space * m >= 2**31:
            key = key.astype(np.int64)
        key = codes if key is None else key * m + codes
        space *= m
        radices.append(m)
        if space >= _MAX_KEY:
            return None
        if j == shared - 1 and j < len(arrays) - 1:
            stages.append((radices, *compact(key, space)))
            key, space, radices = stages[-1][1], len(stages[-1][2]), []
        if cache is not None and j < len(arrays) - 1:
            cache[("dedup.prefix", *map(id, arrays[:j + 1]))] = (tuple(arrays[:j + 1]),
                                                                   (key, space, tuple(radices), tuple(stages)))
    stages.append((radices, *compact(key, space)))
    inverse = stages[-1][1]
    # decode the unique keys stage by stage, last stage first: a later stage's leading digit is the
    # previous stage's compacted code; the first stage's leading digit is the first argument's code
    digits: list[np.ndarray] = []
    rest = stages[-1][2]
    for i in range(len(stages) - 1, -1, -1):
        radices = stages[i][0]
        for m in reversed(radices if i else radices[1:]):
            rest, d = np.divmod(rest, m)
            digits.append(d)
        if i:
            rest = stages[i - 1][2][rest]
    digits.append(rest)
    digits.reverse()
    return [uniq[d] for (_codes, uniq), d in zip(facts, digits)], inverse


_MEMO: contextvars.ContextVar[dict | None] = contextvars.ContextVar("gpu_kernels_memo", default=None)
# set by `memo()`: results for identical (array object) arguments, reused; a ContextVar, so threads (Streamlit
# sessions) never share or clear each other's store


@contextlib.contextmanager
def memo():
    """Within the block, reduce_time_us (and costmodel.model.kernels.kernel_time_us) reuse their result for the same
    model, kind and input array *objects* (a strategy sweep prices the same [R, s] max for local_argmax and
    key_pack, the same argmax twice). Only for callers that do not mutate their arrays inside the block
    (costmodel.model.strategies.build_components opens one per evaluation). Nested blocks share the outer store."""
    outer = _MEMO.get()
    token = _MEMO.set({} if outer is None else outer)
    try:
        yield
    finally:
        _MEMO.reset(token)


def memo_store() -> dict | None:
    """The active `memo()` store (None outside a memo block)."""
    return _MEMO.get()


# -- values that depend only on a scenario's arrays, not on the profile: shared between ensemble members -----------
# arrays up to this many points (in all) are keyed by their contents (`content_key`): a dashboard table of 1,291
# batches x 3 arrays fits; a cache of 256 such entries stays under ~64 MB (keys and values) at worst
SMALL_POINTS = 16384


def content_key(*values) -> tuple | None:
    """A hashable key of the values' dtype, shape and bytes (equal key <=> identical arrays), or None when they
    hold more than SMALL_POINTS points together (then hashing them costs about as much as pricing them)."""
    out, total = [], 0
    for v in values:
        a = np.asarray(v)
        total += a.size
        if total > SMALL_POINTS:
            return None
        out.append((a.dtype.str, a.shape, a.tobytes()))
    return tuple(out)


class ContentCache:
    """A bounded {key: value} of pure results (oldest entry dropped first, under a lock: thread-safe).

    An ensemble prices the same scenario under 100 replicate profiles: what depends only on the scenario
    (a reduction's launch configuration, a table's interpolation weights) is computed once, not 100 times;
    kernel_ratios / kernel_tables keep a measured table's grids in one, keyed by the objects' ids.
    Values are shared between callers: never mutate one.
    """

    def __init__(self, size: int):
        self.size = size
        self._data: dict = {}
        self._lock = threading.Lock()

    def get(self, key):
        return self._data.get(key)

    def put(self, key, value) -> None:
        with self._lock:
            if len(self._data) >= self.size:
                self._data.pop(next(iter(self._data)))
            self._data[key] = value
