"""A prediction as the CLI shows it: the JSON dictionary (`--json`) and the text table, with intervals,
decode-step and engine lines.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

import numpy as np

from ..answers.impact import impact_change
from ..answers.provenance import source_lines
from ..answers.table_quirks import scenario_quirks
from ..io.plain import terminal_text
from ..io.safe_io import write_csv
from ..model.components import BASELINE, DESCRIPTIONS
from ..model.crossover import crossover
from ..model.engines import HOST_SOURCE, PLANS, host_costs, with_overrides
from ..model.kernels import kernel_context
from ..model.predict import Prediction
from ..model.recipes import describe as describe_recipe
from ..model.serving import SERVING_CALL_US, SERVING_SOURCE
from ..model.sources import sources_dict
from .options import HEADLINE


def prediction_dict(pred: Prediction, *, max_batch: float = 65536.0, itl_ms: float | None = None,
                    acceptance_length: float | None = None) -> dict[str, Any]:
    """The `predict --json` object for a single scenario."""
    sc, prof = pred.scenario, pred.profile
    strategies = {}
    for name, r in pred.strategies.items():
        entry: dict[str, Any] = {
            "description": DESCRIPTIONS[name],
            "recipe": describe_recipe(str(sc.engine), name),
            "total_us": float(r.total_us),
            "components": {k: float(v) for k, v in r.components_us.items()},
            "wire_bytes_per_rank": float(r.wire_bytes_per_rank),
            "valid": bool(r.valid),
            "extrapolated": bool(r.extrapolated),
            "saving_per_draft_step_us": float(pred.saving_us(name)),
            "saving_per_decode_step_us": float(pred.saving_per_decode_step_us(name)),
            "saving_pct": float(pred.saving_pct(name)),
        }
        if name != BASELINE:
            cross = crossover(sc, name, prof, batch_range=(1.0, max_batch))
            entry["crossover_batch"] = cross.batch
            entry["crossover"] = cross.to_dict()
        else:
            entry["crossover_batch"] = None
        if itl_ms is not None:
            entry["impact"] = impact_change(float(pred.saving_per_decode_step_us(name)), itl_ms,
                                            acceptance_length or 1.0, name).to_dict()
        strategies[name] = entry
    return {
        "profile": {"name": prof.name, "title": prof.title, "kind": prof.provenance.kind,
                    "source": prof.provenance.source, "gpu": prof.provenance.gpu},
        "kernel_context": kernel_context(prof, sc),
        "scenario": sc.describe(),
        "engine": engine_dict(pred),
        "baseline": BASELINE,
        "best": str(pred.best()),
        "crossover_batch": strategies[HEADLINE]["crossover_batch"],
        "strategies": strategies,
        **_collective_provenance(pred),
        **sources_dict(prof, sc),
        "table_quirks": scenario_quirks(prof, sc),
    }


def _collective_provenance(pred: Prediction) -> dict[str, Any]:
    """{"collective_provenance": {op: "measured" | "derived"}} for a oneshot / multimem scenario: whether the
    profile's measured curve or the derived parameters price it (costmodel.model.collective_impls.provenance)."""
    from ..model.collective_impls import IMPL_OPS, provenance

    sc = pred.scenario.item(0)
    impl = str(sc.collective)
    if impl == "nccl":
        return {}
    return {"collective_provenance": {op: provenance(pred.profile, impl, op, int(sc.tp), int(sc.nodes))
                                      for op in IMPL_OPS}}


def engine_dict(pred: Prediction) -> dict[str, Any]:
    """How the step was executed: the engine's plan (with its source) or one mode for every component."""
    sc = pred.scenario.item(0)
    hc = with_overrides(host_costs(pred.profile), sc.host_op_us, sc.host_collective_us)
    name = str(sc.engine)
    out: dict[str, Any] = {"name": name, "host_torch_op_us": float(hc.torch_op_us),
                           "host_c10d_call_us": float(hc.c10d_call_us), "host_source": hc.source,
                           "serving_term_us_per_collective_call": (SERVING_CALL_US if name != "none"
                                                                   and bool(sc.serving_term) else 0.0),
                           "serving_term_source": SERVING_SOURCE}
    if name == "none":
        out.update(execution=f"--mode {sc.mode} for every component", source="user (--mode)")
    else:
        plan = PLANS[name]
        captured = ("every component in a CUDA graph" if plan.is_captured("*")
                    else "every component launched by the host")
        out.update(execution=f"{captured}; host syncs: {', '.join(sorted(plan.sync_after)) or 'none'}"
                   + ("; head start: the lm_head GEMM" if plan.head_start else ""),
                   source=plan.source, notes=list(plan.notes), engine_default_strategy=plan.default_strategy)
    return out


