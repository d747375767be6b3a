"""Validation: predict every reference point with its matching profile and report the error.

relative error = (predicted - measured) / measured. Per source file (and overall),
the median and p90 of |relative error|. Rows whose figure the profile was built
from (`used_in_profile`) are reported but kept apart: they are in-sample checks.

Reference rows priced as their run executed:
* `nccl_algo` "ring" (NCCL_ALGO=RING / NVLS off): the profile without its NVLS regimes.
* `host_floor_us` (nccl-tests tables): nccl-tests times back-to-back launches with no sync in
  between, so an iteration costs max(host launch time, device time); predicted =
  max(host_floor_us, graph-mode prediction). The floor is the table's own median time
  below TABLE_MIN_BYTES_PER_RANK (calibration.import_nccl_tests), i.e. outside the rows
  `table_errors` scores.
`table_errors` gives n, median and p90 |error| per reference table from
TABLE_MIN_BYTES_PER_RANK up (target for derived profiles: median <= TABLE_TARGET_MEDIAN).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from .collectives import bus_factor, total_bytes, without_regimes
from .errors import InputError, first_line
from .points import floor_priced, numeric_column, predict_points
from .profile import DATA_DIR, load_profile
from .safe_io import read_bytes
from .schema import MAX_MEASUREMENT_BYTES, validate_measurements

REFERENCE_DIR = DATA_DIR / "reference"
# regimes a reference row with nccl_algo "ring" cannot have used (NVLS, and across nodes Tree / NVLS-Tree)
RING_ONLY_DROPS = frozenset({"NVLS", "NVLSTree", "Tree-LL", "Tree-LL128", "Tree-Simple"})
TABLE_MIN_BYTES_PER_RANK = 64 * 1024  # per-table error target applies from 64 KiB per rank up
TABLE_TARGET_MEDIAN = 0.15  # derived profiles: median |error| per published table (issue 9)
_NEEDED = ("op", "mode", "world_size", "gpu", "source")


def reference_files(directory: str | Path = REFERENCE_DIR) -> list[Path]:
    return sorted(Path(directory).glob("*.csv"))


def load_reference(paths: list[str | Path]) -> pd.DataFrame:
    """Concatenate reference CSVs; convert busbw figures to times (t = S * f(p) / busbw)."""
    frames = []
    for path in paths:
        path = Path(path)
        data = read_bytes(path, limit_bytes=MAX_MEASUREMENT_BYTES, what="reference")  # stat first, bounded
        try:
            frame = pd.read_csv(io.BytesIO(data), index_col=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"{path}: cannot read reference CSV ({first_line(exc)})") from None
        missing = [c for c in _NEEDED if c not in frame.columns]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
        # integer columns checked before the busbw conversion uses them (a text world_size is one error line)
        frame = validate_measurements(frame, source=str(path), require_times=False)
        if "median_us" not in frame.columns:
            frame["median_us"] = np.nan
        if "busbw_gbps" in frame.columns:
            bw = pd.to_numeric(frame["busbw_gbps"], errors="coerce")
            need = frame["median_us"].isna() & bw.notna()
            for op in frame.loc[need, "op"].unique():
                m = need & (frame["op"] == op)
                p = frame.loc[m, "world_size"].to_numpy(float)
                size = total_bytes(op, frame.loc[m, "bytes_per_rank"].to_numpy(float), p)
                frame.loc[m, "median_us"] = size * bus_factor(op, p) / bw[m].to_numpy() * 1e-3
        frame["file"] = path.name
        frames.append(validate_measurements(frame, source=str(path)))
    if not frames:
        raise InputError("validate: no reference CSV files found")
    out = pd.concat(frames, ignore_index=True)
    if "used_in_profile" not in out.columns:
        out["used_in_profile"] = False
    out["used_in_profile"] = out["used_in_profile"].astype(str).str.lower().isin(["true", "1", "yes"])
    if "profile" not in out.columns:
        out["profile"] = ""
    return out


def validate(reference: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """Rows of `reference` with `predicted_us` and `rel_error` (each with its own profile unless one is given)."""
    frames = []
    names = [profile] if profile else [p for p in reference["profile"].fillna("").unique() if p]
    for name in names:
        rows = reference if profile else reference[reference["profile"] == name]
        floor = (pd.to_numeric(rows["host_floor_us"], errors="coerce") if "host_floor_us" in rows.columns
                 else pd.Series(np.nan, index=rows.index))
        if floor.notna().any():  # back-to-back launches: device time in graph mode, under the host floor
            rows = rows.assign(mode=rows["mode"].where(floor.isna(), "graph"))
        prof = load_profile(name)
        ring = (rows["nccl_algo"].astype(str) == "ring") if "nccl_algo" in rows.columns else None
        if ring is not None and ring.any():  # runs that forced NCCL_ALGO=RING / NVLS off: price them without NVLS
            part = pd.concat([predict_points(rows[~ring], prof),
                              predict_points(rows[ring], without_regimes(prof, RING_ONLY_DROPS))]).loc[rows.index]
        else:
            part = predict_points(rows, prof)
        if floor.notna().any():
            part["predicted_us"] = np.where(floor.notna(), np.fmax(part["predicted_us"], floor), part["predicted_us"])
            part["mode"] = reference.loc[part.index, "mode"]
        part["profile_used"] = prof.name
        frames.append(part)
    if not frames:
        raise InputError("validate: no reference row names a profile; pass --profile")
    out = pd.concat(frames, ignore_index=True)
    out["rel_error"] = (out["predicted_us"] - out["median_us"]) / out["median_us"]
    return out


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per (file, in-sample/held-out): n, median and p90 |relative error|, plus an overall row."""
    def agg(group: pd.DataFrame) -> pd.Series:
        err = group["rel_error"].abs()
        return pd.Series({"n": len(group), "median_abs_rel_error": err.median(),
                          "p90_abs_rel_error": err.quantile(0.9)})

    table = table.assign(check=np.where(table["used_in_profile"], "in-sample", "held-out"))
    parts = [table.groupby(["file", "check"]).apply(agg, include_groups=False).reset_index()]
    overall = agg(table[table["check"] == "held-out"]) if (table["check"] == "held-out").any() else None
    if overall is not None:
        parts.append(pd.DataFrame([{"file": "all", "check": "held-out", **overall.to_dict()}]))
    out = pd.concat(parts, ignore_index=True)
    out["n"] = out["n"].astype(int)
    return out


