"""Altair charts of the dashboard; each reads one tidy frame from `dashboard.tables` / `dashboard.data`.

Strategies keep one colour everywhere (STRATEGY_COLORS); components have their own fixed palette
(COMPONENT_COLORS, no strategy colour reused, the same in every scenario); savings use a diverging scale
centred at 0 (blue: the local argmax path is faster, red: the full all-gather is faster).
Savings are baseline time - strategy time: positive = faster than the baseline, as in the CLI.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from costmodel import BASELINE, STRATEGIES
from costmodel.answers.sensitivity import effect
from costmodel.answers.step_sweep_frame import PER_CALL_ANSWER, WHOLE_STEP_ANSWER
from costmodel.io.formatting import format_batch, format_pct, format_small_pct, format_us

from .data import FOCUS

STRATEGY_COLORS: dict[str, str] = {
    "full_all_gather": "#e45756",
    "full_all_gather_no_relayout": "#f58518",
    "gather_to_rank0": "#b279a2",
    "local_argmax_pairs": "#4c78a8",
    "packed_allreduce_max": "#54a24b",
}
STRATEGY_SCALE = alt.Scale(domain=list(STRATEGIES), range=[STRATEGY_COLORS[s] for s in STRATEGIES])
# line widths: local_argmax_pairs is drawn wide underneath, packed_allreduce_max thin and dashed on top, so
# both stay visible where they coincide
STRATEGY_WIDTHS: dict[str, float] = {s: (6.0 if s == "local_argmax_pairs" else 2.0 if s == "packed_allreduce_max"
                                         else 2.5) for s in STRATEGIES}
COMPONENT_COLORS: dict[str, str] = {
    "all_gather": "#17becf", "gather": "#0f7b8a", "all_reduce": "#393b79", "broadcast": "#8c6d31",
    "relayout_copy": "#e7ba52", "argmax": "#7f7f7f", "chunked_argmax": "#c7c7c7", "d2t_scatter": "#843c39",
    "d2t_lookup": "#e7969c", "local_argmax": "#bcbd22", "pair_reduce": "#637939", "key_pack": "#ce6dbd",
    "key_unpack": "#de9ed6",
}
EXTRA_COMPONENT_COLORS = ("#9c9ede", "#cedb9c", "#e7cb94", "#fdd0a2", "#6b6ecf", "#b5cf6b", "#e6550d", "#31a354")
COLLECTIVE_COLORS: dict[str, str] = {"nccl": "#4c78a8", "oneshot": "#f58518", "multimem": "#54a24b",
                                     "nccl-symm": "#b279a2"}  # implementations (costmodel.model.collective_impls)
HEAT_TEXT_MIN_CELL_PX = 40  # a heatmap cell narrower than this drops its number ("-1,234" at 11 px is ~36 px)
MARKER_COLOR = "#333333"  # the chosen batch
SAVING_SCALE = alt.Scale(scheme="redblue", domainMid=0)
LOG_BATCH = alt.Scale(type="log", base=2)


def _strategy_color(legend: bool = True, shown=None) -> alt.Color:
    """The strategy colour; its legend lists only the strategies in `shown` (all when None), so a series that
    is not drawn has no entry."""
    values = list(STRATEGIES) if shown is None else [s for s in STRATEGIES if s in set(shown)]
    return alt.Color("strategy:N", scale=STRATEGY_SCALE, sort=list(STRATEGIES),
                     legend=alt.Legend(orient="bottom", columns=3, title=None, labelLimit=400, values=values)
                     if legend else None)


def component_scale(components) -> alt.Scale:
    """Fixed colours for the known components; unknown ones (sorted by name) take the extra colours."""
    extra = sorted(set(components) - set(COMPONENT_COLORS))
    domain = list(COMPONENT_COLORS) + extra
    colors = list(COMPONENT_COLORS.values()) + [EXTRA_COMPONENT_COLORS[i % len(EXTRA_COMPONENT_COLORS)]
                                                for i in range(len(extra))]
    return alt.Scale(domain=domain, range=colors)


def _strategy_width() -> alt.StrokeWidth:
    return alt.StrokeWidth("strategy:N", legend=None, scale=alt.Scale(domain=list(STRATEGIES),
                                                                      range=[STRATEGY_WIDTHS[s] for s in STRATEGIES]))


def _strategy_dash() -> alt.StrokeDash:
    """Solid lines except packed_allreduce_max (dashed), which often lies on top of local_argmax_pairs."""
    return alt.StrokeDash("strategy:N", sort=list(STRATEGIES), legend=None,
                          scale=alt.Scale(domain=list(STRATEGIES),
                                          range=[[1, 0] if s != "packed_allreduce_max" else [6, 3]
                                                 for s in STRATEGIES]))


def breakdown_chart(table: pd.DataFrame, x_title: str = "time per draft call (µs)") -> alt.Chart:
    """Stacked horizontal bars: time per draft call (its logits path) of each strategy split into its
    components; `x_title` says which quantity (under an engine: one call's logits path, not the whole step)."""
    order = [s for s in STRATEGIES if s in set(table["strategy"])]
    bars = alt.Chart(table).mark_bar().encode(
        y=alt.Y("strategy:N", sort=order, title=None, axis=alt.Axis(labelLimit=300)),
        x=alt.X("sum(time_us):Q", title=x_title),
        color=alt.Color("component:N", scale=component_scale(table["component"].unique()),
                        legend=alt.Legend(orient="bottom", columns=6, labelLimit=200,
                                          values=list(dict.fromkeys(table["component"])))),  # first run first
        order=alt.Order("step:Q") if "step" in table.columns else alt.Order("component:N"),  # execution order
        tooltip=["strategy:N", "component:N", alt.Tooltip("time_us:Q", format=".2f", title="time (µs)"),
                 alt.Tooltip("share_pct:Q", format=".1f", title="share (%)")],
    )
    marks = alt.Chart(table).mark_square(size=140).encode(
        y=alt.Y("strategy:N", sort=order, title=None), x=alt.datum(0),
        color=_strategy_color(legend=False), tooltip=["strategy:N"])
    totals = alt.Chart(table).mark_text(align="left", dx=4).encode(
        y=alt.Y("strategy:N", sort=order), x="max(strategy_total_us):Q",
        text=alt.Text("max(strategy_total_us):Q", format=",.3~r"))
    return alt.layer(bars, totals, marks).resolve_scale(color="independent").properties(height=60 * len(order) + 40)


# -- the two sweep charts as plain Vega-Lite dicts --------------------------------------------------------
# Built without Altair: they are redrawn on every K / TP / preset edit, and Altair's object layer costs ~0.1-0.2 s
# a chart where these dicts cost ~5 ms. The tests validate them against the Vega-Lite schema.
VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
_Q = "quantitative"
_X_BATCH = {"field": "batch", "type": _Q, "scale": {"type": "log", "base": 2},
            "title": "batch (sequences per decode step)"}


def _records(frame: pd.DataFrame, columns: list[str]) -> list[dict]:
    """JSON-safe rows of `columns` (numbers as floats, NaN / inf -> null)."""
    values = []
    for c in columns:
        col = frame[c]
        if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
            values.append([float(x) if np.isfinite(x) else None for x in col.to_numpy(dtype=float)])
        else:
            values.append([None if isinstance(x, float) and x != x else x for x in col.tolist()])
    return [dict(zip(columns, row)) for row in zip(*values)]


def _by_strategy(range_: list, legend: dict | None = None) -> dict:
    enc = {"field": "strategy", "type": "nominal", "sort": list(STRATEGIES),
           "scale": {"domain": list(STRATEGIES), "range": range_}}
    enc["legend"] = legend
    return enc


def _color_enc(legend: bool = True) -> dict:
    return _by_strategy([STRATEGY_COLORS[s] for s in STRATEGIES],
                        {"orient": "bottom", "columns": 2, "title": None, "labelLimit": 400, "symbolType": "stroke"}
                        if legend else None)  # a stroke: the dash of packed_allreduce_max shows in its entry


def _line_encodings() -> dict:
    """Colour, dash and width by strategy. Vega-Lite merges the legends of scales with one domain into one legend, so
    the dash and the width declare none of their own (a `legend: null` conflicted with the colour's legend, a console
    warning): the one legend draws each strategy's line as the chart does."""
    dash = _by_strategy([[1, 0] if s != "packed_allreduce_max" else [6, 3] for s in STRATEGIES])
    width = _by_strategy([STRATEGY_WIDTHS[s] for s in STRATEGIES])
    del dash["legend"], width["legend"]
    return {"color": _color_enc(), "strokeDash": dash, "strokeWidth": width}


def _crossover_layers(crossover_batch: float | None, band: tuple[float, float] | None) -> list[dict]:
    """The FOCUS crossover as a rule with a label and its interval as a shaded band."""
    color = STRATEGY_COLORS[FOCUS]
    layers: list[dict] = []
    if band is not None:
        layers.append({"data": {"values": [{"low": float(band[0]), "high": float(band[1])}]},
                       "mark": {"type": "rect", "color": color, "opacity": 0.15},
                       "encoding": {"x": {"field": "low", "type": _Q}, "x2": {"field": "high"},
                                    "tooltip": [{"field": "low", "type": _Q, "format": ",.3~r",
                                                 "title": f"{FOCUS} crossover interval from"},
                                                {"field": "high", "type": _Q, "format": ",.3~r", "title": "to"}]}})
    if crossover_batch is not None:
        data = {"values": [{"batch": float(crossover_batch), "label": f"crossover {format_batch(crossover_batch)}"}]}
        tip = [{"field": "batch", "type": _Q, "format": ",.3~r", "title": f"{FOCUS} crossover batch"}]
        layers += [{"data": data, "mark": {"type": "rule", "color": color, "strokeWidth": 2},
                    "encoding": {"x": {"field": "batch", "type": _Q}, "tooltip": tip}},
                   {"data": data, "mark": {"type": "text", "align": "left", "dx": 5, "dy": -5, "color": color,
                                           "fontWeight": "bold"},
                    "encoding": {"x": {"field": "batch", "type": _Q}, "y": {"value": 12},
                                 "text": {"field": "label", "type": "nominal"}, "tooltip": tip}}]
    return layers


def _spread(values: np.ndarray, gap: float) -> np.ndarray:
    """Positions as close to `values` (sorted ascending) as possible with at least `gap` between neighbours."""
    out = values.astype(float).copy()
    for i in range(1, len(out)):
        out[i] = max(out[i], out[i - 1] + gap)
    shift = (out - values).mean() if len(out) else 0.0  # centre the moved group on the lines
    return out - shift


# the plot heights the end labels are spread for (sweep, saving chart): what the page draws of the specs' 420 / 340
# (Streamlit fits the chart to its container; measured at 800 and 1400 px in Chromium), so labels stay >= 16 px apart
LABEL_PLOT_PX = (240, 190)


def _end_labels(data: pd.DataFrame, field: str, height_px: float, symlog: bool = False) -> dict:
    """Direct labels at the right end of each strategy's line, spread vertically (>= 16 px apart) so lines
    that end together (local_argmax_pairs / packed_allreduce_max) keep readable labels."""
    last = data.loc[data.groupby("strategy")["batch"].idxmax()].copy()
    last = last[np.isfinite(last[field].astype(float))].sort_values(field)
    values = data[field].astype(float).to_numpy()
    values = values[np.isfinite(values)]
    if symlog:  # Vega's symlog, constant 1
        fwd, inv = (lambda v: np.sign(v) * np.log1p(np.abs(v))), (lambda t: np.sign(t) * np.expm1(np.abs(t)))
    else:
        values = values[values > 0]
        last = last[last[field] > 0]
        fwd, inv = np.log10, (lambda t: 10.0 ** t)
    if len(last) and len(values):
        lo, hi = float(fwd(values.min())), float(fwd(values.max()))
        if not symlog:  # the log axis is drawn over whole decades (log_ticks): the labels' gap in its units
            lo, hi = np.floor(lo), np.ceil(hi)
        span = (hi - lo) or 1.0
        gap_px = 20.0 if symlog else 16.0
        last["label_y"] = inv(_spread(fwd(last[field].to_numpy(dtype=float)), gap_px * span / height_px))
    else:
        last["label_y"] = last[field]
    color = _color_enc()
    del color["legend"]  # the lines' legend stands: a `legend: null` here conflicted with it (Vega's console warning)
    return {"data": {"values": _records(last, ["batch", "label_y", "strategy"])},
            "mark": {"type": "text", "align": "left", "dx": 6, "fontSize": 11},
            "encoding": {"x": {"field": "batch", "type": _Q}, "y": {"field": "label_y", "type": _Q},
                         "text": {"field": "strategy", "type": "nominal"}, "color": color}}


# the sweep chart's (time, saving) columns and y title per quantity: `data.sweep_answer`'s two tables
SWEEP_FIELDS = {WHOLE_STEP_ANSWER: ("whole_draft_step_us", "saving_per_decode_step_us",
                                    "time per decode step, whole draft step (µs)"),
                PER_CALL_ANSWER: ("total_us", "saving_per_draft_call_us", "time per draft call (µs)")}


def sweep_chart(table: pd.DataFrame, crossover_batch: float | None,
                band: tuple[float, float] | None = None) -> dict:
    """Time vs batch (log-log) per strategy - per decode step (the whole draft step) where the table has
    `whole_draft_step_us` (costmodel.answers.step_sweep_frame), else per draft call; the FOCUS crossover as a
    rule, its interval a band.

    A Vega-Lite dict; a legend click highlights one strategy."""
    time_col, saving_col, title = SWEEP_FIELDS[
        WHOLE_STEP_ANSWER if "whole_draft_step_us" in table.columns else PER_CALL_ANSWER]
    columns = ["batch", "strategy", time_col, saving_col, "saving_pct"]
    data = {"values": _records(table, columns)}
    ticks = log_ticks(table[time_col])
    y = {"field": time_col, "type": _Q, "title": title,
         "scale": {"type": "log", "domain": [ticks[0], ticks[-1]]}, "axis": {"values": ticks, "format": ",.0f"}}
    lines = {"data": data, "mark": {"type": "line"},
             "params": [{"name": "pick", "select": {"type": "point", "fields": ["strategy"]}, "bind": "legend"}],
             "encoding": {"x": _X_BATCH, "y": y, **_line_encodings(),
                          "opacity": {"condition": {"param": "pick", "value": 0.9}, "value": 0.15}}}
    hover = {"data": data, "mark": {"type": "point", "size": 40, "filled": True},
             "encoding": {"x": _X_BATCH, "y": y, "color": _color_enc(), "opacity": {"value": 0},
                          "tooltip": [{"field": "batch", "type": _Q, "format": ",.4~r"},
                                      {"field": "strategy", "type": "nominal"},
                                      {"field": time_col, "type": _Q, "format": ",.3~r",
                                       "title": "time (µs)"},
                                      {"field": saving_col, "type": _Q, "format": "+,.3~r",
                                       "title": "saving vs baseline (µs)"},
                                      {"field": "saving_pct", "type": _Q, "format": "+.1f", "title": "saving (%)"}]}}
    layers = [*_crossover_layers(crossover_batch, band), lines, hover,
              _end_labels(table, time_col, LABEL_PLOT_PX[0])]
    return {"$schema": VEGA_LITE_SCHEMA, "height": 420, "layer": layers}  # the end labels fit in autosize's bounds


def log_ticks(values) -> list[float]:
    """Whole decades 10^k spanning the positive finite values (1, 10, 100, 1,000, ...): the log axis's ticks and
    domain, so no axis shows 10, 30, 200 without a 1,000."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if not len(values):
        return [1.0, 10.0]
    lo, hi = int(np.floor(np.log10(values.min()))), int(np.ceil(np.log10(values.max())))
    return [10.0**k for k in range(lo, max(hi, lo + 1) + 1)]


def symlog_ticks(values) -> list[float]:
    """Round ticks for a symlog axis: 0 and +-10, 100, 1,000, ... up to the data's magnitude, each sign only where
    the data reach it (+-1 is left out: its label would sit on the 0)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    ticks = [0.0]
    if not len(values):
        return ticks
    for sign, extreme in ((1.0, values.max()), (-1.0, values.min())):
        if sign * extreme > 0:
            top = max(1, int(np.ceil(np.log10(max(sign * extreme, 1.0)))))
            ticks += [sign * 10.0 ** k for k in range(1, top + 1)]
    return sorted(ticks)


def saving_chart(table: pd.DataFrame, crossover_batch: float | None = None,
                 band: tuple[float, float] | None = None) -> dict:
    """Saving per decode step vs the baseline for each alternative strategy (symlog, round ticks, 0 marked)."""
    data = table[table["strategy"] != BASELINE]
    ticks = symlog_ticks(data["saving_per_decode_step_us"])
    y = {"field": "saving_per_decode_step_us", "type": _Q, "scale": {"type": "symlog"},
         "title": "saving / decode step (µs)", "axis": {"values": ticks, "format": ",.0f", "labelOverlap": False}}
    encodings = _line_encodings()
    encodings["color"]["legend"] = {**encodings["color"]["legend"],  # the baseline is not drawn: no entry
                                    "values": [s for s in STRATEGIES if s in set(data["strategy"])]}
    lines = {"data": {"values": _records(data, ["batch", "strategy", "saving_per_decode_step_us"])},
             "mark": {"type": "line"},
             "encoding": {"x": _X_BATCH, "y": y, **encodings, "opacity": {"value": 0.9},
                          "tooltip": [{"field": "batch", "type": _Q, "format": ",.4~r"},
                                      {"field": "strategy", "type": "nominal"},
                                      {"field": "saving_per_decode_step_us", "type": _Q, "format": "+,.3~r",
                                       "title": "saving / decode step (µs)"}]}}
    zero = {"data": {"values": [{"y": 0.0}]}, "mark": {"type": "rule", "color": "black"},
            "encoding": {"y": {"field": "y", "type": _Q}}}
    layers = [*_crossover_layers(crossover_batch, band), zero, lines,
              _end_labels(data, "saving_per_decode_step_us", LABEL_PLOT_PX[1], symlog=True)]
    return {"$schema": VEGA_LITE_SCHEMA, "height": 340, "layer": layers}


def with_batch_marker(spec: dict, batch: float) -> dict:
    """A copy of a (cached) sweep-chart spec with the chosen batch as a dashed rule and label.

    Added to the finished Vega-Lite dict so a batch edit does not rebuild (and re-validate) the chart.
    """
    label = f"batch {int(batch):,}" if float(batch).is_integer() else f"batch {format_batch(batch)}"
    marker = {
        "data": {"values": [{"batch": float(batch), "label": label}]},
        "layer": [
            {"mark": {"type": "rule", "color": MARKER_COLOR, "strokeDash": [4, 3], "strokeWidth": 1.5},
             "encoding": {"x": {"field": "batch", "type": "quantitative"}}},
            {"mark": {"type": "text", "align": "left", "dx": 5, "dy": 10, "color": MARKER_COLOR},
             "encoding": {"x": {"field": "batch", "type": "quantitative"}, "y": {"value": 24},
                          "text": {"field": "label", "type": "nominal"}}},
        ],
    }
    return {**spec, "layer": [*spec["layer"], marker]}


def heat_bound(*tables: pd.DataFrame) -> float:
    """The largest |saving per decode step| over all heatmaps: one colour scale for all of them."""
    values = [float(t["saving_per_decode_step_us"].abs().max()) for t in tables if len(t)]
    bound = max(values, default=0.0)
    return bound if np.isfinite(bound) and bound > 0 else 1.0


def legend_ticks(bound: float) -> list[float]:
    """The colour legend's labels on the symmetric symlog scale [-bound, bound]: +-bound, 0 and the round
    symlog ticks (10, 100, 1,000, ...) between them - not only the end values."""
    bound = float(bound)
    inner = [v for v in symlog_ticks([-bound, bound]) if abs(v) < 0.8 * bound]
    return sorted({-bound, bound, *inner})


def heatmap(table: pd.DataFrame, field: str, title: str, bound: float | None = None) -> alt.LayerChart:
    """Saving of FOCUS vs the baseline per decode step over batch x `field`.

    Diverging colours centred at 0 on a symmetric symlog scale over [-bound, bound] (`heat_bound` of every
    heatmap shown, so equal colours mean equal savings), so both signs stay visible when the gains reach
    thousands of microseconds and the losses tens. Every row is labelled; the cell numbers are drawn only while a
    cell is at least HEAT_TEXT_MIN_CELL_PX wide (Vega's `width` signal over the batch columns), so they never
    overlap in a narrow window.
    """
    values = table["saving_per_decode_step_us"].abs()
    bound = heat_bound(table) if bound is None else float(bound)
    data = table.assign(dark=np.log1p(values) > 0.6 * np.log1p(bound))
    order = sorted(table[field].unique(), reverse=True)
    base = alt.Chart(data).encode(
        x=alt.X("batch:O", title="batch", sort="ascending", axis=alt.Axis(labelAngle=0)),
        y=alt.Y(f"{field}:O", title=title, sort=order, axis=alt.Axis(labelOverlap=False, format=",d")),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("saving_per_decode_step_us:Q",
                        scale=alt.Scale(type="symlog", scheme="redblue", domain=[-bound, bound], domainMid=0),
                        legend=alt.Legend(title="saving / decode step (µs)", orient="right",
                                          values=legend_ticks(bound), format=",.0f", labelOverlap=True,
                                          gradientLength=max(60, min(200, 34 * len(order) - 20)))),
        tooltip=["batch:O", f"{field}:O",
                 alt.Tooltip("saving_per_decode_step_us:Q", format=".2f", title="saving / decode step (µs)"),
                 alt.Tooltip("saving_per_draft_call_us:Q", format=".2f", title="saving / draft call (µs)"),
                 alt.Tooltip("saving_pct:Q", format=".1f", title="saving (%)"),
                 alt.Tooltip("fastest_strategy:N", title="fastest")],
    )
    n_cols = max(1, int(table["batch"].nunique()))
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("saving_per_decode_step_us:Q", format=",.0f"),
        color=alt.condition("datum.dark", alt.value("white"), alt.value("black")),
        # the cell numbers only where a cell is wide enough for them (the colour and the tooltip stay)
        opacity=alt.condition(f"width / {n_cols} >= {HEAT_TEXT_MIN_CELL_PX}", alt.value(1.0), alt.value(0.0)))
    return alt.layer(cells, text).properties(width="container", height=34 * len(order) + 20)


