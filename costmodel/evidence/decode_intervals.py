"""The 90% intervals of one decode step's saving: K draft calls plus the target's greedy verification.

The same ensemble as `costmodel.evidence.intervals.propagate` (`costmodel.evidence.ensemble.ensemble`), priced for
the draft scenario and the verification scenario (`costmodel.model.verification`) in one stacked evaluation each;
decode-step saving of member m = calls_per_decode_step x draft saving_m + greedy_fraction x verify saving_m.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..io.errors import InputError
from ..model.components import STRATEGIES
from ..model.members import predict_members
from ..model.scenario import Scenario
from ..model.verification import check_fraction, verification_scenario
from ..profiles.replicates import replicate_profiles
from ..profiles.types import Profile
from .ensemble import PRIOR_MEMBERS, ensemble
from .intervals import _interval


def decode_step_intervals(scenario: Scenario, profile: Profile, *, verify: bool = False, greedy_fraction: float = 1.0,
                          target_dtype: str | None = None, level: float = 0.9,
                          with_discrepancy: bool = True) -> dict[str, dict[str, Any]]:
    """Central `level` intervals of each strategy's verification-group saving and decode-step saving (us).

    The ensemble is `uncertainty.propagate`'s (the same members, the same fixed-seed per-op discrepancy
    factors): member m prices the draft and the verification scenario, and
    saving_decode(m) = draft saving x calls + F * (T_baseline(verify) - T_s(verify)).
    """
    if scenario.size != 1:
        raise InputError("decode step intervals need a single scenario")
    f = check_fraction(greedy_fraction)
    reps, factors, disc = ensemble(profile, nodes=int(scenario.nodes), with_discrepancy=with_discrepancy)
    ver_sc = verification_scenario(scenario, target_dtype) if verify else None
    names = STRATEGIES[1:]
    draft = predict_members(scenario, reps, names, factors)  # row m: predict(scenario, reps[m], factors=factors[m])
    ver = predict_members(ver_sc, reps, names, factors) if ver_sc is not None else None
    group = {s: (np.zeros(len(reps)) if ver is None else f * ver.saving_us(s).reshape(-1)) for s in names}
    total = {s: draft.saving_per_decode_step_us(s).reshape(-1) + group[s] for s in names}
    members = (f"{len(replicate_profiles(profile))} bootstrap replicates" if replicate_profiles(profile)
               else f"the point profile x {PRIOR_MEMBERS}") + (" x per-op model discrepancy" if disc else "")
    out = {}
    for s in names:
        out[s] = {"verify_saving_us": _interval(np.asarray(group[s]), level).to_dict(),
                  "decode_step_saving_us": _interval(np.asarray(total[s]), level).to_dict(),
                  "members": members}
    return out
