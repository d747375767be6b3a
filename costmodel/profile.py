"""Cluster profiles: the parameters of the collective and kernel models.

A profile is a JSON document (schema_version 1) validated on load; nothing in
it is ever executed. Layout::

    {
      "schema_version": 1,
      "name": "h200-sxm-nvlink",            # short id, used by --profile
      "title": "8x H200 SXM, NVLink 4",
      "provenance": {"kind": "derived|measured|mixed", "source": str, "gpu": str,
                     "interconnect": str, "gpus_per_node": int, "nics_per_node": int?,
                     "nic_gbps": float?, "software": {..},
                     "date": "YYYY-MM-DD", "citations": [str], "files": [str]},
      "collectives": [                        # one curve per (op, world_size?, mode?)
        {"op": "all_gather", "world_size": null|int, "mode": null|"graph"|"eager", "nodes": null|int,
         "launch_us": float, "eager_overhead_us": float,
         "inter_node_busbw_gbps": float|null, "provenance": "derived|measured",
         "select": "breakpoints"|"min"?,      # default breakpoints; "min": max_bytes only document
         "regimes": [{"name": "LL", "max_bytes": int|null, "alpha_base_us": float,
                      "alpha_per_peer_us": float, "alpha_per_node_us": float,
                      "busbw_gbps": float, "s_half_bytes": float?, "inter_node_max_gbps": float?,
                      "ci90": {param: [lo, hi]}?}],
         "samples": {"bytes_per_rank": [..], "n": [..], "median_us": [..], "p10_us": [..], "p90_us": [..],
                     "raw_us": [[..], ..]}?}],      # fitted curves: the measurements per size (CurveSamples)
      "kernels": {
        "graph_kernel_us": float, "eager_launch_us": float,
        "ops": {op: {"launches": float, "fixed_us": float, "bw_gbps": float,
                     "provenance": "derived|measured"}},
        "tables": [{"op", "dtype", "mode", "world_size", "rows": [..], "cols": [..],
                    "median_us": [[..]], "source": str}]},
      "fit_report": [...]?, "bootstrap": [...]?,   # the ensemble's members, one document each, or compactly:
      "ensemble": {"method": "uniform-ranges-v1"|"columns-v1", "n": int, ...}?   # (costmodel.replicates)
    }

A curve with `world_size` null applies to every TP size; one with `mode`
null is the graph-mode curve and eager adds `eager_overhead_us`.
`curve_from_dict` validates a single curve object (calibration.fit uses it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import gpu_kernels, replicates, safe_io
from .errors import InputError
from .schema import (
    COLLECTIVE_OPS,
    DTYPES,
    FUSED_KERNEL_OPS,
    KERNEL_OPS,
    MODES,
    TOPK_KERNEL_OPS,
    SchemaViolation,
    check_schema,
    profile_json_schema,
)

SCHEMA_VERSION = 1
# an installed package carries data/ as costmodel/data (pyproject.toml); a checkout has it at the repository root
_PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = _PACKAGE_DIR / "data" if (_PACKAGE_DIR / "data" / "profiles").is_dir() else _PACKAGE_DIR.parent / "data"
PROFILE_DIR = DATA_DIR / "profiles"
DEFAULT_PROFILE = "h200-sxm-nvlink"
MAX_PROFILE_BYTES = 20 * 1024 * 1024
PROVENANCE_KINDS = ("derived", "measured", "mixed")
CURVE_IMPLS = ("nccl", "oneshot", "multimem")  # the implementation a curve measures (costmodel.collective_impls)
CURVE_SELECT = ("breakpoints", "min")  # how a curve picks its regime (costmodel.collectives)


@dataclass(frozen=True)
class Regime:
    """One protocol regime: time = alpha(p, nodes) + bus_bytes / busbw."""

    name: str
    max_bytes: float  # upper breakpoint on the collective's total bytes S (inf for the last)
    alpha_base_us: float
    alpha_per_peer_us: float
    alpha_per_node_us: float
    busbw_gbps: float
    ci90: dict[str, tuple[float, float]] = field(default_factory=dict)
    s_half_bytes: float = 0.0  # bandwidth ramp: achieved busbw = busbw * S / (S + s_half_bytes)
    inter_node_max_gbps: float | None = None  # this protocol's own busbw ceiling across nodes (NCCL LL: llMaxBw)


@dataclass(frozen=True)
class CurveSamples:
    """The measurements a fitted curve came from (calibration.fit), per distinct bytes_per_rank (increasing):
    n rows, median_us = median of the rows' median_us, p10_us / p90_us = medians of the rows' own p10 / p90
    (their iteration spread; median_us where a row has none), raw_us = the rows' median_us (at most
    schema.MAX_RAW_SAMPLES). On load: equal lengths, sizes strictly increasing, p10 <= median <= p90 and
    1 <= len(raw_us[i]) <= n[i]; the schema bounds every number (finite, positive)."""

    bytes_per_rank: tuple[float, ...]
    n: tuple[int, ...]
    median_us: tuple[float, ...]
    p10_us: tuple[float, ...]
    p90_us: tuple[float, ...]
    raw_us: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class CollectiveCurve:
    op: str
    world_size: int | None
    mode: str | None
    regimes: tuple[Regime, ...]
    launch_us: float = 0.0
    eager_overhead_us: float = 0.0
    inter_node_busbw_gbps: float | None = None
    provenance: str = "derived"
    nodes: int | None = None  # None: any node count (alpha_per_node and the inter-node cap apply)
    select: str = "breakpoints"  # "min": the fastest regime at (S, p) as NCCL picks; "breakpoints": max_bytes
    impl: str = "nccl"  # CURVE_IMPLS: "oneshot" / "multimem" curves are measured by calibration.collectives --impl
    samples: CurveSamples | None = field(default=None, compare=False, repr=False)  # fitted curves' measurements


@dataclass(frozen=True)
class KernelOp:
    """Roofline of one non-communication op: launches * per-kernel cost + fixed + bytes / bw."""

    launches: float
    fixed_us: float
    bw_gbps: float
    provenance: str = "derived"


@dataclass(frozen=True)
class KernelTable:
    op: str
    dtype: str
    mode: str
    world_size: int
    rows: tuple[float, ...]
    cols: tuple[float, ...]
    median_us: tuple[tuple[float, ...], ...]  # [len(rows)][len(cols)]
    source: str = ""
    k: int = 1  # candidates per row (schema.TOPK_KERNEL_OPS tables; 1 for every other op)


@dataclass(frozen=True)
class Provenance:
    kind: str
    source: str
    gpu: str
    interconnect: str = ""
    gpus_per_node: int | None = None  # GPUs in one NVLink / PCIe domain ("node"; 72 for a GB200 NVL72 rack)
    nics_per_node: int | None = None  # scale-out NICs per node (multi-node bus bandwidth = NICs x NIC bw x eff)
    nic_gbps: float | None = None  # one NIC's line rate, GB/s (400 Gb/s = 50 GB/s)
    software: dict[str, Any] = field(default_factory=dict)
    date: str = ""
    citations: tuple[str, ...] = ()
    files: tuple[str, ...] = ()

    @property
    def measured(self) -> bool:
        return self.kind == "measured"


@dataclass(frozen=True)
class Profile:
    name: str
    title: str
    provenance: Provenance
    collectives: tuple[CollectiveCurve, ...]
    graph_kernel_us: float
    eager_launch_us: float
    kernel_ops: dict[str, KernelOp]
    kernel_tables: tuple[KernelTable, ...] = ()
    fit_report: tuple[dict[str, Any], ...] = ()
    bootstrap: Sequence[dict[str, Any]] = ()  # a tuple, or replicates.LazyMembers (built on first use)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # kernels.model / .host / .lm_head (costmodel.gpu_kernels): the mechanistic GPU kernel model, host-side
    # costs of eager torch ops and c10d calls, and the draft lm_head GEMM model (None / {} when absent)
    kernel_model: Any = None
    kernel_host: dict[str, Any] = field(default_factory=dict, compare=False)
    lm_head: Any = None
    # measured one-shot / multimem curves (CollectiveCurve.impl != "nccl"): kept apart from `collectives`, so
    # nothing that prices NCCL sees them; costmodel.collective_impls prices its implementations with them
    impl_curves: tuple[CollectiveCurve, ...] = ()

    def curve(self, op: str, world_size: int, mode: str, nodes: int = 1) -> CollectiveCurve:
        """Most specific curve for (op, world_size, mode, nodes); InputError when none.

        Specificity ranks a matching world size above a matching node count above a matching mode.
        """
        best, best_rank = None, -1
        for c in self.collectives:
            if (c.impl != "nccl" or c.op != op or c.world_size not in (None, world_size) or c.mode not in (None, mode)
                    or c.nodes not in (None, nodes)):
                continue
            rank = 4 * (c.world_size is not None) + 2 * (c.nodes is not None) + (c.mode is not None)
            if rank > best_rank:
                best, best_rank = c, rank
        if best is None:
            raise InputError(f"profile {self.name}: no {op} curve for world size {world_size}, {nodes} node(s), "
                             f"mode {mode}")
        return best

    def impl_curve(self, impl: str, op: str, world_size: int, nodes: int = 1) -> CollectiveCurve | None:
        """The measured graph-mode `impl` curve for `op` covering (world_size, nodes) (most specific first), or None."""
        best, best_rank = None, -1
        for c in self.impl_curves:
            if (c.impl != impl or c.op != op or c.world_size not in (None, world_size) or c.nodes not in (None, nodes)
                    or c.mode not in (None, "graph")):
                continue
            rank = 2 * (c.world_size is not None) + (c.nodes is not None)
            if rank > best_rank:
                best, best_rank = c, rank
        return best

    def kernel_table(self, op: str, dtype: str | None, mode: str, world_size: int) -> KernelTable | None:
        """The measured table for (op, dtype, mode, world_size); dtype None matches any dtype."""
        for t in self.kernel_tables:
            if (t.op, t.mode, t.world_size) == (op, mode, world_size) and dtype in (None, t.dtype):
                return t
        return None


# -- validation helpers --------------------------------------------------------
def _get(obj: Any, key: str, where: str, kind: type, *, default: Any = ...) -> Any:
    """obj[key] checked against `kind` (float: any finite non-bool number; int: a non-bool integer)."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object")
    if key not in obj or obj[key] is None:
        if default is not ...:
            return default
        raise InputError(f"{where}.{key}: missing")
    value = obj[key]
    if kind is float:
        return _as_float(value, f"{where}.{key}")
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}.{key}: expected an integer, got {value!r}")
        return value
    if not isinstance(value, kind):
        raise InputError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    return value


