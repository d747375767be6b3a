"""Issue 18 (low list): axis titles, fixed palettes, decade ticks with 1,000, "µs", legends without hidden series
and with more than their end values, and a compare table narrow enough for 800 px - on the chart specs."""

from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd
import pytest

from costmodel import BASELINE, STRATEGIES
from costmodel.answers.compare import compare_table
from costmodel.model.scenario import Scenario
from costmodel.profiles.store import load_profile
from dashboard import charts
from dashboard.tables import COMPARE_LABELS, compare_long_table


def _points() -> tuple[pd.DataFrame, pd.DataFrame]:
    sizes = 2.0 ** np.arange(3, 25, 3)  # 8 B .. 16 MiB per rank
    rows = [{"op": op, "world_size": 2, "nodes": 1, "mode": "eager", "bytes_per_rank": b,
             "measured_median_us": 20.0 + b / 1e3, "predicted_us": 21.0 + b / 1e3,
             "rel_error_pct": 100.0 / (20.0 + b / 1e3)} for op in ("all_gather", "gather") for b in sizes]
    points = pd.DataFrame(rows)
    return points, points.drop(columns=["measured_median_us"])


def _all_specs() -> list[dict]:
    points, curves = _points()
    heat = pd.DataFrame({"batch": [1, 2, 1, 2], "tp": [2, 2, 4, 4],
                         "saving_per_decode_step_us": [-3.0, 40.0, 900.0, 2500.0],
                         "saving_per_draft_call_us": [-1.0, 8.0, 180.0, 500.0], "saving_pct": [1.0] * 4,
                         "fastest_strategy": ["full_all_gather"] * 4})
    work = pd.DataFrame({"batch": [1, 8], "weight": [0.25, 0.75], "best": ["full_all_gather", "local_argmax_pairs"]})
    curve = pd.DataFrame({"top_k": [1, 2, 4, 1, 2, 4], "collective": ["nccl"] * 3 + ["oneshot"] * 3,
                          "crossover_batch": [3.0, 9.0, 40.0, 2.0, np.nan, 1200.0]})
    return [charts.calibration_chart(points, curves).to_dict(), charts.residual_chart(points).to_dict(),
            charts.heatmap(heat, "tp", "TP size").to_dict(), charts.workload_chart(work).to_dict(),
            charts.crossover_by_k_chart(curve)]


