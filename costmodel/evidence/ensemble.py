"""Interval ensembles: M members = bootstrap replicates x independent per-op discrepancy factors.

Member m is the replicate profile m (or the point profile PRIOR_MEMBERS times when there are none) with per-op
factors exp(sigma_op z), z from _N_Z deterministic normal quantiles per replicate, shuffled per op by a seeded
generator (`_op_factors`), so the efficiencies of different ops vary independently. `costmodel.model.members`
prices every member in one evaluation.
"""

from __future__ import annotations

import numpy as np

from ..profiles.replicates import replicate_profiles
from ..profiles.types import Profile
from .discrepancy import DISCREPANCY_OPS, Discrepancy, discrepancy

PRIOR_MEMBERS = 100  # ensemble size for a profile without replicates (discrepancy draws only)


_N_Z = 25  # discrepancy draws per replicate (normal quantiles, deterministic)
_Z = None


def _z_draws() -> np.ndarray:
    global _Z
    if _Z is None:
        from scipy.stats import norm

        _Z = norm.ppf((np.arange(_N_Z) + 0.5) / _N_Z)
    return _Z


def _op_factors(disc: Discrepancy, ops: list[str], n_members: int, seed: int = 0, nodes: int = 1
                ) -> list[dict[str, float]]:
    """Independent per-op discrepancy factors exp(sigma_op z) for each ensemble member (fixed seed)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n_members, len(ops)))
    sig = np.array([disc.sigma(op, nodes) for op in ops])
    f = np.exp(z * sig)
    return [dict(zip(ops, row, strict=True)) for row in f]


def ensemble(profile: Profile, *, nodes: int = 1, with_discrepancy: bool = True
             ) -> tuple[list[Profile], list[dict[str, float] | None], Discrepancy | None]:
    """The prediction intervals' ensemble: (members, per-member discrepancy factors, discrepancy).

    Members are the profile's bootstrap replicates, or the point profile PRIOR_MEMBERS times when it has
    none; each gets independent per-op factors (`_op_factors`, fixed seed, the multi-node sigma when
    nodes > 1), or None with with_discrepancy=False. Every interval (propagate, the dashboard's
    interval table, recommend, the decode-step intervals) prices these same members.
    """
    reps = replicate_profiles(profile) or [profile] * PRIOR_MEMBERS
    disc = discrepancy(profile) if with_discrepancy else None
    factors = (_op_factors(disc, DISCREPANCY_OPS, len(reps), nodes=int(nodes)) if disc is not None
               else [None] * len(reps))
    return reps, factors, disc