def _nonneg(value: float, where: str) -> float:
    if value < 0:
        raise InputError(f"{where}: must be >= 0, got {value}")
    return value


def _positive(value: float, where: str) -> float:
    if value <= 0:
        raise InputError(f"{where}: must be > 0, got {value}")
    return value


def _regime(obj: Any, where: str) -> Regime:
    max_bytes = _get(obj, "max_bytes", where, float, default=math.inf)
    ci90 = _get(obj, "ci90", where, dict, default={})
    parsed_ci = {}
    for k, v in ci90.items():
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v)):
            raise InputError(f"{where}.ci90.{k}: expected [low, high]")
        parsed_ci[k] = (float(v[0]), float(v[1]))
    return Regime(
        name=_get(obj, "name", where, str, default="regime"),
        max_bytes=_positive(max_bytes, f"{where}.max_bytes"),
        alpha_base_us=_nonneg(_get(obj, "alpha_base_us", where, float), f"{where}.alpha_base_us"),
        alpha_per_peer_us=_nonneg(_get(obj, "alpha_per_peer_us", where, float, default=0.0),
                                  f"{where}.alpha_per_peer_us"),
        alpha_per_node_us=_nonneg(_get(obj, "alpha_per_node_us", where, float, default=0.0),
                                  f"{where}.alpha_per_node_us"),
        busbw_gbps=_positive(_get(obj, "busbw_gbps", where, float), f"{where}.busbw_gbps"),
        ci90=parsed_ci,
        s_half_bytes=_nonneg(_get(obj, "s_half_bytes", where, float, default=0.0), f"{where}.s_half_bytes"),
        inter_node_max_gbps=_get(obj, "inter_node_max_gbps", where, float, default=None),
    )


