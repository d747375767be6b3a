"""`sweep`: price a grid of scenarios (models x flag lists) to a tidy CSV or Parquet table.

Under an engine (vLLM's by default), each row's answer is the whole draft step (`whole_draft_step_us`,
`saving_per_decode_step_us`: costmodel.answers.sweep_step), priced with each --preset's own draft architecture
(the default preset's without --preset, as `predict`)."""

from __future__ import annotations

import argparse
import math
import sys

from ..answers.sweep import sweep_table, write_sweep
from ..io.errors import InputError
from ..model.drafter import DraftArch
from ..model.fabrics import profile_on_fabric
from ..profiles.store import load_profile
from .options import DEFAULT_PRESET, MAX_SWEEP_SCENARIOS
from .placement_args import preset_arch
from .question_args import fabric_kwargs
from .scenario_args import _grid, _model_fields


def run(args: argparse.Namespace) -> int:
    profile = profile_on_fabric(load_profile(args.profile), **fabric_kwargs(args))
    models, grid = _model_fields(args), _grid(args)
    n = len(models) * math.prod(len(v) for v in grid.values())
    if n > MAX_SWEEP_SCENARIOS:
        raise InputError(f"sweep: {n} scenarios, more than the limit of {MAX_SWEEP_SCENARIOS} "
                         "(split the grid into several runs)")
    archs = model_archs(args, models) if any(e != "none" for e in grid["engine"]) else None
    table = sweep_table(models, grid, profile, archs=archs, kv_len=args.kv_len, forward_us=args.forward_us)
    write_sweep(table, args.out, args.format)
    if args.out not in (None, "-"):
        print(f"wrote {table.num_rows} rows to {args.out}", file=sys.stderr)
    return 0


def model_archs(args: argparse.Namespace, models: list[dict]) -> list[DraftArch | None]:
    """Each model's draft architecture (`preset_arch`: its --preset's, lm_head vocabulary = its draft vocab; None
    where the preset has none to give - that row's per-call answer stands). `_model_fields` lists the models preset
    by preset, each preset's vocab / draft vocab / d2t combinations in a block."""
    names = [n.strip() for n in args.preset.split(",")] if args.preset else [DEFAULT_PRESET]
    per = max(len(models) // len(names), 1)
    out: list[DraftArch | None] = []
    for i, m in enumerate(models):
        try:
            out.append(preset_arch(args, names[min(i // per, len(names) - 1)], int(m["draft_vocab"])))
        except InputError:
            out.append(None)
    return out
