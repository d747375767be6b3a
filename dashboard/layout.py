"""Page CSS for narrow windows (issue 18: at 800 px the verdict tiles cut their numbers, "+1…", and the
Recommendation tab hid behind the tab bar's scroll). A constant of this module, never user text: rows of columns
in the main area wrap below MIN_COLUMN_PX per column (the four verdict tiles become 2 x 2), metric values and deltas
are never cut with an ellipsis but wrap inside their tile (issue 35: "identical at TP 1 (nothing to gather)" ran over
the next tile), the tab bar wraps so every tab is visible, and a table wider than the page shows its scrollbar. The
sidebar's own columns are left as they are (TP / nodes side by side)."""

from __future__ import annotations

import streamlit as st

# a table's scrollbar thumb, always drawn: Streamlit's theme makes every scrollbar transparent until hovered, so a table
# wider than the page (the Breakdown tab's verdict table at 1440 px) showed no sign of its columns on the right
SCROLLBAR_THUMB = "rgba(128, 128, 128, 0.6)"  # a mid grey, visible on the light and the dark theme
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
[data-testid="stDataFrame"] .dvn-scroller {{ scrollbar-color: {SCROLLBAR_THUMB} transparent; }}
</style>"""


def apply_layout() -> None:
    """Add CSS (a style-only st.html goes to the event container: no space on the page)."""
    st.html(CSS)
