"""Streamlit rendering of the verdict header and of each tab (layout only; numbers come from data/tables)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from costmodel import BASELINE, DESCRIPTIONS, InputError, Profile
from costmodel.answers.point import impact_rows
from costmodel.answers.provenance import with_provenance
from costmodel.answers.sensitivity import elasticity_meaning
from costmodel.io.formatting import format_interval_us, format_ms, format_number, format_pct, format_us, status_text
from costmodel.io.plain import markdown_text as plain
from costmodel.model.kernels import kernel_context
from costmodel.serving.workload import parse_workload

from . import charts
from .data import (
    FOCUS,
    ProfileText,
    example_workloads,
    fitted_curves,
    heat_batches,
    heat_tp_row,
    heat_tps,
    heat_vocab_row,
    heat_vocabs,
    impl_crossover_frame,
    measured_points,
    recommendation_table,
)
from .export import PNG_SCALE, chart_png, chart_svg, report_html
from .fidelity import SENSITIVITY_TOP, explanation_text, reference_profiles, sensitivity_frame, validation
from .question import answer_of, sidebar_arch, workload_answer
from .sources_panel import provenance_badge, range_quirks_caption, sources_caption
from .state import in_dashboard_words
from .sweep_answer import BREAKDOWN_ONE_CALL, sweep_answer_of, sweep_marks, sweep_quantity
from .tables import (
    breakdown_table,
    column_labels,
    csv_bytes,
    display,
    provenance_table,
    records_table,
)
from .topk_panel import best_pair_caption
from .verdict import Evaluation, bootstrap_method, fused_provenance

PROGRESS_AFTER_S = 0.05


@st.cache_data(show_spinner=False, max_entries=128)
def chart_spec(name: str, *args) -> dict:
    """Vega-Lite spec of charts.<name>(*args), cached on the data: Altair's schema validation costs ~0.1 s a
    chart, so reruns that do not change a chart's data reuse its spec."""
    built = getattr(charts, name)(*args)  # an Altair chart, or a plain Vega-Lite dict (the sweep charts)
    return built if isinstance(built, dict) else built.to_dict(validate=False)  # the tests validate every chart


@st.cache_data(show_spinner=False, max_entries=128, hash_funcs={ProfileText: lambda t: t.digest})
def _keyed_chart_spec(name: str, key: tuple, args: tuple, _frame: pd.DataFrame) -> dict:
    """`chart_spec(name, _frame, *args)` cached on `key` - what determines `_frame` (the profile text and the
    scenario it was priced for) - instead of hashing the frame's cells at every rerun."""
    built = getattr(charts, name)(_frame, *args)
    return built if isinstance(built, dict) else built.to_dict(validate=False)


def chart(name: str, *args, stretch: bool = True, batch: float | None = None, export: str | None = None,
          key: tuple | None = None) -> dict:
    """Draw charts.<name>(*args) (with the chosen `batch` marked, when given) and offer it in the Export menu
    under `export` (default: `name`); returns the spec drawn. `key`: what determines the frame args[0] (its
    spec is then cached on the key, `_keyed_chart_spec`)."""
    spec = chart_spec(name, *args) if key is None else _keyed_chart_spec(name, key, args[1:], args[0])
    if batch is not None:
        spec = charts.with_batch_marker(spec, batch)
    st.vega_lite_chart(spec=spec, width="stretch" if stretch else "content")
    st.session_state.setdefault("_drawn", {})[export or name] = spec
    return spec


def export_menu(ev: Evaluation, drawn: dict[str, dict]) -> None:
    """Every chart drawn in this run as PNG / SVG, and the one-page HTML report (converted only on click)."""
    with st.popover("Export", icon=":material/ios_share:"):
        st.markdown(f"**Charts of this tab** - PNG ({PNG_SCALE}x) or SVG")
        for name, spec in drawn.items():
            label, png, svg = st.columns([3, 1, 1], vertical_alignment="center")
            label.markdown(plain(name))
            png.download_button("PNG", lambda spec=spec: chart_png(spec), file_name=f"{name}.png", mime="image/png",
                                key=f"png_{name}", on_click="ignore")
            svg.download_button("SVG", lambda spec=spec: chart_svg(spec), file_name=f"{name}.svg",
                                mime="image/svg+xml", key=f"svg_{name}", on_click="ignore")
        st.markdown("**Report** - inputs, verdict, charts and provenance on one page that opens offline")
        st.download_button("HTML report", lambda: report_html(ev), file_name="argmax-tp-report.html",
                           mime="text/html", key="report_html", on_click="ignore", icon=":material/description:")


