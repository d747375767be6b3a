"""Where a command's table goes: a formula-safe CSV file (atomic, never over an input), or stdout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..io.outputs import check_output
from ..io.safe_io import write_csv
from ..profiles.paths import profile_file

if TYPE_CHECKING:
    import pandas as pd


def write_table(frame: pd.DataFrame, out: str | None) -> None:
    """Formula-safe CSV (costmodel.io.safe_io) to `out`, or to stdout when out is None or "-"."""
    if out in (None, "-"):
        write_csv(frame, sys.stdout)
    else:
        write_csv(frame, out)
        print(f"wrote {len(frame)} rows to {out}", file=sys.stderr)


INPUT_FLAGS = ("profile", "profile_a", "profile_b", "input", "reference", "workload", "bench", "prompts", "serving")
OUTPUT_FLAGS = ("out", "csv", "matrix_csv")


def command_inputs(args: argparse.Namespace) -> list[Path]:
    """Every file a parsed command reads: path flags that exist, and for a profile flag the file `load_profile` reads
    (`profiles.paths.profile_file`: a bundled name wins over a same-named local file)."""
    found: list[Path] = []
    for name in INPUT_FLAGS:
        value = getattr(args, name, None)
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str) or not item:
                continue
            path = profile_file(item) if name.startswith("profile") else (Path(item) if Path(item).exists() else None)
            if path is not None:
                found.append(path)
    return found


def check_command_outputs(args: argparse.Namespace) -> None:
    """Before a command does any work: refuse an output flag that names one of its inputs, a FIFO, a device or a
    directory (`costmodel.io.outputs.check_output`; the write itself is atomic)."""
    inputs = command_inputs(args)
    for name in OUTPUT_FLAGS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value not in ("", "-"):
            check_output(value, inputs, what=f"--{name.replace('_', '-')}")
