"""Checked reads of one profile JSON field: present, of its kind, in range (one-line InputError naming it).

`get_field` reads obj[key] as a kind (float: any finite non-bool number; int: a non-bool integer), `nonneg` /
`positive` bound a number, `provenance_kind` checks a provenance word, `plain_float` is the fast path of
`as_float` for plain JSON numbers. Shared by the curve parser (costmodel.profiles.parse_curves) and the profile
parser (costmodel.profiles.parse).
"""

from __future__ import annotations

import math
from typing import Any

from ..io.errors import InputError
from .types import (
    PROVENANCE_KINDS,
)


def get_field(obj: Any, key: str, where: str, kind: type, *, default: Any = ...) -> Any:
    """obj[key] checked against `kind` (float: any finite non-bool number; int: a non-bool integer)."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object")
    if key not in obj or obj[key] is None:
        if default is not ...:
            return default
        raise InputError(f"{where}.{key}: missing")
    value = obj[key]
    if kind is float:
        return as_float(value, f"{where}.{key}")
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}.{key}: expected an integer, got {value!r}")
        return value
    if not isinstance(value, kind):
        raise InputError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    return value


def nonneg(value: float, where: str) -> float:
    if value < 0:
        raise InputError(f"{where}: must be >= 0, got {value}")
    return value


def positive(value: float, where: str) -> float:
    if value <= 0:
        raise InputError(f"{where}: must be > 0, got {value}")
    return value


EXACT_INT = 2**53  # ints up to this convert to float exactly (and finitely)


def plain_float(value: Any) -> float | None:
    """`as_float(value)` for a plain JSON float / small int (the common case); None for anything else (missing,
    a bool, a float subclass, a huge int, NaN / inf), which the checked path then handles - or refuses."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int and -EXACT_INT <= value <= EXACT_INT:
        return float(value)
    return None


def as_float(value: Any, where: str) -> float:
    """`value` as a float: any finite non-bool number, else InputError naming `where`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def provenance_kind(value: str, where: str) -> str:
    if value not in PROVENANCE_KINDS:
        raise InputError(f"{where}: expected one of {', '.join(PROVENANCE_KINDS)}, got {value!r}")
    return value