def _find(node, key):
    """Every value stored under `key` anywhere in a JSON tree."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            yield from _find(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _find(v, key)


def test_every_chart_says_microseconds_as_us_sign_and_has_axis_titles():
    for spec in _all_specs():
        text = json.dumps(spec, ensure_ascii=False)
        assert "(us)" not in text and " us " not in text, text[:200]
        for enc in _find(spec, "encoding"):
            for channel in ("x", "y"):
                if channel in enc and "field" in enc[channel] and "title" in enc[channel]:
                    assert enc[channel]["title"], (channel, enc[channel])


def test_log_axes_tick_at_every_decade_with_thousands():
    points, curves = _points()
    spec = charts.calibration_chart(points, curves).to_dict()
    enc = spec["spec"]["layer"][0]["encoding"]
    assert enc["x"]["axis"]["values"] == [10.0**k for k in range(0, 9)]  # 8 B .. 16.8 MB per rank: 1 .. 10^8
    assert enc["x"]["axis"]["format"] == ",.0f" and 1000.0 in enc["y"]["axis"]["values"]
    assert enc["y"]["title"] == "time (µs)"
    curve = pd.DataFrame({"top_k": [1, 2, 4], "collective": ["nccl"] * 3, "crossover_batch": [3.0, 90.0, 4000.0]})
    y = charts.crossover_by_k_chart(curve)["encoding"]["y"]
    assert y["axis"]["values"] == [1.0, 10.0, 100.0, 1000.0, 10000.0] and y["axis"]["format"] == ",.0f"


def test_ops_and_collectives_keep_fixed_colours():
    points, curves = _points()
    color = charts.calibration_chart(points, curves).to_dict()["spec"]["layer"][0]["encoding"]["color"]
    domain, colors = color["scale"]["domain"], color["scale"]["range"]
    assert colors[domain.index("all_gather")] == charts.COMPONENT_COLORS["all_gather"]
    assert colors[domain.index("gather")] == charts.COMPONENT_COLORS["gather"]
    assert color["legend"]["values"] == ["all_gather", "gather"]  # only the ops drawn
    curve = pd.DataFrame({"top_k": [1, 2], "collective": ["multimem", "nccl"], "crossover_batch": [3.0, 9.0]})
    c = charts.crossover_by_k_chart(curve)["encoding"]["color"]
    assert c["scale"]["range"] == [charts.COLLECTIVE_COLORS["multimem"], charts.COLLECTIVE_COLORS["nccl"]]


def test_heatmap_colour_legend_has_more_than_its_end_values():
    heat = pd.DataFrame({"batch": [1, 2], "tp": [2, 4], "saving_per_decode_step_us": [-30.0, 2500.0],
                         "saving_per_draft_call_us": [-6.0, 500.0], "saving_pct": [1.0, 2.0],
                         "fastest_strategy": ["a", "b"]})
    (legend,) = [c["legend"] for c in _find(charts.heatmap(heat, "tp", "TP").to_dict(), "color")
                 if isinstance(c, dict) and "legend" in c]
    assert legend["title"] == "saving / decode step (µs)"
    assert legend["values"] == [-2500.0, -1000.0, -100.0, -10.0, 0.0, 10.0, 100.0, 1000.0, 2500.0]
    assert charts.legend_ticks(50.0) == [-50.0, -10.0, 0.0, 10.0, 50.0]  # 0.8 bound: no 10 on top of a 12


def test_no_legend_entry_for_a_series_that_is_not_drawn():
    batches = [1.0, 2.0, 4.0]
    sweep = pd.DataFrame([{"batch": b, "strategy": s, "saving_per_decode_step_us": 0.0 if s == BASELINE else b - 2}
                          for s in STRATEGIES for b in batches])
    spec = charts.saving_chart(sweep)
    legends = [e["color"]["legend"] for e in _find(spec, "encoding") if e.get("color", {}).get("legend")]
    assert legends and all(BASELINE not in legend["values"] for legend in legends)
    assert legends[0]["values"] == [s for s in STRATEGIES if s != BASELINE]
    work = pd.DataFrame({"batch": [1, 8], "weight": [0.5, 0.5], "best": ["local_argmax_pairs"] * 2})
    (legend,) = [c["legend"] for c in _find(charts.workload_chart(work).to_dict(), "color")
                 if isinstance(c, dict) and c.get("legend")]
    assert legend["values"] == ["local_argmax_pairs"]


@pytest.mark.parametrize("i", range(5))
def test_the_specs_are_valid_vega_lite(i):
    spec = _all_specs()[i]
    if "mark" in spec:
        alt.Chart.from_dict(spec, validate=True)
    elif "facet" in spec:
        alt.FacetChart.from_dict(spec, validate=True)
    else:
        alt.LayerChart.from_dict(spec, validate=True)


def test_the_compare_table_is_long_and_narrow():
    """Before: seven columns headed e.g. 'saving_per_draft_call_us[b200-hgx-nvlink]', cut at 800 and 1440 px."""
    table = compare_table(Scenario(tp=8, batch=64, num_spec_tokens=5),
                          [load_profile("h200-sxm-nvlink"), load_profile("b200-hgx-nvlink")])
    long = compare_long_table(table)
    assert list(long.columns) == ["strategy", "profile", "total_us", "saving_per_draft_call_us",
                                  "crossover_batch"]
    assert len(long) == 2 * len(STRATEGIES)
    assert list(long["strategy"][::2]) == list(STRATEGIES)
    assert list(long["profile"][:2]) == ["h200-sxm-nvlink", "b200-hgx-nvlink"]
    row = table[(table.profile == "b200-hgx-nvlink") & (table.strategy == "local_argmax_pairs")].iloc[0]
    got = long[(long.profile == "b200-hgx-nvlink") & (long.strategy == "local_argmax_pairs")].iloc[0]
    assert got["total_us"] == row["total_us"] and got["crossover_batch"] == row["crossover_batch"]
    assert max(len(label) for label in COMPARE_LABELS.values()) <= 15  # the headers of the per-profile tables


def test_heatmap_cell_numbers_only_where_the_cells_are_wide_enough():
    heat = pd.DataFrame({"batch": list(range(1, 17)) * 2, "tp": [2] * 16 + [4] * 16,
                         "saving_per_decode_step_us": np.linspace(-50, 3000, 32),
                         "saving_per_draft_call_us": np.linspace(-10, 600, 32), "saving_pct": [1.0] * 32,
                         "fastest_strategy": ["a"] * 32})
    spec = charts.heatmap(heat, "tp", "TP").to_dict()
    (text,) = [layer for layer in spec["layer"] if (layer["mark"]["type"] if isinstance(layer["mark"], dict)
                                                     else layer["mark"]) == "text"]
    opacity = text["encoding"]["opacity"]
    assert opacity["condition"]["test"] == f"width / 16 >= {charts.HEAT_TEXT_MIN_CELL_PX}"
    assert opacity["condition"]["value"] == 1.0 and opacity["value"] == 0.0
    alt.LayerChart.from_dict(spec, validate=True)


def test_sweep_time_axis_ticks_every_decade_and_end_labels_do_not_overlap():
    batches = [1.0, 16.0, 1024.0]
    times = {"full_all_gather": [30.0, 300.0, 5000.0], "full_all_gather_no_relayout": [29.0, 280.0, 4900.0],
             "gather_to_rank0": [31.0, 310.0, 4950.0], "local_argmax_pairs": [40.0, 45.0, 60.0],
             "packed_allreduce_max": [40.5, 45.5, 60.5]}
    sweep = pd.DataFrame([{"batch": b, "strategy": s, "total_us": t, "saving_per_draft_call_us": 0.0,
                           "saving_pct": 0.0} for s, ts in times.items() for b, t in zip(batches, ts)])
    spec = charts.sweep_chart(sweep, None)
    y = spec["layer"][0]["encoding"]["y"]
    assert y["axis"]["values"] == [10.0, 100.0, 1000.0, 10000.0] and y["axis"]["format"] == ",.0f"
    labels = spec["layer"][-1]["data"]["values"]
    assert {r["strategy"] for r in labels} == set(STRATEGIES)
    ys = np.log10(sorted(r["label_y"] for r in labels))  # the axis spans 1..4 decades over the plot's height
    gap_px = np.diff(ys) * charts.LABEL_PLOT_PX[0] / (4.0 - 1.0)
    assert gap_px.min() >= 16.0 - 1e-9  # 4,900 / 4,950 / 5,000 and 60 / 60.5 would otherwise sit on each other
