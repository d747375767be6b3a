"""A profile's fit report as one flat table: what the dashboard shows and serves as fit_report.csv.

One row per fit-report entry (calibration.fitting.fit writes them: fitted and skipped groups, base and warning
rows), one column per key any entry has. A cell an entry does not have is empty, never `nan`; a column whose
values are all integers stays integer (82, not 82.0); lists and dicts become their text ("[10, 20]").

`spread_misses`: the fitter stores, for every per-p curve (one op, world size and mode; `--impl` curves too), the
training medians the stored curve misses beyond their measured spread as [bytes_per_rank, rel_err] pairs
(calibration.fitting.fit module doc, "Tail ramps"). In the table `spread_misses` is how many (0: the curve is within
every size's spread) and `spread_missed` which ones ("BYTES B: +E%", "; "-joined). Both are empty where the check
does not apply: generic (any p) curves, kernels, skipped groups, base and warning rows have no per-size medians of
their own to miss.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd


def _missing(value: Any) -> bool:
    """None or a float NaN: a cell to leave empty."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def missed_text(pairs: Iterable[Iterable[float]]) -> str:
    """[[bytes_per_rank, rel_err], ...] as "BYTES B: +E%; ..." (rel_err = curve / median - 1, in %)."""
    return "; ".join(f"{int(b)} B: {100 * float(e):+.1f}%" for b, e in pairs)


def _with_spread_count(entry: Mapping[str, Any]) -> dict[str, Any]:
    """`entry` with a list-valued `spread_misses` replaced by its count and `spread_missed` by its text."""
    row = dict(entry)
    pairs = row.get("spread_misses")
    if isinstance(pairs, (list, tuple)):
        row["spread_misses"], row["spread_missed"] = len(pairs), missed_text(pairs)
    return row


def _column(values: list[Any]) -> pd.Series | list[Any]:
    """One column's cells: nested values as text, all-integer columns as Int64, missing cells empty."""
    present = [v for v in values if not _missing(v)]
    if any(isinstance(v, (dict, list, tuple)) for v in present):
        return [None if _missing(v) else str(v) for v in values]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pd.array([None if _missing(v) else v for v in values], dtype="Int64")
    return [None if _missing(v) else v for v in values]


def fit_report_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The fit report `records` (a profile's `fit_report`) as a table (module doc)."""
    rows = [_with_spread_count(entry) for entry in records]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    if "spread_missed" in columns:  # next to its count
        columns.remove("spread_missed")
        columns.insert(columns.index("spread_misses") + 1, "spread_missed")
    return pd.DataFrame({c: _column([row.get(c) for row in rows]) for c in columns}, columns=columns)
