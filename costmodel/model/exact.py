"""Array shortcuts that skip work only where the result is provably the same bits (pure numpy).

A random 1M-point mask makes `np.where`'s select branchy (~4x a multiply); a copy or a `0.0 +` pass costs a
full-size pass and an allocation. Each helper here checks the condition under which its cheaper form gives the
same float64 / integer / boolean values bit for bit, and falls back to the plain operation otherwise:

    zero_outside(w, v)   np.where(w, v, 0.0) = v * w       for v in [+0.0, +inf) (x * 1 = x, x * 0 = +0.0)
    false_outside(w, f)  np.where(w, f, False) = f & w      for boolean f, w
    pick(w, a, b)        np.where(w, a, b) = b + w (a - b)  for two integer scalars
    scaled(v, f)         v * f = v                          for f == 1.0 and a float64 v (x * 1.0 = x)
    zero_plus_is_v(v)    0.0 + v == v                       for v in [+0.0, +inf) (-0.0 would become +0.0)

"in [+0.0, +inf)" is checked as the int64 view's range [0, _INF_BITS): no sign bit (no negative, no -0.0), not
inf or NaN - two reductions instead of a pass and a full-size temporary.
"""

from __future__ import annotations

import numpy as np

_INF_BITS = 0x7FF0000000000000  # +inf as int64: float64 values in [+0.0, +inf) have int64 views in [0, this)


def zero_outside(when, values):
    """np.where(when, values, 0.0), bit for bit, in one multiply where that is exact: for a float64 `values`
    array of the result's shape whose every element is in [+0.0, +inf) (sign bit clear, finite: int64 view in
    [0, _INF_BITS)), x * True = x and x * False = +0.0. Elsewhere (negative, -0.0, inf, NaN, other shapes or
    dtypes) np.where itself. A random mask makes np.where's select branchy (~4x a multiply at 1M points)."""
    v, w = values, when
    if (isinstance(v, np.ndarray) and isinstance(w, np.ndarray) and v.dtype == np.float64 and w.dtype == bool
            and v.ndim and v.shape == np.broadcast_shapes(v.shape, w.shape)):
        if _nonneg_finite(v):
            return v * w
    return np.where(when, values, 0.0)


def pick(when, a, b):
    """np.where(when, a, b); for two integer scalars and a boolean array b + when * (a - b) (the same integers,
    no branchy select)."""
    if (isinstance(when, np.ndarray) and when.dtype == bool and when.ndim and np.ndim(a) == 0 and np.ndim(b) == 0
            and isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer))
            and not isinstance(a, (bool, np.bool_)) and not isinstance(b, (bool, np.bool_))):
        out = when * np.int64(a - b)
        out += np.int64(b)
        return out
    return np.where(when, a, b)


def scaled(values, factor):
    """values * factor; for the factor 1.0 (no discrepancy draw) a float64 array as it is (x * 1.0 = x, every x):
    the kernel memo's estimate, shared read-only, as every Component's arrays."""
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and values.ndim and np.ndim(factor) == 0 \
            and factor == 1.0:
        return values
    return values * factor


def false_outside(when, flags):
    """np.where(when, flags, False) of boolean flags: flags & when where both are bool arrays (the same values)."""
    if (isinstance(flags, np.ndarray) and isinstance(when, np.ndarray) and flags.dtype == bool and when.dtype == bool
            and flags.shape == np.broadcast_shapes(flags.shape, when.shape)):
        return flags & when
    return np.where(when, flags, False)


def zero_plus_is_v(v: np.ndarray) -> bool:
    """True where 0.0 + v == v bit for bit: a float64 array of values in [+0.0, +inf) (no -0.0, which 0.0 + -0.0
    turns into +0.0; no NaN or inf, checked cheaply as the int64 view's range)."""
    return v.dtype == np.float64 and bool(v.ndim) and v.flags.c_contiguous and _nonneg_finite(v)


def _nonneg_finite(v: np.ndarray) -> bool:
    """Every element of a non-empty float64 array in [+0.0, +inf): its int64 view in [0, _INF_BITS) (no sign bit,
    so no negative and no -0.0; not inf or NaN) - two reductions, no full-size temporary."""
    if not v.size:
        return False
    bits = v.view(np.int64)
    return bool(bits.min() >= 0) and bool(bits.max() < _INF_BITS)
