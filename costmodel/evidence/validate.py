"""Validation: predict every reference point with its matching profile and report the error.

relative error = (predicted - measured) / measured. Per source file (and overall),
the median and p90 of |relative error|. Rows whose figure the profile was built
from (`used_in_profile`: the reference table says so, or - `fitted_rows` - the row comes from a file the
profile was fitted on) are reported but kept apart: they are in-sample checks.

Reference rows priced as their run executed:
* `nccl_algo` "ring" (NCCL_ALGO=RING): the profile without its NVLS, Tree and NVLS-Tree regimes;
  "no-nvls" (NCCL_NVLS_ENABLE=0 only): without NVLS and NVLS-Tree - NCCL still picks Ring or Tree
  (tuning.cc ncclTopoTuneModel: NVLS off disables both NVLS algorithms, nothing else).
* `host_floor_us` (nccl-tests tables): nccl-tests times back-to-back launches with no sync in
  between, so an iteration costs max(host launch time, device time); predicted =
  max(host_floor_us, graph-mode prediction). The floor is the table's own median time
  below TABLE_MIN_BYTES_PER_RANK (calibration.import_nccl_tests), i.e. outside the rows
  `table_errors` scores.
`table_errors` gives n, median and p90 |error| per reference table from
TABLE_MIN_BYTES_PER_RANK up (target for derived profiles: median <= TABLE_TARGET_MEDIAN).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..io.errors import InputError
from ..model.collectives import without_regimes
from ..model.points import predict_points
from ..profiles.store import bundled_profiles, load_profile
from ..profiles.types import Profile

# regimes a reference row with nccl_algo "ring" cannot have used (NVLS, and across nodes Tree / NVLS-Tree)
RING_ONLY_DROPS = frozenset({"NVLS", "NVLSTree", "Tree-LL", "Tree-LL128", "Tree-Simple"})
# ... and one with nccl_algo "no-nvls" (NCCL_NVLS_ENABLE=0: Ring and Tree stay)
NO_NVLS_DROPS = frozenset({"NVLS", "NVLSTree"})
FORCED_DROPS = {"ring": RING_ONLY_DROPS, "no-nvls": NO_NVLS_DROPS}
TABLE_MIN_BYTES_PER_RANK = 64 * 1024  # per-table error target applies from 64 KiB per rank up
TABLE_TARGET_MEDIAN = 0.15  # derived profiles: median |error| per published table (issue 9)


def _same_file(path: str | Path, recorded: str) -> bool:
    """Whether `path` is the file a profile's provenance recorded as `recorded` (a path as given to the fitter):
    the same file from here, or - a relative record, the fit run elsewhere - `path` ends with it."""
    here = Path(path).resolve()
    record = Path(os.path.normpath(recorded))
    if here == record.resolve():
        return True
    parts = record.parts
    return not record.is_absolute() and ".." not in parts and here.parts[-len(parts):] == parts


def fitted_rows(rows: pd.DataFrame, prof: Profile, row_paths: Sequence[str] | None = None) -> np.ndarray:
    """Rows measured in a file `prof` was fitted on (`provenance.files`, as calibration.fit records its inputs):
    the row's reference file is one of them (`row_paths`: each row's file, as `cmd_validate.read_reference` gives
    them), or the row's `source` names one (a reference table citing the measurement, as data/reference/ does).
    Those rows are in-sample checks of `prof`, never held-out ones."""
    files = [f for f in prof.provenance.files if f]
    out = np.zeros(len(rows), dtype=bool)
    if not files:
        return out
    if row_paths is not None:
        fitted = {p: any(_same_file(p, f) for f in files) for p in set(row_paths)}
        out |= np.array([fitted[p] for p in row_paths], dtype=bool)
    if "source" in rows.columns:
        out |= rows["source"].astype(str).map(lambda text: any(f in text for f in files)).to_numpy(bool)
    return out


def validate(reference: pd.DataFrame, profile: str | None = None,
             row_paths: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows of `reference` with `predicted_us` and `rel_error` (each with its own profile unless one is given).

    `profile`: a bundled name or a profile file (e.g. one calibration.fit wrote); `profile_used` is the bundled
    name, or that file's path as given, so the rows' profile can be loaded again (coverage, residual pool).
    `used_in_profile` also marks the rows of the files the profile was fitted on (`fitted_rows`; `row_paths`:
    the file of each reference row, `cmd_validate.read_reference`)."""
    frames = []
    if row_paths is not None:
        reference = reference.assign(_row_path=list(row_paths))
    names = [profile] if profile else [p for p in reference["profile"].fillna("").unique() if p]
    for name in names:
        rows = reference if profile else reference[reference["profile"] == name]
        floor = (pd.to_numeric(rows["host_floor_us"], errors="coerce") if "host_floor_us" in rows.columns
                 else pd.Series(np.nan, index=rows.index))
        if floor.notna().any():  # back-to-back launches: device time in graph mode, under the host floor
            rows = rows.assign(mode=rows["mode"].where(floor.isna(), "graph"))
        prof = load_profile(name)
        algo = rows["nccl_algo"].astype(str) if "nccl_algo" in rows.columns else pd.Series("", index=rows.index)
        forced = algo.isin(list(FORCED_DROPS))
        if forced.any():  # runs that forced NCCL_ALGO=RING / NVLS off: price them without those regimes
            parts = [predict_points(rows[~forced], prof)] + [
                predict_points(rows[algo == name], without_regimes(prof, drops))
                for name, drops in FORCED_DROPS.items() if (algo == name).any()]
            part = pd.concat(parts).loc[rows.index]
        else:
            part = predict_points(rows, prof)
        if floor.notna().any():
            part["predicted_us"] = np.where(floor.notna(), np.fmax(part["predicted_us"], floor), part["predicted_us"])
            part["mode"] = reference.loc[part.index, "mode"]
        part["profile_used"] = prof.name if name in bundled_profiles() else str(name)
        paths = part.pop("_row_path").tolist() if "_row_path" in part.columns else None
        given = part["used_in_profile"].astype(bool).to_numpy() if "used_in_profile" in part.columns else False
        part["used_in_profile"] = given | fitted_rows(part, prof, paths)
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
    what = ("held-out rows" if (errors["n"] > 0).any() else
            "no held-out row here: every row was used to build its profile, so nothing is held out; n_in_sample "
            "counted")
    head = (f"per table, collectives at >= {min_bytes_per_rank // 1024} KiB per rank ({what}; target for "
            f"derived profiles: median <= {TABLE_TARGET_MEDIAN:.0%})")
    text = errors.to_string(index=False, float_format=lambda x: f"{x:.3f}", na_rep="-")
    note = ("\n('-': no held-out row in that table - every row it has was used to build the profile)"
            if (errors["n"] == 0).any() else "")
    return head + "\n" + text + note


def profiles_without_reference(table: pd.DataFrame) -> list[str]:
    """Bundled profiles that no reference row is priced with: for them no held-out (or any) check exists."""
    used = set(table["profile_used"].astype(str))
    return [name for name in bundled_profiles() if name not in used]


def profiles_without_held_out(table: pd.DataFrame) -> list[str]:
    """Profiles priced only on the figures they were built from (in-sample rows only)."""
    held = set(table.loc[~table["used_in_profile"], "profile_used"].astype(str))
    return sorted(set(table["profile_used"].astype(str)) - held)