def _log_axis(field: str, values, title: str, channel=alt.X):
    """A log axis (`channel`: alt.X or alt.Y) over whole decades with a tick at each (1, 10, 100, 1,000, ...;
    `log_ticks`), with thousands separators."""
    ticks = log_ticks(values)
    return channel(f"{field}:Q", title=title, scale=alt.Scale(type="log", domain=[ticks[0], ticks[-1]]),
                 axis=alt.Axis(values=ticks, format=",.0f", labelOverlap=True))


def _op_color(ops) -> alt.Color:
    """Collective ops in the component palette (COMPONENT_COLORS: all_gather is the same colour in every chart),
    the legend listing only the ops shown."""
    shown = list(dict.fromkeys(ops))
    return alt.Color("op:N", scale=component_scale(shown), legend=alt.Legend(orient="bottom", values=shown,
                                                                             title=None))


# the top-k chart's y title and height (axes and legend included: Streamlit fits the whole chart into it). Issue 35:
# "crossover batch (sequences per decode step)" was longer than the ~100 px plot that 300 px left, cut at the top;
# the caption above the chart says the rest
TOPK_Y_TITLE = "crossover batch"
TOPK_HEIGHT = 360


def crossover_by_k_chart(curve: pd.DataFrame) -> dict:
    """local_argmax_pairs' crossover batch vs top-k per collective implementation (log-log, base-2 ticks at the
    k priced, decade ticks on the batch), one fixed colour per implementation (COLLECTIVE_COLORS); rows
    without a crossover in range are left out. A Vega-Lite dict."""
    data = curve[np.isfinite(curve["crossover_batch"].astype(float))]
    impls = list(dict.fromkeys(data["collective"]))
    colors = [COLLECTIVE_COLORS.get(c, EXTRA_COMPONENT_COLORS[i % len(EXTRA_COMPONENT_COLORS)])
              for i, c in enumerate(impls)]
    ticks = log_ticks(data["crossover_batch"])
    ks = sorted(set(curve["top_k"].astype(float)))
    # explicit domains: Streamlit draws the chart before it inserts the data, and a log scale over no data logged
    # "Infinite extent" / "Log scale domain includes zero" in the console
    enc = {"x": {"field": "top_k", "type": _Q, "title": "top-k (candidates per draft call)",
                 "scale": {"type": "log", "base": 2, "domain": [ks[0], ks[-1]] if ks else [1.0, 2.0]},
                 "axis": {"values": ks, "format": ",.0f"}},
           "y": {"field": "crossover_batch", "type": _Q, "title": TOPK_Y_TITLE,
                 "scale": {"type": "log", "domain": [ticks[0], ticks[-1]]}, "axis": {"values": ticks,
                                                                                  "format": ",.0f"}},
           "color": {"field": "collective", "type": "nominal", "scale": {"domain": impls, "range": colors},
                     "legend": {"orient": "bottom", "title": None, "values": impls}},
           "tooltip": [{"field": "top_k", "type": _Q, "title": "top-k"}, {"field": "collective", "type": "nominal"},
                       {"field": "crossover_batch", "type": _Q, "format": ",.3~r", "title": "crossover batch"}]}
    return {"$schema": VEGA_LITE_SCHEMA, "height": TOPK_HEIGHT, "data": {"values": _records(data, list(curve.columns))},
            "mark": {"type": "line", "point": True}, "encoding": enc}


