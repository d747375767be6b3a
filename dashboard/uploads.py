"""Turn an uploaded file into a validated profile - parsed as JSON / CSV / text only, never executed.

* ``*.json``           a cluster profile -> costmodel.parse_profile
* ``*.csv``            a measurement CSV in costmodel.profiles.schema -> calibration.fitting.fit.fit_measurements
* ``*.txt`` / ``*.log`` an nccl-tests log -> calibration.logs.import_nccl_tests.parse_nccl_tests_text -> fit

The calibration modules are imported lazily: without them the dashboard still runs and a measurement
upload answers "fitting uploads needs calibration.fit". Every problem is an InputError with one line.

Limits: MAX_UPLOAD_BYTES (20 MB = 20,000,000 bytes, what the widget accepts at server.maxUploadSize = 20) and
MAX_UPLOAD_ROWS measurement rows; repeated rows of one point are binned before the fit
(calibration.fitting.fit.bin_repeats), so a 19 MB, 1M-row CSV fits within the limits of docs/limits.md
(scripts/bench_limits.py measures it). A file name is only ever used as a label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePath

import pandas as pd

from costmodel import InputError, Profile, parse_profile
from costmodel.io.measurements import COLLECTIVE_OPS, parse_measurement_csv, validate_measurements
from costmodel.io.safe_io import check_rows, check_size, csv_text

from .state import UPLOAD_PREFIX

MAX_UPLOAD_BYTES = 20_000_000  # the upload widget refuses files over server.maxUploadSize x 10^6 bytes (20 MB)
MAX_UPLOAD_ROWS = 1_500_000  # measurement rows per upload (20 MB holds at most ~1.3M of the shortest rows)
MAX_FILE_NAME = 255
UPLOAD_TYPES = ("json", "csv", "txt", "log")
NEEDS_FIT = "fitting uploads needs calibration.fit"


@dataclass(frozen=True)
class UploadedProfile:
    """A validated profile from an upload; `measurements_csv` holds the points it was fitted to (if any)."""

    file_name: str
    profile: Profile
    profile_text: str
    measurements_csv: str | None = None

    @property
    def label(self) -> str:
        return f"{UPLOAD_PREFIX}{self.profile.name}"


def _decode(file_name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{file_name}: not UTF-8 text") from None


def _fit(frame: pd.DataFrame, file_name: str) -> tuple[str, str]:
    """(profile JSON text, measurement CSV text) for a validated measurement frame."""
    try:
        from calibration.fitting.fit import bin_repeats, fit_measurements
    except ImportError:
        raise InputError(NEEDS_FIT) from None
    check_rows(len(frame), limit_rows=MAX_UPLOAD_ROWS, source=file_name)
    from calibration.fitting.fit import MAX_GROUP_SIZES

    coll = frame[frame["op"].isin(COLLECTIVE_OPS)]
    sizes = coll.groupby(["op", "world_size", "mode"])["bytes_per_rank"].nunique()
    if len(sizes) and int(sizes.max()) > MAX_GROUP_SIZES:  # refused before any fitting work
        (op, ws, mode), n = sizes.idxmax(), int(sizes.max())
        raise InputError(f"{file_name}: {op} p={ws} {mode} has {n} distinct sizes, more than the limit of "
                         f"{MAX_GROUP_SIZES} per curve")
    frame = bin_repeats(frame)  # the points the fit uses; also what the Calibration tab plots
    name = PurePath(file_name).stem.strip() or "upload"
    try:
        profile = fit_measurements(frame, name=name)
    except InputError:
        raise
    except (ValueError, KeyError, RuntimeError, ArithmeticError) as exc:  # a fit that cannot run on these points
        raise InputError(f"{file_name}: cannot fit these measurements ({' '.join(str(exc).split())})") from None
    return json.dumps(profile, allow_nan=False), csv_text(frame)


def read_measurement_csv(text: str, source: str) -> pd.DataFrame:
    """Parse and validate measurement CSV text (costmodel.profiles.schema)."""
    return parse_measurement_csv(text, source)


def _check_name(file_name: str) -> str:
    """The upload's name as a one-line label: UTF-8 encodable, no control characters, at most 255 chars."""
    name = str(file_name)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError("upload: the file name is not UTF-8 encodable") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InputError("upload: the file name contains control characters")
    if not name.strip() or len(name) > MAX_FILE_NAME:
        raise InputError(f"upload: the file name must be 1..{MAX_FILE_NAME} characters")
    return name


def parse_upload(file_name: str, data: bytes) -> UploadedProfile:
    """Validate one uploaded file and return the profile it gives; InputError names the problem."""
    file_name = _check_name(file_name)
    check_size(len(data), limit_bytes=MAX_UPLOAD_BYTES, source=file_name)
    if not data.strip():
        raise InputError(f"{file_name}: empty file")
    suffix = PurePath(file_name).suffix.lower().lstrip(".")
    if suffix not in UPLOAD_TYPES:
        raise InputError(f"{file_name}: expected a .json profile, a .csv of measurements or an nccl-tests .txt/.log")
    if suffix == "json":
        text = _decode(file_name, data)
        return UploadedProfile(file_name, parse_profile(text, source=file_name), text)
    text = _decode(file_name, data)
    if suffix == "csv":
        frame = read_measurement_csv(text, file_name)
    else:
        try:
            from calibration.logs.import_nccl_tests import parse_nccl_tests_text
        except ImportError:
            raise InputError(NEEDS_FIT) from None
        frame = validate_measurements(parse_nccl_tests_text(text, file_name), source=file_name)
    profile_text, measurements = _fit(frame, file_name)
    return UploadedProfile(file_name, parse_profile(profile_text, source=file_name), profile_text, measurements)
