"""Where a command's table goes: a formula-safe CSV file, or stdout."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ..io.safe_io import write_csv

if TYPE_CHECKING:
    import pandas as pd


def write_table(frame: pd.DataFrame, out: str | None) -> None:
    """Formula-safe CSV (costmodel.io.safe_io) to `out`, or to stdout when out is None or "-"."""
    if out in (None, "-"):
        write_csv(frame, sys.stdout)
    else:
        write_csv(frame, out)
        print(f"wrote {len(frame)} rows to {out}", file=sys.stderr)
