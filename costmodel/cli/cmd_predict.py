"""`predict`: price every strategy for one scenario - the table (or `--json`), intervals, explanation, sensitivity.

The point prediction needs numpy only; the intervals (`costmodel.evidence`) and `--sensitivity` are imported when
asked for, so `predict --no-intervals` loads neither pandas nor scipy (tests/cli/test_lazy_imports.py).
"""

from __future__ import annotations

import argparse
import json

from ..answers.explain import explain, format_explanation
from ..answers.placement import chosen_placement, placement_lines, placement_table
from ..answers.whole_step import PER_CALL, applies, whole_step_answer
from ..io.errors import InputError
from ..io.plain import terminal_text
from ..model.predict import predict
from ..model.verification import best_pair, matrix_rows
from ..profiles.store import check_tp_placement, load_profile
from .placement_args import arch_from_args, free_bytes
from .render import _format_table, add_decode_step, add_intervals, apply_whole_step, prediction_dict
from .scenario_args import check_impact_args, scenario_from_args


def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    check_impact_args(args)
    scenario = scenario_from_args(args)
    check_tp_placement(profile, int(scenario.tp), int(scenario.nodes))  # TP above GPUs per node needs --nodes
    if args.acceptance_length is not None and args.acceptance_length > int(scenario.num_spec_tokens) + 1:
        raise InputError(f"--acceptance-length: must be in 1..K+1 = 1..{int(scenario.num_spec_tokens) + 1} "
                         f"tokens per decode step, got {args.acceptance_length}")
    pred = predict(scenario, profile)
    result = prediction_dict(pred, max_batch=args.max_batch, itl_ms=args.itl_ms,
                             acceptance_length=args.acceptance_length)
    if args.verify or args.matrix_csv or int(scenario.top_k) > 1 or str(scenario.collective) != "nccl":
        add_decode_step(result, pred, args)
    else:  # the verdict always names the best (strategy, collective) pair (no crossovers: cheap)
        result["best_pair"] = best_pair(matrix_rows(pred.scenario, pred.profile, max_batch=args.max_batch,
                                                    crossovers=False))
    if not args.no_intervals:
        add_intervals(result, pred, max_batch=args.max_batch)
        if "decode_step" in result:  # the verification group's intervals, from the same ensemble
            from ..evidence.decode_intervals import decode_step_intervals  # only with intervals (module doc)

            result["decode_step"]["intervals"] = decode_step_intervals(
                pred.scenario, profile, verify=args.verify, greedy_fraction=args.greedy_fraction,
                target_dtype=args.target_dtype)
    if args.explain:
        result["explain"] = [e.__dict__ for e in explain(pred)]
    add_placements(result, pred, args)
    add_whole_step(result, pred, args)
    if args.sensitivity:
        result["sensitivity"] = sensitivity_rows(result, pred, args)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(terminal_text(_format_table(result), keep_newlines=True))
    if "unavailable" in result.get("placement", {}):
        print(terminal_text(f"\nplacements not priced: {result['placement']['unavailable']}"))
    elif "placement" in result:
        print(terminal_text("\n".join(placement_lines(result["placement"], result["placement"].get("chosen"))),
                            keep_newlines=True))
    if args.explain:
        print("\n" + format_explanation(pred))
    if args.sensitivity:
        rows = result["sensitivity"]
        per = "" if not rows or rows[0]["quantity"] == PER_CALL else ", whole draft step per decode step"
        print(f"\nsensitivity of the local_argmax_pairs saving{per} (elasticity = % change per 1% change):")
        for row in rows[:12]:
            print(f"  {row['elasticity']:+8.3f}  ({row['saving_change_us_per_1pct']:+.2f} us per +1%)  "
                  f"{row['parameter']}")
    return 0


def sensitivity_rows(result: dict, pred, args: argparse.Namespace) -> list[dict]:
    """`--sensitivity`: the elasticities of the answer's saving (costmodel.answers.sensitivity) - the whole draft
    step's per decode step where it is the answer (`add_whole_step` put it in `result`), else one draft call's."""
    from ..answers.sensitivity import WholeStep, elasticities  # only when asked for (module doc)

    sc, profile = pred.scenario, pred.profile
    if "whole_draft_step" in result:
        whole = WholeStep(arch_from_args(args, int(sc.draft_vocab)), args.kv_len, args.forward_us)
        try:
            return elasticities(sc, profile, whole_step=whole).to_dict(orient="records")
        except InputError:  # the whole step's saving is exactly 0 here: the per-call elasticities, as before
            pass
    return elasticities(sc, profile).to_dict(orient="records")


def add_placements(result: dict, pred, args: argparse.Namespace) -> None:
    """result["placement"]: the placement table (costmodel.answers.placement) and the --placement row; skipped with
    --no-placements, or (without --placement) where the profile cannot price the drafter forward."""
    if getattr(args, "no_placements", False) and not args.placement:
        return
    sc, profile = pred.scenario, pred.profile
    kw = {"kv_len": args.kv_len, "forward_us": args.forward_us, "free_bytes": free_bytes(args)}
    arch = arch_from_args(args, int(sc.draft_vocab))
    if profile.lm_head is None and args.forward_us is None and not args.placement:
        return  # no GEMM model (e.g. cpu-gloo): no drafter forward to show
    try:
        table = placement_table(sc, profile, arch, **kw)
    except InputError as exc:  # e.g. a TP that does not divide the draft's heads: the strategy table still stands
        if args.placement:
            raise
        result["placement"] = {"unavailable": str(exc)}
        return
    if args.placement:
        table["chosen"] = chosen_placement(sc, profile, arch, args.placement, **kw)
    result["placement"] = table


def add_whole_step(result: dict, pred, args: argparse.Namespace) -> None:
    """Where an engine runs the step (costmodel.answers.whole_step.applies), the whole draft step becomes the answer
    (`render.apply_whole_step`); elsewhere result["answer"] says the per-call answer stands, and why."""
    sc, profile = pred.scenario, pred.profile
    why = applies(sc, profile, args.forward_us)
    if not why:
        try:
            ws = whole_step_answer(sc, profile, arch_from_args(args, int(sc.draft_vocab)), kv_len=args.kv_len,
                                   forward_us=args.forward_us, max_batch=args.max_batch,
                                   intervals=not args.no_intervals)
        except InputError as exc:  # e.g. a TP that does not divide the draft's heads
            why = f"the whole draft step cannot be priced: {exc}"
        else:
            apply_whole_step(result, ws)
            if "best_pair" in result:  # priced per call (verification.matrix_rows), not as the headline: say so
                result["best_pair"]["quantity"] = "the logits path alone x calls per decode step"
            return
    result["answer"] = {"quantity": PER_CALL, "why_not_whole_draft_step": why}
