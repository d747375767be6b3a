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
from ..io.schema_names import COLLECTIVE_OPS, DTYPES, FUSED_KERNEL_OPS, KERNEL_OPS, MODES, TOPK_KERNEL_OPS
from . import kernel_params
from .compact import LazyMembers, has_ensemble
from .consistency import check_replicates
from .ensemble_checks import check_ensemble
from .schema import SchemaViolation, check_schema, profile_json_schema
from .types import (
    CURVE_IMPLS,
    CURVE_SELECT,
    PROVENANCE_KINDS,
    SCHEMA_VERSION,
    CollectiveCurve,
    CurveSamples,
    KernelOp,
    KernelTable,
    Profile,
    Provenance,
    Regime,
)

MAX_PROFILE_BYTES = 20 * 1024 * 1024


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


_EXACT_INT = 2**53  # ints up to this convert to float exactly (and finitely)


def _plain_float(value: Any) -> float | None:
    """`_as_float(value)` for a plain JSON float / small int (the common case); None for anything else (missing,
    a bool, a float subclass, a huge int, NaN / inf), which the checked path then handles - or refuses."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int and -_EXACT_INT <= value <= _EXACT_INT:
        return float(value)
    return None


def _plain_regime(obj: Any) -> Regime | None:
    """`_regime` of a regime whose fields are all plain and in range (the fields and defaults `_regime` reads, no
    ci90), without its per-field calls: ~3x faster for the thousands of regimes of a profile's replicates. None
    when anything is unusual; `_regime` then checks it field by field (and names what is wrong). A value is
    accepted as `_plain_float` accepts it (a plain float, finite; a plain int within 2^53), written inline."""
    if type(obj) is not dict:
        return None
    get = obj.get
    ci90, name = get("ci90"), get("name")
    if (ci90 is not None and ci90 != {}) or (name is not None and not isinstance(name, str)):
        return None
    values = []
    for key, default, low, strict in _PLAIN_REGIME_FIELDS:
        v = get(key)
        if v is None:
            if default is None:
                return None  # required: `_regime` names it
            values.append(default)
            continue
        kind = type(v)
        if kind is int and -_EXACT_INT <= v <= _EXACT_INT:
            v = float(v)
        elif kind is not float:
            return None
        # finite and above the bound (NaN fails every comparison): _plain_float, then `v < low or v == low`
        if not ((low < v < _INF) if strict else (low <= v < _INF)):
            return None
        values.append(v)
    inter = get("inter_node_max_gbps")
    inter_v = None if inter is None else _plain_float(inter)
    if inter is not None and inter_v is None:
        return None
    max_bytes, base, peer, node, bw, s_half = values
    return Regime(name="regime" if name is None else name, max_bytes=max_bytes, alpha_base_us=base,
                  alpha_per_peer_us=peer, alpha_per_node_us=node, busbw_gbps=bw, ci90={}, s_half_bytes=s_half,
                  inter_node_max_gbps=inter_v)


_INF = math.inf


# (field, default when missing / null (None: required), lower bound, bound excluded) - as `_regime` checks them
_PLAIN_REGIME_FIELDS = (("max_bytes", math.inf, 0.0, True), ("alpha_base_us", None, 0.0, False),
                        ("alpha_per_peer_us", 0.0, 0.0, False), ("alpha_per_node_us", 0.0, 0.0, False),
                        ("busbw_gbps", None, 0.0, True), ("s_half_bytes", 0.0, 0.0, False))


def _regime(obj: Any, where: str) -> Regime:
    """One collective regime, checked: `_plain_regime` when it applies, else `_checked_regime`."""
    plain = _plain_regime(obj)
    return plain if plain is not None else _checked_regime(obj, where)


def _checked_regime(obj: Any, where: str) -> Regime:
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


def _plain_curve(obj: Any) -> CollectiveCurve | None:
    """`curve_from_dict` of a curve whose fields are all plain and valid (plain regimes, no samples), without its
    per-field calls and error texts: the same CollectiveCurve. None when anything is unusual or wrong;
    `curve_from_dict` then checks it field by field (and names what is wrong)."""
    if type(obj) is not dict:
        return None
    get = obj.get
    op, world_size, mode, regimes_raw = get("op"), get("world_size"), get("mode"), get("regimes")
    select, nodes, impl, provenance = get("select"), get("nodes"), get("impl"), get("provenance")
    from_base = get("from_base")
    if get("samples") is not None or type(op) is not str or op not in COLLECTIVE_OPS:
        return None
    if world_size is not None and (type(world_size) is not int or world_size < 1):
        return None
    if nodes is not None and (type(nodes) is not int or nodes < 1):
        return None
    if mode is not None and (type(mode) is not str or mode not in MODES):
        return None
    select = "breakpoints" if select is None else select
    impl = "nccl" if impl is None else impl
    provenance = "derived" if provenance is None else provenance
    if (type(select) is not str or select not in CURVE_SELECT or type(impl) is not str or impl not in CURVE_IMPLS
            or type(provenance) is not str or provenance not in PROVENANCE_KINDS
            or (from_base is not None and type(from_base) is not str)):
        return None
    if type(regimes_raw) is not list or not regimes_raw:
        return None
    regimes = []
    for r in regimes_raw:
        regime = _plain_regime(r)
        if regime is None:
            return None
        regimes.append(regime)
    if select == "breakpoints":
        if regimes[-1].max_bytes != _INF or any(regimes[i].max_bytes <= regimes[i - 1].max_bytes
                                                for i in range(1, len(regimes))):
            return None
    floats = []
    for key, default in (("launch_us", 0.0), ("eager_overhead_us", 0.0), ("inter_node_busbw_gbps", None)):
        v = get(key)
        if v is not None:
            v = _plain_float(v)
            if v is None or v < 0 or (default is None and v == 0):  # launch / overhead >= 0, bandwidth > 0
                return None
        floats.append(default if v is None else v)
    launch, overhead, inter = floats
    return CollectiveCurve(nodes=nodes, select=select, impl=impl, op=op, world_size=world_size, mode=mode,
                           regimes=tuple(regimes), launch_us=launch, eager_overhead_us=overhead,
                           inter_node_busbw_gbps=inter, provenance=provenance, samples=None,
                           from_base="" if from_base is None else from_base)


def curve_from_dict(obj: Any, where: str = "curve") -> CollectiveCurve:
    """Validate one "collectives" entry (layout in the module doc) and build its `CollectiveCurve`.

    Raises `InputError` naming `where` and the bad field (breakpoints must increase, the last regime is open).
    A plain, valid curve takes `_plain_curve` (the same result without the per-field calls).
    """
    plain = _plain_curve(obj)
    if plain is not None:
        return plain
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
        from_base=_get(obj, "from_base", where, str, default=""),
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
    (depth, int64 integers, finite floats, UTF-8 strings) then the JSON Schema of costmodel.profiles.schema
    (data/profiles/schema.json: every field's type and plausible range, checked by `schema.check_schema`).
    InputError names the first offending field."""
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
        launches=_nonneg(_get(spec, "launches", where, float, default=1.0), f"{where}.launches"),
        fixed_us=_nonneg(_get(spec, "fixed_us", where, float, default=0.0), f"{where}.fixed_us"),
        bw_gbps=_positive(_get(spec, "bw_gbps", where, float), f"{where}.bw_gbps"),
        provenance=_kind(_get(spec, "provenance", where, str, default="derived"), f"{where}.provenance"),
    )