def calibration_chart(points: pd.DataFrame, curves: pd.DataFrame) -> alt.FacetChart:
    """Measured medians (points) vs the fitted curve (lines), faceted by mode and world size."""
    keys = ["op", "world_size", "nodes", "mode", "bytes_per_rank"]
    data = pd.concat([
        points[keys].assign(time_us=points["measured_median_us"], kind="measured"),
        curves[keys].assign(time_us=curves["predicted_us"], kind="fitted"),
    ], ignore_index=True)
    base = alt.Chart().encode(
        x=_log_axis("bytes_per_rank", data["bytes_per_rank"], "bytes per rank"),
        y=_log_axis("time_us", data["time_us"], "time (µs)", alt.Y),
        color=_op_color(data["op"]),
        shape=alt.Shape("kind:N", scale=alt.Scale(domain=["measured", "fitted"], range=["circle", "stroke"]),
                        legend=alt.Legend(orient="bottom", title=None)),
        tooltip=["kind:N", "op:N", "world_size:O", "nodes:O", "mode:N", alt.Tooltip("bytes_per_rank:Q", format=",.0f"),
                 alt.Tooltip("time_us:Q", format=".2f", title="time (µs)")],
    )
    layer = alt.layer(base.mark_line().transform_filter("datum.kind == 'fitted'"),
                      base.mark_point(filled=True, size=30).transform_filter("datum.kind == 'measured'"),
                      data=data).properties(width=260, height=200)
    return layer.facet(column=alt.Column("world_size:O", title="world size"), row=alt.Row("mode:N", title=None))


