"""The measurement schema shared by every calibration tool and `predict-points`.

One row per measured point. Collective rows fill `bytes_per_rank`; kernel rows fill `rows` and `cols`. What `cols`
means for each kernel op is in `KERNEL_OPS` (and the README). Times are microseconds per call. Reading is bounded
(`costmodel.io.safe_io`): size before parsing, rows after, every value range-checked with one-line errors.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError, first_line
from .safe_io import check_rows, read_bytes
from .schema_names import (  # noqa: F401 - re-exported: the schema's names live with the frame reader too
    ALL_OPS,
    COLLECTIVE_OPS,
    D2T_DRAFT_COLS,
    DTYPES,
    ELEM_BYTES,
    FUSED_KERNEL_OPS,
    KERNEL_OPS,
    MAX_TOPK,
    MAX_WORLD_SIZE,
    MEASUREMENT_COLUMNS,
    MODES,
    TOPK_KERNEL_OPS,
    VALIDATION_ONLY_OPS,
)

_INT_COLUMNS = ("world_size", "nodes", "bytes_per_rank", "rows", "cols", "iters", "k")
TIME_COLUMNS = ("median_us", "p10_us", "p90_us", "min_us", "max_us")
_TIME_COLUMNS = TIME_COLUMNS
_REQUIRED = ("op", "mode", "world_size", "median_us")


MAX_MEASUREMENT_BYTES = 64 * 2**20  # a measurement CSV file (uploads: dashboard.uploads, 20 MiB)
MAX_MEASUREMENT_ROWS = 2_000_000
MAX_TIME_US = 1e8  # a measured call above 100 s is refused as implausible
INT64_MAX = 2**63 - 1
MAX_INT = 2**53  # integer columns are parsed through float64: every integer up to 2^53 is exact, none above
MAX_COLUMNS = 256  # the schema has ~20 columns (+ a few extra); checked on the header line before any parse
MAX_HEADER_CHARS = 65536
_INT_LIMITS = {"world_size": MAX_WORLD_SIZE, "nodes": MAX_WORLD_SIZE, "k": MAX_TOPK}
_TEXT_COLUMNS = ("op", "backend", "device", "gpu", "dtype", "mode")


def parse_measurement_csv(data: str | bytes, source: str, *, require_times: bool = True) -> pd.DataFrame:
    """Parse measurement CSV text or bytes and validate it (`validate_measurements`); InputError names the
    problem (a row with more fields than the header is refused, not shifted into an index)."""
    import io
    import warnings

    _check_header(data, source)
    buffer = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else io.StringIO(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(buffer, index_col=False, on_bad_lines="error", low_memory=False)
    except pd.errors.ParserWarning:
        raise InputError(f"{source}: a row has more fields than the header") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{source}: not a readable CSV ({first_line(exc)})") from None
    return validate_measurements(frame, source=source, require_times=require_times)


def _check_header(data: str | bytes, source: str) -> None:
    """Refuse a CSV whose header line is longer than MAX_HEADER_CHARS or has more than MAX_COLUMNS columns, before
    pandas allocates a column per field (a 20 MB header of 2M columns would take gigabytes)."""
    head = data[: MAX_HEADER_CHARS + 1]
    newline = b"\n" if isinstance(head, (bytes, bytearray)) else "\n"
    line = head.split(newline, 1)[0]
    if len(line) > MAX_HEADER_CHARS:
        raise InputError(f"{source}: header line longer than {MAX_HEADER_CHARS} characters")
    comma = b"," if isinstance(line, (bytes, bytearray)) else ","
    if line.count(comma) + 1 > MAX_COLUMNS:
        raise InputError(f"{source}: {line.count(comma) + 1} columns in the header, more than {MAX_COLUMNS}")


check_csv_header = _check_header  # public: every reader of an untrusted CSV calls it before pandas parses it


def read_measurements(path: str | Path, *, require_times: bool = True) -> pd.DataFrame:
    """Read and validate a measurement CSV; raise `InputError` naming the problem.

    The file is stat-ed and read with a bound (costmodel.io.safe_io: FIFOs, devices and files over
    MAX_MEASUREMENT_BYTES are refused). Missing optional columns are filled with defaults (nodes=1,
    bytes_per_rank=0, rows=0, cols=0, dtype="fp32", backend/device/gpu="unknown"). With
    `require_times=False` (predict-points input) the time columns may be absent.
    """
    data = read_bytes(path, limit_bytes=MAX_MEASUREMENT_BYTES)
    return parse_measurement_csv(data, str(path), require_times=require_times)


def _bad_row(source: str, column: str, frame: pd.DataFrame, bad: np.ndarray, rule: str) -> InputError:
    row = int(np.flatnonzero(bad)[0])
    value = frame[column].iloc[row]
    value = value.item() if isinstance(value, np.generic) else value
    if value is None or (isinstance(value, float) and math.isnan(value)):  # pandas reads '', NA, nan, null as NaN
        return InputError(f"{source}: column {column} row {row + 2} has no value (empty, NA or NaN); {rule}")
    return InputError(f"{source}: column {column} row {row + 2} is {value!r}; {rule}")


def _int_column(frame: pd.DataFrame, column: str, source: str) -> pd.Series:
    """Column `column` as int64: every cell an integer in 0..its limit (MAX_INT; _INT_LIMITS; k from 1), else
    InputError naming the row. An integer column is compared exactly (2^53 + 1 is not rounded to 2^53 first)."""
    numbers = pd.to_numeric(frame[column], errors="coerce")
    lowest, limit = (1 if column == "k" else 0), _INT_LIMITS.get(column, MAX_INT)
    exact = numbers.to_numpy() if pd.api.types.is_integer_dtype(numbers) else None
    v = numbers.astype(float).to_numpy()
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(v) | (v < lowest) | (v != np.floor(v)) | (v > limit)
    if exact is not None:
        bad |= exact > limit
    if bad.any():
        raise _bad_row(source, column, frame, bad, f"expected an integer in {lowest}..{limit}")
    return numbers.astype(np.int64)


def validate_measurements(
    frame: pd.DataFrame, *, source: str = "measurements", require_times: bool = True,
    extra_collectives: tuple[str, ...] = (),
) -> pd.DataFrame:
    """Validate an in-memory measurement table (see `read_measurements`).

    At most MAX_MEASUREMENT_ROWS rows; integer columns are non-negative integers up to MAX_INT = 2^53 (world_size
    and nodes <= 2^20; nodes >= 1 and dividing world_size); times finite, > 0 (median_us) and <= MAX_TIME_US; text
    cells UTF-8 strings.
    """
    check_rows(len(frame), limit_rows=MAX_MEASUREMENT_ROWS, source=source)
    required = _REQUIRED if require_times else _REQUIRED[:-1]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(missing)}")
    frame = frame.copy()
    defaults = {"backend": "unknown", "device": "unknown", "gpu": "unknown", "dtype": "fp32",
                "nodes": 1, "bytes_per_rank": 0, "rows": 0, "cols": 0, "iters": 0}
    for column, value in defaults.items():
        if column not in frame.columns:
            frame[column] = value
    for column in _TEXT_COLUMNS:
        fill = defaults.get(column, "")
        values = frame[column]
        if values.isna().any():  # a float column of NaN (an empty column) cannot take fillna(str)
            values = values.fillna(fill) if pd.api.types.is_string_dtype(values) else \
                values.astype(object).where(values.notna(), fill)
        frame[column] = values.astype(str).str.strip()
    known_ops = ALL_OPS + tuple(extra_collectives)  # extra_collectives: VALIDATION_ONLY_OPS for the importer
    allowed = {"op": (known_ops, "unknown op {!r} (known: " + ", ".join(known_ops) + ")"),
               "mode": (MODES, "column mode has {!r}; expected graph or eager"),
               "dtype": (tuple(ELEM_BYTES), "column dtype has {!r}; expected one of " + ", ".join(ELEM_BYTES))}
    for column, (values, message) in allowed.items():
        bad = sorted(set(frame[column].unique().tolist()) - set(values))
        if bad and column == "op" and bad[0] in VALIDATION_ONLY_OPS:
            raise InputError(f"{source}: op {bad[0]!r} is imported for validation only (no strategy uses it; the "
                             "cost model neither prices nor fits it): drop those rows")
        if bad:
            raise InputError(f"{source}: " + message.format(bad[0]))
    # k: candidates per row of the top-k kernel ops (optional column; an empty cell or no column = 1; text is bad)
    if "k" in frame.columns:
        frame["k"] = frame["k"].where(frame["k"].notna() & (frame["k"].astype(str).str.strip() != ""), 1)
    else:
        frame["k"] = 1
    for column in _INT_COLUMNS:
        frame[column] = _int_column(frame, column, source)
    if (frame["world_size"] < 1).any():
        raise InputError(f"{source}: column world_size must be >= 1")
    if (frame["nodes"] < 1).any():
        raise InputError(f"{source}: column nodes must be >= 1")
    uneven = (frame["world_size"] % frame["nodes"]) != 0
    if uneven.any():
        raise _bad_row(source, "nodes", frame, uneven.to_numpy(), "nodes must divide world_size (GPUs per node)")
    is_coll = frame["op"].isin(COLLECTIVE_OPS + tuple(extra_collectives))
    if (is_coll & (frame["bytes_per_rank"] <= 0)).any():
        raise InputError(f"{source}: column bytes_per_rank must be > 0 for collective ops")
    if (~is_coll & (frame["rows"] <= 0)).any():
        raise InputError(f"{source}: column rows must be > 0 for kernel ops")
    for column in _TIME_COLUMNS:
        if column not in frame.columns:
            if column == "median_us" and require_times:
                raise InputError(f"{source}: missing column median_us")
            continue
        values = pd.to_numeric(frame[column], errors="coerce").astype(float)
        v = values.to_numpy()
        median = column == "median_us"
        with np.errstate(invalid="ignore"):
            out_of_range = ((v <= 0) if median else (v < 0)) | (v > MAX_TIME_US) | np.isinf(v)
        if require_times and median:
            bad = np.isnan(v) | out_of_range
        else:  # optional statistics: empty is fine, a number must be plausible
            bad = out_of_range | (np.isnan(v) & frame[column].notna().to_numpy())
        if bad.any():
            rule = f"times must be finite, {'> 0' if median else '>= 0'} and <= {MAX_TIME_US:g} us"
            raise _bad_row(source, column, frame, bad, rule)
        frame[column] = values
    return frame
