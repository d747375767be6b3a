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
sigma^2)) is estimated (`discrepancy`): the profile's own `discrepancy` object if any; else for
fitted profiles (and the GPU kernel model's `kernels.model_cv`, on its own GPU) the
cross-validated residuals of its fit report (sigma = the mean of p90 / 1.645
and median / 0.674 of the leave-one-out |relative error| - |log error| to second order, averaged
over both signs - which holds measurement noise and model error; RMS over the op's groups) and,
for derived profiles, the spread against the published / measured reference rows that name the
profile and were not used to build it (RMS of log(predicted / measured), bias included, minus
the part the ensemble's own spread already explains), the larger of the two; ops without data
take the largest sigma of their kind (collective / kernel) in the profile, else
PRIOR_SIGMA_LOG. Each ensemble member gets independent per-op factors exp(sigma_op z), so the
efficiencies of different ops vary independently.

Intervals: the central `level` (default 90%) of the pooled replicate x discrepancy distribution -
of each saving and crossover batch (`propagate`) or of each measurement row (`point_intervals`).
A verdict is "uncertain" when the saving's interval straddles zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError
from .points import predict_points
from .predict import grid_roots, predict
from .profile import Profile, bundled_profiles, profile_from_dict
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
        data = {k: v for k, v in profile.raw.items() if k != "bootstrap"}  # profile_from_dict never mutates
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
MIN_RESIDUALS = 3  # rows of an op needed to estimate its sigma from reference residuals
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
        known = [v for k, v in self.sigma_log.items() if (k in COLLECTIVE_OPS) == coll and k != "host"]
        return max(known) if known else PRIOR_SIGMA_LOG

    def describe(self, op: str, nodes: int = 1) -> str:
        key = f"{op}{INTER}" if nodes > 1 and f"{op}{INTER}" in self.source else op
        if key in self.source:
            return self.source[key]
        return "largest sigma of its kind in this profile" if self.sigma(op, nodes) != PRIOR_SIGMA_LOG else \
            f"prior sigma {PRIOR_SIGMA_LOG} (no data)"


def sigma_from_residuals(log_residuals: np.ndarray) -> float:
    """RMS of log(predicted / measured): spread and bias together (a biased model needs wider intervals)."""
    x = np.asarray(log_residuals, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.sqrt(np.mean(x * x))) if x.size else float("nan")


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


def reference_sigmas(table: pd.DataFrame, exclude_files: tuple[str, ...] = (),
                     param_var: np.ndarray | None = None) -> dict[str, tuple[float, int]]:
    """Per op, from a `validate.validate` table: (sigma, n) over held-out rows not in `exclude_files`.

    sigma^2 = mean(log residual^2) - mean(param_var): the part of the observed error the ensemble's own
    spread (param_var: per-row variance of log prediction over the replicates) does not already explain,
    so parameter spread and discrepancy are not counted twice (>= 0).
    """
    keep = ~table["used_in_profile"].astype(bool).to_numpy()
    if exclude_files and "file" in table.columns:
        keep &= ~table["file"].isin(exclude_files).to_numpy()
    rows = table[keep]
    pv = np.zeros(len(rows)) if param_var is None else np.asarray(param_var, dtype=float)[keep]
    out = {}
    log_res = np.log(rows["predicted_us"].to_numpy(float) / rows["median_us"].to_numpy(float))
    ops = rows["op"].astype(str).to_numpy()
    inter = np.isin(ops, COLLECTIVE_OPS) & (pd.to_numeric(rows["nodes"], errors="coerce").fillna(1).to_numpy() > 1) \
        if "nodes" in rows.columns else np.zeros(len(rows), dtype=bool)
    keys = np.where(inter, np.char.add(ops, INTER), ops)
    for key in np.unique(keys):
        m = (keys == key) & np.isfinite(log_res)
        if m.sum() >= MIN_RESIDUALS:
            total = sigma_from_residuals(log_res[m]) ** 2
            out[str(key)] = (float(np.sqrt(max(total - float(np.mean(pv[m])), 0.0))), int(m.sum()))
    return out


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
_REFERENCE_CACHE: dict[str, pd.DataFrame] = {}


def _reference_table(profile: Profile) -> pd.DataFrame | None:
    """The bundled reference rows that name `profile`, priced by validate (cached per profile name)."""
    if profile.name in _REFERENCE_CACHE:
        return _REFERENCE_CACHE[profile.name]
    from .validate import load_reference, reference_files, validate

    try:
        ref = load_reference(reference_files())
        ref = ref[ref["profile"] == profile.name]
        table = validate(ref) if len(ref) else None
    except InputError:
        table = None
    _REFERENCE_CACHE[profile.name] = table
    return table


def discrepancy(profile: Profile, *, exclude_files: tuple[str, ...] = (),
                reference: pd.DataFrame | None = None) -> Discrepancy:
    """Per-op discrepancy sigma (module doc): profile `discrepancy` > fit report / reference residuals (larger).

    reference: a `validate` table to estimate from (default: the bundled reference rows naming the
    profile, when the profile is a bundled one); exclude_files: reference files left out (coverage
    is scored on a file whose rows did not set the sigma).
    """
    sigma: dict[str, float] = {"host": HOST_SIGMA_LOG}
    source: dict[str, str] = {"host": "H200 probe eager repeat spread +-25% (p10-p90)"}
    for op, v in fit_report_sigmas(profile).items():
        sigma[op], source[op] = v, "fit report: leave-one-out p90 |error|"
    for op, v in model_cv_sigmas(profile).items():
        if v > sigma.get(op, 0.0):
            sigma[op], source[op] = v, "GPU kernel model: leave-one-batch / one-vocab-out error (kernels.model_cv)"
    if reference is None and profile.name in bundled_profiles() and profile.provenance.kind != "measured":
        reference = _reference_table(profile)
    if reference is not None and len(reference):
        pv = param_log_variance(reference, profile)
        for op, (v, n) in reference_sigmas(reference, exclude_files, pv).items():
            if v > sigma.get(op, 0.0) or op not in source:
                sigma[op], source[op] = v, (f"spread vs {n} held-out reference rows (RMS log error beyond the "
                                            "ensemble's own spread)")
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
    nodes = (pd.to_numeric(frame["nodes"], errors="coerce").fillna(1).astype(int).to_numpy() if "nodes" in frame.columns
             else np.ones(len(frame), dtype=int))
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
    savings = {s: [] for s in strategies}
    decode = {s: [] for s in strategies}
    roots: dict[str, list[float]] = {s: [] for s in strategies}
    for rep, fac in zip(reps, factors, strict=True):
        pred = predict(swept, rep, (BASELINE, *strategies), factors=fac)
        for s in strategies:
            values = pred.saving_us(s)
            savings[s].append(float(values[-1]))
            decode[s].append(float(pred.saving_per_decode_step_us(s)[-1]))
            if with_crossover:
                found = grid_roots(grid, values[:-1])
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
