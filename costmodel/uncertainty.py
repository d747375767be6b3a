"""Uncertainty end to end: prediction intervals = parameter uncertainty + model discrepancy.

Parameter uncertainty. A profile may carry `bootstrap`: a list of replicate parameter sets, each
an object with `collectives` (a full curve list) and/or `kernels` (a partial kernels object
merged over the profile's). Each replicate becomes a complete profile after the physical
constraints (`constrain`): within a curve a later (larger-message) protocol is never slower in
bandwidth (busbw_i <= min_{j>i} busbw_j, e.g. LL <= LL128 <= Simple), latencies >= 0, and kernel
bandwidths <= the profile's `kernels.hbm_gbps` where it states one. On load
(`check_replicates`) a profile whose replicates contradict its own point parameters - a point
value outside the [min, max] of its replicates - is refused with one line.

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

Intervals: the central `level` (default 90%) of the pooled replicate x discrepancy distribution -
of each saving and crossover batch (`propagate`) or of each measurement row (`point_intervals`).
A verdict is "uncertain" when the saving's interval straddles zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError
from .points import floor_priced, numeric_column, predict_points
from .predict import grid_roots
from .profile import Profile, profile_from_dict
from .scenario import Scenario
from .schema import COLLECTIVE_OPS, FUSED_KERNEL_OPS, KERNEL_OPS
from .strategies import BASELINE, STRATEGIES

_CACHE: dict[int, tuple[Profile, tuple[Profile, ...]]] = {}


def replicate_profiles(profile: Profile) -> list[Profile]:
    """One Profile per bootstrap replicate (empty when the profile has none); cached per profile object."""
    hit = _CACHE.get(id(profile))
    if hit is None or hit[0] is not profile:
        if len(_CACHE) >= 16:
            _CACHE.pop(next(iter(_CACHE)))
        hit = _CACHE[id(profile)] = (profile, _replicates(profile))
    return list(hit[1])


def _replicates(profile: Profile) -> tuple[Profile, ...]:
    out = []
    for i, rep in enumerate(profile.bootstrap):
        if not isinstance(rep, dict):
            raise InputError(f"profile {profile.name}: bootstrap[{i}] must be an object")
        # profile_from_dict never mutates; "ensemble": the compact form of the bootstrap list (costmodel.replicates)
        data = {k: v for k, v in profile.raw.items() if k not in ("bootstrap", "ensemble")}
        if "collectives" in rep:  # replicate curves replace the point curves with the same key; others stay
            theirs = {_curve_key(c) for c in rep["collectives"]}
            data["collectives"] = [*rep["collectives"],
                                   *(c for c in data.get("collectives", []) if _curve_key(c) not in theirs)]
        if "kernels" in rep:
            data["kernels"] = {**data["kernels"], **rep["kernels"]}
        # the parent document passed check_document with its replicates; constrain only moves values inward
        out.append(profile_from_dict(constrain(data), source=f"{profile.name}.bootstrap[{i}]",
                                     document_checked=True))
    return tuple(out)


def constrain(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of a profile document with the physical constraints of the module doc applied.

    Per curve busbw_i <= min over later regimes (a larger-message protocol is never slower in
    bandwidth: LL <= LL128 <= Simple); latencies clipped at 0; kernel op bandwidths <= kernels.hbm_gbps
    when the profile states it. Only the parts that change are copied.
    """
    curves = []
    for c in data.get("collectives", []):
        regimes = [dict(r) for r in c.get("regimes", [])]
        ceiling = math.inf
        for r in reversed(regimes):
            bw = r.get("busbw_gbps")
            if isinstance(bw, (int, float)) and not isinstance(bw, bool):
                if bw > ceiling:
                    r["busbw_gbps"] = ceiling
                ceiling = min(ceiling, r["busbw_gbps"])
            for key in ("alpha_base_us", "alpha_per_peer_us", "alpha_per_node_us"):
                v = r.get(key)
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                    r[key] = 0.0
        curves.append({**c, "regimes": regimes})
    out = {**data, "collectives": curves}
    kern = data.get("kernels")
    hbm = kern.get("hbm_gbps") if isinstance(kern, dict) else None
    if isinstance(hbm, (int, float)) and not isinstance(hbm, bool) and hbm > 0 and isinstance(kern.get("ops"), dict):
        ops = {op: ({**spec, "bw_gbps": min(spec["bw_gbps"], hbm)}
                    if isinstance(spec, dict) and isinstance(spec.get("bw_gbps"), (int, float)) else spec)
               for op, spec in kern["ops"].items()}
        out["kernels"] = {**kern, "ops": ops}
    return out


