"""`compare`: the same scenario on two profiles side by side (per strategy: time, saving, crossover batch)."""

from __future__ import annotations

import argparse
import sys

from ..answers.compare import column_labels, compare_table, compare_wide
from ..answers.provenance import scenario_source_lines
from ..io.errors import InputError
from ..io.plain import terminal_text
from ..io.safe_io import write_csv
from ..profiles.paths import DEFAULT_PROFILE
from ..profiles.store import load_profile
from .render import wrap_lines
from .scenario_args import scenario_from_args


def run(args: argparse.Namespace) -> int:
    """The same scenario on two profiles: per strategy the time, the saving and the crossover batch, side by side
    (costmodel.answers.compare)."""
    if args.profile != DEFAULT_PROFILE:
        raise InputError("compare: --profile is not used; give the two profiles as arguments "
                         "(compare PROFILE_A PROFILE_B)")
    profiles = [load_profile(args.profile_a), load_profile(args.profile_b)]
    scenario = scenario_from_args(args)
    table = compare_table(scenario, profiles, max_batch=args.max_batch)
    if args.csv:
        write_csv(table, args.csv)
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    sc = scenario
    print(f"scenario: tp {int(sc.tp)} nodes {int(sc.nodes)} batch {int(sc.batch)} K {int(sc.num_spec_tokens)} "
          f"vocab {int(sc.vocab)} {sc.dtype}")
    labels = column_labels([p.name for p in profiles])
    for letter, prof in zip(LETTERS, profiles, strict=False):
        print(terminal_text(f"[{letter}] {prof.name} ({prof.provenance.kind}: {prof.provenance.gpu})"))
    print(terminal_text(_narrow(compare_wide(table), table, labels).to_string(
        index=False, float_format=lambda x: f"{x:.1f}", na_rep="none"), keep_newlines=True))
    for letter, prof in zip(LETTERS, profiles, strict=False):
        for line in wrap_lines([terminal_text(f"[{letter}] {line}") for line in scenario_source_lines(prof, scenario)]):
            print(line)
    return 0


LETTERS = "12"  # the profiles in the order given
# the text table's headers (the CSV keeps compare_table's field names): quantity -> short header, as predict's
TEXT_HEADERS = {"total_us": "us/step", "saving_per_draft_step_us": "saving/step", "crossover_batch": "crossover B"}


def _narrow(wide, table, labels: list[str]):
    """`compare_wide` with its `quantity[profile label]` columns renamed `short header [1]` / `[2]` (the profiles are
    named once above the table) and the crossover in predict's words (`compare_table`'s "crossover": "7.1 (wins
    above)", "wins at every batch in range", "-" for the baseline): ~110-135 columns instead of ~235."""
    rename = {f"{q}[{label}]": f"{head} [{letter}]" for q, head in TEXT_HEADERS.items()
              for letter, label in zip(LETTERS, labels, strict=False)}
    out = wide.rename(columns=rename)
    for letter, label in zip(LETTERS, labels, strict=False):  # the crossover's words (predict's), not a bare NaN
        words = table[table["profile"] == label].set_index("strategy")["crossover"]
        out[f"crossover B [{letter}]"] = out["strategy"].map(words)
    return out
