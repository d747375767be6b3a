"""Issue 35 (section 6), without a browser: the page spells microseconds one way ("µs"), and the batch-sweep charts
declare one legend for the strategy colour (test_browser_polish checks the console of the real page)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from google.protobuf.json_format import MessageToDict
from streamlit.testing.v1 import AppTest

from costmodel import BASELINE, STRATEGIES
from costmodel.io.plain import WORD_JOINER
from dashboard import charts, state
from dashboard.tables import micro

APP = str(Path(__file__).resolve().parents[2] / "app.py")
US = re.compile(r"(?<![\w\-/.])us(?![\w-])")  # the unit "us" as a word: not `saving_us`, `status`, a path
NOT_SHOWN = {"id", "formId", "arrowData", "datasets", "data", "widgetId", "spec", "columns", "key"}


def _strings(node, out: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key not in NOT_SHOWN:
                _strings(value, out)
    elif isinstance(node, list):
        for value in node:
            _strings(value, out)
    elif isinstance(node, str):
        out.append(node)


def _titles(node, out: list[str]) -> None:
    """Every title of a Vega-Lite spec (axes, legends, tooltips), not its data."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                out.append(value)
            elif key not in ("data", "datasets"):
                _titles(value, out)
    elif isinstance(node, list):
        for value in node:
            _titles(value, out)


def verbatim(node, tab: str) -> bool:
    """What the page shows verbatim from elsewhere, in its own spelling: the CLI's `explain` output (a code block),
    the CLI's RECOMMENDATION sentence (issue 35's parity: the decision box is that sentence, test_parity), and a
    profile's own citations (its data)."""
    kind = type(node).__name__
    if kind == "Code":
        return True
    if kind == "Expander" and str(node.label).startswith("Citations"):
        return True
    return tab == "Recommendation" and kind in ("Success", "Warning", "Info") and "expected saving" in node.value


def shown_texts(at: AppTest, tab: str) -> list[str]:
    """The text of every element on the page: markdown, captions, alerts, metric labels / values / deltas / help,
    widget labels, options and help, table headers as shown (column_config labels), chart titles."""
    out: list[str] = []

    def walk(node) -> None:
        if verbatim(node, tab):
            return
        proto = getattr(node, "proto", None)
        if proto is not None:
            fields = MessageToDict(proto)
            _strings(fields, out)
            if "spec" in fields:
                _titles(json.loads(fields["spec"]), out)
            if type(node).__name__ == "Dataframe":
                config = json.loads(proto.columns or "{}")
                out.extend(str((config.get(str(c)) or {}).get("label", c)) for c in node.value.columns)
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            for child in children.values():
                walk(child)

    walk(at._tree)
    return [t.replace(WORD_JOINER, "").replace("\\", "") for t in out]


@pytest.mark.parametrize("tab", state.TABS)
def test_the_page_spells_microseconds_as_us_sign_only(tab):
    """Before: "us" next to "µs" - the draft placement table's headers ("draft step us"), its input, caption and y
    title, the sweep tab's "Shown: ... us per draft call" caption and the measured-table quirk lines. Every tab with
    the panels under the verdict open (top-k matrix, placement, compare) and the Impact inputs set."""
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in {"tab": tab, "itl": "12.5", "accept": "3.2", "topk": "1", "cmp_show": "1"}.items():
        at.query_params[key] = value
    at.session_state["placement_show"] = True
    at.run()
    assert not at.exception, at.exception
    texts = shown_texts(at, tab)
    assert any("µs" in t for t in texts)
    assert [t[:160] for t in texts if US.search(t)] == []


def test_micro_spells_the_unit_only():
    assert micro("26.7 us but 32 x 16,000 = 6.5 us (us per draft call), us.") == \
        "26.7 µs but 32 x 16,000 = 6.5 µs (µs per draft call), µs."
    kept = "saving_us status bus us_per_call data/us.csv campus -us"
    assert micro(kept) == kept


def _legends(spec: dict) -> list[tuple[str, object]]:
    """(channel, legend) of every strategy-keyed encoding channel in a layered spec that declares a legend."""
    found = []

    def walk(node) -> None:
        if isinstance(node, dict):
            encoding = node.get("encoding")
            if isinstance(encoding, dict):
                for channel, enc in encoding.items():
                    if isinstance(enc, dict) and enc.get("field") == "strategy" and "legend" in enc:
                        found.append((channel, enc["legend"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return found


@pytest.mark.parametrize("name", ["sweep_chart", "saving_chart"])
def test_the_sweep_charts_declare_one_legend_for_the_strategies(name):
    """Vega-Lite merges the legends of every channel whose scale has the strategies' domain (colour, dash, width,
    in every layer): a `legend: null` next to the lines' legend was 'Conflicting legend property "disable"' in the
    browser console. Every declaration is now the same legend."""
    rows = [{"batch": b, "strategy": s, "total_us": 10.0 * b + i,
             "saving_per_draft_call_us": 0.0 if s == BASELINE else b - 2.0, "saving_pct": 1.0,
             "saving_per_decode_step_us": 0.0 if s == BASELINE else 3.0 * (b - 2.0)}
            for i, s in enumerate(STRATEGIES) for b in (1.0, 4.0, 64.0)]
    spec = getattr(charts, name)(pd.DataFrame(rows), 3.5, (2.0, 5.0))
    legends = _legends(spec)
    assert legends and all(legend is not None for _, legend in legends), legends
    assert len({json.dumps(legend, sort_keys=True) for _, legend in legends}) == 1, legends
