"""Per decode step: K draft calls plus target-side greedy verification, and the strategy x collective matrix.

Greedy verification (temperature-0 requests): the target model's logits for the B x (K + 1) verified rows
are only argmaxed, so they can stay vocab-sharded like the draft's (calibration/reference/strategies.py `greedy_verify`
runs the same strategies on them). Its scenario is the draft scenario with

    rows = B * (K + 1) in one call, vocab = draft vocab = the target vocab V_target (no d2t), top-k 1,
    the target's TP size, dtype (default: the draft's) and soft-cap / scale, same engine / collective.

With a greedy fraction F (share of decode steps whose batch is all greedy; the others need the full logits
for sampling and run the baseline):

    verify_us(s)      = F * T_s(verify) + (1 - F) * T_baseline(verify)
    decode_step_us(s) = T_s(draft) * calls_per_decode_step + verify_us(s)     (verify_us = 0 without --verify)

`best_pair` / `matrix` price every strategy under every collective implementation (collective_impls.IMPLS)
and name the fastest valid (strategy, collective) pair per decode step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..io.errors import InputError
from ..profiles.store import default_profile
from ..profiles.types import Profile
from .collective_impls import IMPLS, available
from .components import BASELINE, STRATEGIES
from .crossover import crossovers as find_crossovers
from .predict import Prediction, predict
from .scenario import Scenario

if TYPE_CHECKING:
    import pandas as pd


def verification_scenario(scenario: Scenario, target_dtype: str | None = None) -> Scenario:
    """The B x (K + 1)-row greedy verification step over the target vocab (see the module doc)."""
    return scenario.with_(draft_vocab=scenario.vocab, d2t=False, batch=scenario.batch * (scenario.num_spec_tokens + 1),
                          num_spec_tokens=1, drafting="serial", top_k=1,
                          dtype=scenario.dtype if target_dtype is None else target_dtype)


def check_fraction(greedy_fraction: float) -> float:
    f = float(greedy_fraction)
    if not 0.0 <= f <= 1.0:
        raise InputError(f"greedy-fraction: must be in 0..1, got {greedy_fraction}")
    return f


@dataclass(frozen=True)
class DecodeStep:
    """Per-decode-step totals (us) of every strategy: the draft group, the verification group, the sum."""

    draft: Prediction
    verification: Prediction | None
    greedy_fraction: float

    def draft_us(self, name: str) -> np.ndarray:
        return self.draft.total_us(name) * self.draft.scenario.calls_per_decode_step

    def verify_us(self, name: str) -> np.ndarray:
        if self.verification is None:
            return np.zeros(self.draft.scenario.shape)
        v, f = self.verification, self.greedy_fraction
        return f * v.total_us(name) + (1.0 - f) * v.total_us(BASELINE)

    def total_us(self, name: str) -> np.ndarray:
        return self.draft_us(name) + self.verify_us(name)

    def saving_us(self, name: str) -> np.ndarray:
        return self.total_us(BASELINE) - self.total_us(name)

    def valid(self, name: str) -> np.ndarray:
        ok = self.draft.strategies[name].valid
        return ok if self.verification is None else ok & self.verification.strategies[name].valid


def decode_step(scenario: Scenario, profile: Profile | None = None, *, verify: bool = False,
                greedy_fraction: float = 1.0, target_dtype: str | None = None,
                strategies: tuple[str, ...] = STRATEGIES) -> DecodeStep:
    f = check_fraction(greedy_fraction)
    draft = predict(scenario, profile, strategies)
    ver = predict(verification_scenario(scenario, target_dtype), profile, strategies) if verify else None
    return DecodeStep(draft, ver, f)


def verification_dict(step: DecodeStep) -> dict[str, Any]:
    """JSON of the verification group (single scenario): rows, components and totals per strategy."""
    v = step.verification
    if v is None:
        return {"enabled": False}
    sc = v.scenario
    return {
        "enabled": True, "rows": float(sc.batch), "vocab": int(sc.vocab), "tp": int(sc.tp), "dtype": str(sc.dtype),
        "greedy_fraction": step.greedy_fraction,
        "formula": "verify_us = F * T_strategy(B x (K+1) rows) + (1 - F) * T_full_all_gather; "
                   "decode_step_us = draft total x calls per decode step + verify_us",
        "strategies": {n: {"verify_us": float(step.verify_us(n)), "valid": bool(r.valid),
                           "components": {k: float(c) for k, c in r.components_us.items()}}
                       for n, r in v.strategies.items()},
    }


def matrix(scenario: Scenario, profile: Profile | None = None, *, verify: bool = False, greedy_fraction: float = 1.0,
           target_dtype: str | None = None, max_batch: float = 65536.0, crossovers: bool = True) -> pd.DataFrame:
    """Strategy x collective table for one scenario: us per draft call and per decode step, saving versus the
    NCCL baseline, validity, whether the implementation ran natively (else the NCCL fallback priced it) and the
    crossover batch of the strategy against the baseline under the same collective (per draft call).
    The frame of `matrix_rows`."""
    import pandas as pd  # only for the frame: `matrix_rows` + `best_pair` (the predict verdict) need none

    return pd.DataFrame(matrix_rows(scenario, profile, verify=verify, greedy_fraction=greedy_fraction,
                                    target_dtype=target_dtype, max_batch=max_batch, crossovers=crossovers))


def matrix_rows(scenario: Scenario, profile: Profile | None = None, *, verify: bool = False,
                greedy_fraction: float = 1.0, target_dtype: str | None = None, max_batch: float = 65536.0,
                crossovers: bool = True) -> list[dict[str, Any]]:
    """`matrix`'s rows as dicts (strategy-major within each collective implementation, as the frame)."""
    if scenario.size != 1:
        raise InputError("matrix needs a single scenario")
    profile = profile or default_profile()
    rows = []
    # every implementation in one evaluation: element i of each (len(IMPLS),) result is IMPLS[i]
    wide = decode_step(scenario.with_(collective=np.array(IMPLS)), profile, verify=verify,
                       greedy_fraction=greedy_fraction, target_dtype=target_dtype)
    shape = (len(IMPLS),)

    def at(values, i: int) -> float:
        return float(np.broadcast_to(np.asarray(values, dtype=float), shape)[i])

    reference = at(wide.total_us(BASELINE), IMPLS.index("nccl"))
    for i, impl in enumerate(IMPLS):
        sc = scenario.with_(collective=impl)
        valid = {name: bool(np.broadcast_to(wide.valid(name), shape)[i]) for name in STRATEGIES}
        searched = [name for name in STRATEGIES if crossovers and name != BASELINE and valid[name]]
        found = find_crossovers(sc, tuple(searched), profile, batch_range=(1.0, max_batch)) if searched else {}
        for name in STRATEGIES:
            cross = found[name].batch if name in found else None
            total = at(wide.total_us(name), i)
            rows.append({"strategy": name, "collective": impl, "draft_call_us": at(wide.draft.total_us(name), i),
                         "verify_us": at(wide.verify_us(name), i), "decode_step_us": total,
                         "saving_vs_nccl_baseline_us": reference - total,
                         "valid": valid[name], "native": _native(wide.draft, name, profile, impl),
                         "crossover_batch": cross,
                         "provenance": "derived" if impl != "nccl" else profile.provenance.kind})
    return rows


