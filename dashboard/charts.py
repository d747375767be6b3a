"""Altair charts of the dashboard; each reads one tidy frame from `dashboard.tables` / `dashboard.data`.

Strategies keep one colour everywhere (STRATEGY_COLORS); savings use a diverging scale centred at 0
(blue: the local argmax path is faster, red: the full all-gather is faster).
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from costmodel import BASELINE, STRATEGIES

from .data import FOCUS

STRATEGY_COLORS: dict[str, str] = {
    "full_all_gather": "#e45756",
    "full_all_gather_no_relayout": "#f58518",
    "gather_to_rank0": "#b279a2",
    "local_argmax_pairs": "#4c78a8",
    "packed_allreduce_max": "#54a24b",
}
STRATEGY_SCALE = alt.Scale(domain=list(STRATEGIES), range=[STRATEGY_COLORS[s] for s in STRATEGIES])
SAVING_SCALE = alt.Scale(scheme="redblue", domainMid=0)
LOG_BATCH = alt.Scale(type="log", base=2)


def _strategy_color(legend: bool = True) -> alt.Color:
    return alt.Color("strategy:N", scale=STRATEGY_SCALE, sort=list(STRATEGIES),
                     legend=alt.Legend(orient="bottom", columns=3, title=None, labelLimit=400) if legend else None)


def _strategy_dash() -> alt.StrokeDash:
    """Solid lines except packed_allreduce_max (dashed), which often lies on top of local_argmax_pairs."""
    return alt.StrokeDash("strategy:N", sort=list(STRATEGIES), legend=None,
                          scale=alt.Scale(domain=list(STRATEGIES),
                                          range=[[1, 0] if s != "packed_allreduce_max" else [6, 3]
                                                 for s in STRATEGIES]))


def breakdown_chart(table: pd.DataFrame) -> alt.Chart:
    """Stacked horizontal bars: time per draft step of each strategy split into its components."""
    order = [s for s in STRATEGIES if s in set(table["strategy"])]
    bars = alt.Chart(table).mark_bar().encode(
        y=alt.Y("strategy:N", sort=order, title=None, axis=alt.Axis(labelLimit=300)),
        x=alt.X("sum(time_us):Q", title="time per draft step (us)"),
        color=alt.Color("component:N", scale=alt.Scale(scheme="tableau20"),
                        legend=alt.Legend(orient="bottom", columns=6, labelLimit=200)),
        order=alt.Order("component:N"),
        tooltip=["strategy:N", "component:N", alt.Tooltip("time_us:Q", format=".2f", title="time (us)"),
                 alt.Tooltip("share_pct:Q", format=".1f", title="share (%)")],
    )
    marks = alt.Chart(table).mark_square(size=140).encode(
        y=alt.Y("strategy:N", sort=order, title=None), x=alt.datum(0),
        color=_strategy_color(legend=False), tooltip=["strategy:N"])
    totals = alt.Chart(table).mark_text(align="left", dx=4).encode(
        y=alt.Y("strategy:N", sort=order), x="max(strategy_total_us):Q",
        text=alt.Text("max(strategy_total_us):Q", format=".1f"))
    return alt.layer(bars, totals, marks).resolve_scale(color="independent").properties(height=60 * len(order) + 40)


def sweep_chart(table: pd.DataFrame, crossover_batch: float | None) -> alt.LayerChart:
    """Time per draft step vs batch (log-log) per strategy; the FOCUS crossover as a rule."""
    pick = alt.selection_point(fields=["strategy"], bind="legend")
    base = alt.Chart(table).encode(
        x=alt.X("batch:Q", scale=LOG_BATCH, title="batch (rows per draft step)"),
        y=alt.Y("time_per_draft_step_us:Q", scale=alt.Scale(type="log"), title="time per draft step (us)"),
        color=_strategy_color(),
    )
    lines = base.mark_line(strokeWidth=2.5).encode(
        strokeDash=_strategy_dash(), opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15))).add_params(pick)
    hover = base.mark_point(size=40, filled=True).encode(opacity=alt.value(0),
        tooltip=[alt.Tooltip("batch:Q", format=".4g"), "strategy:N",
                 alt.Tooltip("time_per_draft_step_us:Q", format=".2f", title="time (us)"),
                 alt.Tooltip("saving_per_draft_step_us:Q", format=".2f", title="saving vs baseline (us)"),
                 alt.Tooltip("saving_pct:Q", format=".1f", title="saving (%)")])
    layers = [lines, hover]
    if crossover_batch is not None:
        cross = pd.DataFrame({"batch": [crossover_batch], "label": [f"crossover {crossover_batch:.1f}"]})
        base = alt.Chart(cross).encode(x="batch:Q", tooltip=[alt.Tooltip("batch:Q", format=".2f",
                                                                         title=f"{FOCUS} crossover batch")])
        layers += [base.mark_rule(color=STRATEGY_COLORS[FOCUS], strokeWidth=2),
                   base.mark_text(align="left", dx=5, dy=-5, color=STRATEGY_COLORS[FOCUS]).encode(
                       text="label:N", y=alt.value(12))]
    return alt.layer(*layers).properties(height=420)


def saving_chart(table: pd.DataFrame) -> alt.LayerChart:
    """Saving per decode step vs the baseline for each alternative strategy; 0 marked."""
    data = table[table["strategy"] != BASELINE]
    lines = alt.Chart(data).mark_line().encode(
        x=alt.X("batch:Q", scale=LOG_BATCH, title="batch"),
        y=alt.Y("saving_per_decode_step_us:Q", scale=alt.Scale(type="symlog"), title="saving / decode step (us)",
                axis=alt.Axis(values=[-(10**k) for k in range(5, 0, -1)] + [0] + [10**k for k in range(1, 6)],
                              format=",.0f", labelOverlap=True)),
        color=_strategy_color(), strokeDash=_strategy_dash(),
        tooltip=[alt.Tooltip("batch:Q", format=".4g"), "strategy:N",
                 alt.Tooltip("saving_per_decode_step_us:Q", format=".2f", title="saving / decode step (us)")],
    )
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="black").encode(y="y:Q")
    return alt.layer(lines, zero).properties(height=280)


def heatmap(table: pd.DataFrame, field: str, title: str) -> alt.LayerChart:
    """Saving of FOCUS vs the baseline per decode step over batch x `field`.

    Diverging colours centred at 0 on a symmetric symlog scale, so both signs stay visible when the
    gains reach thousands of microseconds and the losses tens.
    """
    values = table["saving_per_decode_step_us"].abs()
    bound = float(values.max()) if len(values) and values.max() > 0 else 1.0
    data = table.assign(dark=np.log1p(values) > 0.6 * np.log1p(bound))
    order = sorted(table[field].unique(), reverse=True)
    base = alt.Chart(data).encode(
        x=alt.X("batch:O", title="batch", sort="ascending", axis=alt.Axis(labelAngle=0)),
        y=alt.Y(f"{field}:O", title=title, sort=order),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("saving_per_decode_step_us:Q",
                        scale=alt.Scale(type="symlog", scheme="redblue", domain=[-bound, bound], domainMid=0),
                        legend=alt.Legend(title="saving / decode step (us)", orient="right",
                                      gradientLength=max(60, min(200, 34 * len(order) - 20)))),
        tooltip=["batch:O", f"{field}:O",
                 alt.Tooltip("saving_per_decode_step_us:Q", format=".2f", title="saving / decode step (us)"),
                 alt.Tooltip("saving_per_draft_step_us:Q", format=".2f", title="saving / draft step (us)"),
                 alt.Tooltip("saving_pct:Q", format=".1f", title="saving (%)"),
                 alt.Tooltip("fastest_strategy:N", title="fastest")],
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("saving_per_decode_step_us:Q", format=",.0f"),
        color=alt.condition("datum.dark", alt.value("white"), alt.value("black")))
    return alt.layer(cells, text).properties(width="container", height=34 * len(order) + 20)


def calibration_chart(points: pd.DataFrame, curves: pd.DataFrame) -> alt.FacetChart:
    """Measured medians (points) vs the fitted curve (lines), faceted by mode and world size."""
    keys = ["op", "world_size", "nodes", "mode", "bytes_per_rank"]
    data = pd.concat([
        points[keys].assign(time_us=points["measured_median_us"], kind="measured"),
        curves[keys].assign(time_us=curves["predicted_us"], kind="fitted"),
    ], ignore_index=True)
    base = alt.Chart().encode(
        x=alt.X("bytes_per_rank:Q", scale=alt.Scale(type="log"), title="bytes per rank"),
        y=alt.Y("time_us:Q", scale=alt.Scale(type="log"), title="time (us)"),
        color=alt.Color("op:N", legend=alt.Legend(orient="bottom")),
        tooltip=["kind:N", "op:N", "world_size:O", "nodes:O", "mode:N", alt.Tooltip("bytes_per_rank:Q", format=",.0f"),
                 alt.Tooltip("time_us:Q", format=".2f")],
    )
    layer = alt.layer(base.mark_line().transform_filter("datum.kind == 'fitted'"),
                      base.mark_point(filled=True, size=30).transform_filter("datum.kind == 'measured'"),
                      data=data).properties(width=260, height=200)
    return layer.facet(column=alt.Column("world_size:O", title="world size"), row=alt.Row("mode:N", title=None))


def residual_chart(points: pd.DataFrame) -> alt.FacetChart:
    """Residuals (measured - predicted) / predicted in % per point, faceted by mode and world size."""
    base = alt.Chart().encode(x=alt.X("bytes_per_rank:Q", scale=alt.Scale(type="log"), title="bytes per rank"))
    dots = base.mark_point(filled=True, size=30).encode(
        y=alt.Y("rel_error_pct:Q", title="(predicted - measured) / measured (%)"),
        color=alt.Color("op:N", legend=alt.Legend(orient="bottom")),
        tooltip=["op:N", "world_size:O", "mode:N", alt.Tooltip("bytes_per_rank:Q", format=",.0f"),
                 alt.Tooltip("measured_median_us:Q", format=".2f"), alt.Tooltip("predicted_us:Q", format=".2f"),
                 alt.Tooltip("rel_error_pct:Q", format=".1f")])
    zero = alt.Chart().mark_rule(color="gray").encode(y=alt.datum(0))
    layer = alt.layer(dots, zero, data=points).properties(width=260, height=140)
    return layer.facet(column=alt.Column("world_size:O", title="world size"), row=alt.Row("mode:N", title=None))


def impact_chart(table: pd.DataFrame) -> alt.FacetChart:
    """ITL and TPOT before / after switching from the baseline, per strategy."""
    rows = []
    for _, r in table.iterrows():
        for metric in ("itl", "tpot"):
            rows.append({"strategy": r["strategy"], "metric": metric.upper(), "when": "before",
                         "ms": r[f"{metric}_before_ms"]})
            rows.append({"strategy": r["strategy"], "metric": metric.upper(), "when": "after",
                         "ms": r[f"{metric}_after_ms"]})
    data = pd.DataFrame(rows)
    bars = alt.Chart().mark_bar().encode(
        y=alt.Y("when:N", sort=["before", "after"], title=None),
        x=alt.X("ms:Q", title="ms"),
        color=alt.Color("when:N", scale=alt.Scale(domain=["before", "after"], range=["#bab0ac", "#4c78a8"]),
                        legend=None),
        tooltip=["strategy:N", "metric:N", "when:N", alt.Tooltip("ms:Q", format=".4f")],
    )
    text = alt.Chart().mark_text(align="left", dx=3).encode(
        y=alt.Y("when:N", sort=["before", "after"]), x="ms:Q", text=alt.Text("ms:Q", format=".3f"))
    return alt.layer(bars, text, data=data).properties(width=320, height=70).facet(
        row=alt.Row("strategy:N", title=None), column=alt.Column("metric:N", title=None)
    ).resolve_scale(x="independent")


def sensitivity_chart(table: pd.DataFrame) -> alt.LayerChart:
    """Horizontal bars: elasticity of the saving per parameter (the rows of `table`, in their order).

    Blue: raising the parameter raises the saving; red: it lowers it. Tooltip: the saving change for +10%.
    """
    data = table.assign(effect=np.where(table["elasticity"] >= 0, "raises the saving", "lowers the saving"))
    bars = alt.Chart(data).mark_bar().encode(
        y=alt.Y("parameter:N", sort=list(data["parameter"]), title=None, axis=alt.Axis(labelLimit=420)),
        x=alt.X("elasticity:Q", title="elasticity of the saving (% change per 1% change of the parameter)"),
        color=alt.Color("effect:N", scale=alt.Scale(domain=["raises the saving", "lowers the saving"],
                                                    range=["#4c78a8", "#e45756"]),
                        legend=alt.Legend(orient="bottom", title=None)),
        tooltip=["parameter:N", alt.Tooltip("elasticity:Q", format=".3f"),
                 alt.Tooltip("saving_change_us_per_10pct:Q", format="+.3f", title="saving change for +10% (us)")],
    )
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="black").encode(x="x:Q")
    return alt.layer(bars, zero).properties(height=24 * len(data) + 40)