def residual_chart(points: pd.DataFrame) -> alt.FacetChart:
    """Relative error (predicted - measured) / measured in % per point, faceted by mode and world size."""
    base = alt.Chart().encode(x=_log_axis("bytes_per_rank", points["bytes_per_rank"], "bytes per rank"))
    dots = base.mark_point(filled=True, size=30).encode(
        y=alt.Y("rel_error_pct:Q", title="(predicted - measured) / measured (%)"),
        color=_op_color(points["op"]),
        tooltip=["op:N", "world_size:O", "mode:N", alt.Tooltip("bytes_per_rank:Q", format=",.0f"),
                 alt.Tooltip("measured_median_us:Q", format=".2f", title="measured (µs)"),
                 alt.Tooltip("predicted_us:Q", format=".2f", title="predicted (µs)"),
                 alt.Tooltip("rel_error_pct:Q", format=".1f")])
    zero = alt.Chart().mark_rule(color="gray").encode(y=alt.datum(0))
    layer = alt.layer(dots, zero, data=points).properties(width=260, height=140)
    return layer.facet(column=alt.Column("world_size:O", title="world size"), row=alt.Row("mode:N", title=None))


def impact_chart(table: pd.DataFrame) -> alt.LayerChart:
    """Output-throughput gain (%) per strategy with its 90% interval as an error bar; positive = faster."""
    order = [s for s in STRATEGIES if s in set(table["strategy"])]
    data = table.assign(label=[format_small_pct(v) for v in table["output_throughput_gain_pct"]])
    y = alt.Y("strategy:N", sort=order, title=None, axis=alt.Axis(labelLimit=300))
    bars = alt.Chart(data).mark_bar(height=22).encode(
        y=y, x=alt.X("output_throughput_gain_pct:Q", title="output throughput gain (%, positive = faster)"),
        color=_strategy_color(legend=False),
        tooltip=["strategy:N", alt.Tooltip("output_throughput_gain_pct:Q", format="+.2f", title="gain (%)"),
                 alt.Tooltip("itl_reduction_pct:Q", format="+.2f", title="ITL reduction (%)"),
                 alt.Tooltip("itl_after_ms:Q", format=".3f", title="ITL after (ms)")])
    whiskers = alt.Chart(data).mark_rule(color=MARKER_COLOR, strokeWidth=1.5).encode(
        y=y, x="output_throughput_gain_low_pct:Q", x2="output_throughput_gain_high_pct:Q")
    text = alt.Chart(data).mark_text(align="left", dx=4, dy=-14, fontSize=11).encode(
        y=y, x="output_throughput_gain_pct:Q", text="label:N")
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="black").encode(x="x:Q")
    return alt.layer(bars, whiskers, text, zero).properties(height=50 * len(order) + 30)