# -- point vs replicate consistency (run on load by profile.profile_from_dict) ------------------------------------
EDGE_TOLERANCE = 0.05  # of the replicates' range: N = 100 uniform draws up to the point leave a gap > 5% with p = 0.6%
_REGIME_PARAMS = ("alpha_base_us", "alpha_per_peer_us", "alpha_per_node_us", "busbw_gbps")
_OP_PARAMS = ("launches", "fixed_us", "bw_gbps")
_KERNEL_SCALARS = ("graph_kernel_us", "eager_launch_us")


def _curve_key(c: Any) -> tuple:
    if not isinstance(c, dict):
        return ()
    return (*(c.get(k) for k in ("op", "world_size", "mode", "nodes")), c.get("impl") or "nccl")


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _point_params(data: dict[str, Any]) -> dict[tuple, float]:
    """{(path...): value} of every point parameter a replicate may also carry."""
    out: dict[tuple, float] = {}
    for c in data.get("collectives") or []:
        key = _curve_key(c)
        for j, r in enumerate(c.get("regimes") or [] if isinstance(c, dict) else []):
            for p in _REGIME_PARAMS:
                if isinstance(r, dict) and _is_num(r.get(p)):
                    out[("collectives", key, len(c["regimes"]), j, p)] = float(r[p])
    kern = data.get("kernels") if isinstance(data.get("kernels"), dict) else {}
    for p in _KERNEL_SCALARS:
        if _is_num(kern.get(p)):
            out[("kernels", p)] = float(kern[p])
    for op, spec in (kern.get("ops") or {}).items() if isinstance(kern.get("ops"), dict) else ():
        for p in _OP_PARAMS:
            if isinstance(spec, dict) and _is_num(spec.get(p)):
                out[("ops", op, p)] = float(spec[p])
    return out


def _label(path: tuple) -> str:
    if path[0] == "collectives":
        (op, ws, mode, nodes), _, j, p = path[1][:4], path[2], path[3], path[4]
        scope = f"p={ws}" if ws is not None else "any p"
        return f"{op} [{scope}, {mode or 'graph+eager'}{'' if nodes is None else f', {nodes} node(s)'}] regime {j} {p}"
    if path[0] == "kernels":
        return f"kernels.{path[1]}"
    return f"kernels.ops.{path[1]}.{path[2]}"


def check_replicates(data: dict[str, Any], source: str = "profile", *, rel_tol: float = 1e-6) -> None:
    """Refuse (InputError, one line) a profile whose bootstrap replicates contradict its point parameters.

    For every point parameter that at least 2 replicates also carry (curves matched by (op,
    world_size, mode, nodes) and the same number of regimes), the point value must lie inside the
    replicates' [min, max], give or take EDGE_TOLERANCE of the range (a derived ensemble drawn
    uniformly up to its point value touches the edge) or `rel_tol` of the value.
    """
    reps = data.get("bootstrap") or []
    if len(reps) < 2:
        return
    point = _point_params(data)
    values: dict[tuple, list[float]] = {}
    for rep in reps:
        if not isinstance(rep, dict):
            continue
        sub = {"collectives": rep.get("collectives") or [], "kernels": rep.get("kernels") or {}}
        for path, v in _point_params(sub).items():
            values.setdefault(path, []).append(v)
    for path, v in point.items():
        got = values.get(path)
        if not got or len(got) < 2:
            continue
        lo, hi = min(got), max(got)
        tol = max(rel_tol * max(abs(lo), abs(hi), 1e-12), EDGE_TOLERANCE * (hi - lo))
        if not lo - tol <= v <= hi + tol:
            raise InputError(f"{source}: bootstrap replicates contradict the point estimate: {_label(path)} = {v:g} "
                             f"lies outside the replicates' range [{lo:g}, {hi:g}]")


