"""`sweep`: price a grid of scenarios (models x flag lists) to a tidy CSV or Parquet table."""

from __future__ import annotations

import argparse
import math
import sys

from ..answers.sweep import sweep_table, write_sweep
from ..io.errors import InputError
from ..profiles.store import load_profile
from .options import MAX_SWEEP_SCENARIOS
from .scenario_args import _grid, _model_fields


def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    models, grid = _model_fields(args), _grid(args)
    n = len(models) * math.prod(len(v) for v in grid.values())
    if n > MAX_SWEEP_SCENARIOS:
        raise InputError(f"sweep: {n} scenarios, more than the limit of {MAX_SWEEP_SCENARIOS} "
                         "(split the grid into several runs)")
    table = sweep_table(models, grid, profile)
    write_sweep(table, args.out, args.format)
    if args.out not in (None, "-"):
        print(f"wrote {table.num_rows} rows to {args.out}", file=sys.stderr)
    return 0