# the columns a table shows on the page, so that it fits a 1440 px window without a horizontal scroll (issue 35:
# tables were cut on the right); its CSV download keeps every column
ON_PAGE = {
    "sensitivity": ["parameter", "elasticity", "saving_change_us_per_1pct"],  # strategy / saving / quantity: title
    "validation": ["op", "mode", "world_size", "nodes", "bytes_per_rank", "measured_us", "predicted_us",
                   "rel_error_pct", "check"],  # its source: the per-source table below
    "recommendation": ["strategy", "expected_saving_per_decode_step_us", "saving_low_us", "saving_high_us",
                       "win_share_pct", "verdict"],  # %, throughput: the tiles above; shipped_as: the CSV
    "serving_ab": ["metric", "strategy", "measured", "value", "low_90", "high_90", "change_pct", "verdict"],
    "impact": ["strategy", "saving_per_decode_step_us", "itl_after_ms", "itl_reduction_pct", "tpot_after_ms",
               "output_throughput_gain_pct"],  # the befores: the text above; the intervals: the whiskers, the tiles
}


def show_table(frame: pd.DataFrame, column_order: list[str] | None = None, hidden: tuple[str, ...] = (),
          styler=None) -> None:
    """st.dataframe of `frame` formatted for people (dashboard.tables.display; the CSV keeps raw values)."""
    config: dict = {name: st.column_config.Column(label) for name, label in column_labels(frame).items()}
    config |= {name: None for name in hidden if name in frame.columns}
    st.dataframe(display(frame) if styler is None else styler, hide_index=True, column_config=config,
                 column_order=column_order)


def download(frame: pd.DataFrame, name: str, label: str = "Download CSV", ev: Evaluation | None = None) -> None:
    """A CSV download of exactly `frame` (no rerun on click); with `ev`, plus the `provenance` column of its
    scenario (costmodel.answers.provenance.with_provenance). The CSV is encoded when the button is clicked
    (Streamlit's deferred download data, as the Export menu's PNG / SVG), not on every rerun."""
    st.download_button(label, lambda: csv_bytes(download_frame(frame, ev)), file_name=f"{name}.csv", mime="text/csv",
                       key=f"download_{name}", on_click="ignore", icon=":material/download:")


def download_frame(frame: pd.DataFrame, ev: Evaluation | None = None) -> pd.DataFrame:
    """What `download` serves: `frame`, with `ev` plus the `provenance` column of its scenario."""
    if ev is None:
        return frame
    return with_provenance(frame, ev.profile, ev.inputs.spec.scenario(float(ev.inputs.batch)))


def context_caption(ev: Evaluation) -> None:
    """What priced the kernels, and the draft lm_head GEMM time at this scenario
    (costmodel.model.kernels.kernel_context): context common to every strategy, as `predict` prints it."""
    ctx = kernel_context(ev.profile, ev.inputs.spec.scenario(float(ev.inputs.batch)))
    text = f"Kernels: {ctx['kernels']}."
    if ctx["lm_head_us"] is not None:
        text += (f" lm_head GEMM (context, common to every strategy): {format_us(ctx['lm_head_us'])} per draft call "
                 f"at hidden {ev.inputs.hidden} ({ctx['lm_head_source']}).")
    elif ev.inputs.hidden is not None:
        text += f" lm_head GEMM: {ctx['lm_head_source']}."
    st.caption(plain(text))