# -- model discrepancy ----------------------------------------------------------------------------------------------
Z90 = 1.6448536269514722  # standard normal 95th percentile: p90 of |z| = Z90 * sigma
Z75 = 0.6744897501960817  # standard normal 75th percentile: median of |z| = Z75 * sigma
PRIOR_SIGMA_LOG = 0.3  # ops of a kind without any data in the profile (a stated prior, not a measurement)
# host launch costs: repeat eager runs of the H200 probe agreed within +-25% (p10-p90;
# ../shared/measurements/h200-2026-11-30/README.md), so log(1.25) = 1.645 sigma
HOST_SIGMA_LOG = math.log(1.25) / Z90
PRIOR_MEMBERS = 100  # ensemble size for a profile without replicates (discrepancy draws only)
INTER = "@inter"  # key suffix of a collective's inter-node discrepancy (rows with nodes > 1)
_N_Z = 25  # discrepancy draws per replicate (normal quantiles, deterministic)
_Z = None


def _z_draws() -> np.ndarray:
    global _Z
    if _Z is None:
        from scipy.stats import norm

        _Z = norm.ppf((np.arange(_N_Z) + 0.5) / _N_Z)
    return _Z


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


def param_log_variance(frame: pd.DataFrame, profile: Profile) -> np.ndarray:
    """Per row, the variance over the profile's replicates of log(predicted_us) (0 without replicates)."""
    key = (id(profile), id(frame), len(frame))
    hit = _PARAM_VAR_CACHE.get(key)
    if hit is not None:
        return hit
    reps = replicate_profiles(profile)
    if not reps or not len(frame):
        out = np.zeros(len(frame))
    else:
        logs = np.stack([np.log(predict_points(frame, rep)["predicted_us"].to_numpy(float)) for rep in reps])
        out = np.nan_to_num(np.var(logs, axis=0), nan=0.0, posinf=0.0)
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


