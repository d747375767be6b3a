"""Evaluate every strategy for a (vectorized) scenario: totals, savings, impact.

saving_us(strategy)                 = T_full_all_gather - T_strategy          (per draft call)
saving_per_decode_step_us(strategy) = saving_us * calls_per_decode_step       (K serial, 1 parallel)
impact: ITL_after = ITL - saving_per_decode_step; TPOT ~ ITL / acceptance length.
The crossover batch (where a saving changes sign) is `costmodel.model.crossover`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..io.errors import InputError
from ..profiles.store import default_profile
from ..profiles.types import Profile
from .components import BASELINE, STRATEGIES
from .exact import zero_plus_is_v
from .kernel_ratios import stacked_members
from .parts import Component
from .scenario import SCENARIO_FIELDS, Scenario
from .strategies import build_components, validity

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class StrategyResult:
    name: str
    components_us: dict[str, np.ndarray]
    total_us: np.ndarray
    wire_bytes_per_rank: np.ndarray
    valid: np.ndarray
    extrapolated: np.ndarray
    calls: dict[str, tuple] = field(default_factory=dict)


@dataclass(frozen=True)
class Prediction:
    """Result object of `predict` (all arrays have the scenario's broadcast shape)."""

    scenario: Scenario
    profile: Profile
    strategies: dict[str, StrategyResult]

    def total_us(self, name: str) -> np.ndarray:
        return self.strategies[name].total_us

    def saving_us(self, name: str, baseline: str = BASELINE) -> np.ndarray:
        """Per draft call: T_baseline - T_name (positive = name is faster)."""
        return self.strategies[baseline].total_us - self.strategies[name].total_us

    def saving_per_decode_step_us(self, name: str, baseline: str = BASELINE) -> np.ndarray:
        return self.saving_us(name, baseline) * self.scenario.calls_per_decode_step

    def saving_pct(self, name: str, baseline: str = BASELINE) -> np.ndarray:
        return 100.0 * self.saving_us(name, baseline) / self.strategies[baseline].total_us

    def best(self) -> np.ndarray:
        """Name of the fastest valid strategy per scenario."""
        names = list(self.strategies)
        best_t = best_i = None
        for i, n in enumerate(names):  # running argmin: no (strategies x scenarios) stack
            r = self.strategies[n]
            t = r.total_us if bool(np.all(r.valid)) else np.where(r.valid, r.total_us, np.inf)
            if best_t is None:
                best_t, best_i = np.array(t, dtype=float), np.zeros(np.shape(t), dtype=np.int8)
                continue
            better = np.less(t, best_t)  # strict: ties keep the earlier strategy, like argmin
            np.minimum(best_t, t, out=best_t)
            np.copyto(best_i, np.int8(i), where=better)
        return np.asarray(names, dtype=object)[best_i]  # object: 1M names share 5 strings

    def to_frame(self) -> pd.DataFrame:
        """Tidy table: one row per scenario x strategy, components as `<name>_us` columns."""
        import pandas as pd  # only here: pricing never builds a frame (the CLI's predict path loads no pandas)

        sc = self.scenario
        n = sc.size
        base = {f: np.broadcast_to(getattr(sc, f) if getattr(sc, f) is not None else np.nan, sc.shape).reshape(-1)
                for f in SCENARIO_FIELDS}
        base.update(padded_draft_vocab=np.broadcast_to(sc.padded_draft_vocab, sc.shape).reshape(-1),
                    shard=np.broadcast_to(sc.shard, sc.shape).reshape(-1),
                    rows_per_call=np.broadcast_to(sc.rows, sc.shape).reshape(-1),
                    calls_per_decode_step=np.broadcast_to(sc.calls_per_decode_step, sc.shape).reshape(-1))
        frames = []
        all_components = sorted({c for r in self.strategies.values() for c in r.components_us})
        for name, r in self.strategies.items():
            cols = dict(base)
            cols["strategy"] = np.full(n, name)
            for comp in all_components:
                value = r.components_us.get(comp)
                cols[f"{comp}_us"] = np.zeros(n) if value is None else np.broadcast_to(value, sc.shape).reshape(-1)
            cols["total_us"] = np.broadcast_to(r.total_us, sc.shape).reshape(-1)
            cols["saving_us"] = np.broadcast_to(self.saving_us(name), sc.shape).reshape(-1)
            cols["saving_per_decode_step_us"] = np.broadcast_to(self.saving_per_decode_step_us(name),
                                                                sc.shape).reshape(-1)
            cols["wire_bytes_per_rank"] = np.broadcast_to(r.wire_bytes_per_rank, sc.shape).reshape(-1)
            cols["valid"] = np.broadcast_to(r.valid, sc.shape).reshape(-1)
            cols["extrapolated"] = np.broadcast_to(r.extrapolated, sc.shape).reshape(-1)
            frames.append(pd.DataFrame(cols))
        out = pd.concat(frames, ignore_index=True)
        out.insert(0, "profile", self.profile.name)
        return out


def _broadcast(x: np.ndarray, shape: tuple) -> np.ndarray:
    """np.broadcast_to, skipped for an array that has the shape already (both read-only uses)."""
    return x if x.shape == shape else np.broadcast_to(x, shape)


def _summarize(name: str, components: dict[str, Component], scenario: Scenario, shape: tuple) -> StrategyResult:
    """Totals of the components, broadcast to `shape` (the scenario's; (members, n) for a stacked ensemble)."""
    times = {k: _broadcast(np.asarray(c.time_us, dtype=float), shape) for k, c in components.items()}

    def add(values, dtype=float):
        """((0 + v1) + v2) + ... (| for flags) over `shape`, skipping scalar zeros (no full-size pass for them).
        0.0 + v1 is v1 itself where that changes no bit (`exact.zero_plus_is_v`; False | v1 is v1 for flags): a
        one-term sum is that array (shared read-only, as the components'), a longer one starts from v1 + v2."""
        out, own = None, False
        for v in values:
            v = np.asarray(v, dtype=dtype)
            if not (v.ndim or v):
                continue
            if out is None:
                if v.shape == shape and v.flags.c_contiguous and (dtype is not float or zero_plus_is_v(v)):
                    out = v  # not ours: the next term makes a new array
                elif v.shape == shape:
                    out, own = 0.0 + v, True
                else:
                    out = np.zeros(shape, dtype=dtype) + v if dtype is float else np.zeros(shape, dtype=dtype) | v
                    own = True
            elif own and isinstance(out, np.ndarray) and out.ndim and \
                    np.broadcast_shapes(out.shape, v.shape) == out.shape:
                (np.add if dtype is float else np.bitwise_or)(out, v, out=out)
            else:
                out, own = (out + v if dtype is float else out | v), True
        return np.zeros(shape, dtype=dtype) if out is None else out

    total = _total_us(components, shape, add)
    wire = add(c.wire_bytes_per_rank for c in components.values())
    extrap = add((c.extrapolated for c in components.values()), bool)
    calls = {k: c.calls for k, c in components.items()}
    return StrategyResult(name, times, total, wire, _broadcast(validity(name, scenario), shape), extrap, calls)


def _total_us(components: dict[str, Component], shape: tuple, add) -> np.ndarray:
    """Sum of the components' GPU times in their order. When the last component is `host_exposed`, the sum of
    the others is its call's `gpu_us` (strategies._host_exposed adds them in the same order from +0.0, and adding
    a scalar +0.0 to a sum started at +0.0 changes no bit), so total = gpu_us + exposed, without re-adding them."""
    last = next(reversed(components), None)
    if last != "host_exposed" or not components[last].calls:
        return add(c.time_us for c in components.values())
    exposed = components[last]
    gpu = exposed.calls[0].args.get("gpu_us")
    if gpu is None:
        return add(c.time_us for c in components.values())
    return add((gpu, exposed.time_us))


def predict(scenario: Scenario, profile: Profile | None = None,
            strategies: tuple[str, ...] = STRATEGIES, *, factors: dict[str, float] | None = None,
            workers: int | None = None) -> Prediction:
    """Price every strategy for `scenario` (vectorized) under `profile` (default profile if None).

    factors: per-op multipliers of GPU time (model-discrepancy draws; see strategies.build_components).
    workers: threads for a large scenario array (None: one per CPU; 1: this thread only; the same numbers either
    way, costmodel.model.threads).
    """
    profile = profile or default_profile()
    if BASELINE not in strategies:
        strategies = (BASELINE, *strategies)
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise InputError(f"strategy: unknown {unknown[0]!r} (known: {', '.join(STRATEGIES)})")
    comps = build_components(scenario, profile, strategies, factors, workers)
    members = stacked_members(profile)  # costmodel.model.members: (1, n) scenario x (M, 1) parameters -> (M, n)
    shape = np.broadcast_shapes(scenario.shape, (len(members), 1)) if members else scenario.shape
    return Prediction(scenario, profile, {n: _summarize(n, c, scenario, shape) for n, c in comps.items()})


# -- ITL / TPOT impact ---------------------------------------------------------------
@dataclass(frozen=True)
class Impact:
    """Decode-step latency before/after switching from the baseline to `strategy`."""

    strategy: str
    itl_before_ms: float
    itl_after_ms: float
    tpot_before_ms: float
    tpot_after_ms: float
    speedup_pct: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def impact(saving_per_decode_step_us: float, itl_ms: float, acceptance_length: float, strategy: str = "") -> Impact:
    """ITL_after = ITL - saving/1000; TPOT = ITL / acceptance length; speedup = 1 - after/before."""
    if not np.isfinite(itl_ms) or itl_ms <= 0:
        raise InputError(f"itl-ms: must be a positive number, got {itl_ms}")
    if not np.isfinite(acceptance_length) or acceptance_length < 1:
        raise InputError(f"acceptance-length: must be >= 1 (tokens per decode step), got {acceptance_length}")
    after = itl_ms - saving_per_decode_step_us / 1000.0
    if after <= 0:
        raise InputError(f"itl-ms: {itl_ms} ms is smaller than the modelled saving; check the baseline ITL")
    return Impact(strategy, itl_ms, after, itl_ms / acceptance_length, after / acceptance_length,
                  100.0 * (itl_ms - after) / itl_ms)
