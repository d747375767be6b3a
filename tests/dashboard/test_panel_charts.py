"""Issue 18 (low list), AppTest: the top-k panel's crossover-by-k chart is a titled log-log Vega-Lite chart with the
fixed collective palette (it was st.line_chart: Streamlit's default palette, no axis titles), and the compare panel
shows one narrow table per profile."""

from __future__ import annotations

import json

from dashboard import charts
from tests.dashboard.test_app import run_app


def test_the_crossover_by_k_chart_has_titles_log_axes_and_the_fixed_palette():
    at = run_app({"topk": "1"})
    assert not at.get("arrow_line_chart")
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    (spec,) = [s for s in specs if s.get("encoding", {}).get("x", {}).get("field") == "top_k"]
    enc = spec["encoding"]
    assert enc["x"]["title"].startswith("top-k") and enc["y"]["title"].startswith("crossover batch")
    assert enc["x"]["scale"]["type"] == "log" and enc["y"]["scale"]["type"] == "log"
    assert enc["x"]["axis"]["values"] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    domain, colors = enc["color"]["scale"]["domain"], enc["color"]["scale"]["range"]
    assert colors == [charts.COLLECTIVE_COLORS[c] for c in domain] and "nccl" in domain


def test_the_compare_panel_shows_one_table_per_profile():
    at = run_app({"cmp": "b200-hgx-nvlink", "cmp_show": "1"})
    tables = [d.value for d in at.dataframe if list(d.value.columns) == [
        "strategy", "total_us", "saving_per_draft_call_us", "crossover_batch"]]
    assert len(tables) == 2 and all(len(t) == 5 for t in tables)
    assert any("b200" in m.value and "(derived)" in m.value for m in at.markdown)  # each table is headed
