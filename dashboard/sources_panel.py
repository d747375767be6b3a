"""Where the numbers come from, in the header: the provenance badge, a warning badge when a fitted profile mixes two
GPUs, the CLI's `sources:` line and its warnings (costmodel.answers.provenance words them for every surface), and
the measured-table quirks the scenario is priced from (costmodel.answers.table_quirks, as `predict`'s notes)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from costmodel import Profile
from costmodel.answers.provenance import gpu_mismatch, scenario_source_lines
from costmodel.answers.table_quirks import scenario_quirks
from costmodel.io.plain import markdown_text as plain

from .tables import micro
from .verdict import Evaluation, provenance_line


def provenance_badge(profile: Profile) -> None:
    """The kind badge and title; a red "another GPU's base" badge when `answers.provenance.gpu_mismatch` says so."""
    color, sentence = provenance_line(profile)
    st.markdown(f":{color}-badge[{profile.provenance.kind}] **{plain(profile.title)}** - {plain(sentence)}")
    mismatch = gpu_mismatch(profile)
    if mismatch is not None:
        st.markdown(f":red-badge[:material/warning: another GPU's base] {plain(mismatch)}")


def sources_caption(ev: Evaluation) -> None:
    """`predict`'s sources line as a caption and each of its warnings as a warning box, for this scenario."""
    lines = scenario_source_lines(ev.profile, ev.inputs.spec.scenario(float(ev.inputs.batch)))
    for line in map(micro, lines):  # the CLI's words, in the page's "µs"
        if line.startswith("warning: "):
            st.warning(plain(line.removeprefix("warning: ")))
        else:
            st.caption(plain(line))
    quirks = scenario_quirks(ev.profile, ev.inputs.spec.scenario(float(ev.inputs.batch)))
    if quirks:
        st.warning(plain(micro(f"Priced from a non-monotone measured table at batch {ev.inputs.batch:,}: "
                               + "; ".join(quirks) + ".")))


def range_quirks_caption(ev: Evaluation) -> None:
    """The measured-table quirks any batch of the charts' range is priced from (a jump in the curves there)."""
    batches = np.arange(ev.inputs.batch_min, ev.inputs.batch_max + 1, dtype=float)
    quirks = scenario_quirks(ev.profile, ev.inputs.spec.scenario(batches))
    if quirks:
        st.caption(plain(micro(f"Curves that jump near a measured-table node: {len(quirks)} non-monotone measured "
                               "table node(s) price batches in this range - " + "; ".join(quirks) + ".")))
