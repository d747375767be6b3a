"""`compare`: the same scenario on two profiles side by side (per strategy: time, saving, crossover batch).

With --engine, the table is the whole draft step per decode step (`predict`'s answer; costmodel.answers.compare),
the per-call columns (the logits path alone) are in --csv."""

from __future__ import annotations

import argparse
import sys

from ..answers.compare import column_labels, compare_table, compare_wide, whole_step_is_the_answer
from ..answers.provenance import scenario_source_lines
from ..io.errors import InputError
from ..io.plain import terminal_text
from ..io.safe_io import write_csv
from ..model.fabrics import profile_on_fabric
from ..profiles.paths import DEFAULT_PROFILE
from ..profiles.store import load_profile
from .placement_args import arch_from_args
from .question_args import fabric_kwargs
from .render import wrap_lines
from .scenario_args import scenario_from_args


def run(args: argparse.Namespace) -> int:
    """The same scenario on two profiles: per strategy the time, the saving and the crossover batch, side by side
    (costmodel.answers.compare)."""
    if args.profile != DEFAULT_PROFILE:
        raise InputError("compare: --profile is not used; give the two profiles as arguments "
                         "(compare PROFILE_A PROFILE_B)")
    profiles = [profile_on_fabric(load_profile(name), **fabric_kwargs(args))
                for name in (args.profile_a, args.profile_b)]
    scenario = scenario_from_args(args)
    arch = None
    if str(scenario.engine) != "none":  # the whole draft step is the answer: the preset's draft (as predict)
        try:
            arch = arch_from_args(args, int(scenario.draft_vocab))
        except InputError:  # no draft architecture: the per-call answer stands (its why in the table)
            arch = None
    table = compare_table(scenario, profiles, max_batch=args.max_batch, arch=arch, kv_len=args.kv_len,
                          forward_us=args.forward_us)
    if args.csv:
        write_csv(table, args.csv)
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    sc = scenario
    print(f"scenario: tp {int(sc.tp)} nodes {int(sc.nodes)} batch {int(sc.batch)} K {int(sc.num_spec_tokens)} "
          f"vocab {int(sc.vocab)} {sc.dtype}")
    labels = column_labels([p.name for p in profiles])
    for letter, prof in zip(LETTERS, profiles, strict=False):
        print(terminal_text(f"[{letter}] {prof.name} ({prof.provenance.kind}: {prof.provenance.gpu})"))
    if str(sc.engine) != "none":  # engine none: the per-call table as before (the quantity asked for)
        for line in wrap_lines([terminal_text(_answer_line(table, labels))]):
            print(line)
    print(terminal_text(_narrow(compare_wide(table), table, labels).to_string(
        index=False, float_format=lambda x: f"{x:.1f}", na_rep="none"), keep_newlines=True))
    for letter, prof in zip(LETTERS, profiles, strict=False):
        for line in wrap_lines([terminal_text(f"[{letter}] {line}") for line in scenario_source_lines(prof, scenario)]):
            print(line)
    return 0


LETTERS = "12"  # the profiles in the order given
# the text table's headers (the CSV keeps compare_table's field names): quantity -> short header, as predict's
TEXT_HEADERS = {"total_us": "us/call", "saving_per_draft_call_us": "saving/call", "crossover_batch": "crossover B"}
# the same for the whole draft step (us per decode step, as predict's whole-step table)
STEP_HEADERS = {"whole_draft_step_us": "us/decode step", "saving_per_decode_step_us": "saving",
                "crossover_batch": "crossover B"}


def _answer_line(table, labels: list[str]) -> str:
    """Which quantity the table is (compare_table's quantity, predict's words) and, under an engine, why a profile's
    answer is per call."""
    if whole_step_is_the_answer(table):
        return f"the answer - {table['quantity'].iloc[0]} (target placement):"
    why = [f"[{letter}] {w}" for letter, label in zip(LETTERS, labels, strict=False)
           for w in dict.fromkeys(table[table["profile"] == label]["why_not_whole_draft_step"]) if w]
    head = "per draft call, the logits path alone (us per draft call)"
    return head + (f"; the whole draft step is not priced: {'; '.join(why)}" if why else ":")


def _narrow(wide, table, labels: list[str]):
    """`compare_wide` with its `quantity[profile label]` columns renamed `short header [1]` / `[2]` (the profiles are
    named once above the table) and the crossover in predict's words (`compare_table`'s "crossover": "7.1 (wins
    above)", "wins at every batch in range", "-" for the baseline): ~110-135 columns instead of ~235."""
    whole = whole_step_is_the_answer(table)
    rename = {f"{q}[{label}]": f"{head} [{letter}]" for q, head in (STEP_HEADERS if whole else TEXT_HEADERS).items()
              for letter, label in zip(LETTERS, labels, strict=False)}
    out = wide.rename(columns=rename)
    for letter, label in zip(LETTERS, labels, strict=False):  # the crossover's words (predict's), not a bare NaN
        words = table[table["profile"] == label].set_index("strategy")["crossover"]
        out[f"crossover B [{letter}]"] = out["strategy"].map(words)
    return out
