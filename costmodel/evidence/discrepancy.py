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
from statistics import NormalDist

import numpy as np
import pandas as pd

from ..io.errors import InputError
from ..io.measurements import COLLECTIVE_OPS, FUSED_KERNEL_OPS, KERNEL_OPS
from ..model.points import floor_priced, numeric_column, predict_points
from ..profiles.consistency import _is_num
from ..profiles.replicates import replicate_profiles
from ..profiles.store import PROFILE_DIR, load_profile
from ..profiles.types import Profile
from .reference import REFERENCE_DIR, load_reference, reference_files, reference_set
from .validate import validate

# -- model discrepancy ----------------------------------------------------------------------------------------------
Z90 = 1.6448536269514722  # standard normal 95th percentile: p90 of |z| = Z90 * sigma
Z75 = 0.6744897501960817  # standard normal 75th percentile: median of |z| = Z75 * sigma
PRIOR_SIGMA_LOG = 0.3  # ops of a kind without any data in the profile (a stated prior, not a measurement)
# host launch costs: repeat eager runs of the H200 probe agreed within +-25% (p10-p90;
# ../shared/measurements/h200-2026-11-30/README.md), so log(1.25) = 1.645 sigma
HOST_SIGMA_LOG = math.log(1.25) / Z90


INTER = "@inter"  # key suffix of a collective's inter-node discrepancy (rows with nodes > 1)


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


def fit_report_sigmas(profile: Profile) -> dict[str, float]:
    """Per op, from the fit report's leave-one-out errors: RMS over the op's groups of log(1 + cv_p90) / Z90."""
    per_op: dict[str, list[float]] = {}
    for row in profile.fit_report:
        if not isinstance(row, dict) or row.get("status", "fitted") != "fitted":
            continue
        p90, med = row.get("cv_p90_rel_err"), row.get("cv_median_rel_err")
        if _is_num(p90) and p90 >= 0 and isinstance(row.get("op"), str):
            # |z| quantiles of a normal: p90 = Z90 sigma, median = Z75 sigma; the mean of both is steadier
            # |pred - t| / t is |log(pred / t)| to second order averaged over both signs (log1p would bias low)
            est = [p90 / Z90] + ([med / Z75] if _is_num(med) and med >= 0 else [])
            inter = row.get("kind") == "collective" and _is_num(row.get("nodes")) and row["nodes"] > 1
            per_op.setdefault(row["op"] + (INTER if inter else ""), []).append(float(np.mean(est)))
    return {op: float(np.sqrt(np.mean(np.square(v)))) for op, v in per_op.items()}


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


_PARAM_VAR_CACHE: dict[tuple, np.ndarray] = {}


def replicate_us(frame: pd.DataFrame, profile: Profile) -> np.ndarray:
    """(R, n): each of the profile's R bootstrap replicates' predicted_us of every row (R = 0 without replicates).
    A row's prediction depends on that row alone, so a caller may price a table once and slice it per subset."""
    reps = replicate_profiles(profile)
    if not reps or not len(frame):
        return np.empty((0, len(frame)))
    return np.stack([predict_points(frame, rep)["predicted_us"].to_numpy(float) for rep in reps])


def param_log_variance(frame: pd.DataFrame, profile: Profile, replicates: np.ndarray | None = None) -> np.ndarray:
    """Per row, the variance over the profile's replicates of log(predicted_us) (0 without replicates).
    replicates: the rows' `replicate_us`, when the caller has them already."""
    key = (id(profile), id(frame), len(frame))
    hit = _PARAM_VAR_CACHE.get(key) if replicates is None else None
    if hit is not None:
        return hit
    rep = replicate_us(frame, profile) if replicates is None else replicates
    if not rep.shape[0] or not len(frame):
        out = np.zeros(len(frame))
    else:
        out = np.nan_to_num(np.var(np.log(rep), axis=0), nan=0.0, posinf=0.0)
    if len(_PARAM_VAR_CACHE) > 32:
        _PARAM_VAR_CACHE.clear()
    _PARAM_VAR_CACHE[key] = out
    return out