def format_validation(table: pd.DataFrame, summ: pd.DataFrame) -> str:
    cols = ["id" if "id" in table.columns else "op", "profile_used", "op", "mode", "world_size", "bytes_per_rank",
            "median_us", "predicted_us", "rel_error", "used_in_profile"]
    cols = list(dict.fromkeys(cols))
    view = table[cols].copy()
    view["rel_error"] = (100 * view["rel_error"]).map("{:+.1f}%".format)
    lines = [view.to_string(index=False, float_format=lambda x: f"{x:.1f}"), "",
             summ.to_string(index=False, float_format=lambda x: f"{x:.3f}")]
    return "\n".join(lines)


def table_errors(table: pd.DataFrame, min_bytes_per_rank: int = TABLE_MIN_BYTES_PER_RANK) -> pd.DataFrame:
    """Per reference table (column `table`, else the file), collectives at >= `min_bytes_per_rank`:
    n, n_in_sample, median and p90 |relative error| over the held-out rows (in-sample rows counted apart)."""
    coll = table[table["op"].isin(["all_gather", "all_reduce", "gather", "broadcast"])
                 & (table["bytes_per_rank"] >= min_bytes_per_rank)]
    key = coll["table"].where(coll["table"].notna() & (coll["table"].astype(str) != ""), coll["file"]) \
        if "table" in coll.columns else coll["file"]
    rows = []
    for name, group in coll.groupby(key, sort=True):
        held = group[~group["used_in_profile"]]["rel_error"].abs()
        rows.append({"table": name, "profile": ", ".join(sorted(group["profile_used"].unique())),
                     "n": len(held), "n_in_sample": int(group["used_in_profile"].sum()),
                     "median_abs_rel_error": held.median() if len(held) else np.nan,
                     "p90_abs_rel_error": held.quantile(0.9) if len(held) else np.nan})
    return pd.DataFrame(rows, columns=["table", "profile", "n", "n_in_sample", "median_abs_rel_error",
                                       "p90_abs_rel_error"])


