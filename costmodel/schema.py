"""The measurement schema shared by every calibration tool and `predict-points`.

One row per measured point. Collective rows fill `bytes_per_rank`; kernel rows
fill `rows` and `cols`. What `cols` means for each kernel op is in
`KERNEL_OPS` (and the README). Times are microseconds per call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError, first_line

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
_INT_LIMITS = {"world_size": MAX_WORLD_SIZE, "nodes": MAX_WORLD_SIZE, "k": MAX_TOPK}
_TEXT_COLUMNS = ("op", "backend", "device", "gpu", "dtype", "mode")


def parse_measurement_csv(data: str | bytes, source: str, *, require_times: bool = True) -> pd.DataFrame:
    """Parse measurement CSV text or bytes and validate it (`validate_measurements`); InputError names the
    problem (a row with more fields than the header is refused, not shifted into an index)."""
    import io
    import warnings

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


def read_measurements(path: str | Path, *, require_times: bool = True) -> pd.DataFrame:
    """Read and validate a measurement CSV; raise `InputError` naming the problem.

    The file is stat-ed and read with a bound (costmodel.safe_io: FIFOs, devices and files over
    MAX_MEASUREMENT_BYTES are refused). Missing optional columns are filled with defaults (nodes=1,
    bytes_per_rank=0, rows=0, cols=0, dtype="fp32", backend/device/gpu="unknown"). With
    `require_times=False` (predict-points input) the time columns may be absent.
    """
    from .safe_io import read_bytes

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

    At most MAX_MEASUREMENT_ROWS rows; integer columns are non-negative integers below 2^63 (world_size
    and nodes <= 2^20); times finite, > 0 (median_us) and <= MAX_TIME_US; text cells UTF-8 strings.
    """
    from .safe_io import check_rows

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
        limit = _INT_LIMITS.get(column, INT64_MAX)
        v = values.to_numpy()
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(v) | (v < 0) | (v != np.floor(v)) | (v > limit)
        if bad.any():
            raise _bad_row(source, column, frame, bad, f"expected an integer in 0..{limit}")
        frame[column] = values.astype(np.int64)
    if (frame["world_size"] < 1).any():
        raise InputError(f"{source}: column world_size must be >= 1")
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


# -- the profile document (costmodel.profile) as JSON Schema ------------------------------------------------
# One table of field specs. Plausible ranges: bandwidths 0.01 GB/s .. 100 TB/s, latencies 0 .. 1 s,
# measured table times (0, 100 s], counts and sizes positive int64. `profile.py` checks what JSON Schema
# cannot (increasing breakpoints, the table grid's shape) and `safe_io.check_tree` the whole document
# (depth, int64, finite floats, UTF-8 strings). To add a field: add it to the object's table below and
# regenerate data/profiles/schema.json with `python -m costmodel.schema`.
BANDWIDTH_GBPS = (1e-6, 1e6)  # 1 kB/s .. 1 PB/s: calibration.fit's ceiling BW_MAX_GBPS marks a latency-only regime
LATENCY_US = (0.0, 1e6)  # 0 .. 1 s
TABLE_TIME_US = (0.0, 1e8)  # exclusive low: (0, 100 s]
MAX_STRING = 100_000
PROFILE_SCHEMA_ID = "https://github.com/argmax-tp/costmodel/data/profiles/schema.json"


def _num(lo: float, hi: float, *, exclusive_low: bool = False, nullable: bool = False) -> dict:
    spec: dict = {"type": ["number", "null"] if nullable else "number", "maximum": hi}
    spec["exclusiveMinimum" if exclusive_low else "minimum"] = lo
    return spec


def _int(lo: int, hi: int = 2**63 - 1, *, nullable: bool = False) -> dict:
    return {"type": ["integer", "null"] if nullable else "integer", "minimum": lo, "maximum": hi}


def _str(*, enum: tuple[str, ...] | None = None, nullable: bool = False, max_length: int = MAX_STRING) -> dict:
    if enum is not None:
        return {"enum": list(enum) + ([None] if nullable else [])}
    return {"type": ["string", "null"] if nullable else "string", "maxLength": max_length}


def _obj(props: dict, required: tuple[str, ...] = (), **extra) -> dict:
    return {"type": "object", "properties": props, "required": list(required), **extra}


def _arr(items: dict, **extra) -> dict:
    return {"type": "array", "items": items, **extra}


