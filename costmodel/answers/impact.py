"""ITL / TPOT / output throughput before and after a strategy's saving (`impact_change`; the formulas are in
`costmodel.answers.recommend`'s module doc). Plain arithmetic, so `predict --itl-ms` needs no workload machinery."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..io.errors import InputError


@dataclass(frozen=True)
class ImpactChange:
    """ITL / TPOT / output throughput before and after, for one strategy (positive = faster)."""

    strategy: str
    itl_before_ms: float
    itl_after_ms: float
    tpot_before_ms: float
    tpot_after_ms: float
    itl_reduction_ms: float
    itl_reduction_pct: float
    output_throughput_gain_pct: float
    output_throughput_gain_pct_interval: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        iv = self.output_throughput_gain_pct_interval
        out["output_throughput_gain_pct_interval"] = None if iv is None else {"low": iv[0], "high": iv[1]}
        return out


def impact_change(saving_per_decode_step_us: float, itl_ms: float, acceptance_length: float,
                  strategy: str = "", saving_interval_us: tuple[float, float] | None = None) -> ImpactChange:
    """ITL_after = ITL - saving / 1000; TPOT = ITL / AL; throughput gain = ITL / ITL_after - 1 (see module doc)."""
    if not np.isfinite(itl_ms) or itl_ms <= 0:
        raise InputError(f"itl-ms: must be a positive number, got {itl_ms}")
    if not np.isfinite(acceptance_length) or acceptance_length < 1:
        raise InputError(f"acceptance-length: must be >= 1 (tokens per decode step), got {acceptance_length}")

    def after(saving_us: float) -> float:
        value = itl_ms - saving_us / 1000.0
        if value <= 0:
            raise InputError(f"itl-ms: {itl_ms} ms is smaller than the modelled saving; check the baseline ITL")
        return value

    a = after(saving_per_decode_step_us)
    gain_iv = None
    if saving_interval_us is not None:
        lo, hi = (100.0 * (itl_ms / after(s) - 1.0) for s in saving_interval_us)
        gain_iv = (lo, hi)
    return ImpactChange(strategy, itl_ms, a, itl_ms / acceptance_length, a / acceptance_length, itl_ms - a,
                        100.0 * (itl_ms - a) / itl_ms, 100.0 * (itl_ms / a - 1.0), gain_iv)