def sensitivity_chart(table: pd.DataFrame) -> alt.LayerChart:
    """Horizontal bars: change of the saving for +1% of each parameter, in the rows' order; the saving is the
    table's own `quantity` (us per draft call, or the whole draft step's us per decode step: the axis says which).

    The colour follows the table's `effect` (costmodel.answers.sensitivity.effect: blue where +1% is in the
    strategy's favour - "raises the saving", or with a negative saving "narrows the loss" - red where it is
    against it), not the sign of the elasticity, which flips when the saving itself is negative. Every bar is
    labelled with its parameter (axis) and its value (text at the bar's end).
    """
    data = table.assign(label=[format_us(v, sign=True) for v in table["saving_change_us_per_1pct"]],
                        align=np.where(table["saving_change_us_per_1pct"] >= 0, "left", "right"))
    y = alt.Y("parameter:N", sort=list(data["parameter"]), title=None,
              axis=alt.Axis(labelLimit=460, labelOverlap=False, labelFontSize=11))
    change = data["saving_change_us_per_1pct"].to_numpy(dtype=float)
    whole = "quantity" in table and table["quantity"].astype(str).str.startswith(WHOLE_STEP_ANSWER).any()
    per = "decode step" if whole else "draft call"  # the data's own quantity (sensitivity.elasticities)
    saving = 1.0 if data.empty else float(data["saving_us"].iloc[0])
    effects = [effect(saving, 1.0), effect(saving, -1.0)]  # the words of +1% for and against, at this saving's sign
    extent = float(np.abs(change).max(initial=0.0)) or 1.0
    lo = min(0.0, float(change.min(initial=0.0))) - 0.25 * extent
    hi = max(0.0, float(change.max(initial=0.0))) + 0.25 * extent
    bars = alt.Chart(data).mark_bar().encode(
        y=y,
        x=alt.X("saving_change_us_per_1pct:Q", title=f"change of the saving per {per} for +1% (µs)",
                scale=alt.Scale(domain=[lo, hi], nice=False)),  # room for the value labels at both ends
        color=alt.Color("effect:N", scale=alt.Scale(domain=effects, range=["#4c78a8", "#e45756"]),
                        legend=alt.Legend(orient="bottom", title=None)),
        tooltip=["parameter:N", alt.Tooltip("saving_change_us_per_1pct:Q", format="+,.3~r",
                                            title="saving change for +1% (µs)"),
                 alt.Tooltip("elasticity:Q", format="+.3f", title="elasticity")],
    )
    right = alt.Chart(data[data["align"] == "left"]).mark_text(align="left", dx=3, fontSize=11).encode(
        y=y, x="saving_change_us_per_1pct:Q", text="label:N")
    left = alt.Chart(data[data["align"] == "right"]).mark_text(align="right", dx=-3, fontSize=11).encode(
        y=y, x="saving_change_us_per_1pct:Q", text="label:N")
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="black").encode(x="x:Q")
    # Streamlit fits the whole chart (axes and legend included) into `height`
    return alt.layer(bars, right, left, zero).properties(height=26 * len(data) + 130, padding={"right": 60,
                                                                                              "left": 10})