_KIND = ("derived", "measured")
_LAT = _num(*LATENCY_US)
_BW = _num(*BANDWIDTH_GBPS)
_CI = {"type": "object", "additionalProperties": _arr({"type": "number"}, minItems=2, maxItems=2)}
REGIME_FIELDS: dict[str, dict] = {
    "name": _str(max_length=64),
    "max_bytes": _num(0, 2.0**63, exclusive_low=True, nullable=True),
    "alpha_base_us": _LAT,
    "alpha_per_peer_us": _LAT,
    "alpha_per_node_us": _LAT,
    "busbw_gbps": _BW,
    "ci90": _CI,
    "s_half_bytes": _num(0, 2.0**63),
    "inter_node_max_gbps": _num(0, 1e6, exclusive_low=True, nullable=True),
}
MAX_SAMPLE_SIZES = 192  # sizes per curve's stored samples (calibration.fit MAX_GROUP_SIZES)
MAX_RAW_SAMPLES = 16  # raw times stored per size (calibration.fit MAX_REPEATS_PER_POINT)
_TIMES = _arr(_num(*TABLE_TIME_US, exclusive_low=True), minItems=1, maxItems=MAX_SAMPLE_SIZES)
SAMPLES_FIELDS: dict[str, dict] = {  # costmodel.profile.CurveSamples: the measurements a fitted curve came from
    "bytes_per_rank": _arr(_num(0, 2.0**63, exclusive_low=True), minItems=1, maxItems=MAX_SAMPLE_SIZES),
    "n": _arr(_int(1, 2**31), minItems=1, maxItems=MAX_SAMPLE_SIZES),
    "median_us": _TIMES, "p10_us": _TIMES, "p90_us": _TIMES,
    "raw_us": _arr(_arr(_num(*TABLE_TIME_US, exclusive_low=True), minItems=1, maxItems=MAX_RAW_SAMPLES),
                   minItems=1, maxItems=MAX_SAMPLE_SIZES),
}
CURVE_FIELDS: dict[str, dict] = {
    "op": _str(enum=COLLECTIVE_OPS),
    "world_size": _int(1, MAX_WORLD_SIZE, nullable=True),
    "mode": _str(enum=MODES, nullable=True),
    "nodes": _int(1, MAX_WORLD_SIZE, nullable=True),
    "launch_us": _LAT,
    "eager_overhead_us": _LAT,
    "inter_node_busbw_gbps": _num(*BANDWIDTH_GBPS, nullable=True),
    "provenance": _str(enum=_KIND),
    "select": _str(enum=("breakpoints", "min")),
    "impl": _str(enum=("nccl", "oneshot", "multimem")),
    "regimes": _arr(_obj(REGIME_FIELDS, ("alpha_base_us", "busbw_gbps")), minItems=1, maxItems=64),
    "samples": _obj(SAMPLES_FIELDS, tuple(SAMPLES_FIELDS)),
}
KERNEL_OP_FIELDS: dict[str, dict] = {
    "launches": _num(0, 1e4),
    "fixed_us": _LAT,
    "bw_gbps": _BW,
    "provenance": _str(enum=_KIND),
}
_AXIS = _arr(_num(0, 2.0**63, exclusive_low=True), minItems=1)
KERNEL_TABLE_FIELDS: dict[str, dict] = {
    "op": _str(enum=tuple(KERNEL_OPS) + tuple(FUSED_KERNEL_OPS) + tuple(TOPK_KERNEL_OPS)),
    "dtype": _str(enum=tuple(DTYPES)),
    "k": _int(1, MAX_TOPK),
    "mode": _str(enum=MODES),
    "world_size": _int(1, MAX_WORLD_SIZE),
    "rows": _AXIS,
    "cols": _AXIS,
    "median_us": _arr(_arr(_num(*TABLE_TIME_US, exclusive_low=True), minItems=1), minItems=1),
    "source": _str(),
}
_RATE = _num(0, 1e15, exclusive_low=True)  # elements per us
KERNEL_MODEL_FIELDS: dict[str, dict] = {  # costmodel.gpu_kernels.model_from_dict
    "gpu": _str(max_length=1000), "provenance": _str(enum=_KIND + ("mixed",)), "source": _str(),
    "sm_count": _int(1, 100_000), "max_threads_per_sm": _int(1, 100_000),
    "hbm_gbps": _BW, "reduce_gbps": _BW,
    **{k: _LAT for k in ("value_us", "wave_us", "global_reduce_us", "small_us", "small_row_us", "copy_floor_us",
                         "pair_base_us", "pair_row_us", "pair_peer_us", "torch_op_us", "view_op_us",
                         "eager_gap_us")},
    "reduce_ops": {"type": "object", "additionalProperties": _obj({"floor_us": _LAT, "elems_per_us": _RATE},
                                                                  ("floor_us", "elems_per_us"))},
    "copy_gbps": {"type": "object", "additionalProperties": _BW},
}
KERNEL_HOST_FIELDS: dict[str, dict] = {  # costmodel.gpu_kernels.host_from_dict
    "torch_op_us": _LAT, "view_op_us": _LAT, "c10d_call_us": _LAT, "source": _str(),
    "c10d_table": _obj({"bytes": _arr(_num(0, 2.0**63, exclusive_low=True)),
                        "median_us": _arr(_num(*TABLE_TIME_US, exclusive_low=True))}, ("bytes", "median_us")),
}
LM_HEAD_FIELDS: dict[str, dict] = {  # costmodel.gpu_kernels.lm_head_from_dict
    "floor_us": _LAT, "weight_gbps": _BW, "tflops": _num(0, 1e6, exclusive_low=True),
    "provenance": _str(enum=_KIND + ("mixed",)), "source": _str(),
}
MODEL_CV_FIELDS: dict[str, dict] = {  # costmodel.gpu_kernel_fit.cross_validate rows (kernels.model_cv)
    "held_out": _str(max_length=200), "op": _str(max_length=200), "mode": _str(enum=MODES), "n": _int(0),
    "median_abs_rel_error": _num(0, 1e6), "p90_abs_rel_error": _num(0, 1e6),
}
KERNELS_FIELDS: dict[str, dict] = {
    "graph_kernel_us": _LAT,
    "eager_launch_us": _LAT,
    "ops": {"type": "object", "propertyNames": {"enum": list(KERNEL_OPS) + list(FUSED_KERNEL_OPS)},
            "additionalProperties": _obj(KERNEL_OP_FIELDS, ("bw_gbps",))},
    "tables": _arr(_obj(KERNEL_TABLE_FIELDS, ("op", "dtype", "mode", "rows", "cols", "median_us"))),
    "model": {"anyOf": [{"type": "null"}, _obj(KERNEL_MODEL_FIELDS, ("sm_count", "hbm_gbps"))]},
    "host": {"anyOf": [{"type": "null"}, _obj(KERNEL_HOST_FIELDS)]},
    "lm_head": {"anyOf": [{"type": "null"}, _obj(LM_HEAD_FIELDS, ("floor_us", "weight_gbps", "tflops"))]},
    "model_cv": _arr(_obj(MODEL_CV_FIELDS, tuple(MODEL_CV_FIELDS)), maxItems=10_000),
}
PROVENANCE_FIELDS: dict[str, dict] = {
    "kind": _str(enum=("derived", "measured", "mixed")),
    "source": _str(),
    "gpu": _str(max_length=1000),
    "interconnect": _str(max_length=1000),
    "gpus_per_node": _int(1, 1024, nullable=True),
    "nics_per_node": _int(0, 1024, nullable=True),
    "nic_gbps": _num(0, 1e5, exclusive_low=True, nullable=True),
    "software": {"type": "object"},
    "date": _str(max_length=64),
    "citations": _arr(_str(), maxItems=10_000),
    "files": _arr(_str(max_length=4096), maxItems=100_000),
}
REPLICATE_FIELDS: dict[str, dict] = {
    "collectives": _arr({"$ref": "#/$defs/curve"}, minItems=1),
    "kernels": _obj(KERNELS_FIELDS),
}
# costmodel.replicates: a compact ensemble (regenerated from a seed and cited ranges, or stored as columns)
ENSEMBLE_METHODS = ("uniform-ranges-v1", "columns-v1")
_RANGE = _arr(_num(0, 1e6, exclusive_low=True), minItems=2, maxItems=2)
ENSEMBLE_FIELDS: dict[str, dict] = {
    "method": _str(enum=ENSEMBLE_METHODS),
    "n": _int(1, 10_000),
    "seed": _int(0),
    "ranges": {"type": "object", "additionalProperties": _RANGE},
    "stored": _obj({"template": {"$ref": "#/$defs/member"},
                    "columns": _arr(_obj({"path": _arr({"type": ["string", "integer"]}, minItems=1, maxItems=64),
                                          "values": _arr({"type": "number"}, minItems=1, maxItems=10_000)},
                                         ("path", "values")), maxItems=100_000)},
                   ("template", "columns")),
}
PROFILE_FIELDS: dict[str, dict] = {
    "schema_version": {"const": 1},
    "name": _str(max_length=200) | {"minLength": 1},
    "title": _str(max_length=1000),
    "provenance": _obj(PROVENANCE_FIELDS, ("kind", "source", "gpu")),
    "collectives": _arr({"$ref": "#/$defs/curve"}),
    "kernels": _obj(KERNELS_FIELDS, ("graph_kernel_us", "eager_launch_us", "ops")),
    "fit_report": _arr({"type": "object"}),
    "bootstrap_method": _str(),
    "bootstrap": _arr({"$ref": "#/$defs/member"}, maxItems=10_000),
    "ensemble": _obj(ENSEMBLE_FIELDS, ("method", "n")),
}


