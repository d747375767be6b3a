"""Price every member of an interval ensemble in ONE evaluation (members x points), with the same numbers.

An interval ensemble (`costmodel.evidence.ensemble.ensemble`) is M profiles (bootstrap replicates) with M per-op
discrepancy factor dicts, each priced over the same scenario array of n batches. One `predict` per member
costs ~1-2 ms of per-call Python work whatever n is, so M = 100 members cost 100-200 ms. Here they are stacked:

    stacked profile   every pricing parameter that differs between members becomes an (M, 1) array (regime
                      latencies and bus bandwidths, kernel-model rates and floors, roofline op parameters, ...);
                      what must be shared (curve keys, select rules, fitted breakpoints, regime names, measured
                      tables, SM counts, host costs) is checked equal, else no stack (`stack_profiles` -> None)
    stacked factors   {op: (M, 1) array of the members' factors}
    scenario          the n batches as a (1, n) array (every other field a scalar)

and the ordinary pricing code runs once: what depends only on the scenario (launch configurations, table
interpolation weights, collective groups) is computed once for the n points, and every formula that takes a
parameter is element-wise in it, so row m of each (M, n) result is, operation for operation, what
`predict(scenario, members[m], factors=factors[m])` computes (tests/model/test_members.py checks bit equality).
The places that need the member axis explicitly: a measured table's measured/model ratio grid depends on
the member's kernel model (`kernel_ratios.member_ratio_grids`), the kernel dedup must not merge points of
different members (`kernels._deduplicated_estimate`), fitted breakpoint curves select their regime point by
point (`collectives._breakpoint_times`). Where the stack does not apply - a scenario field other than the
batch varies, a non-NCCL collective implementation, members that differ in structure -
`predict_members` prices member by member, as before.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..profiles.types import Profile
from .components import BASELINE
from .draft_step import Placement, draft_step
from .drafter import DraftArch
from .engines import host_costs
from .kernel_ratios import STACK_KEY, stacked_members
from .predict import predict
from .scenario import SCENARIO_FIELDS, Scenario

_PRICING_FIELDS = ("collectives", "graph_kernel_us", "eager_launch_us", "kernel_ops", "kernel_model", "lm_head")


class _Mismatch(Exception):
    """Members differ in structure (not only in parameter values): no stack."""


def _stack_values(values: list[Any]) -> Any:
    """One value for M members' values of the same field: shared when all equal, else an (M, 1) array
    (numbers); dataclasses, tuples and dicts stack field by field; anything else must be equal."""
    distinct: dict[int, Any] = {}
    index = [distinct.setdefault(id(v), (len(distinct), v))[0] for v in values]
    return _stack_distinct([v for _, v in distinct.values()], index)


def _stack_distinct(values: list[Any], index: list[int]) -> Any:
    """`_stack_values` of the members' values given as the distinct objects `values` (by identity) and, per
    member, the position of its value in them: every check runs once per distinct object (perturbed copies of
    one profile share most of their parts), and the (M, 1) arrays are built in member order."""
    first = values[0]
    if len(values) == 1:
        return first
    if isinstance(first, bool) or first is None or isinstance(first, str):
        if any(v != first for v in values):
            raise _Mismatch
        return first
    if isinstance(first, (int, float)):
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
            raise _Mismatch
        if all(v == first for v in values):
            return first
        arr = np.array(values, dtype=float)[index]
        if not np.all(np.isfinite(arr)):
            raise _Mismatch  # inf (an open last regime) must be shared
        return arr.reshape(-1, 1)
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        if any(type(v) is not type(first) for v in values):
            raise _Mismatch
        changes = {f.name: _stack_child([getattr(v, f.name) for v in values], index)
                   for f in dataclasses.fields(first)}
        return dataclasses.replace(first, **{k: v for k, v in changes.items() if v is not getattr(first, k)})
    if isinstance(first, tuple):
        if any(not isinstance(v, tuple) or len(v) != len(first) for v in values):
            raise _Mismatch
        return tuple(_stack_child(list(col), index) for col in zip(*values, strict=True))
    if isinstance(first, dict):
        if any(not isinstance(v, dict) or v.keys() != first.keys() for v in values):
            raise _Mismatch
        return {k: _stack_child([v[k] for v in values], index) for k in first}
    raise _Mismatch


def _stack_child(values: list[Any], index: list[int]) -> Any:
    """A field of the distinct objects: dedupe its values by identity again and compose the member index."""
    first = values[0]
    if all(v is first for v in values):
        return first
    distinct: dict[int, Any] = {}
    local = [distinct.setdefault(id(v), (len(distinct), v))[0] for v in values]
    return _stack_distinct([v for _, v in distinct.values()], [local[i] for i in index])


def stack_profiles(members: Sequence[Profile]) -> Profile | None:
    """The members as one profile whose differing pricing parameters are (M, 1) arrays (module doc), or None
    when they differ in structure or use a path the stack does not cover (fitted breakpoint curves)."""
    first = members[0]
    if len(members) < 2:
        return None
    model = first.kernel_model
    try:
        if any(m.kernel_tables != first.kernel_tables or host_costs(m) != host_costs(first)
               or (m.kernel_model is None) != (model is None) for m in members):
            raise _Mismatch
        # read from the first member: the hardware gates (collective_impls.available, recipes.masks) and the
        # measured implementation curves must be every member's
        if any(m.provenance != first.provenance or m.impl_curves != first.impl_curves for m in members
               if m is not first):
            raise _Mismatch
        if model is not None and any((m.kernel_model.sm_count, m.kernel_model.max_threads_per_sm,
                                      m.kernel_model.warp_size)
                                     != (model.sm_count, model.max_threads_per_sm, model.warp_size)
                                     for m in members):
            raise _Mismatch
        stacked = {name: _stack_values([getattr(m, name) for m in members]) for name in _PRICING_FIELDS}
    except _Mismatch:
        return None
    if any(c.select != "min" and any(np.ndim(r.max_bytes) for r in c.regimes) for c in stacked["collectives"]):
        return None  # a fitted curve's measured breakpoints must be shared (they pick the regime per point)
    return dataclasses.replace(first, **stacked, raw={**first.raw, STACK_KEY: tuple(members)})


def _stackable(scenario: Scenario) -> bool:
    """Only the batch varies (at most 1-d), NCCL collectives as the scenario's `collective`: the paths whose
    formulas take (M, 1) parameters. tokenspeed's recipe (recipes.py) picks multimem itself where the profile has
    NVLS at the scenario's (TP, nodes) - a gate read from the regime names and the hardware provenance, which
    every member shares (`stack_profiles` checks) - and `collective_impls` prices it element-wise in the
    members' (M, 1) bandwidths."""
    if np.ndim(scenario.batch) > 1:
        return False
    for name in SCENARIO_FIELDS:
        value = getattr(scenario, name)
        if name != "batch" and value is not None and np.ndim(value):
            return False
    return bool(np.all(scenario.collective == "nccl"))