def format_table_errors(table: pd.DataFrame, min_bytes_per_rank: int = TABLE_MIN_BYTES_PER_RANK) -> str:
    """`table_errors` as text: one line per reference table, held-out rows only, in-sample rows counted."""
    errors = table_errors(table, min_bytes_per_rank)
    errors = errors[(errors["n"] > 0) | (errors["n_in_sample"] > 0)]
    head = (f"per table, collectives at >= {min_bytes_per_rank // 1024} KiB per rank (held-out rows; target for "
            f"derived profiles: median <= {TABLE_TARGET_MEDIAN:.0%})")
    return head + "\n" + errors.to_string(index=False, float_format=lambda x: f"{x:.3f}")


# -- interval coverage (costmodel.uncertainty) ------------------------------------------------------------------
COVERAGE_TARGET = (0.80, 0.95)  # empirical coverage wanted of the nominal 90% intervals (issue 9)


def reference_set(table: pd.DataFrame) -> pd.Series:
    """The reference set of every row: its `table` where given (one nccl-tests table), else its file."""
    if "table" not in table.columns:
        return table["file"].astype(str)
    named = table["table"].notna() & (table["table"].astype(str) != "")
    return table["table"].astype(str).where(named, table["file"].astype(str))


def interval_coverage(table: pd.DataFrame, level: float = 0.9, pool=None) -> pd.DataFrame:
    """`table` (a `validate` result) with `predicted_p05_us`, `predicted_p95_us` and `covered` per row.

    The interval of a row in reference set R uses a discrepancy estimated without R's rows and without
    the rows of any set measured in the same run (leave-one-set-out; `uncertainty.discrepancy`), so
    coverage is scored out of sample. pool (an `uncertainty.ResidualPool`): default the pool of `table`
    itself plus the bundled reference rows of every set `table` does not hold (a user's own reference
    file is scored against all the bundled evidence, as the bundled sets are).
    """
    from .uncertainty import bundled_pool, discrepancy, point_intervals, residual_pool

    out = table.copy()
    out["ref_set"] = reference_set(out)
    if pool is None:
        pool = residual_pool(out)
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
                                               predicted_us=rows["predicted_us"].to_numpy(float))
    out["predicted_p05_us"], out["predicted_p95_us"] = lo, hi
    out["discrepancy_sigma"] = sig  # the log sigma the row's interval drew its model discrepancy with
    out["covered"] = (out["median_us"] >= lo) & (out["median_us"] <= hi)
    out["floor_priced"] = floor_priced(out)  # priced by the table's own host floor, not by the model
    return out


def binomial_range(n: int, level: float = 0.9, coverage: float = 0.9) -> tuple[int, int]:
    """The central `level` acceptance range [lo, hi] of the covered count of n rows whose intervals cover
    with probability `coverage` (Binomial(n, coverage): lo = its 5th, hi = its 95th percentile at 90%)."""
    from scipy.stats import binom

    lo, hi = binom.interval(level, n, coverage)
    return int(lo), int(hi)


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


def profiles_without_reference(table: pd.DataFrame) -> list[str]:
    """Bundled profiles that no reference row is priced with: for them no held-out (or any) check exists."""
    from .profile import bundled_profiles

    used = set(table["profile_used"].astype(str))
    return [name for name in bundled_profiles() if name not in used]


def profiles_without_held_out(table: pd.DataFrame) -> list[str]:
    """Profiles priced only on the figures they were built from (in-sample rows only)."""
    held = set(table.loc[~table["used_in_profile"], "profile_used"].astype(str))
    return sorted(set(table["profile_used"].astype(str)) - held)
