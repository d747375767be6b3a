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
          f"vocab {int(sc.vocab)} {sc.dtype}; profiles: " + ", ".join(
              terminal_text(f"{p.name} ({p.provenance.kind}: {p.provenance.gpu})") for p in profiles))
    print(terminal_text(compare_wide(table).to_string(index=False, float_format=lambda x: f"{x:.1f}", na_rep="none"),
                        keep_newlines=True))
    for label, prof in zip(column_labels([p.name for p in profiles]), profiles, strict=True):
        for line in scenario_source_lines(prof, scenario):
            print(terminal_text(f"  {label}: {line}"))
    return 0
