"""Append-only measurement CSVs: every row is flushed as soon as it is measured.

A crash or a timeout therefore keeps everything measured so far, and
`existing_keys` lets `--resume` skip points already in the file.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from pathlib import Path

from costmodel.schema import MEASUREMENT_COLUMNS

KEY_COLUMNS = ("op", "backend", "device", "dtype", "mode", "world_size", "nodes", "bytes_per_rank", "rows", "cols")


def point_key(row: dict) -> tuple[str, ...]:
    """Identity of a measured point (everything but the timings)."""
    return tuple(str(row.get(c, "")) for c in KEY_COLUMNS)


class RowWriter:
    """Writes schema rows to `path`, header once, flush + fsync after each row."""

    def __init__(self, path: str | Path, extra_columns: Iterable[str] = ()):
        self.path = Path(path)
        self.columns = list(MEASUREMENT_COLUMNS) + [c for c in extra_columns if c not in MEASUREMENT_COLUMNS]
        self.path.parent.mkdir(parents=True, exist_ok=True)
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


def existing_keys(path: str | Path) -> set[tuple[str, ...]]:
    """Keys of the complete rows already in `path` (a torn last line is ignored)."""
    path = Path(path)
    if not path.exists():
        return set()
    keys = set()
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("median_us") in (None, ""):
                continue
            keys.add(point_key(row))
    return keys