def _native(pred: Prediction, name: str, profile: Profile, impl: str) -> bool:
    """True when every all-gather / all-reduce of the strategy ran as `impl` (not the NCCL fallback)."""
    if impl == "nccl":
        return True
    sc = pred.scenario
    for calls in pred.strategies[name].calls.values():
        for call in calls:
            if call.kind == "collective" and call.op in ("all_gather", "all_reduce"):
                ok = available(profile, impl, call.op, call.args["bytes_per_rank"], sc.tp, sc.nodes)
                if not bool(np.all(ok)):
                    return False
            elif call.kind == "collective" and bool(np.any(sc.tp > 1)):
                return False  # gather / broadcast: NCCL only
    return True


def best_pair(table: pd.DataFrame | list[dict[str, Any]]) -> dict[str, Any]:
    """The fastest valid (strategy, collective) per decode step in a `matrix` table or its `matrix_rows`
    (the first of equal times, NaN times skipped, as pandas' idxmin)."""
    rows = table.to_dict(orient="records") if hasattr(table, "to_dict") else table
    ok = [r for r in rows if r["valid"] and not np.isnan(r["decode_step_us"])]
    if not ok:
        raise InputError("best pair: no valid (strategy, collective) pair")
    row = min(ok, key=lambda r: r["decode_step_us"])
    return {"strategy": row["strategy"], "collective": row["collective"],
            "decode_step_us": float(row["decode_step_us"]),
            "saving_vs_nccl_baseline_us": float(row["saving_vs_nccl_baseline_us"]), "native": bool(row["native"])}
