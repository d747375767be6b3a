"""Bounded reads, strict JSON and formula-safe CSV: the one place every reader and CSV writer goes through.

* `read_bytes` / `read_text`: `os.stat` first - a missing path, a directory, a FIFO, a device or a file
  larger than `limit_bytes` is refused before a byte is read - then at most `limit_bytes + 1` bytes are
  read (a file that grew after the stat is refused too). Memory: O(limit_bytes).
* `loads_json`: `json.loads` that refuses duplicate keys (`object_pairs_hook`), NaN / Infinity
  constants, integers outside int64, nesting deeper than `MAX_JSON_DEPTH`, and strings that are not
  UTF-8 encodable (lone surrogates) or hold a NUL; `check_tree` applies the same checks to an
  in-memory document (a fitted profile dict).
* `escape_markdown`: user-controlled text shown literally in Streamlit Markdown (no links, no images, no
  autolinks): `costmodel.io.plain.markdown_text`.
* `safe_cell` / `safe_frame` / `write_csv` / `csv_text`: every text cell that starts with `=`, `+`,
  `-`, `@`, a tab or a carriage return is prefixed with `'` (OWASP "CSV injection"), so a spreadsheet
  shows it as text instead of evaluating it; numeric columns, and text cells that are plain decimal
  numbers ("-3.5"), are written unchanged.

Every refusal is an `InputError` with one line naming the file or field and the limit.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import re
import stat
import sys
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .outputs import atomic_path
from .plain import markdown_text

if TYPE_CHECKING:  # the frame writers get their frame from a caller that has pandas loaded already
    import pandas as pd

MAX_JSON_DEPTH = 64  # objects / arrays nested deeper than this are refused (profiles need 6)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def one_line(text: str, limit: int = 200) -> str:
    """`text` on one line (whitespace runs collapsed), cut to `limit` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


# -- bounded reads ---------------------------------------------------------------------------------------
def _mib(n: int) -> str:
    """A byte limit as people read it: whole MiB, whole MB (the upload widget's unit), else MiB with decimals."""
    if n % 2**20 and not n % 10**6:
        return f"{n // 10**6} MB"
    return f"{n / 2**20:g} MiB"


