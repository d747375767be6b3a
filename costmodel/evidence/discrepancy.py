"""Model discrepancy: per op, how wrong the model's shape is (sigma of log(measured / predicted)).

Model discrepancy. The bootstrap says how well the data pin the parameters, not how wrong the
model's shape is. Per op a log-normal discrepancy sigma (log(measured / predicted) ~ N(0,
sigma^2)) is estimated (`discrepancy`): the profile's own `discrepancy` object if any; else

* fitted ops (a fit report row for the op; the GPU kernel model's `kernels.model_cv`, on its own
  GPU): the cross-validated residuals of the fit (sigma = the mean of p90 / 1.645 and median / 0.674
  of the leave-one-out |relative error| - |log error| to second order, averaged over both signs -
  which holds measurement noise and model error; RMS over the op's groups), the larger of the two;
* derived collectives (every collective a profile of kind derived / mixed has no fit report for):
  one estimate pooled over the held-out reference rows of every derived profile (`residual_pool`,
  `pooled_sigmas`), by scope: op x intra-node / inter-node (key `op@inter` for rows with nodes > 1).
  Why pooled: a derived profile is the NCCL derivation applied to a GPU's published figures; what
  its intervals must cover is how wrong that derivation is on a table it never saw, and the evidence
  for that is its error on every other table, whatever GPU - a profile's own rows alone are few
  (A100: 4 scattered published rows once its nccl-tests table is scored) and then set absurd widths.
  Why a quantile: sigma_total = q / 1.645 with q the split-conformal 90% quantile of |log r| (the
  ceil((n + 1) 0.9)-th smallest of n; a new exchangeable row falls inside +-q with probability >= 90%
  without assuming normality), not an RMS that a few outliers (a 4x bumpy IB row) dominate. Then
  sigma^2 = sigma_total^2 - mean(replicate variance of log prediction): the part the ensemble's own
  spread already explains is not counted twice. Rows left out of the pool: in-sample rows
  (`used_in_profile`), rows priced at their nccl-tests table's own host floor (predicted = that
  table's median below 64 KiB per rank: no evidence about the model), fitted ops. Under
  CONFORMAL_MIN_ROWS (9) rows of the op, the scope's rows of every collective; under that too, the
  fallback below. Not split by message-size regime: the ensemble draws one factor per op and member
  (`_op_factors`, applied by strategies.build_components), so a per-regime sigma could not be priced
  by `propagate` the way `validate` scores it. Leave-one-set-out (`validate.interval_coverage`): the
  scored set's rows, and those of every set measured in the same run (`machine_key`: one results
  directory of one repository, e.g. the four togethercomputer H100 tables), never set its sigma.
  The method was fixed before its coverage was looked at; `python -m costmodel validate` prints what
  it gives per set, with a binomial consistency check.

Ops without data take the largest sigma of their kind (collective / kernel) in the profile, else
PRIOR_SIGMA_LOG. Each ensemble member gets independent per-op factors exp(sigma_op z), so the
efficiencies of different ops vary independently.

With the bootstrap replicates (`costmodel.profiles.replicates`) these make the interval ensembles
(`costmodel.evidence.ensemble`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..io.schema_names import COLLECTIVE_OPS, FUSED_KERNEL_OPS, KERNEL_OPS
from ..profiles.consistency import _is_num
from ..profiles.paths import PROFILE_DIR, REFERENCE_DIR
from ..profiles.types import Profile
from .pool import (  # noqa: F401 - re-exported: the pool's plain parts are named from here too
    CONFORMAL_LEVEL,
    CONFORMAL_MIN_ROWS,
    INTER,
    Z75,
    Z90,
    ResidualPool,
    conformal_sigma,
    fit_report_sigmas,
    machine_key,
    pooled_sigmas,
)

if TYPE_CHECKING:
    import pandas as pd

# -- model discrepancy ----------------------------------------------------------------------------------------------
PRIOR_SIGMA_LOG = 0.3  # ops of a kind without any data in the profile (a stated prior, not a measurement)
# host launch costs: repeat eager runs of the H200 probe agreed within +-25% (p10-p90;
# ../shared/measurements/h200-2026-11-30/README.md), so log(1.25) = 1.645 sigma
HOST_SIGMA_LOG = math.log(1.25) / Z90




@dataclass(frozen=True)
class Discrepancy:
    """Per-op sigma of log(measured / predicted) and where each came from."""

    sigma_log: dict[str, float]
    source: dict[str, str]

    def sigma(self, op: str, nodes: int = 1) -> float:
        """sigma of `op`; a collective spanning nodes > 1 uses its inter-node sigma (`op@inter`) where known
        (the network path is a different model), else the largest of its kind (inter-node first)."""
        coll = op in COLLECTIVE_OPS
        if coll and nodes > 1:
            inter = [v for k, v in self.sigma_log.items() if k.endswith(INTER)]
            if f"{op}{INTER}" in self.sigma_log:
                return self.sigma_log[f"{op}{INTER}"]
            if inter:
                return max(inter)
        if op in self.sigma_log:
            return self.sigma_log[op]
        known = [v for k, v in self.sigma_log.items()
                 if (k.removesuffix(INTER) in COLLECTIVE_OPS) == coll and k != "host"]
        return max(known) if known else PRIOR_SIGMA_LOG

    def describe(self, op: str, nodes: int = 1) -> str:
        key = f"{op}{INTER}" if nodes > 1 and f"{op}{INTER}" in self.source else op
        if key in self.source:
            return self.source[key]
        return "largest sigma of its kind in this profile" if self.sigma(op, nodes) != PRIOR_SIGMA_LOG else \
            f"prior sigma {PRIOR_SIGMA_LOG} (no data)"


# engine ops each probe op of the GPU kernel model's cross-validation stands for
_MODEL_CV_OPS = {"argmax": ("argmax", "chunked_argmax"), "local_pack": ("local_pack", "local_argmax", "key_pack"),
                 "local_max": ("local_max",), "pair_reduce": ("pair_reduce",),
                 "relayout_argmax": ("relayout_argmax", "relayout_copy")}


def model_cv_sigmas(profile: Profile) -> dict[str, float]:
    """Per op, from the GPU kernel model's cross-validation stored in the profile (kernels.model_cv, CUDA-graph
    rows: the GPU times the strategies use), when it was measured on the profile's own GPU: like
    `fit_report_sigmas`, RMS over the held-out kinds (one batch / one vocab out)."""
    kern = profile.raw.get("kernels") if isinstance(profile.raw, dict) else None
    rows = kern.get("model_cv") if isinstance(kern, dict) else None
    gpu = str((kern.get("model") or {}).get("gpu", "")) if isinstance(kern, dict) else ""
    if not isinstance(rows, list) or not gpu or gpu not in profile.provenance.gpu:
        return {}
    per_op: dict[str, list[float]] = {}
    for row in rows:
        if not isinstance(row, dict) or row.get("mode") != "graph":
            continue
        p90, med = row.get("p90_abs_rel_error"), row.get("median_abs_rel_error")
        if _is_num(p90) and _is_num(med):
            for op in _MODEL_CV_OPS.get(str(row.get("op")), (str(row.get("op")),)):
                per_op.setdefault(op, []).append(float(np.mean([p90 / Z90, med / Z75])))
    return {op: float(np.sqrt(np.mean(np.square(v)))) for op, v in per_op.items()}


DISCREPANCY_OPS: list[str] = [*COLLECTIVE_OPS, *KERNEL_OPS, *FUSED_KERNEL_OPS, "host"]
_POOL: list[tuple[ResidualPool, str | None]] = []  # (the pool, the fingerprint of the inputs it was priced from)


def _pool_fingerprint() -> str:
    """sha256 over what the bundled pool depends on: reference CSVs, bundled profiles, the cost model's code."""
    h = hashlib.sha256()
    for path in sorted([*Path(REFERENCE_DIR).glob("*.csv"), *Path(PROFILE_DIR).glob("*.json"),
                        *Path(__file__).parents[1].rglob("*.py")]):
        h.update(str(path.name).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _cache_dir() -> Path:
    root = os.environ.get("COSTMODEL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "costmodel")
    return Path(root)


def bundled_pool() -> ResidualPool:
    """The pool of every bundled reference row (`residuals.reference_pool`: `residual_pool` of `validate` over
    data/reference/).

    Pricing it loads every referenced profile (~3 s), so it is computed once per process and kept on
    disk (COSTMODEL_CACHE_DIR, else ~/.cache/costmodel) under the sha256 of its inputs (`_pool_fingerprint`):
    any change to a reference file, a bundled profile or the code recomputes it. Unreadable or unwritable
    cache: computed in memory. A pool priced while one of those inputs changed (the fingerprint read again after
    pricing differs) is used but not stored: stored under the first fingerprint, it would be served for inputs it
    was not priced from (it was, once, while a profile was being rewritten: the dashboard then showed intervals
    ~1 us off the model's).
    """
    if _POOL:
        return _POOL[0][0]
    fingerprint = _pool_fingerprint()
    path = _cache_dir() / f"discrepancy-pool-{fingerprint[:32]}.json"
    pool = None
    try:
        pool = ResidualPool.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        pool = None
    if pool is None:
        # a miss only: pricing the pool needs the frames (pandas, validate); a hit loads none of them
        from . import residuals

        pool = residuals.reference_pool()
        if _pool_fingerprint() != fingerprint:  # an input changed while the pool was priced: keep it in memory only
            _POOL.append((pool, None))
            return pool
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(pool.to_dict()))
            os.replace(tmp, path)
        except OSError:
            pass
    _POOL.append((pool, fingerprint))
    return pool


def bundled_pool_fingerprint() -> str | None:
    """The fingerprint (`_pool_fingerprint`) of the inputs `bundled_pool` was priced from or loaded for, or None
    when an input changed while it was priced: what a cache of results computed with that pool is keyed by
    (`interval_table.cached_interval_table`), so a result is never stored under inputs it was not computed from."""
    bundled_pool()
    return _POOL[0][1]


def discrepancy(profile: Profile, *, exclude_files: tuple[str, ...] = (),
                reference: pd.DataFrame | None = None, pool: ResidualPool | None = None) -> Discrepancy:
    """Per-op discrepancy sigma (module doc): profile `discrepancy` > pooled reference residuals (derived
    collectives) / fit report and kernel-model CV (fitted ops; the larger of those two).

    pool: the residual pool to estimate derived collectives from (default: `residual_pool(reference)` when a
    `validate` table is given, else the bundled reference rows, `bundled_pool`); exclude_files: reference
    sets left out, with every set measured in the same run (coverage is scored on a set whose rows - and
    whose machine's rows - did not set the sigma).
    """
    sigma: dict[str, float] = {"host": HOST_SIGMA_LOG}
    source: dict[str, str] = {"host": "H200 probe eager repeat spread +-25% (p10-p90)"}
    fitted = fit_report_sigmas(profile)
    for op, v in fitted.items():
        sigma[op], source[op] = v, "fit report: leave-one-out p90 |error|"
    for op, v in model_cv_sigmas(profile).items():
        if v > sigma.get(op, 0.0):
            sigma[op], source[op] = v, "GPU kernel model: leave-one-batch / one-vocab-out error (kernels.model_cv)"
    if profile.provenance.kind != "measured":  # its collectives (those without a fit report) are derived
        if pool is None and reference is not None:  # a `validate` frame: pandas is loaded already
            from .residuals import residual_pool

            pool = residual_pool(reference)
        if pool is None:
            pool = bundled_pool()
        for op, (v, n, scope) in pooled_sigmas(pool, exclude_files).items():
            if op not in fitted:
                sigma[op], source[op] = v, (f"derived profiles vs {n} held-out reference rows ({scope}): conformal "
                                            "90% quantile of |log error| / 1.645, beyond the ensemble's own spread")
    explicit = profile.raw.get("discrepancy") if isinstance(profile.raw, dict) else None
    if isinstance(explicit, dict):
        for op, spec in explicit.items():
            value = spec.get("sigma_log") if isinstance(spec, dict) else spec
            if _is_num(value) and value >= 0:
                sigma[op] = float(value)
                source[op] = str(spec.get("source", "profile discrepancy")) if isinstance(spec, dict) else \
                    "profile discrepancy"
    return Discrepancy(sigma, source)