# -- header ---------------------------------------------------------------------------------------------
def verdict(ev: Evaluation) -> None:
    """Metric tiles, each naming its strategy: FOCUS saving per draft / decode step, its crossover batch, and
    the fastest strategy's saving. Savings are baseline time - strategy time (positive: faster), as in the CLI."""
    v = ev.verdict
    provenance_badge(ev.profile)
    context_caption(ev)
    sources_caption(ev)
    st.subheader(v.headline())
    st.caption(f"{v.fastest}: {DESCRIPTIONS[v.fastest]}. Savings are {BASELINE} time minus the strategy's time, "
               "per rank (positive: the strategy is faster).")
    columns = st.columns(4)
    tiles = [column.container(border=True) for column in columns]
    for tile, name in zip(tiles, [FOCUS, FOCUS, FOCUS, f"fastest: {v.fastest}"]):
        tile.caption(name)  # every tile names its strategy
    tiles[0].metric("Saving / draft call", format_us(v.focus_saving_us, sign=True),
                    format_pct(v.focus_saving_pct),
                    help=f"{BASELINE} time minus {FOCUS} time for one draft call (positive: {FOCUS} is faster)")
    tiles[1].metric("Saving / decode step", format_us(v.focus_saving_decode_us, sign=True),
                    calls_text(ev.point), delta_color="off", delta_arrow="off",
                    help=f"{FOCUS} saving per draft call x draft calls per decode step")
    tiles[2].metric("Crossover batch", v.crossover_value(), v.crossover_text(), delta_color="off",
                    delta_arrow="off",
                    help=f"costmodel.crossover of {FOCUS} vs {BASELINE} over batch 1-65,536, other inputs fixed")
    if v.fastest == BASELINE:  # nothing beats the baseline: no green "+0"
        tiles[3].metric("Best saving / decode step", "baseline", "keep the default", delta_color="off",
                        delta_arrow="off", help=f"no strategy is faster than {BASELINE} here")
    else:
        tiles[3].metric("Best saving / decode step", format_us(v.best_saving_decode_us, sign=True),
                        f"{format_pct(v.best_saving_pct)} per draft call",
                        help=f"{v.fastest} vs {BASELINE}, saving per decode step")
    intervals = v.interval_texts()
    if intervals is not None:
        for column, text in zip(columns, intervals):
            column.caption(text)
    pair = best_pair_caption(ev)
    if pair is not None:
        st.caption(plain(pair))
    st.markdown(v.comparison())
    if v.interval is not None:
        st.caption(f"Intervals: the central {v.interval.saving_us.level:.0%} of {len(ev.profile.bootstrap)} "
                   f"replicates of the profile - {plain(bootstrap_method(ev.profile))}.")
    elif ev.interval_note:
        st.caption(plain(ev.interval_note))
    if not v.focus_valid:
        st.warning(f"{FOCUS} packs ids into fp32, exact only below 2^24 ids: it is not valid for this vocab.")
    extrapolated = ev.point.loc[ev.point["extrapolated"], "strategy"].tolist()
    if extrapolated:
        st.caption(f"Outside the measured kernel tables (roofline used): {', '.join(extrapolated)}")


def calls_text(point: pd.DataFrame) -> str:
    """Draft calls per decode step and rows per call: '3 draft calls of 64 rows' / '1 draft call of 64x3 rows'."""
    first = point.iloc[0]
    calls, rows = int(first["calls_per_decode_step"]), int(first["rows_per_call"])
    if first["drafting"] == "parallel":
        return f"1 draft call of {int(first['batch']):,}×{int(first['num_spec_tokens'])} = {rows:,} rows"
    return f"{calls} draft call{'s' if calls != 1 else ''} of {rows:,} rows"


# -- tabs -------------------------------------------------------------------------------------------------
def sweep_tab(ev: Evaluation) -> None:
    inputs = ev.inputs
    table, step, key = sweep_answer_of(ev)
    title, caption = sweep_quantity(step)
    same, cross, band = sweep_marks(ev, step)
    marks = f"dashed line: batch {inputs.batch:,}" + (f"; solid line: the {FOCUS} crossover" if same else "") + (
        f", shaded: its {ev.verdict.interval.saving_us.level:.0%} interval" if band else "")
    st.markdown(f"**{title}** (log-log; click a legend entry to highlight), batch "
                f"{inputs.batch_min:,}-{inputs.batch_max:,}; {marks}.")
    st.caption(plain(caption))
    chart("sweep_chart", table, cross, band, batch=inputs.batch, key=key)
    per = " (whole draft step)" if step.whole_step else ""
    st.markdown(f"**Saving vs {BASELINE} per decode step{per}** (symmetric-log y axis; above 0 = faster than the "
                f"baseline); {marks}.")
    chart("saving_chart", table, cross, band, batch=inputs.batch, key=key)
    range_quirks_caption(ev)
    download(table, "time_vs_batch", ev=ev)
    box = lazy_expander("Crossover batches of every strategy vs the baseline" + (
        " (whole draft step)" if ev.whole_step else ""), "crossovers_open")
    if box is not None:
        with box:
            crossover_tables(ev)
    box = lazy_expander("Fused kernels: crossover batch with torch ops vs the fused Triton kernels", "fused_open")
    if box is not None:
        with box:
            fused_panel(ev)