def residual_pool(table: pd.DataFrame) -> ResidualPool:
    """The pool of a `validate` table (column `ref_set`, else `validate.reference_set`): rows of a collective
    op whose profile did not fit it (no fit-report sigma for the op: its parameters are derived), held out
    (`used_in_profile` false) and not priced by their table's own host floor (there predicted = the floor,
    the table's own median below 64 KiB per rank: no evidence about the model)."""
    from .profile import load_profile
    from .validate import reference_set

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
            pv[mine] = param_log_variance(table[mine], prof)
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
    import hashlib
    from pathlib import Path

    from .profile import PROFILE_DIR
    from .validate import REFERENCE_DIR

    h = hashlib.sha256()
    for path in sorted([*Path(REFERENCE_DIR).glob("*.csv"), *Path(PROFILE_DIR).glob("*.json"),
                        *Path(__file__).parent.rglob("*.py")]):
        h.update(str(path.name).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _cache_dir():
    import os
    from pathlib import Path

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
    import json
    import os

    fingerprint = _pool_fingerprint()
    path = _cache_dir() / f"discrepancy-pool-{fingerprint[:32]}.json"
    pool = None
    try:
        pool = ResidualPool.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        pool = None
    if pool is None:
        from .validate import load_reference, reference_files, validate

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


def point_intervals(frame: pd.DataFrame, profile: Profile, *, level: float = 0.9,
                    predicted_us: np.ndarray | None = None, disc: Discrepancy | None = None,
                    floor_us: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) central `level` prediction interval of every measurement row (see the module doc).

    Draws: log(max(floor, predicted * t_replicate / t_point)) + sigma_op z over replicates x
    discrepancy quantiles; predicted_us defaults to the profile's point prediction; floor_us (e.g.
    a host floor, NaN = none) bounds every member's prediction from below before the discrepancy.
    """
    point = predict_points(frame, profile)["predicted_us"].to_numpy(float)
    base = point if predicted_us is None else np.asarray(predicted_us, dtype=float)
    disc = disc or discrepancy(profile)
    nodes = numeric_column(frame, "nodes", 1.0)
    ops = frame["op"].astype(str).to_numpy()
    combos, inverse = np.unique(np.char.add(ops, np.where(nodes > 1, INTER, "")), return_inverse=True)
    sig = np.array([disc.sigma(c.removesuffix(INTER), 2 if c.endswith(INTER) else 1) for c in combos])[inverse]
    reps = replicate_profiles(profile)
    shifts = [np.log(predict_points(frame, rep)["predicted_us"].to_numpy(float) / point) for rep in reps] or \
        [np.zeros(len(frame))]
    rel = np.nan_to_num(np.stack(shifts), nan=0.0, posinf=0.0, neginf=0.0)  # (R, n)
    z = _z_draws()
    tail = (1 - level) / 2 * 100
    lo = np.empty(len(frame))
    hi = np.empty(len(frame))
    chunk = max(1, 2_000_000 // (rel.shape[0] * len(z)))
    for start in range(0, len(frame), chunk):
        sl = slice(start, start + chunk)
        member = base[sl][None, :] * np.exp(rel[:, sl])  # (R, n): each ensemble member's prediction
        if floor_us is not None:  # e.g. a host floor: part of the prediction the discrepancy then applies to
            member = np.fmax(member, np.asarray(floor_us, dtype=float)[None, sl])
        draws = np.log(member)[:, None, :] + sig[None, None, sl] * z[None, :, None]
        draws = np.exp(draws.reshape(-1, draws.shape[-1]))
        lo[sl], hi[sl] = np.percentile(draws, [tail, 100 - tail], axis=0)
    return lo, hi


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    level: float

    def straddles_zero(self) -> bool:
        return self.low < 0 < self.high

    def to_dict(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high, "level": self.level}


@dataclass(frozen=True)
class StrategyUncertainty:
    strategy: str
    saving_us: Interval
    saving_per_decode_step_us: Interval
    crossover_batch: Interval | None
    crossover_found_fraction: float  # share of replicates with a crossover in range
    verdict: str  # "faster" | "slower" | "uncertain"

    def to_dict(self) -> dict[str, Any]:
        return {"saving_per_draft_step_us": self.saving_us.to_dict(),
                "saving_per_decode_step_us": self.saving_per_decode_step_us.to_dict(),
                "crossover_batch": None if self.crossover_batch is None else self.crossover_batch.to_dict(),
                "crossover_found_fraction": self.crossover_found_fraction, "verdict": self.verdict}


def _interval(values: np.ndarray, level: float) -> Interval:
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return Interval(float(lo), float(hi), level)


def propagate(scenario: Scenario, profile: Profile, *, level: float = 0.9, with_crossover: bool = True,
              strategies: tuple[str, ...] = STRATEGIES[1:], batch_range: tuple[float, float] = (1.0, 65536.0),
              grid_points: int = 257, with_discrepancy: bool = True) -> dict[str, StrategyUncertainty]:
    """Prediction intervals of every strategy's saving (and crossover): replicates x per-op discrepancy.

    Each ensemble member (a bootstrap replicate, or the point profile PRIOR_MEMBERS times when it has
    none) gets independent per-op discrepancy factors (module doc; with_discrepancy=False: parameter
    uncertainty only). Each member is priced once over a
    log batch grid (plus the scenario's batch); its first crossover is located by linear
    interpolation in log batch (`grid_roots`), within one grid step (4.4%) of brentq.
    """
    if scenario.size != 1:
        raise InputError("uncertainty needs a single scenario")
    reps, factors, _ = ensemble(profile, nodes=int(scenario.nodes), with_discrepancy=with_discrepancy)
    lo, hi = batch_range
    grid = np.geomspace(lo, hi, grid_points) if with_crossover else np.empty(0)
    batches = np.append(grid, np.broadcast_to(scenario.batch, (1,)))  # last = the scenario's own batch
    swept = scenario.item(0).with_(batch=batches)
    from .members import predict_members  # every member in one evaluation: row m = predict(swept, reps[m], ...)

    priced = predict_members(swept, reps, (BASELINE, *strategies), factors)
    savings, decode = {}, {}
    roots: dict[str, list[float]] = {s: [] for s in strategies}
    for s in strategies:
        values = priced.saving_us(s)  # (members, batches)
        savings[s], decode[s] = values[:, -1], priced.saving_per_decode_step_us(s)[:, -1]
        if with_crossover:
            for row in values[:, :-1]:
                found = grid_roots(grid, row)
                if found:
                    roots[s].append(found[0])
    out = {}
    for s in strategies:
        saving = _interval(np.asarray(savings[s]), level)
        if saving.low > 0:
            verdict = "faster"
        elif saving.high < 0:
            verdict = "slower"
        else:
            verdict = "uncertain"
        found = len(roots[s]) / len(reps)
        out[s] = StrategyUncertainty(s, saving, _interval(np.asarray(decode[s]), level),
                                     _interval(np.asarray(roots[s]), level) if roots[s] else None, found, verdict)
    return out
