"""The load-time checks of a compact profile ensemble (costmodel.profiles.compact) beyond the JSON Schema.

Cost. Loading checks a compact ensemble without building its members (`check_ensemble`, ~1 ms): every
column's values against the schema of its leaf (the min and the max suffice for a plain bounded number,
else every value), the drawn values' extremes likewise (each drawn leaf is monotone in its draw: x >= 0
times a draw, correctly rounded), and the point-vs-replicates check of `uncertainty.check_replicates` run
on two pseudo-members holding the per-parameter minima and maxima (`extreme_members`: that check only
reads the min and max of each parameter, so it accepts and refuses exactly what it would on the full list).
Members are built on first use (`LazyMembers`, ~10-30 ms), not on load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..io.errors import InputError
from .compact import KERNEL_SCALARS, UNIFORM_RANGES_V1, copy_json, drawn_extremes, is_number, merge_member, set_leaf
from .schema_check import SchemaViolation, check_schema


def _resolve(schema: dict, root: dict, want: type | None = None) -> dict:
    """`schema` with a $ref followed and an anyOf narrowed to its option for a `want` (dict / list) value."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in schema and want is not None:
        kind = "object" if want is dict else "array"
        schema = next((o for o in schema["anyOf"] if o.get("type") == kind), {})
    return schema


def _leaf_schema(schema: dict, root: dict, path: Sequence, cache: dict | None = None) -> dict:
    """The schema of the value at `path` below a value of `schema` ({} where the schema says nothing). `cache`:
    a dict kept over calls with the same `schema` and `root`, keyed by the path with its list indices left out
    (an array's items share one schema: `items`, never a per-index `prefixItems` in the profile schema)."""
    if cache is not None:
        key = tuple(k for k in path if not isinstance(k, int)), tuple(isinstance(k, int) for k in path)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = _leaf_schema(schema, root, path)
        return hit
    for key in path:
        schema = _resolve(schema, root, list if isinstance(key, int) else dict)
        if isinstance(key, int):
            schema = schema.get("items", {})
        else:
            props, extra = schema.get("properties", {}), schema.get("additionalProperties")
            schema = props[key] if key in props else extra if isinstance(extra, dict) else {}
    return _resolve(schema, root)


_PLAIN_NUMBER = {"type", "minimum", "maximum", "exclusiveMinimum"}


def _check_values(values: Sequence[Any], node: dict, root: dict, path: tuple) -> None:
    """Every value against its leaf schema `node`: the min and the max for a plain bounded number, else each."""
    kind = node.get("type")
    if set(node) <= _PLAIN_NUMBER and kind in ("number", ["number"], ["number", "null"]) and values:
        values = (min(values), max(values))
    for v in values:
        check_schema(v, node, root, path)


def _where(path: Sequence) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _get_leaf(doc: Any, path: Sequence) -> Any:
    for key in path:
        if isinstance(key, int) and isinstance(doc, list) and 0 <= key < len(doc):
            doc = doc[key]
        elif isinstance(key, str) and isinstance(doc, dict) and key in doc:
            doc = doc[key]
        else:
            raise KeyError(key)
    return doc


def _with_leaves(doc: Any, leaves: dict[tuple, Any]) -> Any:
    """A copy of `doc` with the leaf at each path set (only the containers along the paths are copied)."""
    out = copy_json(doc)
    for path, v in leaves.items():
        set_leaf(out, path, v)
    return out