def lazy_expander(label: str, key: str) -> Any:
    """An expander whose body is computed and sent only while it is open (issue 43 item 4: what the first page does
    not show is not computed before its first paint): opening or closing it reruns the script (`on_change`), its
    open state lives in st.session_state[key]. The open expander, or None while it is closed."""
    box = st.expander(label, key=key, on_change="rerun")
    return box if box.open else None


def crossover_tables(ev: Evaluation) -> None:
    """The crossover batch of every strategy vs the baseline (the answer's), and also per draft call where the
    answer is the whole draft step."""
    crossovers = ev.crossover_table()
    show_table(crossovers)
    download(crossovers, "crossovers", ev=ev)
    if ev.whole_step:
        st.markdown("Per draft call (the logits path alone, as `predict --engine none` prices it): context.")
        show_table(ev.crossovers)
        download(ev.crossovers, "crossovers_per_draft_call", ev=ev)


def fused_panel(ev: Evaluation) -> None:
    """Crossover batch vs the baseline with the torch ops and with the fused Triton kernels, side by side."""
    frame = impl_crossover_frame(ev.profile_text, ev.inputs.spec)
    st.markdown(f"**Fused kernels**: crossover batch vs {BASELINE} with torch ops and with the fused Triton "
                "kernels (other inputs as in the sidebar" + ("; per draft call: the logits path alone, not the "
                                                             "whole draft step)" if ev.whole_step else ")"))
    show_table(frame, styler=display(frame, {f"status_{impl}": status_text for impl in ("torch", "fused")}))
    st.caption(f"{plain(fused_provenance(ev.profile))}. No crossover batch: no sign change in batch 1-65,536 (see the "
               "status).")
    download(frame, "crossovers_torch_vs_fused", ev=ev)


def breakdown_tab(ev: Evaluation) -> None:
    verdict = ev.verdict_table()
    if ev.whole_step:
        st.markdown(f"**Verdict table**: every strategy at batch {ev.inputs.batch} against {BASELINE}, the whole "
                    "draft step per decode step (saving_per_draft_call_us: its mean per draft call)")
        shown = ["strategy", "whole_draft_step_us", "saving_per_decode_step_us", "saving_pct",
                 "saving_per_draft_call_us", "fastest", "valid", "crossover_batch"]
    else:
        st.markdown(f"**Verdict table**: every strategy at batch {ev.inputs.batch} against {BASELINE}")
        shown = ["strategy", "total_us", "saving_per_draft_call_us", "saving_pct",
                 "saving_per_decode_step_us", "wire_bytes_per_rank", "fastest", "valid", "crossover_batch"]
    # fits a 1440 px window (issue 35): the crossover's status and words, and each strategy's description, are in
    # the CSV (with the scenario columns), the crossover expander and "What the strategies do"
    show_table(verdict, column_order=[c for c in shown if c != "valid" or not verdict["valid"].all()])
    download(verdict, "verdict", ev=ev)
    table = breakdown_table(ev.point)
    if ev.whole_step:
        st.markdown(f"**Where the time goes: one draft call's logits path** at batch {ev.inputs.batch} (per rank).")
        st.caption("Not the whole draft step the verdict answers with: one draft call's logits path alone, as "
                   "predict prices it per call (host_exposed: host launch time its GPU work and head start do not "
                   "hide). The whole step adds each of the K calls' drafter forward and lm_head, pipelined, so "
                   "launches the GPU work hides cost nothing; its parts per placement: the Draft placement panel.")
        chart("breakdown_chart", table, BREAKDOWN_ONE_CALL)
    else:
        st.markdown(f"**Where the time goes** at batch {ev.inputs.batch} (per draft call, per rank).")
        chart("breakdown_chart", table)
    download(table, "breakdown", ev=ev)
    with st.expander("Full prediction table (Prediction.to_frame())"):
        show_table(ev.point)
        download(ev.point, "prediction", ev=ev)


