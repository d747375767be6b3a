"""Streamlit rendering of the verdict header and of each tab (layout only; numbers come from data/tables)."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from costmodel import BASELINE, DESCRIPTIONS, InputError, Profile

from . import charts
from .data import (
    FOCUS,
    fitted_curves,
    heat_batches,
    heat_tp_row,
    heat_tps,
    heat_vocab_row,
    heat_vocabs,
    impact_frame,
    impl_crossover_frame,
    measured_points,
    sweep_frame,
)
from .fidelity import SENSITIVITY_TOP, explanation_text, reference_profiles, sensitivity_frame, validation
from .tables import breakdown_table, csv_bytes, provenance_table, records_table, sweep_table, verdict_table
from .verdict import Evaluation, bootstrap_method, fused_provenance, provenance_line

PROGRESS_AFTER_S = 0.05


@st.cache_data(show_spinner=False, max_entries=128)
def chart_spec(name: str, *args) -> dict:
    """Vega-Lite spec of charts.<name>(*args), cached on the data: Altair's schema validation costs ~0.1 s a
    chart, so reruns that do not change a chart's data reuse its spec."""
    return getattr(charts, name)(*args).to_dict()


def chart(name: str, *args, stretch: bool = True) -> None:
    st.vega_lite_chart(spec=chart_spec(name, *args), width="stretch" if stretch else "content")


def download(frame: pd.DataFrame, name: str, label: str = "Download CSV") -> None:
    """A CSV download of exactly `frame` (no rerun on click)."""
    st.download_button(label, csv_bytes(frame), file_name=f"{name}.csv", mime="text/csv", key=f"download_{name}",
                       on_click="ignore", icon=":material/download:")


def provenance_badge(profile: Profile) -> None:
    color, sentence = provenance_line(profile)
    st.markdown(f":{color}-badge[{profile.provenance.kind}] **{profile.title}** - {sentence}")


# -- header ---------------------------------------------------------------------------------------------
def verdict(ev: Evaluation) -> None:
    """Metric tiles: winner, FOCUS saving per draft / decode step, crossover batch."""
    v = ev.verdict
    provenance_badge(ev.profile)
    st.subheader(v.headline())
    st.caption(f"{v.fastest}: {DESCRIPTIONS[v.fastest]}. Tiles: {FOCUS} vs {BASELINE}, per rank.")
    tiles = st.columns(4)
    calls = int(ev.point["calls_per_decode_step"].iloc[0])
    tiles[0].metric("Saving / draft step", f"{v.focus_saving_us:+.2f} µs", f"{v.focus_saving_pct:+.1f}%",
                    border=True, help=f"{BASELINE} time minus {FOCUS} time for one draft call "
                                      f"(positive: {FOCUS} is faster)")
    tiles[1].metric("Saving / decode step", f"{v.focus_saving_decode_us:+.2f} µs", f"{calls} draft calls",
                    delta_color="off", delta_arrow="off", border=True,
                    help=f"{FOCUS} saving per draft call x draft calls per decode step")
    cross = "none" if v.crossover_batch is None else f"{v.crossover_batch:.1f}"
    tiles[2].metric("Crossover batch", cross, v.crossover_text().removeprefix(f"{FOCUS} "), delta_color="off",
                    delta_arrow="off", border=True,
                    help=f"costmodel.crossover of {FOCUS} vs {BASELINE} over batch 1-65536, other inputs fixed")
    tiles[3].metric("Fastest: saving / decode step", f"{v.best_saving_decode_us:+.2f} µs",
                    f"{v.best_saving_pct:+.1f}% per draft step", border=True,
                    help=f"{v.fastest} vs {BASELINE}")
    intervals = v.interval_texts()
    if intervals is not None:
        for tile, text in zip(tiles, intervals):
            tile.caption(text)
    st.markdown(v.comparison())
    if v.interval is not None:
        st.caption(f"Intervals: the central {v.interval.saving_us.level:.0%} of {len(ev.profile.bootstrap)} "
                   f"replicates of the profile - {bootstrap_method(ev.profile)}.")
    elif ev.interval_note:
        st.caption(ev.interval_note)
    if not v.focus_valid:
        st.warning(f"{FOCUS} packs ids into fp32, exact only below 2^24 ids: it is not valid for this vocab.")
    extrapolated = ev.point.loc[ev.point["extrapolated"], "strategy"].tolist()
    if extrapolated:
        st.caption(f"Outside the measured kernel tables (roofline used): {', '.join(extrapolated)}")


