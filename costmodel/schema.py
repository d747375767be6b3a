"""The measurement schema shared by every calibration tool and `predict-points`.

One row per measured point. Collective rows fill `bytes_per_rank`; kernel rows
fill `rows` and `cols`. What `cols` means for each kernel op is in
`KERNEL_OPS` (and the README). Times are microseconds per call.
"""

from __future__ import annotations

from pathlib import Path

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
}

# Fused Triton variants of the local path (calibration/triton_kernels.py); `cols` as for the base op.
FUSED_KERNEL_OPS: dict[str, str] = {
    f"{op}_fused": f"fused Triton variant of {op}; cols as for {op}"
    for op in ("local_argmax", "key_pack", "pair_reduce", "key_unpack")
}

ALL_OPS: tuple[str, ...] = COLLECTIVE_OPS + tuple(KERNEL_OPS) + tuple(FUSED_KERNEL_OPS)
# bytes per element of every dtype a measurement row may carry: logits, ids / keys (int64) and raw bytes
ELEM_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "int64": 8, "uint8": 1, "int8": 1}
DTYPES: dict[str, int] = {k: ELEM_BYTES[k] for k in ("bf16", "fp16", "fp32")}  # the logits dtypes
D2T_DRAFT_COLS = 32000  # the kernel benchmark's d2t_scatter draft width: [rows, 32000] logits (KERNEL_OPS)
MODES: tuple[str, ...] = ("graph", "eager")

_INT_COLUMNS = ("world_size", "nodes", "bytes_per_rank", "rows", "cols", "iters")
_TIME_COLUMNS = ("median_us", "p10_us", "p90_us", "min_us", "max_us")
_REQUIRED = ("op", "mode", "world_size", "median_us")


def read_measurements(path: str | Path, *, require_times: bool = True) -> pd.DataFrame:
    """Read and validate a measurement CSV; raise `InputError` naming the problem.

    Missing optional columns are filled with defaults (nodes=1, bytes_per_rank=0,
    rows=0, cols=0, dtype="fp32", backend/device/gpu="unknown"). With
    `require_times=False` (predict-points input) the time columns may be absent.
    """
    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV ({first_line(exc)})") from None
    return validate_measurements(frame, source=str(path), require_times=require_times)