def read_bytes(path: str | Path, *, limit_bytes: int, what: str = "") -> bytes:
    """The contents of the regular file `path`, refused (InputError) when it is missing, not a regular
    file (directory, FIFO, device, socket) or larger than `limit_bytes`; reads at most limit_bytes + 1."""
    label = f"{what} {path}".strip()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{label}: no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        if getattr(exc, "errno", None) == errno.ELOOP:
            raise InputError(f"{label}: symlink loop") from None
        raise InputError(f"{label}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{label}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{label}: not a regular file (a FIFO, device or socket is refused)")
    if st.st_size > limit_bytes:
        raise InputError(f"{label}: {st.st_size} bytes, larger than the {_mib(limit_bytes)} limit")
    try:  # O_NONBLOCK + fstat: a path swapped for a FIFO after the stat still cannot block the read
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise InputError(f"{label}: not a regular file (a FIFO, device or socket is refused)")
            data = fh.read(limit_bytes + 1)
    except OSError as exc:
        raise InputError(f"{label}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit_bytes:
        raise InputError(f"{label}: larger than the {_mib(limit_bytes)} limit")
    return data


def read_text(path: str | Path, *, limit_bytes: int, what: str = "") -> str:
    """`read_bytes` decoded as UTF-8 (InputError when it is not)."""
    data = read_bytes(path, limit_bytes=limit_bytes, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{what} {path}: not UTF-8 text".strip()) from None


def check_size(n_bytes: int, *, limit_bytes: int, source: str) -> None:
    """Refuse an in-memory upload larger than `limit_bytes`."""
    if n_bytes > limit_bytes:
        raise InputError(f"{source}: {n_bytes} bytes, larger than the {_mib(limit_bytes)} limit")


def check_rows(n_rows: int, *, limit_rows: int, source: str) -> None:
    """Refuse a table with more than `limit_rows` rows (the limit is in the message)."""
    if n_rows > limit_rows:
        raise InputError(f"{source}: {n_rows} rows, more than the limit of {limit_rows} rows")


# -- strict JSON ---------------------------------------------------------------------------------------------
def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise InputError(f"{name} is not a JSON number")


def _path(link: tuple | None) -> str:
    """The ".a[0].b" path of a (key, parent link) chain."""
    parts = []
    while link is not None:
        parts.append(link[0])
        link = link[1]
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in reversed(parts))


def _string_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "not UTF-8 encodable (a lone surrogate)"
    return "contains a NUL character" if "\x00" in text else None


def _check_string(text: str, where: str) -> None:
    problem = _string_problem(text)
    if problem:
        raise InputError(f"{where}: {problem}")


def check_tree(data: Any, source: str, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Iteratively check a decoded document: depth <= max_depth, string keys, UTF-8 encodable strings
    without NUL, integers in int64, finite floats (InputError naming the first offending path)."""
    stack: list[tuple[Any, int, tuple | None]] = [(data, 0, None)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth, link = pop()
        kind = type(node)
        if kind is dict or kind is list or isinstance(node, (dict, list, tuple)):
            if depth >= max_depth:
                raise InputError(f"{source}: nested deeper than {max_depth} levels")
            if isinstance(node, dict):
                for key, value in node.items():
                    if type(key) is not str:
                        raise InputError(f"{source}{_path(link)}: key {key!r} is not a string")
                    if _string_problem(key):
                        _check_string(key, f"{source}{_path(link)} key")
                    push((value, depth + 1, (key, link)))
            else:
                for i, value in enumerate(node):
                    push((value, depth + 1, (i, link)))
        elif kind is str:
            if _string_problem(node):
                _check_string(node, f"{source}{_path(link)}")
        elif kind is float:
            if not math.isfinite(node):
                raise InputError(f"{source}{_path(link)}: {node} is not a finite number")
        elif kind is int:
            if not INT64_MIN <= node <= INT64_MAX:
                raise InputError(f"{source}{_path(link)}: integer outside the int64 range")
        elif isinstance(node, str):
            _check_string(node, f"{source}{_path(link)}")
        elif isinstance(node, float) and not math.isfinite(node):
            raise InputError(f"{source}{_path(link)}: {node} is not a finite number")
        elif isinstance(node, int) and not isinstance(node, bool) and not INT64_MIN <= node <= INT64_MAX:
            raise InputError(f"{source}{_path(link)}: integer outside the int64 range")


def loads_json(text: str | bytes, source: str, *, max_depth: int = MAX_JSON_DEPTH,
               keys: Collection[str] | None = None) -> Any:
    """Strict `json.loads` (see the module doc); InputError "<source>: not valid JSON (...)" otherwise. `keys`: a
    top-level object keeps only these fields, dropped before `check_tree` - a field the reader never uses (a
    generated text holding a NUL) can then never make it refuse the document."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{source}: not UTF-8 text") from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark (Windows editors save one): not part of the JSON
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except InputError as exc:
        raise InputError(f"{source}: not valid JSON ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InputError(f"{source}: nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # an integer longer than sys.get_int_max_str_digits() digits
        raise InputError(f"{source}: not valid JSON (a number with more than {limit} digits)"
                         if "digits" in str(exc) else f"{source}: not valid JSON ({exc})") from None
    if keys is not None and isinstance(data, dict):
        data = {k: v for k, v in data.items() if k in keys}
    check_tree(data, source, max_depth=max_depth)
    return data


# -- formula-safe CSV ---------------------------------------------------------------------------------------
def safe_cell(value: Any) -> Any:
    """`value` with a leading `'` when it is text starting with = + - @ tab or CR (plain numbers are kept)."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` with every text cell (and column name) passed through `safe_cell`."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype  # here, not at the top: reading needs no pandas

    out = frame.copy()
    for column in out.columns:
        if not (is_numeric_dtype(out[column]) or is_bool_dtype(out[column])):
            out[column] = out[column].map(safe_cell)
    out.columns = [safe_cell(str(c)) if isinstance(c, str) else c for c in out.columns]
    return out


def _csv_kwargs(frame: pd.DataFrame, kwargs: dict[str, Any]) -> dict[str, Any]:
    """index off; every text cell quoted when one holds a CR (the csv module would not quote it, and a
    reader would split the row there)."""
    from pandas.api.types import is_string_dtype  # here, not at the top: reading needs no pandas

    kwargs.setdefault("index", False)
    text = [c for c in frame.columns if frame[c].dtype == object or is_string_dtype(frame[c])]
    if "quoting" not in kwargs and any(frame[c].astype(str).str.contains("\r", regex=False).any() for c in text):
        kwargs["quoting"] = csv.QUOTE_NONNUMERIC
    return kwargs


def csv_text(frame: pd.DataFrame, **kwargs: Any) -> str:
    """`frame` as formula-safe CSV text (index off unless asked for)."""
    safe = safe_frame(frame)
    return safe.to_csv(**_csv_kwargs(safe, kwargs))


def write_csv(frame: pd.DataFrame, target: str | Path | io.TextIOBase, *, inputs: Iterable[Any] = (),
              **kwargs: Any) -> None:
    """Write `frame` as formula-safe CSV to an open text stream, or to a path atomically and never over one of
    `inputs` (`costmodel.io.outputs.atomic_path`); InputError naming the path when it cannot be written."""
    safe = safe_frame(frame)
    kwargs = _csv_kwargs(safe, kwargs)
    if not isinstance(target, (str, Path)):
        safe.to_csv(target, **kwargs)
        return
    with atomic_path(target, inputs) as tmp:
        safe.to_csv(tmp, **kwargs)


# -- plain text in Markdown ------------------------------------------------------------------------------
def escape_markdown(text: Any) -> str:
    """`costmodel.io.plain.markdown_text` (kept under this name for existing callers): `text` as literal,
    link-free text inside Streamlit Markdown - no Markdown, HTML, GFM autolink or e-mail link forms."""
    return markdown_text(text)