def stack_factors(factors: Sequence[dict[str, float] | None]) -> dict[str, Any] | None:
    """{op: (M, 1) array} of the members' factor dicts (None: no factors; differing keys: not stackable)."""
    if all(f is None for f in factors):
        return None
    if any(f is None for f in factors) or any(f.keys() != factors[0].keys() for f in factors):
        raise _Mismatch
    return {op: np.array([f[op] for f in factors], dtype=float).reshape(-1, 1) for op in factors[0]}


@dataclasses.dataclass(frozen=True)
class MemberPrices:
    """Each member's total per strategy, (M, n): row m = predict(scenario, members[m], factors=factors[m])."""

    scenario: Scenario
    total_us: dict[str, np.ndarray]
    stacked: bool  # True: priced in one evaluation; False: member by member

    def saving_us(self, name: str, baseline: str = BASELINE) -> np.ndarray:
        """(M, n): T_baseline - T_name per draft call, as Prediction.saving_us per member."""
        return self.total_us[baseline] - self.total_us[name]

    def saving_per_decode_step_us(self, name: str, baseline: str = BASELINE) -> np.ndarray:
        """(M, n): saving_us * calls per decode step, as Prediction.saving_per_decode_step_us per member."""
        return self.saving_us(name, baseline) * self.scenario.calls_per_decode_step


_STACKS: dict[tuple[int, ...], tuple[tuple[Profile, ...], Profile | None]] = {}
_STACKS_LOCK = threading.Lock()


def _cached_stack(members: Sequence[Profile]) -> Profile | None:
    key = tuple(map(id, members))
    hit = _STACKS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], members, strict=True)):
        return hit[1]
    stacked = stack_profiles(members)
    with _STACKS_LOCK:  # Streamlit sessions are threads sharing this cache
        if len(_STACKS) >= 16:
            _STACKS.pop(next(iter(_STACKS)), None)
        _STACKS[key] = (tuple(members), stacked)  # members kept alive: their ids stay theirs while cached
    return stacked