def _samples(obj: Any, where: str) -> CurveSamples | None:
    """A curve's `samples` (CurveSamples) after the checks JSON Schema cannot make; None when absent."""
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object")
    cols = {}
    for key in ("bytes_per_rank", "n", "median_us", "p10_us", "p90_us", "raw_us"):
        value = _get(obj, key, where, list)
        if key == "raw_us":
            if not all(isinstance(r, list) and r for r in value):
                raise InputError(f"{where}.raw_us: expected a non-empty list of times per size")
            cols[key] = tuple(tuple(_positive(_as_float(v, f"{where}.raw_us"), f"{where}.raw_us") for v in r)
                              for r in value)
        else:
            cols[key] = tuple(_positive(_as_float(v, f"{where}.{key}"), f"{where}.{key}") for v in value)
    k = len(cols["bytes_per_rank"])
    for key, value in cols.items():
        if len(value) != k:
            raise InputError(f"{where}.{key}: {len(value)} entries for {k} sizes")
    b = cols["bytes_per_rank"]
    if any(b[i] >= b[i + 1] for i in range(k - 1)):
        raise InputError(f"{where}.bytes_per_rank: sizes must increase")
    lo, med, hi = cols["p10_us"], cols["median_us"], cols["p90_us"]
    if any(not lo[i] <= med[i] <= hi[i] for i in range(k)):
        i = next(i for i in range(k) if not lo[i] <= med[i] <= hi[i])
        raise InputError(f"{where}: size {b[i]:g} needs p10_us <= median_us <= p90_us, got {lo[i]:g}, {med[i]:g}, "
                         f"{hi[i]:g}")
    n = tuple(int(v) for v in cols["n"])
    if any(float(v) != int(v) for v in cols["n"]) or any(len(r) > c for r, c in zip(cols["raw_us"], n)):
        raise InputError(f"{where}.n: whole counts >= the raw samples stored per size")
    return CurveSamples(bytes_per_rank=b, n=n, median_us=med, p10_us=lo, p90_us=hi, raw_us=cols["raw_us"])