# -- tabs -------------------------------------------------------------------------------------------------
def sweep_tab(ev: Evaluation) -> None:
    inputs = ev.inputs
    table = sweep_table(sweep_frame(ev.profile_text, inputs.spec, inputs.batch_min, inputs.batch_max))
    st.markdown(f"**Time per draft step vs batch** (log-log; click a legend entry to highlight), batch "
                f"{inputs.batch_min}-{inputs.batch_max}; the vertical line is the {FOCUS} crossover.")
    # the chosen batch is not drawn: a chart that changes with every batch edit costs ~1 s of browser redraw
    chart("sweep_chart", table, ev.verdict.crossover_batch)
    st.markdown(f"**Saving vs {BASELINE} per decode step** (symmetric-log y axis; above 0 = faster than the "
                "baseline)")
    chart("saving_chart", table)
    download(table, "time_vs_batch")
    with st.expander("Crossover batches of every strategy vs the baseline"):
        st.dataframe(ev.crossovers, hide_index=True)
        download(ev.crossovers, "crossovers")
    fused_panel(ev)


def fused_panel(ev: Evaluation) -> None:
    """Crossover batch vs the baseline with the torch ops and with the fused Triton kernels, side by side."""
    table = impl_crossover_frame(ev.profile_text, ev.inputs.spec)
    st.markdown(f"**Fused kernels**: crossover batch vs {BASELINE} with torch ops and with the fused Triton "
                "kernels (other inputs as in the sidebar)")
    st.dataframe(table, hide_index=True, column_config={
        "crossover_batch_torch": st.column_config.NumberColumn("crossover batch (torch)", format="%.1f"),
        "crossover_batch_fused": st.column_config.NumberColumn("crossover batch (fused)", format="%.1f"),
        "status_torch": st.column_config.TextColumn("status (torch)"),
        "status_fused": st.column_config.TextColumn("status (fused)"),
        "shift_pct": st.column_config.NumberColumn("shift (%)", format="%+.1f")})
    st.caption(f"{fused_provenance(ev.profile)}. Empty crossover: no sign change in batch 1-65536 (see status).")
    download(table, "crossovers_torch_vs_fused")


def breakdown_tab(ev: Evaluation) -> None:
    st.markdown(f"**Verdict table**: every strategy at batch {ev.inputs.batch} against {BASELINE}")
    verdict = verdict_table(ev.point, ev.crossovers)
    shown = ["strategy", "time_per_draft_step_us", "saving_per_draft_step_us", "saving_pct",
             "saving_per_decode_step_us", "wire_bytes_per_rank", "fastest", "valid", "crossover_batch",
             "crossover_status", "description"]
    st.dataframe(verdict, hide_index=True, column_order=shown)  # the CSV also carries the scenario columns
    download(verdict, "verdict")
    table = breakdown_table(ev.point)
    st.markdown(f"**Where the time goes** at batch {ev.inputs.batch} (per draft step, per rank).")
    chart("breakdown_chart", table)
    download(table, "breakdown")
    with st.expander("Full prediction table (Prediction.to_frame())"):
        st.dataframe(ev.point, hide_index=True)
        download(ev.point, "prediction")


