"""Several uploaded files at once -> the profiles they give (parsed as JSON / CSV / text only, never executed).

* every ``*.json`` is a complete profile of its own (dashboard.uploads.parse_upload);
* every measurement file - collective or kernel CSVs (costmodel.profiles.schema) and nccl-tests logs - is read and
  validated on its own (errors name the file), then all of them are fitted TOGETHER into ONE profile
  (calibration.fitting.fit.fit_measurements), so a collectives CSV and a kernels CSV of the same cluster make one
  profile instead of two that are each completed from a default;
* what the measurements do not cover comes from an explicitly chosen base profile, and
  `base_parameters(profile)` lists those parameters so the page can say so.

Limits (bounded before parsing, issue 22): at most MAX_FILES files, MAX_COMBINED_BYTES (as one upload, 20 MB)
together - checked on the byte counts before any file is parsed - and MAX_UPLOAD_ROWS measurement rows
together, checked after each file so that parsing stops at the file that crosses it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePath

import pandas as pd

from costmodel import InputError, Profile, parse_profile
from costmodel.io.measurements import COLLECTIVE_OPS, validate_measurements
from costmodel.io.safe_io import check_rows, check_size, csv_text

from .tables import provenance_table
from .uploads import (
    MAX_UPLOAD_BYTES,
    MAX_UPLOAD_ROWS,
    NEEDS_FIT,
    UPLOAD_TYPES,
    UploadedProfile,
    _check_name,
    _decode,
    parse_upload,
    read_measurement_csv,
)

MAX_FILES = 16
MAX_NAME = 60
MAX_COMBINED_BYTES = MAX_UPLOAD_BYTES  # every file of one upload together (sixteen 19.75 MiB files took 3.8 GB)


def _check_combined(files: Sequence[tuple[str, bytes]]) -> None:
    """Refuse (one line) an upload whose files together exceed MAX_COMBINED_BYTES, before any is parsed."""
    total = sum(len(data) for _, data in files)
    if total > MAX_COMBINED_BYTES:
        raise InputError(f"upload: {len(files)} files of {total:,} bytes together, more than the limit of "
                         f"{MAX_COMBINED_BYTES:,} bytes ({MAX_COMBINED_BYTES // 2**20} MiB) for one upload")


def read_measurement_file(file_name: str, data: bytes) -> pd.DataFrame:
    """The validated measurement rows of one .csv (costmodel.profiles.schema) or nccl-tests .txt / .log file."""
    file_name = _check_name(file_name)
    check_size(len(data), limit_bytes=MAX_UPLOAD_BYTES, source=file_name)
    if not data.strip():
        raise InputError(f"{file_name}: empty file")
    suffix = PurePath(file_name).suffix.lower().lstrip(".")
    text = _decode(file_name, data)
    if suffix == "csv":
        return read_measurement_csv(text, file_name)
    if suffix in ("txt", "log"):
        try:
            from calibration.logs.import_nccl_tests import parse_nccl_tests_text
        except ImportError:
            raise InputError(NEEDS_FIT) from None
        return validate_measurements(parse_nccl_tests_text(text, file_name), source=file_name)
    raise InputError(f"{file_name}: expected a .csv of measurements or an nccl-tests .txt/.log")


def combined_name(file_names: Sequence[str]) -> str:
    """'ag8' for one file, 'collectives+kernels' for two, truncated to MAX_NAME characters."""
    stems = [PurePath(n).stem.strip() or "upload" for n in file_names]
    name = "+".join(dict.fromkeys(stems))
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 3] + "..."


def fit_together(files: Sequence[tuple[str, bytes]], base: Profile) -> UploadedProfile:
    """One profile fitted from every measurement file, unmeasured parameters from `base`."""
    try:
        from calibration.fitting.fit import bin_repeats, fit_measurements
    except ImportError:
        raise InputError(NEEDS_FIT) from None
    _check_combined(files)
    names = [name for name, _ in files]
    label = ", ".join(names)
    frames, n_rows = [], 0
    for name, data in files:  # the combined row count after each file: parsing stops at the one that crosses it
        frames.append(read_measurement_file(name, data))
        n_rows += len(frames[-1])
        check_rows(n_rows, limit_rows=MAX_UPLOAD_ROWS, source=label)
    frame = pd.concat(frames, ignore_index=True)
    _check_group_sizes(frame, label)
    frame = bin_repeats(frame)
    name = combined_name(names)
    try:
        doc = fit_measurements(frame, name=name, base_profile=base,
                               title=f"{name} (fitted from {label}; base {base.name})")
    except InputError as exc:
        raise InputError(f"{label}: {exc}") from None
    except (ValueError, KeyError, RuntimeError, ArithmeticError) as exc:
        raise InputError(f"{label}: cannot fit these measurements ({' '.join(str(exc).split())})") from None
    text = json.dumps(doc, allow_nan=False)
    return UploadedProfile(label, parse_profile(text, source=label), text, csv_text(frame))


def _check_group_sizes(frame: pd.DataFrame, label: str) -> None:
    """The single-file upload's limit (dashboard.uploads): at most calibration.fitting.fit.MAX_GROUP_SIZES distinct
    sizes per collective curve, refused before any fitting work."""
    import calibration.fitting.fit

    limit = getattr(calibration.fitting.fit, "MAX_GROUP_SIZES", None)
    coll = frame[frame["op"].isin(COLLECTIVE_OPS)]
    if limit is None or coll.empty:
        return
    sizes = coll.groupby(["op", "world_size", "mode"])["bytes_per_rank"].nunique()
    if int(sizes.max()) > limit:
        (op, ws, mode), n = sizes.idxmax(), int(sizes.max())
        raise InputError(f"{label}: {op} p={ws} {mode} has {n} distinct sizes, more than the limit of {limit} "
                         "per curve")


def parse_uploads(files: Sequence[tuple[str, bytes]], base: Profile) -> tuple[UploadedProfile, ...]:
    """Profiles from a set of uploaded files: each JSON on its own, all measurement files fitted into one."""
    if len(files) > MAX_FILES:
        raise InputError(f"upload: at most {MAX_FILES} files at once, got {len(files)}")
    _check_combined(files)
    out = []
    measurements = []
    for name, data in files:
        suffix = PurePath(str(name)).suffix.lower().lstrip(".")
        if suffix not in UPLOAD_TYPES:
            raise InputError(f"{name}: expected a .json profile, a .csv of measurements or an nccl-tests .txt/.log")
        if suffix == "json":
            out.append(parse_upload(name, data))
        else:
            measurements.append((name, data))
    if measurements:
        out.append(fit_together(measurements, base))
    return tuple(out)


def base_parameters(profile: Profile) -> list[str]:
    """The parameter groups of `profile` that were not measured (taken from the base profile when fitted)."""
    parts = provenance_table(profile)
    rows = parts[parts["provenance"] != "measured"]
    return [f"{r['part']} {r['name']}" + (f" (world size {r['world_size']}, {r['mode']})" if r["part"] != "kernel"
                                          else "") for _, r in rows.iterrows()]
