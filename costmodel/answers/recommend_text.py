"""A `Recommendation` as text for the terminal: the decision, the expected saving with its interval, the
config to paste and the workload it was computed for.
"""

from __future__ import annotations

import textwrap

from ..io.plain import terminal_text
from .provenance import source_lines
from .recommend import SHIPPED, Recommendation


def format_recommendation(rec: Recommendation) -> str:
    """Human-readable report: headline, per-strategy table, impact, configs."""
    sc, wl = rec.scenario, rec.workload
    lines = [
        terminal_text(f"profile {rec.profile['name']} ({rec.profile['kind']}: {rec.profile['gpu']})"),
        f"vocab {sc['vocab']} draft {sc['draft_vocab']} d2t {'on' if sc['d2t'] else 'off'}  tp {sc['tp']} "
        f"nodes {sc['nodes']}  K {sc['num_spec_tokens']} {sc['drafting']}  {sc['dtype']} "
        f"impl {sc['impl']}" + (f"  engine {sc['engine']}" if sc.get("engine", "none") != "none"
                                else f"  engine none, mode {sc['mode']}")
        + f"  top-k {sc.get('top_k', 1)}  collective {sc.get('collective', 'nccl')}"
        + ("" if not rec.verification.get("enabled") else
           f"  + greedy verification ({rec.verification['rows_per_batch_row']} target rows per batch row, "
           f"F = {rec.verification['greedy_fraction']:g}, {rec.verification['dtype']})"),
        *(part for line in source_lines(rec.profile)  # prose wrapped at 100 columns, continuations indented
          for part in textwrap.wrap(terminal_text(line), width=100, subsequent_indent="    ", break_long_words=False,
                                    break_on_hyphens=False)),
        terminal_text(f"workload {wl.name} ({wl.source}): {wl.method}"),
        f"  {wl.observations} observations, {wl.batch.size} distinct batches, mean {wl.mean_batch:.1f}, "
        f"p50 {wl.quantile(0.5)}, p90 {wl.quantile(0.9)}, range {int(wl.batch[0])}..{int(wl.batch[-1])}",
        "",
        f"RECOMMENDATION: {rec.headline}",
        "",
        f"{'strategy':28s} {'E[saving]/decode':>16s} {int(round(rec.level * 100))}% interval (us){'':4s}"
        f"{'saving':>8s} {'wins':>6s} {'>base':>6s}  verdict",
    ]
    for name, o in rec.strategies.items():
        iv = "-" if o.interval_us is None else f"{o.interval_us[0]:+.1f}..{o.interval_us[1]:+.1f}"
        shipped = f"  [{o.shipped_as}]" if o.shipped_as else "  [no engine ships it]"
        lines.append(f"{name:28s} {o.expected_saving_per_decode_step_us:+16.1f} {iv:>22s}"
                     f"{o.saving_pct:+7.1f}% {o.win_share:6.0%} {o.beats_baseline_share:6.0%}  {o.verdict}{shipped}")
    lines.append("  (us per decode step, positive = faster than full_all_gather; saving % of the baseline's "
                 "per-decode-step argmax path; wins = share of steps where it is the fastest; >base = share where "
                 "it beats the baseline)")
    lines.append(f"  savings of the {rec.quantity}")
    if rec.best_modelled not in SHIPPED:
        lines.append(f"  best modelled: {rec.best_modelled} - no engine ships it (a reference implementation in "
                     "calibration/reference/strategies.py)")
    if any(o.impact for o in rec.strategies.values()):
        lines.append("")
        lines.append("impact (positive = faster):")
        for name, o in rec.strategies.items():
            if o.impact is None:
                continue
            im = o.impact
            iv = im.output_throughput_gain_pct_interval
            iv_txt = "" if iv is None else f" [{iv[0]:+.2f}..{iv[1]:+.2f}%]"
            lines.append(f"  {name:28s} ITL {im.itl_before_ms:.3f} -> {im.itl_after_ms:.3f} ms "
                         f"(ITL reduction {im.itl_reduction_pct:+.2f}%), TPOT {im.tpot_before_ms:.3f} -> "
                         f"{im.tpot_after_ms:.3f} ms, output throughput {im.output_throughput_gain_pct:+.2f}%{iv_txt}")
    if wl.hints:
        hint = ", ".join(f"{k} {v:.3g}" for k, v in wl.hints.items())
        lines.append(f"  measured in {terminal_text(wl.name)}: {hint} (pass them as --itl-ms / --acceptance-length)")
    lines.append("")
    lines.append("config to paste:")
    for c in rec.configs:
        lines.append(f"  {c.engine:7s} {c.text if c.available else '(nothing to set)'}")
        lines.append(f"  {'':7s} {c.note}")
    for note in rec.config_notes:
        lines.append(f"  not settable - {note}")
    return "\n".join(lines)