def profile_from_dict(data: Any, *, source: str = "profile", document_checked: bool = False,
                      parent: Profile | None = None) -> Profile:
    """Validate a decoded JSON document (`check_document`, then the semantic checks below) and build a
    `Profile`. document_checked=True skips `check_document` for a document whose parent already passed it
    (uncertainty builds one profile per bootstrap replicate of a checked profile). parent: a Profile whose raw
    document shares objects with `data` (a replicate's parent): the kernel tables, lm_head and host objects that
    are the very same objects as the parent's are not parsed again - the parent's parsed values are taken (the
    same input object gives the same result)."""
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
        nvlink_generation=_get(prov, "nvlink_generation", pw, int, default=None),
        software=_get(prov, "software", pw, dict, default={}),
        date=_get(prov, "date", pw, str, default=""),
        citations=tuple(_get(prov, "citations", pw, list, default=[])),
        files=tuple(_get(prov, "files", pw, list, default=[])),
        base=_get(prov, "base", pw, str, default=""),
        base_gpu=_get(prov, "base_gpu", pw, str, default=""),
    )
    curves_raw = _get(data, "collectives", source, list)
    all_curves = tuple(curve_from_dict(c, f"{source}.collectives[{i}]") for i, c in enumerate(curves_raw))
    curves = tuple(c for c in all_curves if c.impl == "nccl")
    kern = _get(data, "kernels", source, dict)
    kw = f"{source}.kernels"
    ops_raw = _get(kern, "ops", kw, dict)
    ops = {op: kernel_op_from_dict(op, spec, f"{kw}.ops.{op}") for op, spec in ops_raw.items()}
    tables_raw = _get(kern, "tables", kw, list, default=[])
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
        title=_get(data, "title", source, str, default=name),
        provenance=provenance,
        collectives=curves,
        impl_curves=tuple(c for c in all_curves if c.impl != "nccl"),
        graph_kernel_us=_nonneg(_get(kern, "graph_kernel_us", kw, float), f"{kw}.graph_kernel_us"),
        eager_launch_us=_nonneg(_get(kern, "eager_launch_us", kw, float), f"{kw}.eager_launch_us"),
        kernel_ops=ops,
        kernel_tables=tables,
        fit_report=tuple(_get(data, "fit_report", source, list, default=[])),
        bootstrap=LazyMembers(data) if compact else tuple(_get(data, "bootstrap", source, list, default=[])),
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
    return profile_from_dict(safe_io.loads_json(text, source), source=source)
