"""Numbers for people: the one place that turns model outputs into display text.

Used by the dashboard tiles, tables and report; CSV exports keep the raw values.

* durations (`format_us`): microseconds below 1,000 us, milliseconds from there, 3 significant digits
  (at most 2 decimals, at least 0), thousands separators: 0.5 us, 5.63 us, 88.1 us, 264 us, 1.23 ms,
  51.1 ms, 1,234 ms;
* plain numbers (`format_number`): 3 significant digits, thousands separators, never scientific
  notation: 5.63, 88.1, 1,024, 65,536;
* percentages (`format_pct`): 1 decimal below 100 %, 0 above: +71.0 %, -12.1 %, +3,500 %;
* bytes (`format_bytes`): binary prefixes, 3 significant digits: 8 B, 1.5 KiB, 3.06 MiB;
* status identifiers of costmodel (crossover statuses and directions, verdicts) as words (`STATUS_TEXT`).

Missing values (None, NaN) are shown as MISSING, never as "None" or "nan".
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "–"
MINUS = "-"  # ASCII, as the CLI prints it

STATUS_TEXT: dict[str, str] = {
    "crossover": "crosses over",
    "wins_everywhere": "wins at every batch",
    "loses_everywhere": "loses at every batch",
    "wins_above": "wins above the crossover",
    "wins_below": "wins below the crossover",
    "faster": "faster",
    "slower": "slower",
    "uncertain": "uncertain (interval spans 0)",
    "identical": "identical (nothing to gather at TP 1)",
}


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def _numeric(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, (str, bytes))


def _lenient(rule):
    """`rule` for numbers; anything else (a list, a text) is shown as its text."""
    def show(value: Any) -> str:
        if _missing(value):
            return MISSING
        return rule(value) if _numeric(value) else str(value)
    return show


def _decimals(magnitude: float, significant: int = 3, max_decimals: int = 2) -> int:
    """Decimals that give `significant` digits to a number of this magnitude, clipped to 0..max_decimals."""
    if magnitude == 0:
        return 0
    digits = math.floor(math.log10(magnitude)) + 1  # digits before the decimal point (<= 0 below 1)
    return max(0, min(max_decimals, significant - digits))


def _signed(text: str, value: float, sign: bool) -> str:
    if value < 0:
        return MINUS + text
    return ("+" + text) if sign and value > 0 else text


def format_number(value: Any, *, sign: bool = False, significant: int = 3, max_decimals: int = 2) -> str:
    """3 significant digits (at most `max_decimals` decimals), thousands separators: 5.63, 88.1, 65,536."""
    if _missing(value):
        return MISSING
    x = float(value)
    decimals = _decimals(abs(x), significant, max_decimals)
    text = f"{abs(x):,.{decimals}f}"
    if float(text.replace(",", "")) == 0:
        return "0"
    return _signed(text, x, sign)


def format_us(value_us: Any, *, sign: bool = False) -> str:
    """A duration given in microseconds: us below 1,000 us, ms from 1,000 us (3 significant digits)."""
    if _missing(value_us):
        return MISSING
    x = float(value_us)
    if abs(x) >= 999.5:
        return f"{format_number(x / 1000.0, sign=sign)} ms"
    return f"{format_number(x, sign=sign)} µs"


def format_ms(value_ms: Any, *, sign: bool = False, decimals: int | None = None) -> str:
    """A duration given in milliseconds: format_us of value_ms x 1000, or with `decimals` fixed decimals in ms
    (ITL before / after: 25.000 -> 24.742 ms, where 3 significant digits would hide the change)."""
    if _missing(value_ms):
        return MISSING
    if decimals is None:
        return format_us(float(value_ms) * 1000.0, sign=sign)
    x = float(value_ms)
    return _signed(f"{abs(x):,.{decimals}f}", x, sign) + " ms"


def format_pct(value_pct: Any, *, sign: bool = True) -> str:
    """A percentage: 1 decimal below 100 %, none above, thousands separators."""
    if _missing(value_pct):
        return MISSING
    x = float(value_pct)
    text = f"{abs(x):,.{1 if abs(x) < 99.95 else 0}f}"
    if float(text.replace(",", "")) == 0:
        return "0%"
    return _signed(text, x, sign) + "%"


def format_small_pct(value_pct: Any, *, sign: bool = True) -> str:
    """`format_pct`, but below 1% in magnitude two significant digits (+0.053%, -0.0012%), so a small impact is not
    rounded to "+0.1%" or "0%"; exactly 0 is "0%"."""
    if _missing(value_pct):
        return MISSING
    x = float(value_pct)
    if x == 0 or abs(x) >= 0.995:  # from 0.995 on, .2g would print '1': the 1-decimal form
        return format_pct(x, sign=sign)
    return _signed(f"{abs(x):.2g}", x, sign) + "%"


def format_bytes(value: Any) -> str:
    """Bytes with binary prefixes: 8 B, 1.5 KiB, 3.06 MiB."""
    if _missing(value):
        return MISSING
    x = float(value)
    if abs(x) < 1023.5:
        return f"{x:,.0f} B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1023.5 or unit == "TiB":
            return f"{format_number(x)} {unit}"
        x /= 1024.0
    raise AssertionError("unreachable")


def format_batch(value: Any) -> str:
    """A (possibly fractional) batch: integers as integers, else 1 decimal below 100; thousands separators."""
    if _missing(value):
        return MISSING
    x = float(value)
    if x.is_integer() or abs(x) >= 99.95:
        return f"{x:,.0f}"
    return f"{x:,.1f}"


def format_interval_us(low_us: Any, high_us: Any, *, sign: bool = True) -> str:
    """'+72.9 to +103 µs' (both ends in the unit of the larger end)."""
    if _missing(low_us) or _missing(high_us):
        return MISSING
    lo, hi = float(low_us), float(high_us)
    if max(abs(lo), abs(hi)) >= 999.5:
        return f"{format_number(lo / 1000, sign=sign)} to {format_number(hi / 1000, sign=sign)} ms"
    return f"{format_number(lo, sign=sign)} to {format_number(hi, sign=sign)} µs"


def status_text(value: Any) -> str:
    """A costmodel status identifier as words (unknown identifiers: underscores become spaces)."""
    if _missing(value) or value == "":
        return MISSING
    text = str(value)
    return STATUS_TEXT.get(text, text.replace("_", " "))


def column_formatter(column: str):
    """The display formatter for a table column, chosen by the unit in its name (None: leave as is).

    `*_us` -> format_us (signed for savings, changes, errors - not for |errors|), `*_ms` -> format_ms with 3
    decimals, `*_pct` -> format_pct, `*bytes*` ->
    format_bytes, `*batch*` -> format_batch, `*status` / `*direction` / `verdict` -> status_text.
    """
    name = column.lower()
    signed = any(word in name for word in ("saving", "change", "shift", "reduction", "gain", "error", "delta")) \
        and "abs" not in name  # |error| has no sign
    if name.endswith("_us") or "_us_" in name:
        return _lenient(lambda v: format_us(v, sign=signed))
    if name.endswith("_ms"):
        return _lenient(lambda v: format_ms(v, sign=signed, decimals=3))
    if name.endswith("_pct") or "_pct_" in name:
        return _lenient(lambda v: format_pct(v, sign=signed))
    if "bytes" in name:
        return _lenient(format_bytes)
    if "batch" in name:
        return _lenient(format_batch)
    if name.endswith("status") or name.endswith("direction") or name == "verdict":
        return status_text
    return None
