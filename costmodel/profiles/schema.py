"""The profile JSON schema (data/profiles/schema.json) and a small, bounded checker for it.

The schema is built here from field tables (REGIME_FIELDS, CURVE_FIELDS, KERNELS_FIELDS, ...) with physical ranges
(BANDWIDTH_GBPS, LATENCY_US, TABLE_TIME_US); `python -m costmodel.profiles.schema` rewrites the JSON file, and a test
checks it is current. `costmodel.profiles.schema_check.check_schema` validates a document against it without
recursion limits or regex backtracking (`SchemaViolation` names the first bad path).
"""

from __future__ import annotations

from pathlib import Path

from ..io.schema_names import (
    COLLECTIVE_OPS,
    DTYPES,
    FUSED_KERNEL_OPS,
    KERNEL_OPS,
    MAX_TOPK,
    MAX_WORLD_SIZE,
    MODES,
    TOPK_KERNEL_OPS,
)

# -- the profile document (costmodel.profiles.types) as JSON Schema ------------------------------------------------
# One table of field specs. Plausible ranges: bandwidths 0.01 GB/s .. 100 TB/s, latencies 0 .. 1 s,
# measured table times (0, 100 s], counts and sizes positive int64. `profile.py` checks what JSON Schema
# cannot (increasing breakpoints, the table grid's shape) and `safe_io.check_tree` the whole document
# (depth, int64, finite floats, UTF-8 strings). To add a field: add it to the object's table below and
# regenerate data/profiles/schema.json with `python -m costmodel.profiles.schema`.
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
    """A closed object: only `props` (a misspelled key such as `busbw_gpbs` is refused, not silently ignored);
    `additionalProperties=...` in `extra` opens it."""
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False,
            **extra}


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
    "net_busbw_gbps": _num(0, 1e6, exclusive_low=True, nullable=True),
}
MAX_SAMPLE_SIZES = 192  # sizes per curve's stored samples (calibration.fit MAX_GROUP_SIZES)
MAX_RAW_SAMPLES = 16  # raw times stored per size (calibration.fit MAX_REPEATS_PER_POINT)
_TIMES = _arr(_num(*TABLE_TIME_US, exclusive_low=True), minItems=1, maxItems=MAX_SAMPLE_SIZES)
SAMPLES_FIELDS: dict[str, dict] = {  # costmodel.profiles.types.CurveSamples: the measurements a fitted curve came from
    "bytes_per_rank": _arr(_num(0, 2.0**63, exclusive_low=True), minItems=1, maxItems=MAX_SAMPLE_SIZES),
    "n": _arr(_int(1, 2**31), minItems=1, maxItems=MAX_SAMPLE_SIZES),
    "median_us": _TIMES, "p10_us": _TIMES, "p90_us": _TIMES,
    "raw_us": _arr(_arr(_num(*TABLE_TIME_US, exclusive_low=True), minItems=1, maxItems=MAX_RAW_SAMPLES),
                   minItems=1, maxItems=MAX_SAMPLE_SIZES),
}
_COLUMN = {"max_bytes": REGIME_FIELDS["max_bytes"], "busbw_gbps": _BW, "net_busbw_gbps": _BW,
           "s_half_bytes": REGIME_FIELDS["s_half_bytes"]}  # a candidate family's per-bracket columns