def _as_float(value: Any, where: str) -> float:
    """`value` as a float: any finite non-bool number, else InputError naming `where`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def curve_from_dict(obj: Any, where: str = "curve") -> CollectiveCurve:
    """Validate one "collectives" entry (layout in the module doc) and build its `CollectiveCurve`.

    Raises `InputError` naming `where` and the bad field (breakpoints must increase, the last regime is open).
    """
    op = _get(obj, "op", where, str)
    if op not in COLLECTIVE_OPS:
        raise InputError(f"{where}.op: unknown collective {op!r} (known: {', '.join(COLLECTIVE_OPS)})")
    world_size = _get(obj, "world_size", where, int, default=None)
    if world_size is not None and world_size < 1:
        raise InputError(f"{where}.world_size: must be >= 1")
    mode = _get(obj, "mode", where, str, default=None)
    if mode is not None and mode not in MODES:
        raise InputError(f"{where}.mode: expected graph, eager or null, got {mode!r}")
    regimes_raw = _get(obj, "regimes", where, list)
    if not regimes_raw:
        raise InputError(f"{where}.regimes: needs at least one regime")
    regimes = tuple(_regime(r, f"{where}.regimes[{i}]") for i, r in enumerate(regimes_raw))
    select = _get(obj, "select", where, str, default="breakpoints")
    if select not in CURVE_SELECT:
        raise InputError(f"{where}.select: expected one of {', '.join(CURVE_SELECT)}, got {select!r}")
    for i in range(1, len(regimes) if select == "breakpoints" else 0):  # "min": max_bytes only document
        if regimes[i].max_bytes <= regimes[i - 1].max_bytes:
            raise InputError(f"{where}.regimes[{i}].max_bytes: breakpoints must increase")
    if select == "breakpoints" and not math.isinf(regimes[-1].max_bytes):
        raise InputError(f"{where}.regimes[{len(regimes) - 1}].max_bytes: the last regime must be open (null)")
    inter = _get(obj, "inter_node_busbw_gbps", where, float, default=None)
    nodes = _get(obj, "nodes", where, int, default=None)
    if nodes is not None and nodes < 1:
        raise InputError(f"{where}.nodes: must be >= 1")
    impl = _get(obj, "impl", where, str, default="nccl")
    if impl not in CURVE_IMPLS:
        raise InputError(f"{where}.impl: expected one of {', '.join(CURVE_IMPLS)}, got {impl!r}")
    return CollectiveCurve(
        nodes=nodes, select=select, impl=impl,
        op=op, world_size=world_size, mode=mode, regimes=regimes,
        launch_us=_nonneg(_get(obj, "launch_us", where, float, default=0.0), f"{where}.launch_us"),
        eager_overhead_us=_nonneg(_get(obj, "eager_overhead_us", where, float, default=0.0),
                                  f"{where}.eager_overhead_us"),
        inter_node_busbw_gbps=None if inter is None else _positive(inter, f"{where}.inter_node_busbw_gbps"),
        provenance=_kind(_get(obj, "provenance", where, str, default="derived"), f"{where}.provenance"),
        samples=_samples(obj.get("samples"), f"{where}.samples"),
    )


def _kind(value: str, where: str) -> str:
    if value not in PROVENANCE_KINDS:
        raise InputError(f"{where}: expected one of {', '.join(PROVENANCE_KINDS)}, got {value!r}")
    return value


def _table(obj: Any, where: str) -> KernelTable:
    op = _get(obj, "op", where, str)
    if op not in KERNEL_OPS and op not in FUSED_KERNEL_OPS and op not in TOPK_KERNEL_OPS:
        raise InputError(f"{where}.op: unknown kernel op {op!r}")
    dtype = _get(obj, "dtype", where, str)
    if dtype not in DTYPES:
        raise InputError(f"{where}.dtype: expected one of {', '.join(DTYPES)}, got {dtype!r}")
    mode = _get(obj, "mode", where, str)
    if mode not in MODES:
        raise InputError(f"{where}.mode: expected graph or eager, got {mode!r}")
    rows = _get(obj, "rows", where, list)
    cols = _get(obj, "cols", where, list)
    grid = _get(obj, "median_us", where, list)

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
                       world_size=_get(obj, "world_size", where, int, default=1),
                       rows=rows_t, cols=cols_t,
                       median_us=tuple(tuple(float(v) for v in r) for r in grid),
                       source=_get(obj, "source", where, str, default=""),
                       k=_get(obj, "k", where, int, default=1))


@lru_cache(maxsize=1)
def _profile_schema() -> dict:
    return profile_json_schema()


def check_document(data: Any, source: str = "profile") -> None:
    """First pass over a whole profile document, bootstrap replicates included: `safe_io.check_tree`
    (depth, int64 integers, finite floats, UTF-8 strings) then the JSON Schema of costmodel.schema
    (data/profiles/schema.json: every field's type and plausible range, checked by `schema.check_schema`).
    InputError names the first offending field."""
    safe_io.check_tree(data, source)
    try:
        check_schema(data, _profile_schema())
    except SchemaViolation as exc:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        raise InputError(f"{source}{where}: " + safe_io.one_line(exc.message)) from None


def profile_from_dict(data: Any, *, source: str = "profile", document_checked: bool = False) -> Profile:
    """Validate a decoded JSON document (`check_document`, then the semantic checks below) and build a
    `Profile`. document_checked=True skips `check_document` for a document whose parent already passed it
    (uncertainty builds one profile per bootstrap replicate of a checked profile)."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: a profile must be a JSON object")
    version = data.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise InputError(f"{source}: schema_version must be {SCHEMA_VERSION}, got {version!r}")
    if not document_checked:  # True: a bootstrap replicate of a profile whose whole document passed
        check_document(data, source)
    name = _get(data, "name", source, str)
    prov = _get(data, "provenance", source, dict)
    pw = f"{source}.provenance"
    provenance = Provenance(
        kind=_kind(_get(prov, "kind", pw, str), f"{pw}.kind"),
        source=_get(prov, "source", pw, str),
        gpu=_get(prov, "gpu", pw, str),
        interconnect=_get(prov, "interconnect", pw, str, default=""),
        gpus_per_node=_get(prov, "gpus_per_node", pw, int, default=None),
        nics_per_node=_get(prov, "nics_per_node", pw, int, default=None),
        nic_gbps=_get(prov, "nic_gbps", pw, float, default=None),
        software=_get(prov, "software", pw, dict, default={}),
        date=_get(prov, "date", pw, str, default=""),
        citations=tuple(_get(prov, "citations", pw, list, default=[])),
        files=tuple(_get(prov, "files", pw, list, default=[])),
    )
    curves_raw = _get(data, "collectives", source, list)
    all_curves = tuple(curve_from_dict(c, f"{source}.collectives[{i}]") for i, c in enumerate(curves_raw))
    curves = tuple(c for c in all_curves if c.impl == "nccl")
    kern = _get(data, "kernels", source, dict)
    kw = f"{source}.kernels"
    ops_raw = _get(kern, "ops", kw, dict)
    ops = {}
    for op, spec in ops_raw.items():
        where = f"{kw}.ops.{op}"
        if op not in KERNEL_OPS and op not in FUSED_KERNEL_OPS:
            raise InputError(f"{where}: unknown kernel op")
        ops[op] = KernelOp(
            launches=_nonneg(_get(spec, "launches", where, float, default=1.0), f"{where}.launches"),
            fixed_us=_nonneg(_get(spec, "fixed_us", where, float, default=0.0), f"{where}.fixed_us"),
            bw_gbps=_positive(_get(spec, "bw_gbps", where, float), f"{where}.bw_gbps"),
            provenance=_kind(_get(spec, "provenance", where, str, default="derived"), f"{where}.provenance"),
        )
    tables = tuple(_table(t, f"{kw}.tables[{i}]") for i, t in enumerate(_get(kern, "tables", kw, list, default=[])))
    compact = replicates.has_ensemble(data)
    if data.get("bootstrap") or compact:  # replicates must not contradict the point parameters (one-line error)
        from .uncertainty import check_replicates  # here: uncertainty imports this module

        # a compact ensemble: checked without building its members, on its per-parameter extremes
        check_replicates({**data, "bootstrap": replicates.check_ensemble(data, _profile_schema(), source)}
                         if compact else data, source)
    return Profile(
        name=name,
        title=_get(data, "title", source, str, default=name),
        provenance=provenance,
        collectives=curves,
        impl_curves=tuple(c for c in all_curves if c.impl != "nccl"),
        graph_kernel_us=_nonneg(_get(kern, "graph_kernel_us", kw, float), f"{kw}.graph_kernel_us"),
        eager_launch_us=_nonneg(_get(kern, "eager_launch_us", kw, float), f"{kw}.eager_launch_us"),
        kernel_ops=ops,
        kernel_tables=tables,
        fit_report=tuple(_get(data, "fit_report", source, list, default=[])),
        bootstrap=replicates.LazyMembers(data) if compact else tuple(_get(data, "bootstrap", source, list, default=[])),
        raw=data,
        kernel_model=None if kern.get("model") is None else gpu_kernels.model_from_dict(kern["model"], f"{kw}.model"),
        kernel_host=gpu_kernels.host_from_dict(kern.get("host"), f"{kw}.host"),
        lm_head=None if kern.get("lm_head") is None else gpu_kernels.lm_head_from_dict(kern["lm_head"],
                                                                                      f"{kw}.lm_head"),
    )


