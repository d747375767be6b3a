"""`recommend`: on or off for a workload's batch mix - expected saving, interval and the engine config to paste."""

from __future__ import annotations

import argparse
import json
import sys

from ..answers.placement import recommend_placement
from ..answers.recommend import recommend
from ..answers.recommend_text import format_recommendation
from ..answers.workload import load_workload
from ..io.errors import InputError
from ..io.plain import terminal_text
from ..io.safe_io import write_csv
from ..model.scenario import Scenario
from ..profiles.presets import presets as preset_table
from ..profiles.store import check_tp_placement, load_profile
from .options import DEFAULT_PRESET
from .placement_args import arch_from_args, free_bytes
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
    arch = arch_from_args(args, int(Scenario(**model, **grid).draft_vocab))
    rec = recommend({**model, **grid}, workload, profile, itl_ms=args.itl_ms,
                    acceptance_length=args.acceptance_length, method=method, verify=args.verify,
                    greedy_fraction=args.greedy_fraction, target_dtype=args.target_dtype, arch=arch,
                    kv_len=args.kv_len, forward_us=args.forward_us)
    if args.csv:
        table = rec.per_batch.copy()
        head = {"profile": profile.name, "provenance": rec.profile["provenance"], **rec.scenario,
                "quantity": rec.quantity}
        for key, value in reversed(list(head.items())):
            table.insert(0, key, value)
        write_csv(table, args.csv)
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    choice, why = None, ""
    if profile.lm_head is not None or args.forward_us is not None:  # no GEMM model (cpu-gloo): no placement
        sc = Scenario(**model, **grid)
        try:
            choice = recommend_placement(sc, profile, arch, workload.batch,
                                         workload.weight, kv_len=args.kv_len, forward_us=args.forward_us,
                                         free_bytes=free_bytes(args))
        except InputError as exc:  # a draft that cannot shard at the TP: the logits answer still stands
            why = str(exc)
    if args.json:
        extra = {"placement": choice.to_dict()} if choice else ({"placement": {"unavailable": why}} if why else {})
        print(json.dumps({**rec.to_dict(), **extra}, indent=2))
    else:
        print(terminal_text(format_recommendation(rec), keep_newlines=True))
        if choice is not None:
            print(terminal_text(placement_text(choice), keep_newlines=True))
        elif why:
            print(terminal_text(f"\nplacement: not priced: {why}"))
    return 0


def placement_text(c) -> str:
    """The (placement, strategy, collective) triple in words (costmodel.answers.placement.PlacementChoice)."""
    lines = [f"\nplacement: run the draft at {c.placement} with {c.strategy} over {c.collective}: "
             f"{c.expected_us:.1f} us per decode step expected (target + full_all_gather + nccl: {c.baseline_us:.1f})",
             f"  engine: {c.engine}"]
    lines.append(f"  placement config: {c.config}" if c.config
                 else "  placement config: nothing to set (the engine's default)")
    lines += [f"  not considered: {r}" for r in c.refused]
    return "\n".join(lines)