def sensitivity_tab(ev: Evaluation) -> None:
    inputs = ev.inputs
    try:
        with st.spinner("perturbing every profile parameter (a few seconds; cached afterwards)"):
            arch = sidebar_arch(inputs.preset, inputs.draft_vocab, inputs.hidden) if ev.whole_step else None
            table = sensitivity_frame(ev.profile_text, inputs.spec, float(inputs.batch), FOCUS, arch)
    except InputError as exc:
        table, error = None, exc
    else:
        error = None
    shown = "" if table is None or table.empty else (
        f" The chart shows the {min(SENSITIVITY_TOP, len(table))} largest of the {len(table)} parameters that move it"
        " (the table lists all).")
    if ev.whole_step:  # say which quantity: the verdict's
        st.caption("The whole draft step's saving per decode step, as the verdict: the K draft calls' drafter "
                   "forward, lm_head and logits path as the engine pipelines them - host launches the forward hides "
                   "move nothing.")
    saving = None if table is None or table.empty else float(table["saving_us"].iloc[0])
    here = "" if saving is None else f" ({format_us(saving, sign=True)})"
    st.markdown(f"**What moves the {FOCUS} saving** at batch {inputs.batch}{here}: elasticity = "
                f"{elasticity_meaning(1.0 if saving is None else saving)} (central difference, ±1%), and the "
                f"saving's change in µs for that +1%. Measured kernel tables are not perturbed.{shown}")
    if error is not None:
        st.error(plain(in_dashboard_words(str(error))))
    if table is not None and table.empty:
        st.info("No profile parameter changes this saving.")
    elif table is not None:
        chart("sensitivity_chart", table.head(SENSITIVITY_TOP))
        show_table(table, styler=display(table, {"elasticity": lambda v: format_number(v, sign=True)}),
                   column_order=ON_PAGE["sensitivity"])
        download(table, "sensitivity", ev=ev)
    with st.expander("How is this computed?"):
        st.markdown(f"Every priced call of every strategy at batch {inputs.batch}, its formula with the numbers "
                    "substituted (costmodel.answers.explain); each strategy's calls add up to its total.")
        st.code(explanation_text(ev.profile_text, inputs.spec, float(inputs.batch)), language=None)


def _heat_rows(kind: str, values: tuple[int, ...], compute) -> tuple[pd.DataFrame, list[str]]:
    """Compute heatmap rows one by one; rows the model rejects are skipped and named.

    A progress bar appears once the sweep has run for PROGRESS_AFTER_S (cached reruns never show one).
    """
    bar, start = None, time.perf_counter()
    frames, skipped = [], []
    for i, value in enumerate(values):
        try:
            frames.append(compute(value))
        except InputError as exc:
            skipped.append(f"{kind} {value}: {exc}")
        if bar is None and time.perf_counter() - start > PROGRESS_AFTER_S:
            bar = st.progress(0.0)
        if bar is not None:
            bar.progress((i + 1) / len(values), text=f"sweeping {kind}: {i + 1}/{len(values)}")
    if bar is not None:
        bar.empty()
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), skipped


def heatmaps_tab(ev: Evaluation) -> None:
    inputs, text = ev.inputs, ev.profile_text
    batches = heat_batches(inputs.batch_min, inputs.batch_max)
    # the verdict's quantity: the whole draft step where an engine runs it (priced with the verdict's draft)
    whole = ev.whole_step
    arch = sidebar_arch(inputs.preset, int(inputs.draft_vocab), inputs.hidden) if whole else None
    quantity = ("the whole draft step: the K draft calls as the engine composes them" if whole
                else "the logits path alone, x calls per decode step")
    st.markdown(f"**Saving of {FOCUS} vs {BASELINE} per decode step (µs)** ({quantity}): blue = {FOCUS} faster, "
                f"red = {BASELINE} faster; both heatmaps share one colour scale.")
    vocab, vocab_skipped = _heat_rows("draft vocab", heat_vocabs(inputs.spec),
                                      lambda v: heat_vocab_row(text, inputs.spec, v, batches, arch))
    tp, tp_skipped = _heat_rows("TP", heat_tps(inputs.spec, ev.profile),
                                lambda p: heat_tp_row(text, inputs.spec, p, batches, arch))
    bound = charts.heat_bound(vocab, tp)
    _heatmap(ev, vocab, vocab_skipped, f"batch x draft vocab (target vocab {inputs.vocab:,}; the d2t map on below it)",
             "draft_vocab", "draft vocab", "saving_batch_x_draft_vocab", bound)
    _heatmap(ev, tp, tp_skipped, f"batch x TP size ({inputs.nodes} node(s); draft vocab {inputs.draft_vocab:,})", "tp",
             "TP size", "saving_batch_x_tp", bound)


