"""`validate`: predict the published / measured reference points, report the error and the intervals' coverage."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..answers.question import build_question
from ..evidence.coverage import coverage_summary, format_coverage, interval_coverage
from ..evidence.engine_figures import engine_figure_rows, format_engine_figures
from ..evidence.reference import load_reference, reference_files
from ..evidence.validate import (
    format_table_errors,
    format_validation,
    profiles_without_held_out,
    profiles_without_reference,
    summary,
    validate,
)
from ..io.errors import InputError
from ..profiles.paths import DEFAULT_PRESET
from ..profiles.presets import preset, preset_logit_ops
from ..profiles.store import load_profile
from ..serving.table import CLI_CONFIG
from ..serving.validation import (
    ab_pair_rows,
    bundled_runs,
    format_serving,
    noise_rows,
    serving_answers,
    serving_rows,
)
from .output import write_table


def check_args(args: argparse.Namespace) -> None:
    """Flags that would be silently ignored are refused: --held-out-only only narrows --max-error's check;
    --serving-fit and --pairs-out only mean something with --serving, --pairs-out only on the bundled runs (the
    real A/B pairs are theirs)."""
    if getattr(args, "held_out_only", False) and args.max_error is None:
        raise InputError("--held-out-only: limits which rows --max-error checks, so it needs --max-error")
    serving = getattr(args, "serving", None)
    if serving is None and (getattr(args, "serving_fit", "all") != "all" or getattr(args, "pairs_out", None)):
        raise InputError("--serving-fit / --pairs-out: only with --serving")
    if serving and getattr(args, "pairs_out", None):
        raise InputError("--pairs-out: the A/B pairs are the bundled runs' (data/serving-runs/); give --serving "
                         "without RUN.json files")


def read_reference(paths: Sequence[str | Path]) -> tuple[pd.DataFrame, list[str]]:
    """`load_reference(paths)` and, per row, the path of the file it was read from (what `validate` matches
    against a fitted profile's `provenance.files`; the table's `file` column holds the file's name only)."""
    frames = [load_reference([path]) for path in paths] or [load_reference([])]
    row_paths = [str(path) for path, frame in zip(paths, frames, strict=True) for _ in range(len(frame))]
    return pd.concat(frames, ignore_index=True), row_paths


def serving(args: argparse.Namespace) -> int:
    """`validate --serving [RUN.json ...]`: simulate's calibration error on each run (the bundled runs by default),
    priced for the default question (the default preset at TP 8 under vLLM on --profile or the default profile)."""
    question = build_question({**preset(DEFAULT_PRESET), **preset_logit_ops(DEFAULT_PRESET), "tp": 8, "nodes": 1,
                               "batch": 64, "num_spec_tokens": 3, "engine": "vllm"}, load_profile(args.profile),
                              preset=DEFAULT_PRESET)
    config = replace(CLI_CONFIG, fit_part=args.serving_fit)
    answers = serving_answers(args.serving or bundled_runs(), question, config)
    rows = serving_rows(answers)
    pairs = ab_pair_rows(config=config) if not args.serving else None  # the bundled real A/B pairs
    print(format_serving(rows, pairs, args.serving_fit, noise_rows(answers)))
    if args.out:
        write_table(pd.DataFrame(rows), args.out)
    if args.pairs_out:
        write_table(pd.DataFrame(pairs), args.pairs_out)
    return 0


def run(args: argparse.Namespace) -> int:
    check_args(args)
    if args.serving is not None:
        return serving(args)
    if getattr(args, "engine_figures", False):
        figures = engine_figure_rows()
        print(format_engine_figures(figures))
        if args.out:
            write_table(figures, args.out)
        return 0 if bool(figures["within_target"].all()) else 1
    paths = args.reference or reference_files()
    reference, row_paths = read_reference(paths)
    table = validate(reference, args.profile, row_paths)
    summ = summary(table)
    if args.summary_only:
        print(summ.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    else:
        print(format_validation(table, summ))
    print()
    print(format_table_errors(table))
    if not args.profile:  # say plainly where no held-out data exists
        none = profiles_without_reference(table)
        only_in = profiles_without_held_out(table)
        if none and args.reference:  # a user's own files: the other profiles are simply not in them
            print("not priced by these reference files: " + ", ".join(none))
        elif none:
            print("no reference table for: " + ", ".join(none) + " (derived, unchecked: no published table matches "
                  "their GPU)")
        if only_in:
            print("in-sample rows only (no held-out check) for: " + ", ".join(only_in))
    if not getattr(args, "no_coverage", False):
        table = interval_coverage(table)
        print()
        print(format_coverage(coverage_summary(table)))
    if args.out:
        write_table(table, args.out)
    if args.max_error is not None:
        rows = table if not args.held_out_only else table[~table["used_in_profile"]]
        worst = rows["rel_error"].abs().max()
        if worst > args.max_error:
            print(f"error: max |relative error| {worst:.3f} exceeds --max-error {args.max_error}", file=sys.stderr)
            return 1
    return 0