def profile_json_schema() -> dict:
    """The profile document's JSON Schema (draft 2020-12), built from the field tables above."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": PROFILE_SCHEMA_ID,
        "title": "argmax-tp cost-model profile (schema_version 1)",
        "description": "Validated on load by costmodel.profile; generated by `python -m costmodel.schema`.",
        "$defs": {"curve": _obj(CURVE_FIELDS, ("op", "regimes")),
                  "member": _obj(REPLICATE_FIELDS)},  # one ensemble member (a bootstrap replicate)
        **_obj(PROFILE_FIELDS, ("schema_version", "name", "provenance", "collectives", "kernels")),
    }


PROFILE_SCHEMA_PATH = Path(__file__).resolve().parent.parent / "data" / "profiles" / "schema.json"


def profile_schema_text() -> str:
    import json

    return json.dumps(profile_json_schema(), indent=1) + "\n"


if __name__ == "__main__":
    PROFILE_SCHEMA_PATH.write_text(profile_schema_text())
    print(f"wrote {PROFILE_SCHEMA_PATH}")


# -- a fast checker for the JSON Schema subset above ----------------------------------------------------------
# jsonschema (pinned in requirements.txt) validates data/profiles/schema.json in the tests; it needs ~1.5 s for
# a bundled profile with 100 replicates (1 MB), so loading uses this ~10x faster interpreter of the keywords the
# tables above use. tests/test_fuzz.py checks that both accept and refuse the same documents.
_JSON_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


class SchemaViolation(Exception):
    """The first place a document breaks the schema: `path` (keys / indices) and a one-line `message`."""

    def __init__(self, path: tuple, message: str):
        super().__init__(message)
        self.path, self.message = path, message


def _fail(path: tuple, message: str) -> None:
    raise SchemaViolation(path, message)


def check_schema(value: Any, schema: dict, root: dict | None = None, path: tuple = ()) -> None:
    """Raise SchemaViolation at the first violation of `schema` (the keyword subset of profile_json_schema:
    type, enum, const, minimum, maximum, exclusiveMinimum, minLength, maxLength, minItems, maxItems,
    properties, required, additionalProperties, propertyNames, items, $ref to #/$defs, anyOf)."""
    root = schema if root is None else root
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in schema:
        errors = []
        for option in schema["anyOf"]:
            try:
                check_schema(value, option, root, path)
                break
            except SchemaViolation as exc:
                errors.append(exc)
        else:  # report the option that got deepest (the object, not the "null" alternative)
            deepest = max(errors, key=lambda e: len(e.path))
            if len(deepest.path) == len(path):
                _fail(path, " / ".join(dict.fromkeys(e.message for e in errors)))
            raise deepest
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_JSON_TYPES[k](value) for k in kinds):
            bad = f"{type(value).__name__}" if isinstance(value, (dict, list)) else f"{value!r}"
            _fail(path, f"{bad} is not of type {' or '.join(kinds)}" if not isinstance(value, (dict, list))
                  else f"expected {' or '.join(kinds)}, got {bad}")
    if "const" in schema and not (value == schema["const"] and type(value) is type(schema["const"])):
        _fail(path, f"{value!r} must be {schema['const']!r}")
    if "enum" in schema and not any(value == e and type(value) is type(e) for e in schema["enum"]):
        _fail(path, f"{value!r} is not one of {schema['enum']}")
    if _JSON_TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            _fail(path, f"{value!r} is below the minimum {schema['minimum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            _fail(path, f"{value!r} must be > {schema['exclusiveMinimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            _fail(path, f"{value!r} is above the maximum {schema['maximum']}")
    elif isinstance(value, str):
        if len(value) > schema.get("maxLength", len(value)):
            _fail(path, f"longer than {schema['maxLength']} characters")
        if len(value) < schema.get("minLength", 0):
            _fail(path, f"shorter than {schema['minLength']} character(s)")
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            _fail(path, f"needs at least {schema['minItems']} item(s)")
        if len(value) > schema.get("maxItems", len(value)):
            _fail(path, f"has more than {schema['maxItems']} items")
        items = schema.get("items")
        if items is not None:
            for i, item in enumerate(value):
                check_schema(item, items, root, path + (i,))
    elif isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                _fail(path, f"{key!r} is a required property")
        names = schema.get("propertyNames")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if names is not None:
                check_schema(key, names, root, path + (key,))
            if key in props:
                check_schema(item, props[key], root, path + (key,))
            elif isinstance(extra, dict):
                check_schema(item, extra, root, path + (key,))
