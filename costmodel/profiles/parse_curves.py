"""One "collectives" entry of a profile document -> a checked, frozen `CollectiveCurve` (`curve_from_dict`).

Regimes (breakpoints increasing, the last open), their optional ci90 and the measured samples a fitted curve
carries; a plain, valid curve takes the fast path (`_plain_curve`, `_plain_regime`: the same result without the
per-field calls, for the thousands of regimes of a profile's replicates). Errors are one line naming the field.
"""

from __future__ import annotations

import math
from typing import Any

from ..io.errors import InputError
from ..io.schema_names import COLLECTIVE_OPS, MODES
from .fields import EXACT_INT, as_float, get_field, nonneg, plain_float, positive, provenance_kind
from .types import (
    CURVE_IMPLS,
    CURVE_SELECT,
    PROVENANCE_KINDS,
    CollectiveCurve,
    CurveSamples,
    Regime,
)


def _plain_regime(obj: Any) -> Regime | None:
    """`_regime` of a regime whose fields are all plain and in range (the fields and defaults `_regime` reads, no
    ci90), without its per-field calls: ~3x faster for the thousands of regimes of a profile's replicates. None
    when anything is unusual; `_regime` then checks it field by field (and names what is wrong). A value is
    accepted as `plain_float` accepts it (a plain float, finite; a plain int within 2^53), written inline."""
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
        if kind is int and -EXACT_INT <= v <= EXACT_INT:
            v = float(v)
        elif kind is not float:
            return None
        # finite and above the bound (NaN fails every comparison): plain_float, then `v < low or v == low`
        if not ((low < v < _INF) if strict else (low <= v < _INF)):
            return None
        values.append(v)
    optional = []
    for key in ("inter_node_max_gbps", "net_busbw_gbps"):
        raw = get(key)
        v = None if raw is None else plain_float(raw)
        if raw is not None and v is None:
            return None
        optional.append(v)
    max_bytes, base, peer, node, bw, s_half = values
    return Regime(name="regime" if name is None else name, max_bytes=max_bytes, alpha_base_us=base,
                  alpha_per_peer_us=peer, alpha_per_node_us=node, busbw_gbps=bw, ci90={}, s_half_bytes=s_half,
                  inter_node_max_gbps=optional[0], net_busbw_gbps=optional[1])


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
    max_bytes = get_field(obj, "max_bytes", where, float, default=math.inf)
    ci90 = get_field(obj, "ci90", where, dict, default={})
    parsed_ci = {}
    for k, v in ci90.items():
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v)):
            raise InputError(f"{where}.ci90.{k}: expected [low, high]")
        parsed_ci[k] = (float(v[0]), float(v[1]))
    return Regime(
        name=get_field(obj, "name", where, str, default="regime"),
        max_bytes=positive(max_bytes, f"{where}.max_bytes"),
        alpha_base_us=nonneg(get_field(obj, "alpha_base_us", where, float), f"{where}.alpha_base_us"),
        alpha_per_peer_us=nonneg(get_field(obj, "alpha_per_peer_us", where, float, default=0.0),
                                  f"{where}.alpha_per_peer_us"),
        alpha_per_node_us=nonneg(get_field(obj, "alpha_per_node_us", where, float, default=0.0),
                                  f"{where}.alpha_per_node_us"),
        busbw_gbps=positive(get_field(obj, "busbw_gbps", where, float), f"{where}.busbw_gbps"),
        ci90=parsed_ci,
        s_half_bytes=nonneg(get_field(obj, "s_half_bytes", where, float, default=0.0), f"{where}.s_half_bytes"),
        inter_node_max_gbps=get_field(obj, "inter_node_max_gbps", where, float, default=None),
        net_busbw_gbps=get_field(obj, "net_busbw_gbps", where, float, default=None),
    )


CANDIDATE_COLUMNS = ("max_bytes", "busbw_gbps", "net_busbw_gbps", "s_half_bytes")


_COLUMN_NULL = {"max_bytes": math.inf, "net_busbw_gbps": None, "s_half_bytes": 0.0}  # a null entry: open / unset / 0


def _column(values: list | None, key: str, at: str, k: int) -> list:
    """One candidate column checked as `_checked_regime` checks the field (`as_float`, then `positive` or, for
    s_half_bytes, `nonneg`); a null entry or a missing column takes _COLUMN_NULL (busbw_gbps has none: required)."""
    if values is None:
        return [_COLUMN_NULL.get(key)] * k
    check = nonneg if key == "s_half_bytes" else positive
    return [_COLUMN_NULL[key] if v is None and key in _COLUMN_NULL else check(as_float(v, f"{at}.{key}"), f"{at}.{key}")
            for v in values]


def _candidates(obj: Any, where: str) -> tuple[Regime, ...]:
    """A per-(p, n) curve's `candidates` (CollectiveCurve.candidates): per family, its fixed fields plus
    CANDIDATE_COLUMNS lists of one length, one regime per bracket, max_bytes increasing and the last open."""
    if obj is None:
        return ()
    if not isinstance(obj, list):
        raise InputError(f"{where}: expected a list of families")
    out: list[Regime] = []
    for i, family in enumerate(obj):
        at = f"{where}[{i}]"
        if not isinstance(family, dict):
            raise InputError(f"{at}: expected an object")
        columns = {k: family[k] for k in CANDIDATE_COLUMNS if k in family}
        if not all(isinstance(v, list) and v for v in columns.values()) or "busbw_gbps" not in columns:
            raise InputError(f"{at}: max_bytes, busbw_gbps (and net_busbw_gbps, s_half_bytes) are non-empty lists")
        k = len(columns["busbw_gbps"])
        if any(len(v) != k for v in columns.values()):
            raise InputError(f"{at}: {', '.join(columns)} need one entry per bracket ({k})")
        fixed = {key: v for key, v in family.items() if key not in CANDIDATE_COLUMNS}
        first = _regime({**fixed, **{key: v[0] for key, v in columns.items()}}, f"{at}[0]")  # the fixed fields
        cols = [_column(columns.get(key), key, at, k) for key in CANDIDATE_COLUMNS]
        brackets = tuple(Regime(first.name, mb, first.alpha_base_us, first.alpha_per_peer_us, first.alpha_per_node_us,
                                bw, {}, half, first.inter_node_max_gbps, net_busbw_gbps=net)
                         for mb, bw, net, half in zip(*cols))
        if any(b.max_bytes <= a.max_bytes for a, b in zip(brackets, brackets[1:])) or not math.isinf(
                brackets[-1].max_bytes):
            raise InputError(f"{at}.max_bytes: brackets must increase and the last be open (null)")
        out += brackets
    return tuple(out)