def parse_profile(text: str | bytes, *, source: str = "profile") -> Profile:
    """Parse profile JSON text (an upload, a file's contents)."""
    safe_io.check_size(len(text), limit_bytes=MAX_PROFILE_BYTES, source=source)
    return profile_from_dict(safe_io.loads_json(text, source), source=source)


def bundled_profiles() -> list[str]:
    """Names of the profiles shipped in data/profiles/."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json") if p.name != "schema.json")


@lru_cache(maxsize=32)
def _load_path(path: str) -> Profile:
    p = Path(path)
    text = safe_io.read_bytes(p, limit_bytes=MAX_PROFILE_BYTES, what="profile")
    return parse_profile(text, source=p.name)


def load_profile(name_or_path: str | Path | None = None) -> Profile:
    """Load a bundled profile by name, or a JSON file by path (None: the default)."""
    if name_or_path is None:
        name_or_path = DEFAULT_PROFILE
    text = str(name_or_path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError("--profile: not UTF-8 encodable") from None
    if "\x00" in text:
        raise InputError("--profile: contains a NUL character")
    candidate = PROFILE_DIR / f"{text}.json"
    if not text.endswith(".json") and "/" not in text and text != "schema" and candidate.exists():
        return _load_path(str(candidate))
    if not Path(text).exists() and not text.endswith(".json"):
        raise InputError(f"profile {text!r}: not a bundled profile ({', '.join(bundled_profiles())}) or a file")
    return _load_path(str(Path(text).resolve()))


def default_profile() -> Profile:
    return load_profile(DEFAULT_PROFILE)


def save_profile(data: dict[str, Any], path: str | Path) -> Profile:
    """Validate `data` and write it as JSON; returns the parsed profile."""
    profile = profile_from_dict(data, source=str(path))
    Path(path).write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    return profile


def tp_placement_problem(profile: Profile, tp: int, nodes: int = 1) -> str | None:
    """Why a TP group of `tp` ranks over `nodes` nodes cannot run on `profile`'s machines, or None when it can.

    A node holds `provenance.gpus_per_node` GPUs (one NVLink / PCIe domain; 72 for a GB200 NVL72 rack), so the
    group needs ceil(tp / nodes) <= gpus_per_node; profiles that do not say how many GPUs a node has accept any tp.
    """
    per_node = profile.provenance.gpus_per_node
    if per_node is None or tp <= 1 or nodes < 1:
        return None
    need = -(-int(tp) // int(nodes))
    if need <= per_node:
        return None
    fix = -(-int(tp) // per_node)
    return (f"tp {tp} on {nodes} node(s) needs {need} GPUs per node, but profile {profile.name} has "
            f"{per_node} GPUs per node: pass --nodes {fix} (or more)")


def check_tp_placement(profile: Profile, tp: int, nodes: int = 1) -> None:
    """InputError (one line) when `tp_placement_problem` finds one."""
    problem = tp_placement_problem(profile, tp, nodes)
    if problem is not None:
        raise InputError(problem)
