"""A fast, bounded checker for the JSON Schema subset the profile schema uses (costmodel.profiles.schema).

`check_schema(value, schema, root, path)` raises `SchemaViolation` (the first bad path and a one-line message) or
returns. jsonschema (pinned in requirements.txt) validates data/profiles/schema.json in the tests, but needs ~1.5 s
for a profile with 100 stored replicates (1 MB); this checker compiles each schema node once into a closure (the
keywords it uses looked up once, not per value) and builds a failure's path only on the way out of a failure, so a
fitted profile's check costs a few visits per JSON value. tests/io/test_fuzz.py checks that it and jsonschema
accept and refuse the same documents. No recursion beyond the document's own depth (`safe_io.check_tree` bounds
it) and no regular expressions.

Keywords: type, enum, const, minimum, maximum, exclusiveMinimum, minLength, maxLength, minItems, maxItems,
properties, required, additionalProperties, propertyNames, items, $ref to #/$defs, anyOf. A node with `$ref` is
the referenced definition (its other keywords ignored); anyOf passes on the first option that passes and otherwise
reports the option whose failure got deepest (the object, not the "null" alternative).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], None]


class SchemaViolation(Exception):
    """The first place a document breaks the schema: `path` (keys / indices) and a one-line `message`."""

    def __init__(self, path: tuple, message: str):
        super().__init__(message)
        self.path, self.message = path, message


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "number": _is_number,
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}

_COMPILED: dict[tuple[int, int], tuple[dict, dict, Check]] = {}  # (id(schema), id(root)) -> (schema, root, check)
_LOCK = threading.Lock()


def check_schema(value: Any, schema: dict, root: dict | None = None, path: tuple = ()) -> None:
    """Raise SchemaViolation (its path starting with `path`) at the first violation of `schema` by `value`;
    `root` holds the `$defs` a `$ref` names (default: `schema` itself)."""
    try:
        _compiled(schema, schema if root is None else root)(value)
    except SchemaViolation as exc:
        exc.path = path + exc.path
        raise


def _compiled(schema: dict, root: dict) -> Check:
    """The check of `schema`, compiled once per (schema, root) object pair; both are kept alive with it so the
    ids stay theirs."""
    key = (id(schema), id(root))
    hit = _COMPILED.get(key)
    if hit is not None and hit[0] is schema and hit[1] is root:
        return hit[2]
    check = _compile(schema, root)
    with _LOCK:  # Streamlit sessions are threads
        _COMPILED[key] = (schema, root, check)
    return check


def _deferred(schema: dict, root: dict) -> Check:
    """A check that compiles `schema` on first use (a $ref may name the definition being compiled)."""
    box: list[Check] = []

    def check(value: Any) -> None:
        if not box:
            box.append(_compiled(schema, root))
        box[0](value)
    return check


def _under(key: Any, check: Check, value: Any) -> None:
    """check(value), a failure's path prefixed with `key` (the value's place in its parent)."""
    try:
        check(value)
    except SchemaViolation as exc:
        exc.path = (key,) + exc.path
        raise


def _compile(schema: dict, root: dict) -> Check:
    if "$ref" in schema:
        return _deferred(root["$defs"][schema["$ref"].rsplit("/", 1)[-1]], root)
    steps: list[Check] = []
    if "anyOf" in schema:
        steps.append(_any_of([_compiled(option, root) for option in schema["anyOf"]]))
    if schema.get("type") is not None:
        steps.append(_type(schema["type"]))
    if "const" in schema:
        steps.append(_const(schema["const"]))
    if "enum" in schema:
        steps.append(_enum(list(schema["enum"])))
    by_kind = _by_kind(schema, root)
    if by_kind is not None:
        steps.append(by_kind)
    if not steps:
        return _anything
    if len(steps) == 1:
        return steps[0]

    def check(value: Any) -> None:
        for step in steps:
            step(value)
    return check


def _anything(value: Any) -> None:
    return None


def _any_of(options: list[Check]) -> Check:
    def check(value: Any) -> None:
        errors = []
        for option in options:
            try:
                option(value)
                return
            except SchemaViolation as exc:
                errors.append(exc)
        deepest = max(errors, key=lambda e: len(e.path))
        if not deepest.path:
            raise SchemaViolation((), " / ".join(dict.fromkeys(e.message for e in errors)))
        raise deepest
    return check


def _type(kind: str | list[str]) -> Check:
    kinds = kind if isinstance(kind, list) else [kind]
    tests = tuple(_JSON_TYPES[k] for k in kinds)
    words = " or ".join(kinds)

    def check(value: Any) -> None:
        for test in tests:
            if test(value):
                return
        if isinstance(value, (dict, list)):
            raise SchemaViolation((), f"expected {words}, got {type(value).__name__}")
        raise SchemaViolation((), f"{value!r} is not of type {words}")
    return check


def _const(const: Any) -> Check:
    def check(value: Any) -> None:
        if not (value == const and type(value) is type(const)):
            raise SchemaViolation((), f"{value!r} must be {const!r}")
    return check


def _enum(enum: list) -> Check:
    def check(value: Any) -> None:
        if not any(value == e and type(value) is type(e) for e in enum):
            raise SchemaViolation((), f"{value!r} is not one of {enum}")
    return check


_ARRAY_KEYWORDS = ("minItems", "maxItems", "items")
_OBJECT_KEYWORDS = ("required", "propertyNames", "properties", "additionalProperties")


def _by_kind(schema: dict, root: dict) -> Check | None:
    """The keywords that apply to a number, a string, an array or an object, by the value's kind (None: none
    of them is in `schema`)."""
    number = _number(schema)
    text = _string(schema)
    array = _array(schema, root) if any(k in schema for k in _ARRAY_KEYWORDS) else None
    obj = _object(schema, root) if any(k in schema for k in _OBJECT_KEYWORDS) else None
    if number is None and text is None and array is None and obj is None:
        return None

    def check(value: Any) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if number is not None:
                number(value)
        elif isinstance(value, str):
            if text is not None:
                text(value)
        elif isinstance(value, list):
            if array is not None:
                array(value)
        elif isinstance(value, dict):
            if obj is not None:
                obj(value)
    return check


def _number(schema: dict) -> Check | None:
    lo, lo_open, hi = schema.get("minimum"), schema.get("exclusiveMinimum"), schema.get("maximum")
    if lo is None and lo_open is None and hi is None:
        return None

    def check(value: Any) -> None:
        if lo is not None and value < lo:
            raise SchemaViolation((), f"{value!r} is below the minimum {lo}")
        if lo_open is not None and value <= lo_open:
            raise SchemaViolation((), f"{value!r} must be > {lo_open}")
        if hi is not None and value > hi:
            raise SchemaViolation((), f"{value!r} is above the maximum {hi}")
    return check


def _string(schema: dict) -> Check | None:
    longest, shortest = schema.get("maxLength"), schema.get("minLength", 0)
    if longest is None and not shortest:
        return None

    def check(value: str) -> None:
        if longest is not None and len(value) > longest:
            raise SchemaViolation((), f"longer than {longest} characters")
        if len(value) < shortest:
            raise SchemaViolation((), f"shorter than {shortest} character(s)")
    return check


def _array(schema: dict, root: dict) -> Check:
    fewest, most = schema.get("minItems", 0), schema.get("maxItems")
    items = None if schema.get("items") is None else _compiled(schema["items"], root)

    def check(value: list) -> None:
        if len(value) < fewest:
            raise SchemaViolation((), f"needs at least {fewest} item(s)")
        if most is not None and len(value) > most:
            raise SchemaViolation((), f"has more than {most} items")
        if items is not None:
            for i, item in enumerate(value):
                try:
                    items(item)
                except SchemaViolation as exc:
                    exc.path = (i,) + exc.path
                    raise
    return check


def _object(schema: dict, root: dict) -> Check:
    required = tuple(schema.get("required", ()))
    names = None if schema.get("propertyNames") is None else _compiled(schema["propertyNames"], root)
    props = {key: _compiled(sub, root) for key, sub in schema.get("properties", {}).items()}
    extra = schema.get("additionalProperties")
    rest = _compiled(extra, root) if isinstance(extra, dict) else None
    closed = extra is False

    def check(value: dict) -> None:
        for key in required:
            if key not in value:
                raise SchemaViolation((), f"{key!r} is a required property")
        for key, item in value.items():
            if names is not None:
                _under(key, names, key)
            sub = props.get(key, rest)
            if sub is not None:
                try:
                    sub(item)
                except SchemaViolation as exc:
                    exc.path = (key,) + exc.path
                    raise
            elif closed:
                raise SchemaViolation((key,), "is not a known field (misspelled?)")
    return check