DISCREPANCY_OPS: list[str] = [*COLLECTIVE_OPS, *KERNEL_OPS, *FUSED_KERNEL_OPS, "host"]
CONFORMAL_LEVEL = 0.9  # the level the pooled sigma is calibrated at (the intervals' default level)
# rows needed for the split-conformal quantile: rank ceil((n + 1) 0.9) <= n needs n >= 9
CONFORMAL_MIN_ROWS = math.ceil(CONFORMAL_LEVEL / (1 - CONFORMAL_LEVEL) - 1e-9)
_RUN_FILE_SUFFIXES = (".out", ".log", ".txt")


def conformal_sigma(abs_log_residuals: np.ndarray, level: float = CONFORMAL_LEVEL) -> float:
    """sigma = q / z_{(1+level)/2} with q the split-conformal quantile of |log r|: the k-th smallest of n,
    k = ceil((n + 1) level). A new row exchangeable with the n has |log r| <= q with probability >= level
    (finite-sample, no normality needed); dividing by the normal z turns q into the sigma the ensemble draws
    (Z90 at level 0.9). NaN when n < k (too few rows for the quantile)."""
    x = np.sort(np.abs(np.asarray(abs_log_residuals, dtype=float)))
    x = x[np.isfinite(x)]
    k = math.ceil((x.size + 1) * level - 1e-9)
    if x.size == 0 or k > x.size:
        return float("nan")
    return float(x[k - 1] / NormalDist().inv_cdf(0.5 + level / 2))


def machine_key(source: str, ref_set: str) -> str:
    """The run a reference row was measured in: for an output file in a repository ("owner/repo
    path/run/x.out ..."), the repository and the file's directory (one results directory = one run on one
    machine, e.g. the four togethercomputer H100 tables); any other source: its reference set alone."""
    tokens = str(source).split()
    if len(tokens) >= 2 and "/" in tokens[0] and "/" in tokens[1] and tokens[1].endswith(_RUN_FILE_SUFFIXES):
        return f"{tokens[0]} {tokens[1].rsplit('/', 1)[0]}"
    return f"set:{ref_set}"


@dataclass(frozen=True)
class ResidualPool:
    """Held-out log residuals log(predicted / measured) of derived collectives, one entry per reference row.

    key: op, or op@inter for rows spanning nodes > 1; ref_set / machine: where the row came from
    (`machine_key`); param_var: the variance over the row's own profile's replicates of log(predicted).
    """

    key: np.ndarray
    ref_set: np.ndarray
    machine: np.ndarray
    log_res: np.ndarray
    param_var: np.ndarray

    def to_dict(self) -> dict[str, list]:
        return {f: getattr(self, f).tolist() for f in ("key", "ref_set", "machine", "log_res", "param_var")}

    def __add__(self, other: ResidualPool) -> ResidualPool:
        return ResidualPool(*(np.concatenate([getattr(self, f), getattr(other, f)])
                              for f in ("key", "ref_set", "machine", "log_res", "param_var")))

    def without_sets(self, sets: set[str]) -> ResidualPool:
        keep = ~np.isin(self.ref_set, list(sets))
        return ResidualPool(*(getattr(self, f)[keep] for f in ("key", "ref_set", "machine", "log_res", "param_var")))

    @staticmethod
    def from_dict(d: dict[str, list]) -> ResidualPool:
        return ResidualPool(*(np.asarray(d[f], dtype=object if f in ("key", "ref_set", "machine") else float)
                              for f in ("key", "ref_set", "machine", "log_res", "param_var")))


