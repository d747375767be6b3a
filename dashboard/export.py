"""Export: every chart drawn as PNG / SVG (vl-convert, offline) and a one-page HTML report of the scenario.

The conversions run only when a download button is clicked (Streamlit's deferred download data), so they
cost nothing on an ordinary rerun; vl-convert itself (a 16 ms import) is imported by the first conversion, not by
the page that draws the Export menu. The report is assembled by costmodel.answers.report from the numbers the page
shows (costmodel.io.formatting) - nothing is priced twice differently.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from functools import lru_cache

import pandas as pd

from costmodel import BASELINE
from costmodel.answers.point import impact_rows
from costmodel.answers.provenance import scenario_source_lines
from costmodel.answers.report import ReportTable, html_report
from costmodel.answers.table_quirks import scenario_quirks
from costmodel.io.formatting import MISSING, column_formatter, format_batch, format_number, format_pct, format_us

from . import charts
from .data import FOCUS
from .question import answer_of
from .sweep_answer import BREAKDOWN_ONE_CALL, sweep_answer_of, sweep_marks, sweep_quantity
from .tables import breakdown_table
from .verdict import Evaluation, bootstrap_method, provenance_line

EXPORT_WIDTH_PX = 760  # charts drawn "stretch" in the page get this width in a file
PNG_SCALE = 2


def export_spec(spec: dict) -> dict:
    """The spec with a fixed width where the page stretches it (files have no container to fill)."""
    out = copy.deepcopy(spec)
    if "facet" not in out and out.get("width") in (None, "container"):
        out["width"] = EXPORT_WIDTH_PX
    for layer in out.get("layer", []):
        if layer.get("width") == "container":
            layer["width"] = EXPORT_WIDTH_PX
    out.setdefault("background", "white")
    return out


@lru_cache(maxsize=32)
def _svg(spec_json: str) -> str:
    import vl_convert  # on the first conversion (module doc)

    return vl_convert.vegalite_to_svg(json.loads(spec_json))


@lru_cache(maxsize=32)
def _png(spec_json: str, scale: float) -> bytes:
    import vl_convert  # on the first conversion (module doc)

    return vl_convert.vegalite_to_png(json.loads(spec_json), scale=scale)


def chart_svg(spec: dict) -> str:
    """The chart as an SVG document."""
    return _svg(json.dumps(export_spec(spec), sort_keys=True))


def chart_png(spec: dict, scale: float = PNG_SCALE) -> bytes:
    """The chart as a PNG (`scale` x the SVG's size in pixels)."""
    return _png(json.dumps(export_spec(spec), sort_keys=True), float(scale))


def _formatted(frame: pd.DataFrame, title: str, columns: dict[str, str]) -> ReportTable:
    """`columns` (name -> header) of `frame` as display strings (costmodel.io.formatting, as in the page)."""
    rules = {c: column_formatter(c) or (lambda v: MISSING if v is None or v != v else
                                        format_number(v) if isinstance(v, float) else str(v)) for c in columns}
    rows = [[rules[c](row[c]) for c in columns] for _, row in frame.iterrows()]
    numeric = [frame[c].dtype.kind in "fiu" for c in columns]
    return ReportTable(title, list(columns.values()), rows, numeric)


def report_html(ev: Evaluation) -> str:
    """The one-page offline HTML report of `ev`: inputs, verdict, verdict table, charts, provenance."""
    inputs, v, profile = ev.inputs, ev.verdict, ev.profile
    shown_inputs = {
        "profile": f"{profile.name} ({profile.provenance.kind}: {profile.provenance.gpu})",
        "target / draft vocab": f"{inputs.vocab:,} / {inputs.draft_vocab:,}" + (" (d2t map)" if inputs.d2t else ""),
        "TP size, nodes": f"{inputs.tp}, {inputs.nodes}",
        "logits dtype": inputs.dtype, "K (draft tokens)": str(inputs.k), "drafting": inputs.drafting,
        "engine": inputs.engine if inputs.engine != "none" else f"none (every component {inputs.mode})",
        "mode": inputs.mode, "kernels": inputs.impl, "batch (sequences per decode step)": f"{inputs.batch:,}",
        "chart batch range": f"{inputs.batch_min:,}-{inputs.batch_max:,}",
    }
    if inputs.itl_ms is not None:
        shown_inputs["baseline ITL"] = f"{inputs.itl_ms:g} ms"
    if inputs.acceptance_length is not None:
        shown_inputs["mean acceptance length"] = f"{inputs.acceptance_length:g} tokens / decode step"
    lines = [v.headline(), v.comparison(),
             f"{FOCUS}: saving {format_us(v.focus_saving_us, sign=True)} per draft call "
             f"({format_pct(v.focus_saving_pct)}), {format_us(v.focus_saving_decode_us, sign=True)} per decode step; "
             f"crossover batch {v.crossover_value()} ({v.crossover_text()})."]
    intervals = v.interval_texts()
    if intervals is not None:
        lines.append(f"{FOCUS} intervals (saving / draft call, / decode step, crossover): " + "; ".join(intervals)
                     + f" - {bootstrap_method(profile)}.")
    if inputs.itl_ms is not None and inputs.acceptance_length is not None:  # the Answer's impact (the Impact tab's)
        im = next(r for r in impact_rows(answer_of(ev.profile_text, inputs).point) if r["strategy"] == FOCUS)
        low, high = im["output_throughput_gain_low_pct"], im["output_throughput_gain_high_pct"]
        lines.append(f"Impact of {FOCUS} (baseline ITL {inputs.itl_ms:g} ms, acceptance length "
                     f"{inputs.acceptance_length:g}): ITL {im['itl_before_ms']:.3f} -> {im['itl_after_ms']:.3f} ms "
                     f"({format_pct(im['itl_reduction_pct'])} ITL reduction), TPOT {im['tpot_before_ms']:.3f} -> "
                     f"{im['tpot_after_ms']:.3f} ms, output throughput {format_pct(im['output_throughput_gain_pct'])}"
                     + ("" if low != low else f" (90% interval {format_pct(low)} to {format_pct(high)})") + ".")
    else:
        lines.append("Impact: not computed (needs a baseline ITL and the mean acceptance length).")
    lines.append(f"Savings are {BASELINE} time minus the strategy's time, per rank: positive = faster.")
    table = _formatted(ev.verdict_table(), f"Every strategy at batch {inputs.batch:,}" + (
        ": the whole draft step (time per decode step; saving / draft call is its mean per call)"
        if ev.whole_step else ""), {
        "strategy": "strategy", **({"whole_draft_step_us": "time / decode step"} if ev.whole_step else
                                   {"total_us": "time / draft call"}),
        "saving_per_draft_call_us": "saving / draft call", "saving_pct": "saving",
        "saving_per_decode_step_us": "saving / decode step", "crossover_batch": "crossover batch",
        "crossover_status": "crossover"})
    sweep, step, _ = sweep_answer_of(ev)  # the quantity the page's sweep charts show
    _, cross, band = sweep_marks(ev, step)
    one_call = ev.whole_step
    figures = [
        (sweep_quantity(step)[0], charts.with_batch_marker(charts.sweep_chart(sweep, cross, band), inputs.batch)),
        (f"Saving vs {BASELINE} per decode step" + (" (whole draft step)" if step.whole_step else ""),
         charts.with_batch_marker(charts.saving_chart(sweep, cross, band), inputs.batch)),
        (f"Where the time goes at batch {inputs.batch:,}" + (": one draft call's logits path" if one_call else ""),
         charts.breakdown_chart(breakdown_table(ev.point),
                                *((BREAKDOWN_ONE_CALL,) if one_call else ())).to_dict()),
    ]
    prov = profile.provenance
    scenario = inputs.spec.scenario(float(inputs.batch))
    provenance = [f"{provenance_line(profile)[1]}.", prov.source, *scenario_source_lines(profile, scenario),
                  *(f"note: {q}" for q in scenario_quirks(profile, scenario))] + [
        f"citation: {c}" for c in prov.citations]
    if prov.date:
        provenance.append(f"profile date: {prov.date}")
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return html_report(
        title=f"Local argmax vs full all-gather: {v.headline()}",
        subtitle=f"argmax-tp cost model, profile {profile.name}; generated {now}; batch {format_batch(inputs.batch)}",
        inputs=shown_inputs, verdict=lines, tables=[table],
        charts=[(caption, chart_svg(spec)) for caption, spec in figures], provenance=provenance,
        footer="Numbers from the analytical cost model costmodel (numpy); derived profiles are not measurements.")