def sensitivity_tab(ev: Evaluation) -> None:
    inputs = ev.inputs
    st.markdown(f"**What moves the {FOCUS} saving** at batch {inputs.batch}: elasticity = % change of the saving "
                "per 1% change of one profile parameter (central difference, ±1%), top "
                f"{SENSITIVITY_TOP} by size. Measured kernel tables are not perturbed.")
    try:
        with st.spinner("perturbing every profile parameter (a few seconds; cached afterwards)"):
            table = sensitivity_frame(ev.profile_text, inputs.spec, float(inputs.batch))
    except InputError as exc:
        st.error(str(exc))
        table = None
    if table is not None and table.empty:
        st.info("No profile parameter changes this saving.")
    elif table is not None:
        chart("sensitivity_chart", table.head(SENSITIVITY_TOP))
        st.dataframe(table, hide_index=True, column_config={
            "elasticity": st.column_config.NumberColumn(format="%+.3f"),
            "saving_change_us_per_10pct": st.column_config.NumberColumn(format="%+.3f"),
            "saving_us": st.column_config.NumberColumn(format="%.3f")})
        download(table, "sensitivity")
    with st.expander("How is this computed?"):
        st.markdown(f"Every priced call of every strategy at batch {inputs.batch}, its formula with the numbers "
                    "substituted (costmodel.explain); each strategy's calls add up to its total.")
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
    st.markdown(f"**Saving of {FOCUS} vs {BASELINE} per decode step (µs)**: blue = {FOCUS} faster, "
                f"red = {BASELINE} faster.")
    _heatmap("draft vocab", heat_vocabs(inputs.spec), lambda v: heat_vocab_row(text, inputs.spec, v, batches),
             f"batch x draft vocab (target vocab {inputs.vocab:,}; the d2t map on below it)", "draft_vocab",
             "draft vocab", "saving_batch_x_draft_vocab")
    _heatmap("TP", heat_tps(inputs.spec), lambda p: heat_tp_row(text, inputs.spec, p, batches),
             f"batch x TP size ({inputs.nodes} node(s); draft vocab {inputs.draft_vocab:,})", "tp", "TP size",
             "saving_batch_x_tp")


def _heatmap(kind: str, values: tuple[int, ...], compute, caption: str, field: str, title: str, name: str) -> None:
    """One heatmap of the FOCUS saving: rows from `compute(value)`, its CSV, and the rows the model rejected."""
    frame, skipped = _heat_rows(kind, values, compute)
    st.markdown(caption)
    if not frame.empty:
        chart("heatmap", frame, field, title)
        download(frame, name)
    for line in skipped:
        st.caption(line)


def calibration_tab(ev: Evaluation, measurements_csv: str | None) -> None:
    provenance_section(ev.profile)
    validation_section(ev.inputs.profile)
    measured_section(ev, measurements_csv)


def provenance_section(profile: Profile) -> None:
    prov = profile.provenance
    st.markdown("**Provenance**")
    provenance_badge(profile)
    st.markdown(f"{prov.source}")
    facts = {"GPU": prov.gpu, "interconnect": prov.interconnect, "GPUs per node": prov.gpus_per_node,
             "date": prov.date, "software": ", ".join(f"{k} {v}" for k, v in prov.software.items())}
    st.markdown("  \n".join(f"{k}: {v}" for k, v in facts.items() if v))
    if prov.citations:
        with st.expander(f"Citations ({len(prov.citations)})"):
            st.markdown("\n".join(f"- {c}" for c in prov.citations))
    parts = provenance_table(profile)
    colors = {"measured": "background-color: #d4edda", "derived": "background-color: #fff3cd",
              "mixed": "background-color: #e2d9f3"}
    st.dataframe(parts.style.map(lambda v: colors.get(v, ""), subset=["provenance"]), hide_index=True)
    download(parts, "provenance")
    if profile.fit_report:
        st.markdown("**Fit report**")
        report = records_table(profile.fit_report)
        st.dataframe(report, hide_index=True)
        download(report, "fit_report")


