"""`simulate`: replay a `vllm bench serve` run per strategy - the A/B table with 90% intervals and whether an A/B
of this size can see each change (`costmodel.serving.ab`)."""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..answers.question import check_acceptance
from ..io.errors import InputError
from ..io.plain import terminal_text
from ..serving.ab import SimConfig, simulate_ab
from ..serving.run import load_bench_run, load_sharegpt, synthetic_run
from ..serving.table import ab_rows, noise_line, setup_lines
from .question_args import question_from_args
from .simulate_args import DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN, WITHOUT_BENCH


def _check(args: argparse.Namespace) -> None:
    """What the flags' bounded types (costmodel/cli/simulate_args.py) cannot say alone."""
    if args.request_rate is not None and (not (args.request_rate > 0) or math.isnan(args.request_rate)):
        raise InputError("--request-rate: must be > 0 (inf: all at once)")
    if args.bench is None and args.num_prompts is None and args.prompts is None:
        raise InputError("simulate: give --bench RUN.json, or --num-prompts / --prompts with --itl-ms")
    if args.bench is not None and args.prompts is not None:
        raise InputError("--prompts: the lengths come from --bench already (give one of them)")
    given = [name for name in WITHOUT_BENCH if getattr(args, name) is not None]
    if args.bench is not None and given:
        flag = "--" + given[0].replace("_", "-")
        raise InputError(f"{flag}: the bench file says the run's requests, rate and concurrency already (--bench); "
                         "give it without --bench")


def run(args: argparse.Namespace) -> int:
    _check(args)
    qargs = copy.copy(args)
    qargs.itl_ms = qargs.acceptance_length = None  # simulate checks its own (the question pairs them)
    qargs.verify, qargs.greedy_fraction, qargs.target_dtype = False, None, None
    question = question_from_args(qargs)
    k = int(question.scenario.num_spec_tokens)
    check_acceptance(args.acceptance_length, k)
    if args.bench is not None:
        bench = load_bench_run(args.bench, args.acceptance_length)
    else:
        lengths = load_sharegpt(args.prompts) if args.prompts else None
        n = args.num_prompts or int(lengths[1].size)
        bench = synthetic_run(n, args.input_len or DEFAULT_INPUT_LEN, args.output_len or DEFAULT_OUTPUT_LEN,
                              math.inf if args.request_rate is None else args.request_rate, args.max_concurrency,
                              args.acceptance_length, "flags" if lengths is None else Path(args.prompts).name, lengths)
    if args.itl_ms is not None:
        question = replace(question, itl_ms=args.itl_ms)
    cfg = SimConfig(args.max_num_seqs, args.max_num_batched_tokens, args.seeds, 0, args.acceptance_drift)
    ab = simulate_ab(bench, question, cfg)
    if args.csv:
        _write_csv(ab, args.csv)
        print(f"wrote the A/B table to {args.csv}", file=sys.stderr)
    if args.json:
        print(json.dumps(_finite(ab), indent=2, allow_nan=False))
        return 0
    print(terminal_text(format_ab(ab), keep_newlines=True))
    return 0


def _finite(value: Any) -> Any:
    """The dict with every non-finite float as null (strict JSON has no NaN / Infinity)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _write_csv(ab: dict[str, Any], path: str) -> None:
    import pandas as pd  # noqa: PLC0415 - kept out of the CLI's startup (tests/cli/test_lazy_imports.py)

    from ..io.safe_io import write_csv

    write_csv(pd.DataFrame(ab_rows(ab)), path)  # the rows the text table and the dashboard's tab show


def format_ab(ab: dict[str, Any]) -> str:
    """The A/B table in words: one block per metric, the measured run, each strategy's value [90%] and change."""
    lines = [*setup_lines(ab),
             "", f"{'metric':<24}{'measured':>11}  {'strategy':<28}{'value':>11}  {'90% interval':>23}"
             f"{'change [90%]':>24}  A/B of {ab['requests']} sees it?"]
    previous = None
    for r in ab_rows(ab):  # the dashboard tab's rows (costmodel.serving.table): one source for both
        first = r["metric"] != previous
        previous = r["metric"]
        meas = r["measured"]
        lead = (f"{r['metric']:<24}{meas:>11.3f}" if first and meas == meas else
                f"{r['metric'] if first else '':<24}{'':>11}")
        span = "" if r["strategy"] == ab["reference"] else f" [{r['change_low_pct']:+.2f}..{r['change_high_pct']:+.2f}]"
        verdict = f"({r['verdict']})" if r["strategy"] == ab["reference"] else r["verdict"]
        lines.append(f"{lead}  {r['strategy']:<28}{r['value']:>11.3f}  {r['low_90']:>11.3f}..{r['high_90']:<11.3f}"
                     f"{r['change_pct']:>+8.2f}%{span}  {verdict}")
    if len(ab["strategies"]) == 1:
        lines.append(f"\nthe engine runs {ab['reference']} and no other strategy here (no switch to turn it off or to "
                     "another path): nothing to A/B")
    lines.append("\n" + noise_line(ab))
    return "\n".join(lines)