def _heatmap(ev: Evaluation, frame: pd.DataFrame, skipped: list[str], caption: str, field: str, title: str,
             name: str, bound: float) -> None:
    """One heatmap of the FOCUS saving, its CSV, and the rows the model rejected."""
    st.markdown(caption)
    if not frame.empty:
        chart("heatmap", frame, field, title, bound, export=name)
        download(frame, name, ev=ev)
    for line in skipped:
        st.caption(plain(line))


def calibration_tab(ev: Evaluation, measurements_csv: str | None) -> None:
    provenance_section(ev.profile)
    validation_section(ev.inputs.profile)
    measured_section(ev, measurements_csv)


def provenance_section(profile: Profile) -> None:
    prov = profile.provenance
    st.markdown("**Provenance**")
    provenance_badge(profile)
    st.markdown(plain(prov.source))
    facts = {"GPU": prov.gpu, "interconnect": prov.interconnect, "GPUs per node": prov.gpus_per_node,
             "date": prov.date, "software": ", ".join(f"{k} {v}" for k, v in prov.software.items())}
    st.markdown("  \n".join(f"{k}: {plain(v)}" for k, v in facts.items() if v))
    if prov.citations:
        with st.expander(f"Citations ({len(prov.citations)})"):
            st.markdown("\n".join(f"- {plain(c)}" for c in prov.citations))
    parts = provenance_table(profile)
    colors = {"measured": "background-color: #d4edda", "derived": "background-color: #fff3cd",
              "mixed": "background-color: #e2d9f3"}
    show_table(parts, styler=display(parts).map(lambda v: colors.get(v, ""), subset=["provenance"]))
    download(parts, "provenance")
    if profile.fit_report:
        st.markdown("**Fit report**")
        report = records_table(profile.fit_report)
        show_table(report)
        download(report, "fit_report")


VALIDATION_HIDDEN = ("median_abs_rel_error", "p90_abs_rel_error")  # shown in % instead


def _validation_tables(name: str | None) -> None:
    rows, summ = validation(name)
    show_table(rows, hidden=VALIDATION_HIDDEN, column_order=ON_PAGE["validation"])
    download(rows, "validation")
    st.markdown("**Per source**: median and p90 |relative error| (the `all` row: held-out rows only)")
    show_table(summ, hidden=VALIDATION_HIDDEN)
    download(summ, "validation_summary")


def validation_section(name: str) -> None:
    """costmodel.evidence.validate on the reference rows (data/reference/*.csv) naming the selected profile."""
    st.markdown("**Validation against reference points** (data/reference: published figures and this "
                "project's measurements). Relative error = (predicted - measured) / measured; in-sample: the "
                "profile was built from that figure, held-out: it was not.")
    try:
        counts = reference_profiles()
        if name in counts:
            st.caption(f"{counts[name]} reference rows name {plain(name)}.")
            _validation_tables(name)
            return
        st.info(plain(f"No reference row names the profile {name!r} (reference rows name: "
                      f"{', '.join(f'{k} ({v})' for k, v in counts.items())})."))
        with st.expander("Validation table for all bundled profiles named in data/reference"):
            _validation_tables(None)
    except InputError as exc:
        st.error(plain(in_dashboard_words(str(exc))))


def measured_section(ev: Evaluation, measurements_csv: str | None) -> None:
    points, notes = measured_points(ev.profile_text, measurements_csv)
    for note in notes:
        st.caption(plain(note))
    if points.empty:
        st.info("No measured collective points for this profile (an uploaded measurement CSV / nccl-tests log, "
                "or CSVs listed in provenance.files, are plotted here).")
        return
    curves = fitted_curves(ev.profile_text, points)
    st.markdown("**Measured vs fitted** (points: measured medians; lines: the profile's collective model)")
    chart("calibration_chart", points, curves, stretch=False)
    download(curves, "fitted_curves", "Download the fitted curves (CSV)")
    st.markdown("**Relative error** (predicted - measured) / measured, in % (above 0: the model is slower than "
                "the measurement)")
    chart("residual_chart", points, stretch=False)
    download(points, "measured_vs_fitted", "Download the measured points and residuals (CSV)")