def check_ensemble(data: dict[str, Any], root: dict, source: str = "profile") -> list[dict[str, Any]]:
    """The checks a compact `ensemble` needs beyond the JSON Schema (module doc); InputError with one line naming
    the field. Returns the two extreme pseudo-members (`extreme_members`) for `uncertainty.check_replicates`.

    `root`: the profile JSON Schema (costmodel.profiles.schema.profile_json_schema); the document passed it already."""
    ens = data["ensemble"]
    where = f"{source}.ensemble"
    if "bootstrap" in data:
        raise InputError(f"{source}: give the replicates as `bootstrap` or as `ensemble`, not both")
    member_schema = root["$defs"]["member"]
    n = ens["n"]
    method = ens["method"]
    stored = ens.get("stored")
    if method == "columns-v1" and stored is None:
        raise InputError(f"{where}.stored: missing (columns-v1 stores its members)")
    lo_leaves: dict[tuple, Any] = {}
    hi_leaves: dict[tuple, Any] = {}
    leaf_schemas: dict = {}  # `_leaf_schema`'s cache
    if stored is not None:
        template = stored["template"]
        try:
            check_schema(template, member_schema, root, ("ensemble", "stored", "template"))
        except SchemaViolation as exc:
            raise InputError(f"{source}{_where(exc.path)}: {exc.message}") from None
        seen = set()
        for j, col in enumerate(stored["columns"]):
            cw = f"{where}.stored.columns[{j}]"
            path, values = tuple(col["path"]), col["values"]
            if path in seen:
                raise InputError(f"{cw}.path: {list(path)} given twice")
            seen.add(path)
            if len(values) != n:
                raise InputError(f"{cw}.values: {len(values)} values for n = {n} members")
            try:
                leaf = _get_leaf(template, path)
            except KeyError:
                raise InputError(f"{cw}.path: {list(path)} is not a leaf of the template") from None
            if not is_number(leaf):
                raise InputError(f"{cw}.path: {list(path)} is not a number in the template")
            try:
                _check_values(values, _leaf_schema(member_schema, root, path, leaf_schemas), root, path)
            except SchemaViolation as exc:
                raise InputError(f"{cw}.values (member{_where(exc.path)}): {exc.message}") from None
            lo_leaves[path], hi_leaves[path] = min(values), max(values)
    if method == "uniform-ranges-v1":
        for key in ("seed", "ranges"):
            if key not in ens:
                raise InputError(f"{where}.{key}: missing (uniform-ranges-v1)")
        ranges = ens["ranges"]
        unknown = [k for k in ranges if k not in UNIFORM_RANGES_V1]
        if unknown:
            raise InputError(f"{where}.ranges.{unknown[0]}: not a uniform-ranges-v1 parameter "
                             f"({', '.join(UNIFORM_RANGES_V1)})")
        for k in UNIFORM_RANGES_V1:
            if k not in ranges:
                raise InputError(f"{where}.ranges.{k}: missing (uniform-ranges-v1 draws "
                                 f"{', '.join(UNIFORM_RANGES_V1)})")
            if not ranges[k][0] <= ranges[k][1]:
                raise InputError(f"{where}.ranges.{k}: low {ranges[k][0]!r} above high {ranges[k][1]!r}")
        if stored is not None:  # the stored part must not overlap what is drawn (both would set the same leaf)
            extra = stored["template"]
            clash = [k for k in extra if k != "kernels"] + [f"kernels.{k}" for k in extra.get("kernels", {})
                                                            if k in (*KERNEL_SCALARS, "ops")]
            if clash:
                raise InputError(f"{where}.stored.template.{clash[0]}: drawn by uniform-ranges-v1, not stored")
        if not data["collectives"]:
            raise InputError(f"{where}: uniform-ranges-v1 needs at least one curve in collectives")
        point = {"collectives": data["collectives"], "kernels": {k: v for k, v in data["kernels"].items()
                                                                 if k in (*KERNEL_SCALARS, "ops")}}
        for path, (a, b) in drawn_extremes(data, ranges, ens["seed"], n).items():
            try:
                _check_values((a, b), _leaf_schema(member_schema, root, path, leaf_schemas), root, path)
            except SchemaViolation as exc:
                raise InputError(f"{where} (drawn member{_where(exc.path)}): {exc.message}") from None
            lo_leaves[path], hi_leaves[path] = a, b
        base = merge_member(point, stored["template"]) if stored is not None else point
    else:
        base = stored["template"]
    return extreme_members(base, lo_leaves, hi_leaves)


def extreme_members(base: dict[str, Any], lo: dict[tuple, Any], hi: dict[tuple, Any]) -> list[dict[str, Any]]:
    """Two pseudo-members shaped as `base`: every varying leaf at its minimum over the members, then at its
    maximum (what uncertainty.check_replicates reads of the members: each parameter's min and max)."""
    return [_with_leaves(base, lo), _with_leaves(base, hi)]
