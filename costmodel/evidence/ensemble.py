"""Interval ensembles: M members = bootstrap replicates x independent per-op discrepancy factors.

Member m is the replicate profile m (or the point profile PRIOR_MEMBERS times when there are none) with per-op
factors exp(sigma_op z), z from _N_Z deterministic normal quantiles per replicate, shuffled per op by a seeded
generator (`_op_factors`), so the efficiencies of different ops vary independently. `costmodel.model.members`
prices every member in one evaluation.
"""

from __future__ import annotations

import numpy as np

from ..model.serving import SERVING_SIGMA_LOG
from ..profiles.replicates import replicate_profiles
from ..profiles.types import Profile
from .discrepancy import DISCREPANCY_OPS, Discrepancy, discrepancy

SERVING_SEED = 17  # the serving term's draws (issue 17)

PRIOR_MEMBERS = 100  # ensemble size for a profile without replicates (discrepancy draws only)


_N_Z = 25  # discrepancy draws per replicate (normal quantiles, deterministic)
# scipy.stats.norm.ppf((arange(_N_Z) + 0.5) / _N_Z), stored: the same floats to the last bit without importing
# scipy.stats (~0.2 s); statistics.NormalDist().inv_cdf differs in the last bit at 20 of the 25
# (tests/evidence/test_z_draws.py compares these with scipy)
_Z_QUANTILES = (-2.053748910631823, -1.5547735945968535, -1.2815515655446004, -1.0803193408149558, -0.915365087842814,
                -0.7721932141886848, -0.643345405392917, -0.5244005127080409, -0.41246312944140473,
                -0.3054807880993974, -0.20189347914185088, -0.10043372051146975, 0.0, 0.10043372051146988,
                0.20189347914185074, 0.3054807880993974, 0.41246312944140495, 0.5244005127080407, 0.643345405392917,
                0.7721932141886848, 0.9153650878428138, 1.0803193408149558, 1.2815515655446004, 1.5547735945968535,
                2.0537489106318225)


def _z_draws() -> np.ndarray:
    """The _N_Z normal quantiles (z_k = Phi^-1((k + 0.5) / _N_Z)) every point interval draws; read-only."""
    z = np.array(_Z_QUANTILES)
    z.flags.writeable = False
    return z


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
    if disc is not None:  # the serving term's own spread (model/serving.py), from its own stream: the ops' draws stay
        z = np.random.default_rng(SERVING_SEED).standard_normal(len(reps))
        for f, zi in zip(factors, z, strict=True):
            f["serving"] = float(np.exp(SERVING_SIGMA_LOG * zi))
    return reps, factors, disc