def impact_tab(ev: Evaluation) -> None:
    """The Answer's impact on ITL / TPOT / throughput (`costmodel.answers.point.impact_rows`): the whole draft
    step's saving where it is the answer - the numbers of the headline, the report and `predict --itl-ms`."""
    inputs = ev.inputs
    if inputs.itl_ms is None or inputs.acceptance_length is None:
        st.info("Enter a baseline ITL (ms) and the mean acceptance length in the sidebar to see ITL / TPOT "
                "before and after.")
        return
    try:
        result = answer_of(ev.profile_text, inputs).point
    except InputError as exc:
        st.error(plain(in_dashboard_words(str(exc))))
        return
    frame = pd.DataFrame(impact_rows(result))
    st.markdown(f"**Impact of switching from {BASELINE}** at batch {inputs.batch:,}, baseline ITL "
                f"{format_ms(inputs.itl_ms)}, {inputs.acceptance_length:g} tokens per decode step. ITL reduction = "
                "1 - ITL after / ITL before; output throughput gain = ITL before / ITL after - 1; positive = "
                "faster (the CLI's convention).")
    st.caption(plain(f"Savings of the {result['question']['quantity']}."))
    shown = [FOCUS] + [s for s in (result["best"],) if s not in (FOCUS, BASELINE)]
    cols = st.columns(4)
    for i, name in enumerate(shown):
        row = frame.set_index("strategy").loc[name]
        box = cols[2 * i].container(border=True)
        box.caption(name)
        box.metric("ITL after", format_ms(row["itl_after_ms"], decimals=3),
                   f"{format_pct(row['itl_reduction_pct'])} ITL reduction",
                   help=f"baseline {format_ms(row['itl_before_ms'], decimals=3)}")
        box = cols[2 * i + 1].container(border=True)
        box.caption(name)
        box.metric("Output throughput", format_pct(row["output_throughput_gain_pct"]),
                   f"TPOT {format_ms(row['tpot_after_ms'], decimals=3)}", delta_color="off", delta_arrow="off",
                   help="tokens/s at the same batch scale with 1 / ITL")
        if np.isfinite(row["output_throughput_gain_low_pct"]):
            cols[2 * i + 1].caption(f"90% interval: {format_pct(row['output_throughput_gain_low_pct'])} to "
                                    f"{format_pct(row['output_throughput_gain_high_pct'])}")
    st.markdown("**Output throughput gain per strategy** (bars; whiskers: the 90% interval)")
    chart("impact_chart", frame)
    show_table(frame, column_order=ON_PAGE["impact"])
    download(frame, "impact", ev=ev)


# -- recommendation for a workload -------------------------------------------------------------------------
WORKLOAD_TYPES = ("csv", "txt", "json")
DECISION_BOX = {"enable": st.success, "keep off": st.warning, "uncertain": st.info}


@dataclass(frozen=True)
class FilePicker:
    """An example-or-upload choice (the Recommendation and Serving A/B tabs): the selectbox's session key and label,
    the uploader's label and types, and `read` (validate and decode an upload: InputError, one line)."""

    key: str
    label: str
    upload_label: str
    types: tuple[str, ...]
    read: Callable[[bytes, str], str]
    empty: str

    @property
    def store(self) -> str:
        return f"_{self.key}_uploads"


def _on_upload(picker: FilePicker) -> None:
    """Validate an upload now: a bad file is one error line and the tab keeps the last good one."""
    ss = st.session_state
    file = ss.get(f"{picker.key}_upload")
    if file is None:
        return
    try:
        text = picker.read(file.getvalue(), file.name)
    except InputError as exc:
        ss[f"_{picker.key}_error"] = str(exc)
        return
    ss.setdefault(picker.store, {})[file.name] = text
    ss.update({picker.key: file.name, f"_{picker.key}_error": None})


def pick_file(picker: FilePicker, examples: dict[str, str]) -> tuple[str, str] | None:
    """The selectbox (this session's uploads, then the examples), the uploader, a bad upload's error line, and the
    chosen (name, text) - None (with a note) when there is nothing to choose."""
    ss = st.session_state
    uploaded = ss.setdefault(picker.store, {})
    options = [*uploaded, *(n for n in examples if n not in uploaded)]
    left, right = st.columns([2, 3])
    if ss.get(picker.key) not in options and options:
        ss[picker.key] = options[0]
    left.selectbox(picker.label, options, key=picker.key,
                   format_func=lambda n: f"upload: {n}" if n in uploaded else f"example: {n}")
    right.file_uploader(picker.upload_label, type=list(picker.types), key=f"{picker.key}_upload",
                        on_change=_on_upload, args=(picker,))
    if ss.get(f"_{picker.key}_error"):
        st.error(plain(in_dashboard_words(ss[f"_{picker.key}_error"])))
    name = ss.get(picker.key)
    if name is None:
        st.info(picker.empty)
        return None
    return name, uploaded.get(name, examples.get(name))


