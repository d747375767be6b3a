"""A profile document -> a checked, frozen `Profile` (one-line errors naming the bad field).

`check_document` validates the whole document against the JSON schema (`costmodel.profiles.schema`);
`profile_from_dict` then converts it field by field (non-negative latencies, positive bandwidths, known ops,
monotone regime breakpoints, kernel tables on increasing axes) and refuses replicates that contradict the point
values (`costmodel.profiles.consistency`). `parse_profile` reads JSON text with strict parsing (no NaN, no
duplicate keys, bounded size). Nothing in a profile is ever executed.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from ..io import safe_io
from ..io.errors import InputError
from ..io.schema_names import DTYPES, FUSED_KERNEL_OPS, KERNEL_OPS, MODES, TOPK_KERNEL_OPS
from . import kernel_params
from .compact import LazyMembers, has_ensemble
from .consistency import check_replicates
from .ensemble_checks import check_ensemble
from .fields import get_field, nonneg, positive, provenance_kind
from .parse_curves import curve_from_dict
from .schema import profile_json_schema
from .schema_check import SchemaViolation, check_schema
from .types import (
    SCHEMA_VERSION,
    KernelOp,
    KernelTable,
    Profile,
    Provenance,
)

MAX_PROFILE_BYTES = 20 * 1024 * 1024


def _table(obj: Any, where: str) -> KernelTable:
    op = get_field(obj, "op", where, str)
    if op not in KERNEL_OPS and op not in FUSED_KERNEL_OPS and op not in TOPK_KERNEL_OPS:
        raise InputError(f"{where}.op: unknown kernel op {op!r}")
    dtype = get_field(obj, "dtype", where, str)
    if dtype not in DTYPES:
        raise InputError(f"{where}.dtype: expected one of {', '.join(DTYPES)}, got {dtype!r}")
    mode = get_field(obj, "mode", where, str)
    if mode not in MODES:
        raise InputError(f"{where}.mode: expected graph or eager, got {mode!r}")
    rows = get_field(obj, "rows", where, list)
    cols = get_field(obj, "cols", where, list)
    grid = get_field(obj, "median_us", where, list)

    def axis(values: list, name: str) -> tuple[float, ...]:
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
            raise InputError(f"{where}.{name}: expected a non-empty list of positive numbers")
        if any(b <= a for a, b in zip(values, values[1:])):
            raise InputError(f"{where}.{name}: must be strictly increasing")
        return tuple(float(v) for v in values)

    rows_t, cols_t = axis(rows, "rows"), axis(cols, "cols")
    if len(grid) != len(rows_t) or any(not isinstance(r, list) or len(r) != len(cols_t) for r in grid):
        raise InputError(f"{where}.median_us: expected a {len(rows_t)} x {len(cols_t)} grid")
    for r in grid:
        for v in r:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise InputError(f"{where}.median_us: times must be finite and > 0, got {v!r}")
    return KernelTable(op=op, dtype=dtype, mode=mode,
                       world_size=get_field(obj, "world_size", where, int, default=1),
                       rows=rows_t, cols=cols_t,
                       median_us=tuple(tuple(float(v) for v in r) for r in grid),
                       source=get_field(obj, "source", where, str, default=""),
                       k=get_field(obj, "k", where, int, default=1))


@lru_cache(maxsize=1)
def _profile_schema() -> dict:
    return profile_json_schema()


def check_document(data: Any, source: str = "profile", *, tree_checked: bool = False) -> None:
    """First pass over a whole profile document, bootstrap replicates included: `safe_io.check_tree`
    (depth, int64 integers, finite floats, UTF-8 strings; tree_checked=True: `safe_io.loads_json` decoded `data`
    and ran it already) then the JSON Schema of costmodel.profiles.schema (data/profiles/schema.json: every
    field's type and plausible range, checked by `schema_check.check_schema`). InputError names the first
    offending field."""
    if not tree_checked:
        safe_io.check_tree(data, source)
    try:
        check_schema(data, _profile_schema())
    except SchemaViolation as exc:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        raise InputError(f"{source}{where}: " + safe_io.one_line(exc.message)) from None


def kernel_op_from_dict(op: str, spec: Any, where: str) -> KernelOp:
    """One `kernels.ops` entry: launches, fixed_us, bw_gbps (roofline), provenance."""
    if op not in KERNEL_OPS and op not in FUSED_KERNEL_OPS:
        raise InputError(f"{where}: unknown kernel op")
    return KernelOp(
        launches=nonneg(get_field(spec, "launches", where, float, default=1.0), f"{where}.launches"),
        fixed_us=nonneg(get_field(spec, "fixed_us", where, float, default=0.0), f"{where}.fixed_us"),
        bw_gbps=positive(get_field(spec, "bw_gbps", where, float), f"{where}.bw_gbps"),
        provenance=provenance_kind(get_field(spec, "provenance", where, str, default="derived"), f"{where}.provenance"),
    )


def profile_from_dict(data: Any, *, source: str = "profile", document_checked: bool = False,
                      parent: Profile | None = None, tree_checked: bool = False) -> Profile:
    """Validate a decoded JSON document (`check_document`, then the semantic checks below) and build a
    `Profile`. document_checked=True skips `check_document` for a document whose parent already passed it
    (uncertainty builds one profile per bootstrap replicate of a checked profile). parent: a Profile whose raw
    document shares objects with `data` (a replicate's parent): the kernel tables, lm_head and host objects that
    are the very same objects as the parent's are not parsed again - the parent's parsed values are taken (the
    same input object gives the same result). tree_checked=True: `data` is what `safe_io.loads_json` returned
    (its `check_tree` ran; `check_document` does not run it again)."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: a profile must be a JSON object")
    version = data.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise InputError(f"{source}: schema_version must be {SCHEMA_VERSION}, got {version!r}")
    if not document_checked:  # True: a bootstrap replicate of a profile whose whole document passed
        check_document(data, source, tree_checked=tree_checked)
    name = get_field(data, "name", source, str)
    prov = get_field(data, "provenance", source, dict)
    pw = f"{source}.provenance"
    provenance = Provenance(
        kind=provenance_kind(get_field(prov, "kind", pw, str), f"{pw}.kind"),
        source=get_field(prov, "source", pw, str),
        gpu=get_field(prov, "gpu", pw, str),
        interconnect=get_field(prov, "interconnect", pw, str, default=""),
        gpus_per_node=get_field(prov, "gpus_per_node", pw, int, default=None),
        nics_per_node=get_field(prov, "nics_per_node", pw, int, default=None),
        nic_gbps=get_field(prov, "nic_gbps", pw, float, default=None),
        nvlink_generation=get_field(prov, "nvlink_generation", pw, int, default=None),
        software=get_field(prov, "software", pw, dict, default={}),
        date=get_field(prov, "date", pw, str, default=""),
        citations=tuple(get_field(prov, "citations", pw, list, default=[])),
        files=tuple(get_field(prov, "files", pw, list, default=[])),
        base=get_field(prov, "base", pw, str, default=""),
        base_gpu=get_field(prov, "base_gpu", pw, str, default=""),
    )
    curves_raw = get_field(data, "collectives", source, list)
    all_curves = tuple(curve_from_dict(c, f"{source}.collectives[{i}]") for i, c in enumerate(curves_raw))
    curves = tuple(c for c in all_curves if c.impl == "nccl")
    kern = get_field(data, "kernels", source, dict)
    kw = f"{source}.kernels"
    ops_raw = get_field(kern, "ops", kw, dict)
    ops = {op: kernel_op_from_dict(op, spec, f"{kw}.ops.{op}") for op, spec in ops_raw.items()}
    tables_raw = get_field(kern, "tables", kw, list, default=[])
    parent_kern = parent.raw.get("kernels") if parent is not None and isinstance(parent.raw, dict) else None
    parent_kern = parent_kern if isinstance(parent_kern, dict) else None

    def shared(key: str) -> bool:  # data's kernels[key] is the parent's own object (None for both: both absent)
        return parent_kern is not None and kern.get(key) is parent_kern.get(key)

    tables = parent.kernel_tables if shared("tables") and tables_raw is parent_kern.get("tables") else \
        tuple(_table(t, f"{kw}.tables[{i}]") for i, t in enumerate(tables_raw))
    compact = has_ensemble(data)
    if data.get("bootstrap") or compact:  # replicates must not contradict the point parameters (one-line error)
        # a compact ensemble: checked without building its members, on its per-parameter extremes
        check_replicates({**data, "bootstrap": check_ensemble(data, _profile_schema(), source)}
                         if compact else data, source)
    return Profile(
        name=name,
        title=get_field(data, "title", source, str, default=name),
        provenance=provenance,
        collectives=curves,
        impl_curves=tuple(c for c in all_curves if c.impl != "nccl"),
        graph_kernel_us=nonneg(get_field(kern, "graph_kernel_us", kw, float), f"{kw}.graph_kernel_us"),
        eager_launch_us=nonneg(get_field(kern, "eager_launch_us", kw, float), f"{kw}.eager_launch_us"),
        kernel_ops=ops,
        kernel_tables=tables,
        fit_report=tuple(get_field(data, "fit_report", source, list, default=[])),
        bootstrap=LazyMembers(data) if compact else tuple(get_field(data, "bootstrap", source, list, default=[])),
        raw=data,
        kernel_model=None if kern.get("model") is None else kernel_params.model_from_dict(kern["model"], f"{kw}.model"),
        kernel_host=parent.kernel_host if shared("host") else kernel_params.host_from_dict(kern.get("host"),
                                                                                           f"{kw}.host"),
        lm_head=parent.lm_head if shared("lm_head") else None if kern.get("lm_head") is None else
        kernel_params.lm_head_from_dict(kern["lm_head"], f"{kw}.lm_head"),
    )


def parse_profile(text: str | bytes, *, source: str = "profile") -> Profile:
    """Parse profile JSON text (an upload, a file's contents)."""
    safe_io.check_size(len(text), limit_bytes=MAX_PROFILE_BYTES, source=source)
    return profile_from_dict(safe_io.loads_json(text, source), source=source, tree_checked=True)
