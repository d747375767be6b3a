"""The measurement schema shared by every calibration tool and `predict-points`.

One row per measured point. Collective rows fill `bytes_per_rank`; kernel rows fill `rows` and `cols`. What `cols`
means for each kernel op is in `KERNEL_OPS` (and the README). Times are microseconds per call. Reading is bounded
(`costmodel.io.safe_io`): size before parsing, rows after, every value range-checked with one-line errors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError, first_line
from .safe_io import check_rows, read_bytes

MEASUREMENT_COLUMNS: tuple[str, ...] = (
    "op",
    "backend",
    "device",
    "gpu",
    "dtype",
    "mode",
    "world_size",
    "nodes",
    "bytes_per_rank",
    "rows",
    "cols",
    "iters",
    "median_us",
    "p10_us",
    "p90_us",
    "min_us",
    "max_us",
)

COLLECTIVE_OPS: tuple[str, ...] = ("all_gather", "all_reduce", "gather", "broadcast")

# op -> what `cols` is (rows is always the number of sampled rows B).
KERNEL_OPS: dict[str, str] = {
    "local_argmax": "vocab shard s: mask padding, max over [rows, s], pack (fp32 value, fp32 global id)",
    "relayout_copy": "vocab shard s: copy the gathered [p*rows, s] into [rows, p*s] (world_size = p)",
    "argmax": "argmaxed width (V, or V_target after a d2t scatter): torch.argmax over [rows, cols]",
    "relayout_argmax": "vocab shard s: relayout_copy followed by argmax over [rows, p*s] (world_size = p)",
    "chunked_argmax": "vocab shard s: argmax of each rank chunk of the gathered [p*rows, s] buffer + reduce over p",
    "pair_reduce": "unused (0): reduce p gathered (value, id) pairs per row (world_size = p)",
    "key_pack": "vocab shard s: mask padding, max over [rows, s], build one 64-bit order key per row",
    "key_unpack": "unused (0): decode the reduced 64-bit key into an int64 id",
    "d2t_scatter": "target vocab V_target: fill [rows, V_target] with -inf and scatter [rows, 32000] draft logits",
    "d2t_lookup": "unused (0): target = draft + d2t[draft] for rows ids",
    "local_max": "vocab shard s: torch.max over [rows, s] (values and indices; the TP = 1 local path)",
    "local_pack": "vocab shard s: max over [rows, s], pack (fp32 value, fp32 id) - no rank offset, no padding mask",
    "local_argmax_masked": "vocab shard s: local_argmax on the last of 2 ranks holding 64 padding ids (V = 2s - 64): "
                           "padding excluded, max, rank offset, fp32 pack",
}

# Fused Triton variants of the local path (calibration/reference/triton_kernels.py); `cols` as for the base op.
FUSED_KERNEL_OPS: dict[str, str] = {
    f"{op}_fused": f"fused Triton variant of {op}; cols as for {op}"
    for op in ("local_argmax", "key_pack", "pair_reduce", "key_unpack")
}

# Top-k (tree drafting) kernels, measured per k: their rows carry a `k` column (default 1 for every other op) and
# their tables a `k` field. `cols` as described; calibration/reference/strategies.py local_topk / merge_topk.
TOPK_KERNEL_OPS: dict[str, str] = {
    "local_topk": "vocab shard s: stable top-k (value desc, lowest id) of [rows, s] + rank offset, packed as k "
                  "(fp32 value, fp32 id) pairs",
    "topk_merge": "candidates p*k: stable top-k of [rows, p*k] fp32 (value, id) candidates by (value desc, id asc)",
}
MAX_TOPK = 4096

ALL_OPS: tuple[str, ...] = COLLECTIVE_OPS + tuple(KERNEL_OPS) + tuple(FUSED_KERNEL_OPS) + tuple(TOPK_KERNEL_OPS)
# bytes per element of every dtype a measurement row may carry: logits, ids / keys (int64) and raw bytes
ELEM_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "int64": 8, "uint8": 1, "int8": 1,
                              # the other nccl-tests data types (calibration.import_nccl_tests): collectives only
                              "int32": 4, "uint32": 4, "uint64": 8, "fp64": 8, "fp8_e4m3": 1, "fp8_e5m2": 1}
# collectives nccl-tests measures that no strategy uses: imported for validation only (not priced, not fitted)
VALIDATION_ONLY_OPS: tuple[str, ...] = ("reduce_scatter", "alltoall")
DTYPES: dict[str, int] = {k: ELEM_BYTES[k] for k in ("bf16", "fp16", "fp32")}  # the logits dtypes
D2T_DRAFT_COLS = 32000  # the kernel benchmark's d2t_scatter draft width: [rows, 32000] logits (KERNEL_OPS)
MODES: tuple[str, ...] = ("graph", "eager")

_INT_COLUMNS = ("world_size", "nodes", "bytes_per_rank", "rows", "cols", "iters", "k")
TIME_COLUMNS = ("median_us", "p10_us", "p90_us", "min_us", "max_us")
_TIME_COLUMNS = TIME_COLUMNS
_REQUIRED = ("op", "mode", "world_size", "median_us")


MAX_MEASUREMENT_BYTES = 64 * 2**20  # a measurement CSV file (uploads: dashboard.uploads, 20 MiB)
MAX_MEASUREMENT_ROWS = 2_000_000
MAX_TIME_US = 1e8  # a measured call above 100 s is refused as implausible
MAX_WORLD_SIZE = 1 << 20
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
    return InputError(f"{source}: column {column} row {row + 2} is {value!r}; {rule}")


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
    # k: candidates per row of the top-k kernel ops (optional column; empty or absent = 1)
    frame["k"] = pd.to_numeric(frame["k"], errors="coerce").fillna(1) if "k" in frame.columns else 1
    for column in _INT_COLUMNS:
        values = pd.to_numeric(frame[column], errors="coerce").astype(float)
        limit = _INT_LIMITS.get(column, MAX_INT)
        v = values.to_numpy()
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(v) | (v < 0) | (v != np.floor(v)) | (v > limit)
        if bad.any():
            raise _bad_row(source, column, frame, bad, f"expected an integer in 0..{limit}")
        frame[column] = values.astype(np.int64)
    if (frame["world_size"] < 1).any():
        raise InputError(f"{source}: column world_size must be >= 1")
    if (frame["nodes"] < 1).any():
        raise InputError(f"{source}: column nodes must be >= 1")
    uneven = (frame["world_size"] % frame["nodes"]) != 0
    if uneven.any():
        raise _bad_row(source, "nodes", frame, uneven.to_numpy(), "nodes must divide world_size (GPUs per node)")
    if (frame["k"] < 1).any():
        raise InputError(f"{source}: column k must be >= 1")
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