VALIDATION_CONFIG = {
    "measured_us": st.column_config.NumberColumn("measured (us)", format="%.2f"),
    "predicted_us": st.column_config.NumberColumn("predicted (us)", format="%.2f"),
    "rel_error_pct": st.column_config.NumberColumn("relative error (%)", format="%+.1f"),
    "median_abs_rel_error": None, "p90_abs_rel_error": None,
    "median_abs_rel_error_pct": st.column_config.NumberColumn("median |rel. error| (%)", format="%.1f"),
    "p90_abs_rel_error_pct": st.column_config.NumberColumn("p90 |rel. error| (%)", format="%.1f"),
}


def _validation_tables(name: str | None) -> None:
    rows, summ = validation(name)
    st.dataframe(rows, hide_index=True, column_config=VALIDATION_CONFIG)
    download(rows, "validation")
    st.markdown("**Per source**: median and p90 |relative error| (the `all` row: held-out rows only)")
    st.dataframe(summ, hide_index=True, column_config=VALIDATION_CONFIG)
    download(summ, "validation_summary")


def validation_section(name: str) -> None:
    """costmodel.validate on the reference rows (data/reference/*.csv) naming the selected profile."""
    st.markdown("**Validation against reference points** (data/reference: published figures and this "
                "project's measurements). Relative error = (predicted - measured) / measured; in-sample: the "
                "profile was built from that figure, held-out: it was not.")
    try:
        counts = reference_profiles()
        if name in counts:
            st.caption(f"{counts[name]} reference rows name {name}.")
            _validation_tables(name)
            return
        st.info(f"No reference row names the profile {name!r} (reference rows name: "
                f"{', '.join(f'{k} ({v})' for k, v in counts.items())}).")
        with st.expander("Validation table for all bundled profiles named in data/reference"):
            _validation_tables(None)
    except InputError as exc:
        st.error(str(exc))


def measured_section(ev: Evaluation, measurements_csv: str | None) -> None:
    points, notes = measured_points(ev.profile_text, measurements_csv)
    for note in notes:
        st.caption(note)
    if points.empty:
        st.info("No measured collective points for this profile (an uploaded measurement CSV / nccl-tests log, "
                "or CSVs listed in provenance.files, are plotted here).")
        return
    curves = fitted_curves(ev.profile_text, points)
    st.markdown("**Measured vs fitted** (points: measured medians; lines: the profile's collective model)")
    chart("calibration_chart", points, curves, stretch=False)
    download(curves, "fitted_curves", "Download the fitted curves (CSV)")
    st.markdown("**Residuals** (measured - predicted) / predicted")
    chart("residual_chart", points, stretch=False)
    download(points, "measured_vs_fitted", "Download the measured points and residuals (CSV)")


def impact_tab(ev: Evaluation) -> None:
    inputs = ev.inputs
    if inputs.itl_ms is None or inputs.acceptance_length is None:
        st.info("Enter a baseline ITL (ms) and the mean acceptance length in the sidebar to see ITL / TPOT "
                "before and after.")
        return
    try:
        table = impact_frame(ev.point, inputs.itl_ms, inputs.acceptance_length)
    except InputError as exc:
        st.error(str(exc))
        return
    cols = st.columns(4)
    for i, (_, row) in enumerate(table.iterrows()):
        for j, metric in enumerate(("itl", "tpot")):
            before, after = row[f"{metric}_before_ms"], row[f"{metric}_after_ms"]
            cols[(2 * i + j) % 4].metric(f"{metric.upper()} with {row['strategy']}", f"{after:.3f} ms",
                                         f"{after - before:+.3f} ms ({-row['speedup_pct']:+.2f}%)",
                                         delta_color="inverse", border=True)
    chart("impact_chart", table, stretch=False)
    st.dataframe(table, hide_index=True)
    download(table, "impact")