def validate_measurements(
    frame: pd.DataFrame, *, source: str = "measurements", require_times: bool = True
) -> pd.DataFrame:
    """Validate an in-memory measurement table (see `read_measurements`)."""
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
    frame["op"] = frame["op"].astype(str).str.strip()
    bad_ops = sorted(set(frame["op"]) - set(ALL_OPS))
    if bad_ops:
        raise InputError(f"{source}: unknown op {bad_ops[0]!r} (known: {', '.join(ALL_OPS)})")
    frame["mode"] = frame["mode"].astype(str).str.strip()
    bad_modes = sorted(set(frame["mode"]) - set(MODES))
    if bad_modes:
        raise InputError(f"{source}: column mode has {bad_modes[0]!r}; expected graph or eager")
    frame["dtype"] = frame["dtype"].fillna("fp32").astype(str).str.strip()
    bad_dtypes = sorted(set(frame["dtype"]) - set(ELEM_BYTES))
    if bad_dtypes:
        raise InputError(f"{source}: column dtype has {bad_dtypes[0]!r}; expected one of {', '.join(ELEM_BYTES)}")
    for column in _INT_COLUMNS:
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().any() or (values < 0).any() or (values != np.floor(values)).any():
            row = int(np.flatnonzero(values.isna() | (values < 0) | (values != np.floor(values)))[0])
            raise InputError(f"{source}: column {column} row {row + 2} is not a non-negative integer")
        frame[column] = values.astype(np.int64)
    if (frame["world_size"] < 1).any():
        raise InputError(f"{source}: column world_size must be >= 1")
    is_coll = frame["op"].isin(COLLECTIVE_OPS)
    if (is_coll & (frame["bytes_per_rank"] <= 0)).any():
        raise InputError(f"{source}: column bytes_per_rank must be > 0 for collective ops")
    if (~is_coll & (frame["rows"] <= 0)).any():
        raise InputError(f"{source}: column rows must be > 0 for kernel ops")
    for column in _TIME_COLUMNS:
        if column not in frame.columns:
            if column == "median_us" and require_times:
                raise InputError(f"{source}: missing column median_us")
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        if require_times and column == "median_us":
            bad = values.isna() | ~np.isfinite(values) | (values <= 0)
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                raise InputError(
                    f"{source}: column median_us row {row + 2} is {frame[column].iloc[row]!r}; "
                    "times must be finite and > 0"
                )
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
MAX_WORLD_SIZE = 1 << 20
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
    "regimes": _arr(_obj(REGIME_FIELDS, ("alpha_base_us", "busbw_gbps")), minItems=1, maxItems=64),
}
KERNEL_OP_FIELDS: dict[str, dict] = {
    "launches": _num(0, 1e4),
    "fixed_us": _LAT,
    "bw_gbps": _BW,
    "provenance": _str(enum=_KIND),
}
_AXIS = _arr(_num(0, 2.0**63, exclusive_low=True), minItems=1)
KERNEL_TABLE_FIELDS: dict[str, dict] = {
    "op": _str(enum=tuple(KERNEL_OPS) + tuple(FUSED_KERNEL_OPS)),
    "dtype": _str(enum=tuple(DTYPES)),
    "mode": _str(enum=MODES),
    "world_size": _int(1, MAX_WORLD_SIZE),
    "rows": _AXIS,
    "cols": _AXIS,
    "median_us": _arr(_arr(_num(*TABLE_TIME_US, exclusive_low=True), minItems=1), minItems=1),
    "source": _str(),
}
KERNELS_FIELDS: dict[str, dict] = {
    "graph_kernel_us": _LAT,
    "eager_launch_us": _LAT,
    "ops": {"type": "object", "propertyNames": {"enum": list(KERNEL_OPS) + list(FUSED_KERNEL_OPS)},
            "additionalProperties": _obj(KERNEL_OP_FIELDS, ("bw_gbps",))},
    "tables": _arr(_obj(KERNEL_TABLE_FIELDS, ("op", "dtype", "mode", "rows", "cols", "median_us"))),
}
PROVENANCE_FIELDS: dict[str, dict] = {
    "kind": _str(enum=("derived", "measured", "mixed")),
    "source": _str(),
    "gpu": _str(max_length=1000),
    "interconnect": _str(max_length=1000),
    "gpus_per_node": _int(1, 1024, nullable=True),
    "software": {"type": "object"},
    "date": _str(max_length=64),
    "citations": _arr(_str(), maxItems=10_000),
    "files": _arr(_str(max_length=4096), maxItems=100_000),
}
REPLICATE_FIELDS: dict[str, dict] = {
    "collectives": _arr({"$ref": "#/$defs/curve"}, minItems=1),
    "kernels": _obj(KERNELS_FIELDS),
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
    "bootstrap": _arr(_obj(REPLICATE_FIELDS), maxItems=10_000),
}


def profile_json_schema() -> dict:
    """The profile document's JSON Schema (draft 2020-12), built from the field tables above."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": PROFILE_SCHEMA_ID,
        "title": "argmax-tp cost-model profile (schema_version 1)",
        "description": "Validated on load by costmodel.profile; generated by `python -m costmodel.schema`.",
        "$defs": {"curve": _obj(CURVE_FIELDS, ("op", "regimes"))},
        **_obj(PROFILE_FIELDS, ("schema_version", "name", "provenance", "collectives", "kernels")),
    }


PROFILE_SCHEMA_PATH = Path(__file__).resolve().parent.parent / "data" / "profiles" / "schema.json"


def profile_schema_text() -> str:
    import json

    return json.dumps(profile_json_schema(), indent=1) + "\n"


if __name__ == "__main__":
    PROFILE_SCHEMA_PATH.write_text(profile_schema_text())
    print(f"wrote {PROFILE_SCHEMA_PATH}")
