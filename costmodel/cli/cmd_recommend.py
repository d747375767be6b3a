"""`recommend`: on or off for a workload's batch mix - expected saving, interval and the engine config to paste."""

from __future__ import annotations

import argparse
import json
import sys

from ..answers.answer import price
from ..answers.recommend_text import format_recommendation
from ..io.plain import terminal_text
from ..io.safe_io import write_csv
from ..serving.workload import load_workload
from .question_args import question_from_args


def run(args: argparse.Namespace) -> int:
    workload = load_workload(args.workload, args.workload_kind)
    question = question_from_args(args, workload=workload)
    answer = price(question).workload
    rec = answer.recommendation
    if args.csv:
        table = rec.per_batch.copy()
        head = {"profile": question.profile.name, "provenance": rec.profile["provenance"], **rec.scenario,
                "quantity": rec.quantity}
        for key, value in reversed(list(head.items())):
            table.insert(0, key, value)
        write_csv(table, args.csv)
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    if args.json:
        print(json.dumps(answer.to_dict(), indent=2))
        return 0
    print(terminal_text(format_recommendation(rec), keep_newlines=True))
    if answer.placement is not None:
        print(terminal_text(placement_text(answer.placement, answer.placement_engine_cannot), keep_newlines=True))
    elif answer.placement_unavailable:
        print(terminal_text(f"\nplacement: not priced: {answer.placement_unavailable}"))
    return 0


def placement_text(c, cannot: str = "") -> str:
    """The (placement, strategy, collective) triple in words (costmodel.answers.placement.PlacementChoice): what to
    run - a triple the engine runs, under the headline's decision rule (`answer.placement_rule`) - and its saving
    versus what engines run today; apart, the faster triple it set aside and why."""
    lines = [f"\nplacement: run the draft at {c.placement} with {c.strategy} over {c.collective}: "
             f"{c.expected_us:.1f} us per decode step expected, saving {c.saving_us:+.1f} us vs target + "
             f"full_all_gather + nccl ({c.baseline_us:.1f})",
             *([f"  not runnable under this engine: {cannot}"] if cannot else []),
             f"  engine: {c.engine}"]
    lines.append(f"  placement config: {c.config}" if c.config
                 else "  placement config: nothing to set (the engine's default)")
    if c.set_aside is not None:
        a = c.set_aside
        lines.append(f"  faster, set aside: {a.placement} with {a.strategy} over {a.collective}: "
                     f"{a.expected_us:.1f} us per decode step expected - {a.why}")
    lines += [f"  not considered: {r}" for r in c.refused]
    return "\n".join(lines)