def _format_table(result: dict[str, Any]) -> str:
    sc = result["scenario"]
    lines = [
        terminal_text(f"profile {result['profile']['name']} ({result['profile']['kind']}: {result['profile']['gpu']})"),
        f"vocab {sc['vocab']} draft {sc['draft_vocab']} (V_pad {sc['padded_draft_vocab']}, shard {sc['shard']}) "
        f"d2t {'on' if sc['d2t'] else 'off'}  tp {sc['tp']} nodes {sc['nodes']}  batch {sc['batch']}  "
        f"K {sc['num_spec_tokens']} {sc['drafting']}  {sc['dtype']} impl {sc['impl']}",
        *wrap_lines([_engine_line(result), *_kernel_lines(result), *source_lines(result),
                     *(f"note: {q}" for q in result.get("table_quirks") or [])]),
        "",
    ]
    if "whole_draft_step" in result:
        return "\n".join(lines + _per_call_lines(result) + whole_step_lines(result) + _decode_lines(result))
    lines.append(f"{'strategy':30s} {'us/draft step':>13s} {'saving/step':>12s} {'saving/decode':>14s}  crossover B")
    for name, s in result["strategies"].items():
        cross = s.get("crossover_batch")
        cross_txt = "-" if name == result["baseline"] else (
            s["crossover"]["text"] if "crossover" in s else ("none" if cross is None else f"{cross:.1f}"))
        flag = "" if s["valid"] else ("  (invalid: packed keys are exact at top-k 1 only)"
                                      if name == "packed_allreduce_max" and sc.get("top_k", 1) > 1
                                      else "  (invalid: ids not exact in fp32)")
        lines.append(f"{name:30s} {s['total_us']:13.1f} {s['saving_per_draft_step_us']:12.1f} "
                     f"{s['saving_per_decode_step_us']:14.1f}  {cross_txt}{flag}")  # words: left-aligned, last
        if "interval" in s:
            lines.append(_interval_line(s["interval"]["saving_per_draft_step_us"], s["interval"]["crossover_batch"],
                                        s["verdict"]))
        lines += _component_lines(s, result)
        if "impact" in s and name != result["baseline"]:
            im = s["impact"]
            gain_iv = im.get("output_throughput_gain_pct_interval")
            gain_txt = "" if not gain_iv else f" [{gain_iv['low']:+.2f}..{gain_iv['high']:+.2f}%]"
            lines.append(f"{'':30s}   ITL {im['itl_before_ms']:.3f} -> {im['itl_after_ms']:.3f} ms "
                         f"(reduction {im['itl_reduction_pct']:+.2f}%), TPOT {im['tpot_before_ms']:.3f} -> "
                         f"{im['tpot_after_ms']:.3f} ms, output throughput {im['output_throughput_gain_pct']:+.2f}%"
                         f"{gain_txt}")
    lines.append("")
    lines.append(f"fastest: {result['best']}   (savings are versus {result['baseline']}, us; positive = faster)")
    lines.extend(_decode_lines(result))
    return "\n".join(lines)


def _per_call_lines(result: dict[str, Any]) -> list[str]:
    """Where the whole draft step is the answer: the per-call table (the logits path alone, context)."""
    lines = ["per draft call, the logits path alone (context; the answer is the whole draft step below):",
             f"{'strategy':30s} {'us/draft call':>13s} {'saving/call':>12s}"]
    for name, s in result["strategies"].items():
        lines.append(f"{name:30s} {s['total_us']:13.1f} {s['saving_per_draft_step_us']:12.1f}"
                     + ("" if s["valid"] else "  (invalid)"))
        lines += _component_lines(s, result)
    return lines


