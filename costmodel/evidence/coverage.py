"""Do the 90% intervals cover 90% of real measurements? Coverage per reference set, held out.

`interval_coverage` prices every reference row's interval (`costmodel.evidence.point_intervals`) with the
pooled discrepancy fitted leave-one-set-out (a set's own rows, and those of every set from the same run, never set
its sigma). `binomial_range(n)` is the central 90% acceptance range of the covered count for n rows at a true
coverage of 90%: a set is "consistent with 90%" when its count lies inside it, "too wide" above, "too narrow"
below.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pandas as pd

from ..model.points import floor_priced, numeric_column, predict_points
from ..profiles.replicates import replicate_profiles
from ..profiles.store import load_profile
from .discrepancy import bundled_pool, discrepancy
from .point_intervals import point_intervals
from .reference import reference_files, reference_set
from .residuals import replicate_us, residual_pool

COVERAGE_TARGET = (0.80, 0.95)  # empirical coverage wanted of the nominal 90% intervals (issue 9)


def interval_coverage(table: pd.DataFrame, level: float = 0.9, pool=None) -> pd.DataFrame:
    """`table` (a `validate` result) with `predicted_p05_us`, `predicted_p95_us` and `covered` per row.

    The interval of a row in reference set R uses a discrepancy estimated without R's rows and without
    the rows of any set measured in the same run (leave-one-set-out; `uncertainty.discrepancy`), so
    coverage is scored out of sample. pool (an `uncertainty.ResidualPool`): default the pool of `table`
    itself plus the bundled reference rows of every set `table` does not hold (a user's own reference
    file is scored against all the bundled evidence, as the bundled sets are).
    """
    out = table.copy()
    out["ref_set"] = reference_set(out)
    # each profile's point and replicate predictions of all its rows, priced once (a row's prediction depends on
    # that row alone) and sliced for the pool and for each reference set
    point = np.full(len(out), np.nan)
    replicates: dict[str, np.ndarray] = {}
    for name in out["profile_used"].unique():
        prof = load_profile(name)
        mine = (out["profile_used"] == name).to_numpy()
        rows = out[mine]
        point[mine] = predict_points(rows, prof)["predicted_us"].to_numpy(float)
        replicates[name] = np.full((len(replicate_profiles(prof)), len(out)), np.nan)
        replicates[name][:, mine] = replicate_us(rows, prof)
    if pool is None:
        pool = residual_pool(out, replicates)
        files = set(out["file"].astype(str)) if "file" in out.columns else set()
        if not {path.name for path in reference_files()} <= files:
            pool = pool + bundled_pool().without_sets(set(out["ref_set"].astype(str)))
    lo = np.full(len(out), np.nan)
    hi = np.full(len(out), np.nan)
    sig = np.full(len(out), np.nan)
    for name in out["profile_used"].unique():
        prof = load_profile(name)
        mine = (out["profile_used"] == name).to_numpy()
        for ref_name in out.loc[mine, "ref_set"].unique():
            sel = mine & (out["ref_set"] == ref_name).to_numpy()
            rows = out[sel]
            disc = discrepancy(prof, exclude_files=(ref_name,), pool=pool)
            nodes = numeric_column(rows, "nodes", 1.0)
            sig[sel] = [disc.sigma(op, int(n)) for op, n in zip(rows["op"].astype(str), nodes, strict=True)]
            floor = numeric_column(rows, "host_floor_us") if "host_floor_us" in rows.columns else None
            lo[sel], hi[sel] = point_intervals(rows, prof, level=level, disc=disc, floor_us=floor,
                                               predicted_us=rows["predicted_us"].to_numpy(float),
                                               priced=(point[sel], replicates[name][:, sel]))
    out["predicted_p05_us"], out["predicted_p95_us"] = lo, hi
    out["discrepancy_sigma"] = sig  # the log sigma the row's interval drew its model discrepancy with
    out["covered"] = (out["median_us"] >= lo) & (out["median_us"] <= hi)
    out["floor_priced"] = floor_priced(out)  # priced by the table's own host floor, not by the model
    return out


def _binomial_ppf(q: float, n: int, p: float) -> int:
    """The smallest k with P(Binomial(n, p) <= k) >= q, from the exact CDF in integers: p as the fraction a/d it
    stands for (limit_denominator: 0.9 -> 9/10), so P(X <= k) = sum_i C(n, i) a^i (d - a)^(n - i) / d^n. What
    scipy.stats.binom.ppf returns (tests/evidence compares them for n = 0..400), without importing scipy.stats
    (~0.6 s) for a few hundred rows."""
    frac = Fraction(p).limit_denominator(10**6)
    a, d = frac.numerator, frac.denominator
    target = Fraction(q) * d**n  # P(X <= k) >= q  <=>  sum_i C(n, i) a^i (d - a)^(n - i) >= q d^n
    acc = 0
    for k in range(n + 1):
        acc += comb(n, k) * a**k * (d - a) ** (n - k)
        if acc >= target:
            return k
    return n


def binomial_range(n: int, level: float = 0.9, coverage: float = 0.9) -> tuple[int, int]:
    """The central `level` acceptance range [lo, hi] of the covered count of n rows whose intervals cover
    with probability `coverage` (Binomial(n, coverage): lo = its 5th, hi = its 95th percentile at 90%)."""
    return _binomial_ppf((1 - level) / 2, n, coverage), _binomial_ppf((1 + level) / 2, n, coverage)


def _verdict(covered: int, lo: int, hi: int) -> str:
    """Whether `covered` lies in the binomial acceptance range [lo, hi] (`binomial_range`)."""
    if covered < lo:
        return "no: too narrow"
    if covered > hi:
        return "no: too wide"
    return "yes"


def coverage_summary(covered: pd.DataFrame) -> pd.DataFrame:
    """Per (reference set, in-sample/held-out): n, the empirical coverage of the 90% intervals, the 90%
    acceptance range of the covered count at true coverage 90% (`binomial_range`) and whether the set is
    consistent with 90%, the median width p95/p05 and the median discrepancy sigma (log) the rows' intervals
    drew; then pooled rows over every held-out row ("all held-out"; its rows are not
    independent - sets share a profile - so its range is a guide, not a test), split into rows the model
    priced and rows priced at their nccl-tests table's own host floor (`floor_priced`, see `validate`)."""
    check = np.where(covered["used_in_profile"], "in-sample", "held-out")
    frame = covered.assign(check=check)

    def row(ref: str, chk: str, g: pd.DataFrame) -> dict:
        n, k = len(g), int(g["covered"].sum())
        lo, hi = binomial_range(n)
        return {"reference_set": ref, "profile": ", ".join(sorted(g["profile_used"].unique())), "check": chk,
                "n": n, "covered": k, "coverage_90": k / n, "binomial_90_range": f"{lo}-{hi}",
                "consistent_with_90": _verdict(k, lo, hi),
                "median_width_ratio": float(np.median(g["predicted_p95_us"] / g["predicted_p05_us"])),
                "median_sigma": (float(np.nanmedian(g["discrepancy_sigma"])) if "discrepancy_sigma" in g.columns
                                 and g["discrepancy_sigma"].notna().any() else np.nan)}

    rows = [row(ref, chk, g) for (ref, chk), g in frame.groupby(["ref_set", "check"], sort=True)]
    held = frame[frame["check"] == "held-out"]
    floor = held["floor_priced"].astype(bool) if "floor_priced" in held.columns else pd.Series(False, held.index)
    for name, part in (("all held-out", held), ("all held-out, priced by the model", held[~floor]),
                       ("all held-out, priced at the table's host floor", held[floor])):
        if len(part):
            rows.append({**row(name, "held-out", part), "profile": "(pooled)"})
    return pd.DataFrame(rows, columns=["reference_set", "profile", "check", "n", "covered", "coverage_90",
                                       "binomial_90_range", "consistent_with_90", "median_width_ratio",
                                       "median_sigma"])


def format_coverage(summ: pd.DataFrame) -> str:
    lo, hi = COVERAGE_TARGET
    head = (f"90% prediction intervals: empirical coverage per reference set (target {lo:.0%}-{hi:.0%}; "
            "discrepancy estimated without the set's own rows and its run's other sets; binomial_90_range: "
            "the covered count expected 90% of the time if the true coverage were 90%)")
    return head + "\n" + summ.to_string(index=False, float_format=lambda x: f"{x:.3f}")