def workload_chart(per_batch: pd.DataFrame) -> alt.LayerChart:
    """Share of decode steps per batch of a workload (Recommendation.per_batch), coloured by the fastest strategy,
    each bar labelled with its share."""
    data = per_batch.assign(share_pct=100.0 * per_batch["weight"]).rename(columns={"best": "strategy"})
    data["label"] = [format_pct(v, sign=False) for v in data["share_pct"]]
    x = alt.X("batch:O", title="decode batch (sequences)", axis=alt.Axis(labelAngle=0, labelOverlap=True))
    bars = alt.Chart(data).mark_bar().encode(
        x=x, y=alt.Y("share_pct:Q", title="share of decode steps (%)"), color=_strategy_color(shown=data["strategy"]),
        tooltip=["batch:O", alt.Tooltip("share_pct:Q", format=".1f", title="share (%)"),
                 alt.Tooltip("strategy:N", title="fastest")])
    text = alt.Chart(data).mark_text(dy=-6, fontSize=10).encode(x=x, y="share_pct:Q", text="label:N")
    return alt.layer(bars, text).properties(height=340)  # axes and legend included (Streamlit fits the chart)


SERVING_ROW_PX = 22


def serving_change_chart(changes: pd.DataFrame) -> alt.LayerChart:
    """The Serving A/B tab: per metric (one band of the y axis each, its strategies side by side in it: yOffset)
    every strategy's predicted change vs the baseline replay (%, point) with its 90% interval (whisker), over the
    run's noise band (grey: the |change| one A/B of the run's size resolves,
    costmodel.serving.ab.detectability); one legend, the strategy colour, under the plot.

    One layered view, not a facet per metric, so that it takes its container's width (width "container": the
    tab draws it stretched); the facet's fixed 560 px plot, row headers and legend made it 867 px wide, cut on the
    right of a 466 px column at an 800 px window (issue 43 item 6)."""
    order = [s for s in STRATEGIES if s in set(changes["strategy"])]
    metrics = list(dict.fromkeys(changes["metric"]))
    data = changes.assign(noise_low_pct=-changes["noise_pct"])
    y = alt.Y("metric:N", sort=metrics, title=None, axis=alt.Axis(labelLimit=150, ticks=False, domain=False),
              scale=alt.Scale(paddingInner=0.25, paddingOuter=0.1))
    offset = alt.YOffset("strategy:N", sort=order, scale=alt.Scale(paddingInner=0.2))
    x = alt.X("change_pct:Q", title="predicted change vs the baseline replay (%)")
    band = alt.Chart().mark_bar(color="#bbbbbb", opacity=0.45).encode(y=y, x="noise_low_pct:Q", x2="noise_pct:Q")
    whiskers = alt.Chart().mark_rule(strokeWidth=2).encode(
        y=y, yOffset=offset, x="change_low_pct:Q", x2="change_high_pct:Q", color=_strategy_color(shown=order))
    points = alt.Chart().mark_point(filled=True, size=60).encode(
        y=y, yOffset=offset, x=x, color=_strategy_color(shown=order),
        tooltip=["metric:N", "strategy:N", alt.Tooltip("change_pct:Q", format="+.2f", title="change (%)"),
                 alt.Tooltip("change_low_pct:Q", format="+.2f", title="90% low (%)"),
                 alt.Tooltip("change_high_pct:Q", format="+.2f", title="90% high (%)"),
                 alt.Tooltip("noise_pct:Q", format=".2f", title="resolves above (%)")])
    zero = alt.Chart().mark_rule(color="black").encode(x=alt.datum(0))
    return alt.layer(band, whiskers, points, zero, data=data).properties(
        width="container", height=SERVING_ROW_PX * max(len(order), 1) * max(len(metrics), 1) + 20)
