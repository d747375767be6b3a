"""`recommend`: on or off for a workload's batch mix - expected saving, interval and the engine config to paste."""

from __future__ import annotations

import argparse
import json
import sys

from ..answers.recommend import recommend
from ..answers.recommend_text import format_recommendation
from ..answers.workload import load_workload
from ..io.plain import terminal_text
from ..io.safe_io import write_csv
from ..profiles.presets import presets as preset_table
from ..profiles.store import check_tp_placement, load_profile
from .options import DEFAULT_PRESET
from .scenario_args import _grid, _model_fields, _single, check_impact_args


def run(args: argparse.Namespace) -> int:
    check_impact_args(args)
    profile = load_profile(args.profile)
    workload = load_workload(args.workload, args.workload_kind)
    model = _single(_model_fields(args), "preset/--vocab")
    grid = {k: _single(v, k.replace("_", "-")) for k, v in _grid(args).items() if k != "batch"}
    check_tp_placement(profile, int(grid["tp"]), int(grid["nodes"]))  # TP above GPUs per node needs --nodes
    method = args.method
    if method is None:
        name = (args.preset or ("" if args.vocab or args.draft_vocab else DEFAULT_PRESET)).strip()
        draft = str(preset_table()["draft"].get(name, "")) if name else ""
        method = "mtp" if draft.upper().startswith("MTP") else None
    rec = recommend({**model, **grid}, workload, profile, itl_ms=args.itl_ms,
                    acceptance_length=args.acceptance_length, method=method, verify=args.verify,
                    greedy_fraction=args.greedy_fraction, target_dtype=args.target_dtype)
    if args.csv:
        table = rec.per_batch.copy()
        head = {"profile": profile.name, "provenance": rec.profile["provenance"], **rec.scenario}
        for key, value in reversed(list(head.items())):
            table.insert(0, key, value)
        write_csv(table, args.csv)
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    if args.json:
        print(json.dumps(rec.to_dict(), indent=2))
    else:
        print(terminal_text(format_recommendation(rec), keep_newlines=True))
    return 0