def stack_members(scenario: Scenario, members: Sequence[Profile],
                  factors: Sequence[dict[str, float] | None] | None = None
                  ) -> tuple[Scenario, Profile, dict[str, Any] | None] | None:
    """(wide scenario, stacked profile, stacked factors) to price the M members over the scenario's n batches in
    one evaluation - the batches as a (1, n) array, the members' differing parameters and factors as (M, 1)
    arrays (module doc), so every (M, n) result's row m is member m's - or None where the stack does not apply
    (one member, a scenario `_stackable` rejects, members that differ in structure, differing factor keys)."""
    factors = list(factors) if factors is not None else [None] * len(members)
    if len(factors) != len(members):
        raise ValueError("one factor dict (or None) per member")
    stacked = _cached_stack(members) if len(members) > 1 and _stackable(scenario) else None
    if stacked is None:
        return None
    try:
        stacked_factors = stack_factors(factors)
    except _Mismatch:
        return None
    wide = scenario.with_(batch=np.asarray(scenario.batch, dtype=float).reshape(1, scenario.size))
    return wide, stacked, stacked_factors


def _member_totals(scenario: Scenario, members: Sequence[Profile],
                   factors: Sequence[dict[str, float] | None] | None,
                   totals_of: Callable[[Scenario, Profile, dict[str, Any] | None], dict[str, Any]]) -> MemberPrices:
    """{strategy: (M, n)} of totals_of(scenario, members[m], factors[m]) (a dict of totals over the scenario): one
    call on the stack where `stack_members` applies - row m of its (M, n) result is member m's - else member by
    member; the same numbers either way."""
    members = list(members)
    factors = list(factors) if factors is not None else [None] * len(members)
    m, n = len(members), scenario.size
    stack = stack_members(scenario, members, factors)
    if stack is not None:
        wide, stacked, stacked_factors = stack
        priced = totals_of(wide, stacked, stacked_factors)  # (1, n) x (M, 1) -> (M, n)
        totals = {s: np.broadcast_to(np.asarray(t, dtype=float), (m, n)).reshape(m, *scenario.shape)
                  for s, t in priced.items()}
        return MemberPrices(scenario, totals, True)
    each = [totals_of(scenario, rep, fac) for rep, fac in zip(members, factors, strict=True)]
    totals = {s: np.stack([np.broadcast_to(np.asarray(t[s], dtype=float), scenario.shape) for t in each])
              for s in each[0]}
    return MemberPrices(scenario, totals, False)


def predict_members(scenario: Scenario, members: Sequence[Profile], strategies: tuple[str, ...],
                    factors: Sequence[dict[str, float] | None] | None = None) -> MemberPrices:
    """Every member's `predict(scenario, member, strategies, factors=...)` totals, (M, n), in one evaluation
    where the stack applies (`stack_members`), else member by member - the same numbers either way."""
    if BASELINE not in strategies:
        strategies = (BASELINE, *strategies)

    def totals_of(sc: Scenario, profile: Profile, fac: dict[str, Any] | None) -> dict[str, Any]:
        pred = predict(sc, profile, strategies, factors=fac)
        return {s: pred.total_us(s) for s in strategies}

    return _member_totals(scenario, members, factors, totals_of)


def draft_step_members(scenario: Scenario, members: Sequence[Profile], placement: Placement, arch: DraftArch,
                       strategies: tuple[str, ...], factors: Sequence[dict[str, float] | None] | None = None, *,
                       kv_len: int = 2048, forward_us: float | None = None) -> MemberPrices:
    """Every member's whole draft step, `draft_step(scenario, members[m], placement, arch, ...,
    factors=factors[m]).total_us`, as (M, n) per strategy: one stacked evaluation where `stack_members` applies
    (draft_step's formulas are element-wise in the (M, 1) parameters and factors, as predict's), else member by
    member - the same numbers either way (tests/model/test_draft_step_members.py)."""
    def totals_of(sc: Scenario, profile: Profile, fac: dict[str, Any] | None) -> dict[str, Any]:
        return draft_step(sc, profile, placement, arch, kv_len=kv_len, forward_us=forward_us, strategies=strategies,
                          factors=fac).total_us

    return _member_totals(scenario, members, factors, totals_of)


__all__ = ["draft_step_members", "MemberPrices", "predict_members", "stack_factors", "stack_members", "stack_profiles",
           "stacked_members"]
