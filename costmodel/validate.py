"""Validation: predict every reference point with its matching profile and report the error.

relative error = (predicted - measured) / measured. Per source file (and overall),
the median and p90 of |relative error|. Rows whose figure the profile was built
from (`used_in_profile`) are reported but kept apart: they are in-sample checks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .collectives import bus_factor, total_bytes
from .errors import InputError, first_line
from .points import predict_points
from .profile import DATA_DIR, load_profile
from .schema import validate_measurements

REFERENCE_DIR = DATA_DIR / "reference"
_NEEDED = ("op", "mode", "world_size", "gpu", "source")


def reference_files(directory: str | Path = REFERENCE_DIR) -> list[Path]:
    return sorted(Path(directory).glob("*.csv"))


def load_reference(paths: list[str | Path]) -> pd.DataFrame:
    """Concatenate reference CSVs; convert busbw figures to times (t = S * f(p) / busbw)."""
    frames = []
    for path in paths:
        path = Path(path)
        try:
            frame = pd.read_csv(path)
        except (FileNotFoundError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot read reference CSV ({first_line(exc)})") from None
        missing = [c for c in _NEEDED if c not in frame.columns]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
        frame = frame.copy()
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
        prof = load_profile(name)
        part = predict_points(rows, prof)
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


# -- interval coverage (costmodel.uncertainty) ------------------------------------------------------------------
COVERAGE_TARGET = (0.80, 0.95)  # empirical coverage wanted of the nominal 90% intervals (issue 9)


def reference_set(table: pd.DataFrame) -> pd.Series:
    """The reference set of every row: its `table` where given (one nccl-tests table), else its file."""
    if "table" not in table.columns:
        return table["file"].astype(str)
    named = table["table"].notna() & (table["table"].astype(str) != "")
    return table["table"].astype(str).where(named, table["file"].astype(str))


def interval_coverage(table: pd.DataFrame, level: float = 0.9) -> pd.DataFrame:
    """`table` (a `validate` result) with `predicted_p05_us`, `predicted_p95_us` and `covered` per row.

    The interval of a row in reference set R uses a discrepancy estimated without R's rows
    (leave-one-set-out; `uncertainty.discrepancy`), so coverage is scored out of sample.
    """
    from .uncertainty import discrepancy, point_intervals

    out = table.copy()
    out["ref_set"] = reference_set(out)
    lo = np.full(len(out), np.nan)
    hi = np.full(len(out), np.nan)
    for name in out["profile_used"].unique():
        prof = load_profile(name)
        mine = (out["profile_used"] == name).to_numpy()
        ref = out[mine].assign(file=out.loc[mine, "ref_set"])  # exclude by reference set
        for ref_name in ref["file"].unique():
            sel = mine & (out["ref_set"] == ref_name).to_numpy()
            rows = out[sel]
            disc = discrepancy(prof, exclude_files=(ref_name,), reference=ref)
            floor = (pd.to_numeric(rows["host_floor_us"], errors="coerce").to_numpy(float)
                     if "host_floor_us" in rows.columns else None)
            lo[sel], hi[sel] = point_intervals(rows, prof, level=level, disc=disc, floor_us=floor,
                                               predicted_us=rows["predicted_us"].to_numpy(float))
    out["predicted_p05_us"], out["predicted_p95_us"] = lo, hi
    out["covered"] = (out["median_us"] >= lo) & (out["median_us"] <= hi)
    return out


def coverage_summary(covered: pd.DataFrame) -> pd.DataFrame:
    """Per (reference set, in-sample/held-out): n and the empirical coverage of the 90% intervals."""
    check = np.where(covered["used_in_profile"], "in-sample", "held-out")
    rows = []
    for (ref, chk), g in covered.assign(check=check).groupby(["ref_set", "check"], sort=True):
        rows.append({"reference_set": ref, "profile": ", ".join(sorted(g["profile_used"].unique())), "check": chk,
                     "n": len(g), "coverage_90": float(g["covered"].mean()),
                     "median_width_ratio": float(np.median(g["predicted_p95_us"] / g["predicted_p05_us"]))})
    return pd.DataFrame(rows, columns=["reference_set", "profile", "check", "n", "coverage_90", "median_width_ratio"])


def format_coverage(summ: pd.DataFrame) -> str:
    lo, hi = COVERAGE_TARGET
    head = (f"90% prediction intervals: empirical coverage per reference set (target {lo:.0%}-{hi:.0%}; "
            "discrepancy estimated without the set's own rows)")
    return head + "\n" + summ.to_string(index=False, float_format=lambda x: f"{x:.3f}")
