"""`predict`: the answer to one question (`costmodel.answers.answer`) as the table (or `--json`), with intervals,
explanation and sensitivity. It prices nothing itself: it builds the Question from the flags and renders the Answer.
"""

from __future__ import annotations

import argparse
import json

from ..answers.answer import Options, price
from ..answers.explain import format_explanation
from ..answers.placement import chosen_line, placement_lines
from ..answers.whole_step import PER_CALL
from ..io.plain import terminal_text
from ..io.safe_io import write_csv
from .question_args import question_from_args
from .render import _format_table


def run(args: argparse.Namespace) -> int:
    question = question_from_args(args)
    answer = price(question, Options(intervals=not args.no_intervals, explain=args.explain,
                                     sensitivity=args.sensitivity, placements=not getattr(args, "no_placements", False),
                                     matrix_crossovers=bool(args.matrix_csv)))
    result = answer.point
    if args.matrix_csv:
        import pandas as pd  # the CSV's frame only (the text and JSON need none)

        sc = question.scenario
        write_csv(pd.DataFrame(result["matrix"]).assign(
            profile=question.profile.name, top_k=int(sc.top_k), batch=float(sc.batch), verify=question.verify,
            greedy_fraction=question.greedy_fraction), args.matrix_csv)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(terminal_text(_format_table(result), keep_newlines=True))
    if "unavailable" in result.get("placement", {}):
        print(terminal_text(f"\nplacements not priced: {result['placement']['unavailable']}"))
        if "chosen" in result["placement"]:  # tp1 / dp where the draft cannot shard at the target's TP
            print(terminal_text(chosen_line(result["placement"]["chosen"])))
    elif "placement" in result:
        print(terminal_text("\n".join(placement_lines(result["placement"], result["placement"].get("chosen"))),
                            keep_newlines=True))
    if args.explain:
        print("\n" + format_explanation(answer.prediction))
    if args.sensitivity:
        rows = result["sensitivity"]
        per = "" if not rows or rows[0]["quantity"] == PER_CALL else ", whole draft step per decode step"
        from ..answers.sensitivity import elasticity_meaning  # pandas: only with --sensitivity (answer.py)

        saving = f" ({rows[0]['saving_us']:+.1f} us here)" if rows else ""
        print(f"\nsensitivity of the local_argmax_pairs saving{per}{saving}:")
        print(f"  elasticity = {elasticity_meaning(rows[0]['saving_us'] if rows else 1.0)}")
        for row in rows[:12]:
            print(f"  {row['elasticity']:+8.3f}  ({row['saving_change_us_per_1pct']:+.2f} us per +1%: "
                  f"{row['effect']})  {row['parameter']}")
    return 0
