"""Append-only measurement CSVs: every row is flushed as soon as it is measured.

A crash or a timeout therefore keeps everything measured so far. A crash in
the middle of a row can still leave a torn last line (no trailing newline):
`existing_keys` - which every tool calls before it appends - first drops it
with `drop_torn_tail`, so the torn point is neither counted as measured nor
glued to the next row, and `drop_bad_rows` removes complete lines that cannot be a measured point (a wrong
field count, a time that is not a finite number > 0: a torn row that a later append completed, garbage), naming
their line numbers; `--resume` then skips exactly the good rows and measures the dropped points again.
"""

from __future__ import annotations

import csv
import math
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from costmodel.io.errors import InputError
from costmodel.io.measurements import MEASUREMENT_COLUMNS
from costmodel.io.outputs import atomic_path

KEY_COLUMNS = ("op", "backend", "device", "dtype", "mode", "world_size", "nodes", "bytes_per_rank", "rows", "cols",
               "k")  # k: top-k kernel rows only (empty elsewhere)


def point_key(row: dict) -> tuple[str, ...]:
    """Identity of a measured point (everything but the timings)."""
    key = tuple(str(row.get(c, "")) for c in KEY_COLUMNS[:-1])
    k = str(row.get("k", ""))  # k = 1, empty or absent: the same point (only top-k kernel rows carry k > 1)
    return (*key, "" if k in ("", "1", "1.0", "nan", "None") else k)


class RowWriter:
    """Writes schema rows to `path`, header once, flush + fsync after each row."""

    def __init__(self, path: str | Path, extra_columns: Iterable[str] = ()):
        self.path = Path(path)
        self.columns = list(MEASUREMENT_COLUMNS) + [c for c in extra_columns if c not in MEASUREMENT_COLUMNS]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            _regular(self.path)  # appending to a FIFO would block; to a device would lose the rows
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._fh = open(self.path, "a", newline="")
        self._writer = csv.DictWriter(self._fh, fieldnames=self.columns, extrasaction="ignore")
        if new:
            self._writer.writeheader()
            self._flush()

    def write(self, row: dict) -> None:
        self._writer.writerow(row)
        self._flush()

    def _flush(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def drop_torn_tail(path: str | Path) -> bool:
    """Truncate `path` after its last newline when it does not end with one; True if bytes were dropped.

    A missing or empty file is left alone. A file without any newline (a torn header) becomes empty.
    """
    path = Path(path)
    if not path.exists():
        return False
    _regular(path)
    size = path.stat().st_size
    if size == 0:
        return False
    with open(path, "r+b") as fh:  # read backwards in blocks: O(last row), not O(file)
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return False
        end, cut = size, 0
        while end > 0 and not cut:
            start = max(0, end - 65536)
            fh.seek(start)
            block = fh.read(end - start)
            nl = block.rfind(b"\n")
            cut = start + nl + 1 if nl >= 0 else 0
            end = start if nl < 0 else 0
        fh.truncate(cut)
        fh.flush()
        os.fsync(fh.fileno())
    return True


def _regular(path: Path) -> None:
    """Refuse a results path that is not a regular file (a FIFO would block the reader forever)."""
    if not stat.S_ISREG(path.stat().st_mode):
        raise InputError(f"{path}: not a regular file (a directory, FIFO or device cannot hold results)")


def _row_problem(header: list[str], fields: list[str]) -> str | None:
    """Why a data row of a results CSV cannot be a measured point (None when it can)."""
    if len(fields) != len(header):
        return f"{len(fields)} fields, the header has {len(header)}"
    row = dict(zip(header, fields, strict=True))
    median = row.get("median_us")
    if median in (None, ""):
        return None  # a planned point without a time (kept; not counted as measured)
    try:
        value = float(median)
    except ValueError:
        return f"median_us {median[:20]!r} is not a number"
    if not math.isfinite(value) or value <= 0:
        return f"median_us {median[:20]!r} is not a finite time > 0"
    for column in ("world_size", "nodes", "bytes_per_rank", "rows", "cols", "k"):
        text = row.get(column) or ""
        if text and not text.lstrip("-").isdigit():
            return f"{column} {text[:20]!r} is not an integer"
    return None


def drop_bad_rows(path: str | Path) -> list[int]:
    """Remove the rows of `path` that cannot be measured points (torn, garbage: `_row_problem`); returns their
    line numbers. The file is rewritten atomically (costmodel.io.outputs) only when there is one."""
    path = Path(path)
    with open(path, newline="") as fh:
        lines = list(csv.reader(fh))
    if not lines:
        return []
    header, bad = lines[0], []
    keep = [header]
    for number, fields in enumerate(lines[1:], start=2):
        if fields and _row_problem(header, fields) is not None:
            bad.append(number)
        elif fields:
            keep.append(fields)
    if bad:
        with atomic_path(path, what="results") as tmp, open(tmp, "w", newline="") as fh:
            csv.writer(fh).writerows(keep)
            fh.flush()
            os.fsync(fh.fileno())
    return bad


def existing_keys(path: str | Path) -> set[tuple[str, ...]]:
    """Keys of the complete rows already in `path`, after `drop_torn_tail` and `drop_bad_rows` (each says what
    it dropped, naming the lines, on stderr; call this before appending)."""
    path = Path(path)
    if drop_torn_tail(path):
        print(f"note: dropped a torn last line of {path}", file=sys.stderr)
    if not path.exists():
        return set()
    _regular(path)
    bad = drop_bad_rows(path)
    if bad:
        shown = ", ".join(map(str, bad[:10])) + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
        print(f"note: dropped {len(bad)} torn or garbage row(s) of {path} (line {shown}); they are measured again",
              file=sys.stderr)
    keys = set()
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("median_us") in (None, ""):
                continue
            keys.add(point_key(row))
    return keys
