"""Timing statistics shared by the collective and kernel benchmarks.

`Stats.from_samples` turns per-iteration times (us) into the schema's
median / p10 / p90 / min / max. `converged` implements the stopping rule:
stop when the 95% confidence interval of the median (order statistics,
normal approximation of the binomial) is within `rel_tol` of the median.
The benchmarks evaluate it only when `check_due` (every CHECK_EVERY samples
once past min_iters): it sorts all samples, so checking after every sample
would cost O(n^2 log n) per point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CHECK_EVERY = 8  # samples between two evaluations of the stopping rule


@dataclass(frozen=True)
class Stats:
    iters: int
    median_us: float
    p10_us: float
    p90_us: float
    min_us: float
    max_us: float

    @classmethod
    def from_samples(cls, samples_us) -> Stats:
        x = np.asarray(samples_us, dtype=float)
        if x.size == 0 or not np.all(np.isfinite(x)):
            raise ValueError("timing samples must be non-empty and finite")
        p10, med, p90 = np.percentile(x, [10, 50, 90])
        return cls(int(x.size), float(med), float(p10), float(p90), float(x.min()), float(x.max()))

    def as_row(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def _ci95_sorted(x: np.ndarray) -> tuple[float, float]:
    """`median_ci95` of an already sorted, non-empty array."""
    n = x.size
    half = 1.96 * math.sqrt(n) / 2
    lo = max(int(math.floor(n / 2 - half)), 0)
    hi = min(int(math.ceil(n / 2 + half)), n - 1)
    return float(x[lo]), float(x[hi])


def _median_sorted(x: np.ndarray) -> float:
    """Median of an already sorted, non-empty array (the mean of the two middle values when n is even)."""
    mid = x.size // 2
    return float(x[mid]) if x.size % 2 else float((x[mid - 1] + x[mid]) / 2)


def median_ci95(samples_us) -> tuple[float, float]:
    """Distribution-free 95% CI of the median: order statistics n/2 -+ 1.96 sqrt(n)/2."""
    return _ci95_sorted(np.sort(np.asarray(samples_us, dtype=float)))


def converged(samples_us, rel_tol: float = 0.02, min_iters: int = 10) -> bool:
    """True when the median's 95% CI lies within +-rel_tol of the median (one sort per call)."""
    if len(samples_us) < min_iters:
        return False
    x = np.sort(np.asarray(samples_us, dtype=float))
    lo, hi = _ci95_sorted(x)
    med = _median_sorted(x)
    return med > 0 and (med - lo) <= rel_tol * med and (hi - med) <= rel_tol * med


def check_due(n_samples: int, min_iters: int, every: int = CHECK_EVERY) -> bool:
    """Whether to evaluate `converged` after `n_samples`: at min_iters, then every `every` samples."""
    return n_samples >= min_iters and (n_samples - min_iters) % every == 0


def next_check_due(n_samples: int, min_iters: int, every: int = CHECK_EVERY) -> int:
    """The smallest sample count above `n_samples` at which `check_due` is true."""
    if n_samples < min_iters:
        return min_iters
    return n_samples + every - (n_samples - min_iters) % every
