"""A prediction as the CLI shows it: the JSON dictionary (`--json`) and the text table, with intervals,
decode-step and engine lines.
"""

from __future__ import annotations

import textwrap
from typing import Any

from ..answers.provenance import source_lines
from ..io.plain import terminal_text
from ..model.engines import HOST_SOURCE


def _format_table(result: dict[str, Any]) -> str:
    sc = result["scenario"]
    lines = [
        terminal_text(f"profile {result['profile']['name']} ({result['profile']['kind']}: {result['profile']['gpu']})"),
        f"vocab {sc['vocab']} draft {sc['draft_vocab']} (V_pad {sc['padded_draft_vocab']}, shard {sc['shard']}) "
        f"d2t {'on' if sc['d2t'] else 'off'}  tp {sc['tp']} nodes {sc['nodes']}  batch {sc['batch']}  "
        f"K {sc['num_spec_tokens']} {sc['drafting']}  {sc['dtype']} impl {sc['impl']}",
        *wrap_lines([*_question_lines(result), _engine_line(result), *_kernel_lines(result), *source_lines(result),
                     *(f"note: {q}" for q in result.get("table_quirks") or [])]),
        "",
    ]
    if "whole_draft_step" in result:
        return "\n".join(lines + _per_call_lines(result) + whole_step_lines(result) + _decode_lines(result))
    lines.append(f"{'strategy':30s} {'us/draft call':>13s} {'saving/call':>12s} {'saving/decode':>14s}  crossover B")
    for name, s in result["strategies"].items():
        cross = s.get("crossover_batch")
        cross_txt = "-" if name == result["baseline"] else (
            s["crossover"]["text"] if "crossover" in s else ("none" if cross is None else f"{cross:.1f}"))
        flag = "" if s["valid"] else ("  (invalid: packed keys are exact at top-k 1 only)"
                                      if name == "packed_allreduce_max" and sc.get("top_k", 1) > 1
                                      else "  (invalid: ids not exact in fp32)")
        lines.append(f"{name:30s} {s['total_us']:13.1f} {s['saving_per_draft_call_us']:12.1f} "
                     f"{s['saving_per_decode_step_us']:14.1f}  {cross_txt}{flag}")  # words: left-aligned, last
        if "interval" in s:
            lines.append(_interval_line(s["interval"]["saving_per_draft_call_us"], s["interval"], cross,
                                        s["verdict"]))
        lines += _cannot_lines(s, result)
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


def _question_lines(result: dict[str, Any]) -> list[str]:
    """What the numbers are ("answer: whole draft step under vllm, per decode step of K = 5 draft tokens ...") and
    which draft architecture priced the drafter forward, and where it came from."""
    q = result.get("question")
    if not q:
        return []
    return [f"answer: {q['quantity']}", f"draft architecture: {q['draft_arch']}"]


def _per_call_lines(result: dict[str, Any]) -> list[str]:
    """Where the whole draft step is the answer: the per-call table (the logits path alone, context)."""
    lines = ["per draft call, the logits path alone (context; the answer is the whole draft step below):",
             f"{'strategy':30s} {'us/draft call':>13s} {'saving/call':>12s}"]
    for name, s in result["strategies"].items():
        lines.append(f"{name:30s} {s['total_us']:13.1f} {s['per_call']['logits_path_saving_per_call_us']:12.1f}"
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


def _cannot_lines(s: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """Where the engine cannot run a strategy (`engine_config.engine_cannot`), the reason next to its number."""
    note = s.get("engine_cannot")
    return [f"{'':30s}   not runnable under {result['engine']['name']}: {note}"] if note else []


def _interval_line(saving: dict[str, Any], interval: dict[str, Any], point_cross: float | None, verdict: str) -> str:
    """"90% interval: saving LOW..HIGH us, crossover LOW..HIGH -> verdict": the crossover part only where the point
    answer has a crossover (`point_cross`). Where it has none ("wins at every batch in range", "never wins"), the
    members that do cross are a minority's range, not an interval of the answer's crossover: the line says so
    instead of printing one (issue 43 item 6)."""
    cross, found = interval.get("crossover_batch"), float(interval.get("crossover_found_fraction") or 0.0)
    if cross is None:
        cx_txt = ""
    elif point_cross is None:
        cx_txt = f", no crossover at the point ({found:.0%} of members cross in range)"
    else:
        cx_txt = f", crossover {cross['low']:.1f}..{cross['high']:.1f}" + (
            "" if found >= 1.0 else f" ({found:.0%} of members cross)")
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
            + ("" if bp["collective"] == "nccl" else _impl_provenance_note(bp))
            + (f"  [not runnable under this engine: {bp['engine_cannot']}]" if bp.get("engine_cannot") else ""))


def _impl_provenance_note(bp: dict[str, Any]) -> str:
    prov = bp.get("collective_provenance") or {}
    measured = sorted(op for op, kind in prov.items() if kind == "measured")
    if not measured:
        return "  (oneshot / multimem / nccl-symm parameters are derived from published figures, not measured)"
    derived = sorted(op for op, kind in prov.items() if kind != "measured")
    return (f"  ({bp['collective']} {' / '.join(measured)}: measured curve"
            + (f"; {' / '.join(derived)}: derived from published figures)" if derived else ")"))


def _kernel_lines(result: dict[str, Any]) -> list[str]:
    ctx = result.get("kernel_context") or {}
    if not ctx:
        return []
    lines = [f"kernels: {ctx['kernels']}"]
    if ctx.get("lm_head_us") is not None:
        lines.append(f"lm_head GEMM (context, common to every strategy): {ctx['lm_head_us']:.1f} us per draft call "
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


def whole_step_lines(result: dict[str, Any]) -> list[str]:
    """The whole-draft-step table (the answer where an engine runs the step) and the fastest line."""
    ws = result["whole_draft_step"]
    lines = ["", *wrap_lines([f"the answer - {ws['quantity']} ({ws['calls']} calls, target placement):"]),
             f"{'strategy':30s} {'us/decode step':>14s} {'saving':>10s}  crossover B"]
    for name, s in result["strategies"].items():
        w = ws["strategies"][name]
        cross = "-" if name == result["baseline"] else s["crossover"]["text"]
        lines.append(f"{name:30s} {w['whole_draft_step_us']:14.1f} {w['saving_per_decode_step_us']:10.1f}  {cross}"
                     + ("" if w["valid"] else "  (invalid)"))
        if "interval" in w:
            lines.append(_interval_line(w["interval"]["saving_per_decode_step_us"], w["interval"],
                                        s.get("crossover_batch"), s["verdict"]))
        lines += _cannot_lines(s, result)
        if "impact" in s and name != result["baseline"]:
            im = s["impact"]
            gain_iv = im.get("output_throughput_gain_pct_interval")
            gain_txt = "" if not gain_iv else f" [{gain_iv['low']:+.2f}..{gain_iv['high']:+.2f}%]"
            lines.append(f"{'':30s}   ITL {im['itl_before_ms']:.3f} -> {im['itl_after_ms']:.3f} ms, TPOT "
                         f"{im['tpot_before_ms']:.3f} -> {im['tpot_after_ms']:.3f} ms, output "
                         f"throughput {im['output_throughput_gain_pct']:+.2f}%{gain_txt}")
    lines += ["", f"fastest: {result['best']}   (whole draft step per decode step; savings versus "
                  f"{result['baseline']}, us; positive = faster)"]
    if result["answer"]["per_call_best"] != result["best"]:
        lines.append(f"  (per draft call, the logits path alone: {result['answer']['per_call_best']})")
    return lines
