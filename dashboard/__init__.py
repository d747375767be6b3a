"""Streamlit dashboard helpers: everything app.py needs except the widgets themselves.

Modules (one concept each):
    state    - the dashboard inputs, query parameters <-> widget state
    uploads  - parse an uploaded profile JSON / measurement CSV / nccl-tests log (never executed)
    data     - cached computations, all delegated to `costmodel` (incl. the bootstrap intervals)
    fidelity - validation against data/reference, sensitivity (elasticities), explanation text
    tables   - the tidy tables behind every view (and their CSV bytes), the verdict summary
    charts   - Altair charts with one colour per strategy
    views    - the Streamlit rendering of each tab
    placement - the draft placement panel (costmodel.answers.placement: table and chart over batch)
    layout   - page CSS for narrow windows (tiles and tabs wrap)
    sources_panel - the header's provenance badge, GPU-mismatch badge, sources line and its warnings

Nothing here imports torch.
"""

from costmodel.profiles.store import DATA_DIR

# the folder holding data/: the repository root, or site-packages/costmodel when installed
REPO_ROOT = DATA_DIR.parent
