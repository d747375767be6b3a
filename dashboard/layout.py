"""Page CSS for narrow windows (issue 18: at 800 px the verdict tiles cut their numbers, "+1…", and the
Recommendation tab hid behind the tab bar's scroll). A constant of this module, never user text: rows of columns
in the main area wrap below MIN_COLUMN_PX per column (the four verdict tiles become 2 x 2), metric values are
never cut with an ellipsis, and the tab bar wraps so every tab is visible. The sidebar's own columns are left as
they are (TP / nodes side by side)."""

from __future__ import annotations

import streamlit as st

MIN_COLUMN_PX = 190  # a verdict tile's label and a "+1,234 µs" value at Streamlit's metric font fit in this

CSS = f"""<style>
[data-testid="stMain"] [data-testid="stHorizontalBlock"] {{ flex-wrap: wrap; }}
[data-testid="stMain"] [data-testid="stHorizontalBlock"] > [data-testid="stColumn"] {{
  min-width: {MIN_COLUMN_PX}px; }}
[data-testid="stMetricValue"] > div, [data-testid="stMetricValue"] p,
[data-testid="stMetricDelta"] > div, [data-testid="stMetricDelta"] p {{
  white-space: normal; overflow: visible; text-overflow: clip; overflow-wrap: break-word; }}
[data-testid="stMetricDelta"] {{ height: auto; max-width: 100%; }}
[data-testid="stMetricLabel"] p {{ white-space: normal; }}
[data-testid="stMain"] [role="tablist"] {{ flex-wrap: wrap; overflow-x: visible; }}
</style>"""


def apply_layout() -> None:
    """Add CSS (a style-only st.html goes to the event container: no space on the page)."""
    st.html(CSS)