def _samples(obj: Any, where: str) -> CurveSamples | None:
    """A curve's `samples` (CurveSamples) after the checks JSON Schema cannot make; None when absent."""
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object")
    cols = {}
    for key in ("bytes_per_rank", "n", "median_us", "p10_us", "p90_us", "raw_us"):
        value = get_field(obj, key, where, list)
        if key == "raw_us":
            if not all(isinstance(r, list) and r for r in value):
                raise InputError(f"{where}.raw_us: expected a non-empty list of times per size")
            cols[key] = tuple(tuple(positive(as_float(v, f"{where}.raw_us"), f"{where}.raw_us") for v in r)
                              for r in value)
        else:
            cols[key] = tuple(positive(as_float(v, f"{where}.{key}"), f"{where}.{key}") for v in value)
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
            v = plain_float(v)
            if v is None or v < 0 or (default is None and v == 0):  # launch / overhead >= 0, bandwidth > 0
                return None
        floats.append(default if v is None else v)
    launch, overhead, inter = floats
    try:
        candidates = _candidates(get("candidates"), "candidates")
    except InputError:
        return None
    return CollectiveCurve(nodes=nodes, select=select, impl=impl, op=op, world_size=world_size, mode=mode,
                           regimes=tuple(regimes), launch_us=launch, eager_overhead_us=overhead,
                           inter_node_busbw_gbps=inter, provenance=provenance, samples=None,
                           from_base="" if from_base is None else from_base, candidates=candidates)


def curve_from_dict(obj: Any, where: str = "curve") -> CollectiveCurve:
    """Validate one "collectives" entry (layout in the module doc) and build its `CollectiveCurve`.

    Raises `InputError` naming `where` and the bad field (breakpoints must increase, the last regime is open).
    A plain, valid curve takes `_plain_curve` (the same result without the per-field calls).
    """
    plain = _plain_curve(obj)
    if plain is not None:
        return plain
    op = get_field(obj, "op", where, str)
    if op not in COLLECTIVE_OPS:
        raise InputError(f"{where}.op: unknown collective {op!r} (known: {', '.join(COLLECTIVE_OPS)})")
    world_size = get_field(obj, "world_size", where, int, default=None)
    if world_size is not None and world_size < 1:
        raise InputError(f"{where}.world_size: must be >= 1")
    mode = get_field(obj, "mode", where, str, default=None)
    if mode is not None and mode not in MODES:
        raise InputError(f"{where}.mode: expected graph, eager or null, got {mode!r}")
    regimes_raw = get_field(obj, "regimes", where, list)
    if not regimes_raw:
        raise InputError(f"{where}.regimes: needs at least one regime")
    regimes = tuple(_regime(r, f"{where}.regimes[{i}]") for i, r in enumerate(regimes_raw))
    select = get_field(obj, "select", where, str, default="breakpoints")
    if select not in CURVE_SELECT:
        raise InputError(f"{where}.select: expected one of {', '.join(CURVE_SELECT)}, got {select!r}")
    for i in range(1, len(regimes) if select == "breakpoints" else 0):  # "min": max_bytes only document
        if regimes[i].max_bytes <= regimes[i - 1].max_bytes:
            raise InputError(f"{where}.regimes[{i}].max_bytes: breakpoints must increase")
    if select == "breakpoints" and not math.isinf(regimes[-1].max_bytes):
        raise InputError(f"{where}.regimes[{len(regimes) - 1}].max_bytes: the last regime must be open (null)")
    inter = get_field(obj, "inter_node_busbw_gbps", where, float, default=None)
    nodes = get_field(obj, "nodes", where, int, default=None)
    if nodes is not None and nodes < 1:
        raise InputError(f"{where}.nodes: must be >= 1")
    impl = get_field(obj, "impl", where, str, default="nccl")
    if impl not in CURVE_IMPLS:
        raise InputError(f"{where}.impl: expected one of {', '.join(CURVE_IMPLS)}, got {impl!r}")
    return CollectiveCurve(
        nodes=nodes, select=select, impl=impl,
        op=op, world_size=world_size, mode=mode, regimes=regimes,
        launch_us=nonneg(get_field(obj, "launch_us", where, float, default=0.0), f"{where}.launch_us"),
        eager_overhead_us=nonneg(get_field(obj, "eager_overhead_us", where, float, default=0.0),
                                  f"{where}.eager_overhead_us"),
        inter_node_busbw_gbps=None if inter is None else positive(inter, f"{where}.inter_node_busbw_gbps"),
        provenance=provenance_kind(get_field(obj, "provenance", where, str, default="derived"), f"{where}.provenance"),
        samples=_samples(obj.get("samples"), f"{where}.samples"),
        from_base=get_field(obj, "from_base", where, str, default=""),
        candidates=_candidates(obj.get("candidates"), f"{where}.candidates"),
    )