CANDIDATE_FIELDS: dict[str, dict] = {  # costmodel.profiles.types.CollectiveCurve.candidates, one family
    **{k: REGIME_FIELDS[k] for k in ("name", "alpha_base_us", "alpha_per_peer_us", "alpha_per_node_us",
                                     "inter_node_max_gbps")},
    **{k: _arr(v, minItems=1, maxItems=64) for k, v in _COLUMN.items()},
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
    "from_base": _str(max_length=200),  # calibration.fit: the base profile this curve was kept from
    "candidates": _arr(_obj(CANDIDATE_FIELDS, ("name", "alpha_base_us", "max_bytes", "busbw_gbps")), maxItems=16),
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
KERNEL_MODEL_FIELDS: dict[str, dict] = {  # costmodel.profiles.kernel_params.model_from_dict
    "gpu": _str(max_length=1000), "provenance": _str(enum=_KIND + ("mixed",)), "source": _str(),
    "sm_count": _int(1, 100_000), "max_threads_per_sm": _int(1, 100_000), "warp_size": _int(1, 1024),
    "hbm_gbps": _BW, "reduce_gbps": _BW,
    **{k: _LAT for k in ("value_us", "wave_us", "global_reduce_us", "small_us", "small_row_us", "copy_floor_us",
                         "pair_base_us", "pair_row_us", "pair_peer_us", "torch_op_us", "view_op_us",
                         "eager_gap_us")},
    "reduce_ops": {"type": "object", "additionalProperties": _obj({"floor_us": _LAT, "elems_per_us": _RATE},
                                                                  ("floor_us", "elems_per_us"))},
    "copy_gbps": {"type": "object", "additionalProperties": _BW},
}
KERNEL_HOST_FIELDS: dict[str, dict] = {  # costmodel.profiles.kernel_params.host_from_dict
    "torch_op_us": _LAT, "view_op_us": _LAT, "c10d_call_us": _LAT, "source": _str(),
    "c10d_table": _obj({"bytes": _arr(_num(0, 2.0**63, exclusive_low=True)),
                        "median_us": _arr(_num(*TABLE_TIME_US, exclusive_low=True))}, ("bytes", "median_us")),
}
LM_HEAD_FIELDS: dict[str, dict] = {  # costmodel.profiles.kernel_params.lm_head_from_dict
    "floor_us": _LAT, "weight_gbps": _BW, "tflops": _num(0, 1e6, exclusive_low=True),
    "provenance": _str(enum=_KIND + ("mixed",)), "source": _str(),
}
MODEL_CV_FIELDS: dict[str, dict] = {  # costmodel.evidence.gpu_kernel_fit.cross_validate rows (kernels.model_cv)
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
    "from_base": _arr(_str(max_length=200), maxItems=10_000),  # calibration.fit: parts kept from the base profile
}
PROVENANCE_FIELDS: dict[str, dict] = {
    "kind": _str(enum=("derived", "measured", "mixed")),
    "source": _str(),
    "gpu": _str(max_length=1000),
    "interconnect": _str(max_length=1000),
    "gpus_per_node": _int(1, 1024, nullable=True),
    "nics_per_node": _int(0, 1024, nullable=True),
    "nic_gbps": _num(0, 1e5, exclusive_low=True, nullable=True),
    "nvlink_generation": _int(1, 100, nullable=True),  # costmodel.model.peer_sync: custom collectives' flag round
    "software": {"type": "object"},
    "date": _str(max_length=64),
    "citations": _arr(_str(), maxItems=10_000),
    "files": _arr(_str(max_length=4096), maxItems=100_000),
    "base": _str(max_length=200),  # calibration.fit: the base profile's name and GPU
    "base_gpu": _str(max_length=1000),
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
        "description": ("Validated on load by costmodel.profiles.parse; "
                        "generated by `python -m costmodel.profiles.schema`."),
        "$defs": {"curve": _obj(CURVE_FIELDS, ("op", "regimes")),
                  "member": _obj(REPLICATE_FIELDS)},  # one ensemble member (a bootstrap replicate)
        **_obj(PROFILE_FIELDS, ("schema_version", "name", "provenance", "collectives", "kernels")),
    }


PROFILE_SCHEMA_PATH = Path(__file__).resolve().parents[2] / "data" / "profiles" / "schema.json"


def profile_schema_text() -> str:
    import json

    return json.dumps(profile_json_schema(), indent=1) + "\n"


if __name__ == "__main__":
    PROFILE_SCHEMA_PATH.write_text(profile_schema_text())
    print(f"wrote {PROFILE_SCHEMA_PATH}")