def _component_lines(s: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """A strategy's components ("= all_gather 47.9, ...") and, under an engine, the recipe that priced them."""
    parts = ", ".join(f"{k} {v:.1f}" for k, v in s["components"].items() if v)
    lines = [f"{'':30s}   = {parts}"]
    if result.get("engine", {}).get("name", "none") != "none" and "reference" not in s.get("recipe", "reference"):
        lines.append(f"{'':30s}   " + terminal_text(s["recipe"].rsplit(" [", 1)[0]))
    return lines


def _interval_line(saving: dict[str, Any], cross: dict[str, Any] | None, verdict: str) -> str:
    """"90% interval: saving LOW..HIGH us, crossover LOW..HIGH -> verdict" (the crossover part when there is one)."""
    cx_txt = "" if cross is None else f", crossover {cross['low']:.1f}..{cross['high']:.1f}"
    return f"{'':30s}   90% interval: saving {saving['low']:.1f}..{saving['high']:.1f} us{cx_txt} -> {verdict}"


def _decode_lines(result: dict[str, Any]) -> list[str]:
    """Per decode step: the draft group, the verification group (with --verify) and the best pair."""
    step = result.get("decode_step")
    if not step:
        return [_best_pair_line(result["best_pair"], _whole(result))] if result.get("best_pair") else []
    ver = result.get("verification", {})
    head = "per decode step (us): draft x calls" + (f" + greedy verification of {ver['rows']:.0f} rows over "
                                                   f"vocab {ver['vocab']} at TP {ver['tp']} {ver['dtype']}, "
                                                   f"F = {ver['greedy_fraction']:g}" if ver.get("enabled") else "")
    lines = ["", head, f"{'strategy':30s} {'draft':>10s} {'verify':>10s} {'decode step':>12s} {'saving':>10s}"]
    ivs = step.get("intervals") or {}
    for name, d in step["strategies"].items():
        iv = ivs.get(name)
        iv_txt = "" if iv is None else (
            f"  [saving {iv['decode_step_saving_us']['low']:+.1f}..{iv['decode_step_saving_us']['high']:+.1f}"
            + (f", verify {iv['verify_saving_us']['low']:+.1f}..{iv['verify_saving_us']['high']:+.1f}"
               if ver.get("enabled") else "") + "]")
        lines.append(f"{name:30s} {d['draft_us']:10.1f} {d['verify_us']:10.1f} {d['decode_step_us']:12.1f} "
                     f"{d['saving_us']:10.1f}{'' if d['valid'] else '  (invalid)'}{iv_txt}")
    if ivs:
        level = next(iter(ivs.values()))["decode_step_saving_us"]["level"]
        lines.append(f"  [..]: central {level:.0%} of {next(iter(ivs.values()))['members']} (as the intervals above)")
    lines.append(_best_pair_line(result["best_pair"], _whole(result)))
    return lines


def _whole(result: dict[str, Any]) -> bool:
    """True where the whole draft step is the answer (`apply_whole_step`): the best pair is then priced on another
    quantity than the headline, and says so."""
    return str((result.get("answer") or {}).get("quantity", "")).startswith("whole draft step")


def _best_pair_line(bp: dict[str, Any], whole: bool = False) -> str:
    """The verdict's best (strategy, collective) pair, per decode step, with the provenance of the collective; where
    the whole draft step is the headline, labelled as what it is: the logits path alone x the calls per decode step
    (`verification.matrix_rows`; the drafter's own all-reduces would change with the implementation too)."""
    label = " of the logits path alone (per call x calls, not the whole draft step)" if whole else ""
    return (f"best (strategy, collective){label}: ({bp['strategy']}, {bp['collective']}) "
            f"{bp['decode_step_us']:.1f} us per decode step, saving {bp['saving_vs_nccl_baseline_us']:.1f} us "
            f"vs (full_all_gather, nccl){'' if bp['native'] else ' [NCCL fallback for some collectives]'}"
            + ("" if bp["collective"] == "nccl" else _impl_provenance_note(bp)))


def _impl_provenance_note(bp: dict[str, Any]) -> str:
    prov = bp.get("collective_provenance") or {}
    measured = sorted(op for op, kind in prov.items() if kind == "measured")
    if not measured:
        return "  (oneshot / multimem / nccl-symm parameters are derived from published figures, not measured)"
    derived = sorted(op for op, kind in prov.items() if kind != "measured")
    return (f"  ({bp['collective']} {' / '.join(measured)}: measured curve"
            + (f"; {' / '.join(derived)}: derived from published figures)" if derived else ")"))


def add_decode_step(result: dict[str, Any], pred: Prediction, args: argparse.Namespace) -> None:
    """`decode_step` (draft + verification groups per strategy), `verification`, `best_pair`, `matrix`."""
    from ..model.verification import best_pair, decode_step, matrix_rows, verification_dict

    sc = pred.scenario
    step = decode_step(sc, pred.profile, verify=args.verify, greedy_fraction=args.greedy_fraction,
                       target_dtype=args.target_dtype)
    result["decode_step"] = {"strategies": {
        n: {"draft_us": float(step.draft_us(n)), "verify_us": float(step.verify_us(n)),
            "decode_step_us": float(step.total_us(n)), "saving_us": float(step.saving_us(n)),
            "valid": bool(step.valid(n))} for n in pred.strategies}}
    result["verification"] = verification_dict(step)
    rows = matrix_rows(sc, pred.profile, verify=args.verify, greedy_fraction=args.greedy_fraction,
                       target_dtype=args.target_dtype, max_batch=args.max_batch, crossovers=bool(args.matrix_csv))
    result["best_pair"] = best_pair(rows)
    bp_impl, bp_sc = str(result["best_pair"]["collective"]), pred.scenario.item(0)
    if bp_impl != "nccl":  # measured where the profile has the implementation's curves (collective_impls.provenance)
        from ..model.collective_impls import IMPL_OPS, provenance

        result["best_pair"]["collective_provenance"] = {
            op: provenance(pred.profile, bp_impl, op, int(bp_sc.tp), int(bp_sc.nodes)) for op in IMPL_OPS}
    result["matrix"] = [{k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()}
                        for row in rows]
    if args.matrix_csv:
        import pandas as pd  # the CSV's frame only (the text and JSON need none)

        write_csv(pd.DataFrame(rows).assign(profile=pred.profile.name, top_k=int(sc.top_k), batch=float(sc.batch),
                               verify=bool(args.verify), greedy_fraction=args.greedy_fraction), args.matrix_csv)


def _kernel_lines(result: dict[str, Any]) -> list[str]:
    ctx = result.get("kernel_context") or {}
    if not ctx:
        return []
    lines = [f"kernels: {ctx['kernels']}"]
    if ctx.get("lm_head_us") is not None:
        lines.append(f"lm_head GEMM (context, common to every strategy): {ctx['lm_head_us']:.1f} us per draft step "
                     f"at hidden {result['scenario']['hidden']} ({ctx['lm_head_source']})")
    elif result["scenario"].get("hidden") is not None:
        lines.append(f"lm_head GEMM: {ctx['lm_head_source']}")
    return lines


TEXT_WIDTH = 100  # the header's prose lines wrap here (they ran to 200-250 columns); the table keeps its columns


def wrap_lines(lines: list[str], width: int = TEXT_WIDTH) -> list[str]:
    """Each line wrapped at `width` columns at spaces (words and paths never split), continuation lines indented."""
    out: list[str] = []
    for line in lines:
        out += textwrap.wrap(line, width=width, subsequent_indent="    ", break_long_words=False,
                             break_on_hyphens=False) or [line]
    return out


def _engine_line(result: dict[str, Any]) -> str:
    eng = result.get("engine") or {}
    if not eng:
        return f"mode {result['scenario']['mode']}"
    who = "engine none" if eng["name"] == "none" else f"engine {eng['name']} ({eng['source']})"
    return (f"{who}: {eng['execution']}; host per torch op {eng['host_torch_op_us']:g} us, "
            f"per c10d call {eng['host_c10d_call_us']:g} us"
            + (" (defaults: no kernels.host in the profile)" if eng.get("host_source") == HOST_SOURCE else "")
            + (f"; serving term {eng['serving_term_us_per_collective_call']:g} us per collective call (derived)"
               if eng.get("serving_term_us_per_collective_call") else ""))


def add_intervals(result: dict[str, Any], pred: Prediction, *, max_batch: float) -> None:
    """Attach 90% bootstrap intervals (when the profile has replicates) and the verdict per strategy."""
    from ..evidence.intervals import propagate

    unc = propagate(pred.scenario, pred.profile, batch_range=(1.0, max_batch))
    members = (f"{len(pred.profile.bootstrap)} bootstrap replicates" if pred.profile.bootstrap
               else "the point profile (no replicates)")
    result["intervals"] = f"90% prediction interval: {members} x per-op model discrepancy"
    for name, entry in result["strategies"].items():
        if name in unc:
            entry["interval"] = unc[name].to_dict()
            entry["verdict"] = unc[name].verdict
            if "impact" in entry:  # the impact's throughput gain over the same interval
                im, iv = entry["impact"], unc[name].saving_per_decode_step_us
                entry["impact"] = impact_change(entry["saving_per_decode_step_us"], im["itl_before_ms"],
                                                im["itl_before_ms"] / im["tpot_before_ms"], name,
                                                (iv.low, iv.high)).to_dict()
        elif name != BASELINE:
            s = entry["saving_per_draft_step_us"]
            entry["verdict"] = "faster" if s > 0 else "slower" if s < 0 else "equal"
        if name != BASELINE and not entry["valid"]:  # not exact here (fp32 ids, or packed keys at top-k > 1)
            entry["verdict"] = "invalid"


PER_CALL_KEYS = ("interval", "verdict", "crossover", "crossover_batch", "saving_per_decode_step_us", "impact")


def apply_whole_step(result: dict[str, Any], ws: dict[str, Any]) -> None:
    """Make the whole draft step (`costmodel.answers.whole_step`) the answer of a `prediction_dict`: per strategy,
    the per-call fields of PER_CALL_KEYS move under "per_call" and the whole step's take their place (saving per
    decode step, crossover, interval, verdict, impact); "best" and "crossover_batch" become the whole step's."""
    result["whole_draft_step"] = ws
    result["answer"] = {"quantity": ws["quantity"], "per_call_best": result["best"]}
    result["best"] = ws["best"]
    for name, entry in result["strategies"].items():
        w = ws["strategies"][name]
        entry["per_call"] = {k: entry.pop(k) for k in PER_CALL_KEYS if k in entry}
        entry["saving_per_decode_step_us"] = w["saving_us"]
        entry["whole_draft_step_us"] = w["total_us"]
        for key in ("crossover", "crossover_batch", "interval", "verdict"):
            if key in w:
                entry[key] = w[key]
        im = entry["per_call"].get("impact")
        if im is not None and name == BASELINE:
            entry["impact"] = im  # no saving against itself, in either view
        elif im is not None:
            iv = w.get("interval", {}).get("saving_per_decode_step_us")
            entry["impact"] = impact_change(w["saving_us"], im["itl_before_ms"],
                                            im["itl_before_ms"] / im["tpot_before_ms"], name,
                                            None if iv is None else (iv["low"], iv["high"])).to_dict()
    result["crossover_batch"] = result["strategies"][HEADLINE].get("crossover_batch")


def whole_step_lines(result: dict[str, Any]) -> list[str]:
    """The whole-draft-step table (the answer where an engine runs the step) and the fastest line."""
    ws = result["whole_draft_step"]
    lines = ["", *wrap_lines([f"the answer - {ws['quantity']} ({ws['calls']} calls, target placement):"]),
             f"{'strategy':30s} {'us/decode step':>14s} {'saving':>10s}  crossover B"]
    for name, s in result["strategies"].items():
        w = ws["strategies"][name]
        cross = "-" if name == result["baseline"] else s["crossover"]["text"]
        lines.append(f"{name:30s} {w['total_us']:14.1f} {w['saving_us']:10.1f}  {cross}"
                     + ("" if w["valid"] else "  (invalid)"))
        if "interval" in w:
            lines.append(_interval_line(w["interval"]["saving_per_decode_step_us"], w["interval"]["crossover_batch"],
                                        s["verdict"]))
        if "impact" in s and name != result["baseline"]:
            im = s["impact"]
            gain_iv = im.get("output_throughput_gain_pct_interval")
            gain_txt = "" if not gain_iv else f" [{gain_iv['low']:+.2f}..{gain_iv['high']:+.2f}%]"
            lines.append(f"{'':30s}   ITL {im['itl_before_ms']:.3f} -> {im['itl_after_ms']:.3f} ms, output "
                         f"throughput {im['output_throughput_gain_pct']:+.2f}%{gain_txt}")
    lines += ["", f"fastest: {result['best']}   (whole draft step per decode step; savings versus "
                  f"{result['baseline']}, us; positive = faster)"]
    if result["answer"]["per_call_best"] != result["best"]:
        lines.append(f"  (per draft call, the logits path alone: {result['answer']['per_call_best']})")
    return lines