def _workload_text(data: bytes, name: str) -> str:
    parse_workload(data, name)
    return data.decode("utf-8")


WORKLOAD_PICKER = FilePicker("workload", "Workload", "...or upload a workload file", WORKLOAD_TYPES, _workload_text,
                             "No workload: upload one.")


def recommendation_tab(ev: Evaluation) -> None:
    """costmodel.answers.recommend over a workload's batch mix, for the sidebar scenario: decision, expected saving
    with its interval, win shares, impact, and the config to paste."""
    st.markdown("**Recommendation for your workload**: a distribution of decode batch sizes - a CSV `batch,weight`, "
                "a scrape of vLLM's Prometheus `/metrics` (the `vllm:num_requests_running` gauge), or the JSON that "
                "`vllm bench serve --save-result` writes - priced with the sidebar's scenario and profile.")
    picked = pick_file(WORKLOAD_PICKER, example_workloads())
    if picked is None:
        return
    name, text = picked
    inputs = ev.inputs
    try:
        answer = workload_answer(ev.profile_text, inputs, name, text)
    except InputError as exc:
        st.error(plain(in_dashboard_words(str(exc))))
        return
    rec = answer.recommendation
    DECISION_BOX[rec.decision](plain(rec.headline))
    flag, wl = rec.flag, rec.workload
    level = f"{rec.level:.0%}"
    tiles = [c.container(border=True) for c in st.columns(4)]
    for tile, caption in zip(tiles, [f"{FOCUS}, workload mean", FOCUS, "workload", FOCUS]):
        tile.caption(caption)
    tiles[0].metric("Saving / decode step", format_us(flag.expected_saving_per_decode_step_us, sign=True),
                    format_pct(flag.saving_pct), help="step-weighted mean of the saving over the workload's batches")
    if flag.interval_us is not None:
        tiles[0].caption(f"{level} interval: {format_interval_us(*flag.interval_us)}")
    tiles[1].metric("Decode steps faster", format_pct(100 * flag.beats_baseline_share, sign=False),
                    f"fastest in {format_pct(100 * flag.win_share, sign=False)}", delta_color="off",
                    delta_arrow="off", help=f"share of decode steps where {FOCUS} beats {BASELINE} / is the fastest")
    tiles[2].metric("Mean batch", format_number(wl.mean_batch), f"p50 {wl.quantile(0.5):,}, p90 {wl.quantile(0.9):,}",
                    delta_color="off", delta_arrow="off", help=plain(wl.method))
    if flag.impact is not None:
        gain = flag.impact.output_throughput_gain_pct_interval
        tiles[3].metric("Output throughput", format_pct(flag.impact.output_throughput_gain_pct),
                        f"ITL {format_ms(flag.impact.itl_after_ms, decimals=3)}", delta_color="off",
                        delta_arrow="off", help="ITL before / ITL after - 1 (positive = faster)")
        if gain is not None:
            tiles[3].caption(f"{level} interval: {format_pct(gain[0])} to {format_pct(gain[1])}")
    else:
        tiles[3].metric("Output throughput", "-", "needs ITL + acceptance length", delta_color="off",
                        delta_arrow="off", help="enter a baseline ITL and the acceptance length in the sidebar")
    if wl.hints and flag.impact is None:
        st.caption(plain("Measured in " + name + ": " + ", ".join(f"{k} {v:.3g}" for k, v in wl.hints.items())
                         + " - enter them in the sidebar (Impact) to see the ITL / throughput change."))
    st.markdown("**Config to paste**")
    for config in rec.configs:
        if config.available:
            st.code(config.text, language="bash", wrap_lines=True)
            st.caption(plain(f"{config.engine}: {config.note}"))
        else:
            st.caption(plain(f"{config.engine}: nothing to set - {config.note}"))
    st.markdown(f"**Every strategy over the workload** (savings vs {BASELINE}, positive = faster; bars below: the "
                "share of decode steps at each batch, coloured by the fastest strategy there)")
    table = recommendation_table(rec)
    show_table(table, column_order=ON_PAGE["recommendation"])
    download(table, "recommendation", ev=ev)
    chart("workload_chart", rec.per_batch)
    st.caption(plain(f"Workload {name} ({wl.source}): {wl.method}; {wl.observations:,} observations, "
                     f"{wl.batch.size} distinct batches. Intervals: {rec.interval_source}."))