def residual_pool(table: pd.DataFrame, replicates: dict[str, np.ndarray] | None = None) -> ResidualPool:
    """The pool of a `validate` table (column `ref_set`, else `validate.reference_set`): rows of a collective
    op whose profile did not fit it (no fit-report sigma for the op: its parameters are derived), held out
    (`used_in_profile` false) and not priced by their table's own host floor (there predicted = the floor,
    the table's own median below 64 KiB per rank: no evidence about the model). replicates: per profile name,
    the (R, len(table)) `replicate_us` of the table's rows (only that profile's columns are read), when the
    caller has them already."""
    if not len(table):
        return ResidualPool(*(np.empty(0, dtype=object),) * 3, np.empty(0), np.empty(0))
    sets = table["ref_set"].astype(str) if "ref_set" in table.columns else reference_set(table)
    ops = table["op"].astype(str).to_numpy()
    nodes = numeric_column(table, "nodes", 1.0)
    keys = np.where(np.isin(ops, COLLECTIVE_OPS) & (nodes > 1), np.char.add(ops.astype(str), INTER), ops)
    pred = table["predicted_us"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_res = np.log(pred / table["median_us"].to_numpy(float))
    keep = (np.isin(ops, COLLECTIVE_OPS) & ~table["used_in_profile"].astype(bool).to_numpy() & np.isfinite(log_res)
            & ~floor_priced(table))
    names = table["profile_used"].astype(str).to_numpy() if "profile_used" in table.columns else \
        table["profile"].astype(str).to_numpy()
    pv = np.zeros(len(table))
    for name in np.unique(names[keep]):
        prof = load_profile(name)
        fitted = fit_report_sigmas(prof)
        mine = keep & (names == name)
        mine &= ~np.isin(keys, list(fitted))  # fitted ops keep their fit report's sigma
        keep &= ~((names == name) & ~mine)
        if mine.any():
            given = None if replicates is None or name not in replicates else replicates[name][:, mine]
            pv[mine] = param_log_variance(table[mine], prof, given)
    machines = np.array([machine_key(s, r) for s, r in zip(table["source"].astype(str) if "source" in table.columns
                                                          else [""] * len(table), sets, strict=True)], dtype=object)
    return ResidualPool(keys[keep].astype(object), sets.to_numpy(dtype=object)[keep], machines[keep], log_res[keep],
                        pv[keep])


def pooled_sigmas(pool: ResidualPool, exclude_sets: tuple[str, ...] = (), level: float = CONFORMAL_LEVEL
                  ) -> dict[str, tuple[float, int, str]]:
    """Per key of the pool: (sigma, n rows used, scope) from the rows left after leaving out `exclude_sets`
    and every set measured in the same run as one of them (`machine_key`).

    sigma^2 = (conformal_sigma of the rows' |log r|)^2 - mean(param_var): the part of the error the
    ensemble's own replicate spread does not already explain (>= 0). Scope: the op's own rows
    (op x intra-node / inter-node); under CONFORMAL_MIN_ROWS of them, every collective's rows of that
    scope; under that too, no entry (Discrepancy.sigma then falls back).
    """
    gone = np.isin(pool.ref_set, list(exclude_sets))
    gone |= np.isin(pool.machine, list(set(pool.machine[gone])))
    inter = np.char.endswith(pool.key.astype(str), INTER)
    out: dict[str, tuple[float, int, str]] = {}
    for key in sorted(set(pool.key)):
        own = (pool.key == key) & ~gone
        scope_rows = (inter == key.endswith(INTER)) & ~gone
        for rows, scope in ((own, key), (scope_rows, "every collective, " +
                                         ("inter-node" if key.endswith(INTER) else "intra-node"))):
            if rows.sum() >= CONFORMAL_MIN_ROWS:
                total = conformal_sigma(pool.log_res[rows], level)
                sigma = math.sqrt(max(total ** 2 - float(np.mean(pool.param_var[rows])), 0.0))
                out[key] = (sigma, int(rows.sum()), scope)
                break
    return out


_POOL: list[ResidualPool] = []


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
    """The pool of every bundled reference row (`residual_pool` of `validate` over data/reference/).

    Pricing it loads every referenced profile (~3 s), so it is computed once per process and kept on
    disk (COSTMODEL_CACHE_DIR, else ~/.cache/costmodel) under the sha256 of its inputs (`_pool_fingerprint`):
    any change to a reference file, a bundled profile or the code recomputes it. Unreadable or unwritable
    cache: computed in memory.
    """
    if _POOL:
        return _POOL[0]
    fingerprint = _pool_fingerprint()
    path = _cache_dir() / f"discrepancy-pool-{fingerprint[:32]}.json"
    pool = None
    try:
        pool = ResidualPool.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        pool = None
    if pool is None:
        try:
            pool = residual_pool(validate(load_reference(reference_files())))
        except InputError:
            pool = residual_pool(pd.DataFrame())
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(pool.to_dict()))
            os.replace(tmp, path)
        except OSError:
            pass
    _POOL.append(pool)
    return pool


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
        if pool is None:
            pool = residual_pool(reference) if reference is not None else bundled_pool()
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
