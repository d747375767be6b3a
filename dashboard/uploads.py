"""Turn an uploaded file into a validated profile - parsed as JSON / CSV / text only, never executed.

* ``*.json``           a cluster profile -> costmodel.parse_profile
* ``*.csv``            a measurement CSV in costmodel.schema -> calibration.fit.fit_measurements
* ``*.txt`` / ``*.log`` an nccl-tests log -> calibration.import_nccl_tests.parse_nccl_tests_text -> fit

The calibration modules are imported lazily: without them the dashboard still runs and a measurement
upload answers "fitting uploads needs calibration.fit". Every problem is an InputError with one line.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import PurePath

import pandas as pd

from costmodel import InputError, Profile, parse_profile
from costmodel.schema import validate_measurements

from .state import UPLOAD_PREFIX

MAX_UPLOAD_BYTES = 20 * 2**20  # keep in step with server.maxUploadSize in .streamlit/config.toml
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
        from calibration.fit import fit_measurements
    except ImportError:
        raise InputError(NEEDS_FIT) from None
    name = PurePath(file_name).stem or "upload"
    try:
        profile = fit_measurements(frame, name=name)
    except InputError:
        raise
    except (ValueError, KeyError, RuntimeError) as exc:  # a fit that cannot run on these points
        raise InputError(f"{file_name}: cannot fit these measurements ({' '.join(str(exc).split())})") from None
    return json.dumps(profile, allow_nan=False), frame.to_csv(index=False)


def read_measurement_csv(text: str, source: str) -> pd.DataFrame:
    """Parse and validate measurement CSV text (costmodel.schema)."""
    try:
        frame = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{source}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    return validate_measurements(frame, source=source)


def parse_upload(file_name: str, data: bytes) -> UploadedProfile:
    """Validate one uploaded file and return the profile it gives; InputError names the problem."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise InputError(f"{file_name}: larger than {MAX_UPLOAD_BYTES // 2**20} MiB")
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
            from calibration.import_nccl_tests import parse_nccl_tests_text
        except ImportError:
            raise InputError(NEEDS_FIT) from None
        frame = validate_measurements(parse_nccl_tests_text(text, file_name), source=file_name)
    profile_text, measurements = _fit(frame, file_name)
    return UploadedProfile(file_name, parse_profile(profile_text, source=file_name), profile_text, measurements)
