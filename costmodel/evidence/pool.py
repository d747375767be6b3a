"""The residual pool's plain parts (numpy only): the pool itself (`ResidualPool`), the split-conformal sigma of its
rows (`conformal_sigma`, `pooled_sigmas`), the run a reference row came from (`machine_key`) and the fit report's
per-op sigmas (`fit_report_sigmas`). `costmodel.evidence.discrepancy` explains the method; building a pool from a
`validate` table (pandas) is `costmodel.evidence.residuals`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ..profiles.consistency import _is_num
from ..profiles.types import Profile

Z90 = 1.6448536269514722  # standard normal 95th percentile: p90 of |z| = Z90 * sigma
Z75 = 0.6744897501960817  # standard normal 75th percentile: median of |z| = Z75 * sigma
INTER = "@inter"  # key suffix of a collective's inter-node discrepancy (rows with nodes > 1)


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
