"""Compare profiles: the chosen scenario's savings and crossover on the current profile and a second one side by
side (e.g. H100 vs B200, or a derived profile vs your calibration), with a CSV. No modelling here: every number
comes from costmodel.answers.compare (each profile prices the scenario as predict does)."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import streamlit as st

from costmodel import InputError
from costmodel.answers.compare import bundled_family, compare_table, profiles_by_family, whole_step_is_the_answer
from costmodel.io.plain import markdown_text as plain
from costmodel.io.safe_io import write_csv
from costmodel.model.fabrics import profile_on_fabric
from costmodel.profiles.families import family_vendor
from costmodel.profiles.store import bundled_profiles, load_profile

from .data import text_fabric
from .question import sidebar_arch
from .state import in_dashboard_words
from .tables import COMPARE_LABELS, compare_long_table, display


def profile_label(name: str) -> str:
    """'NVIDIA Blackwell · b200-hgx-nvlink' for a bundled profile (the picker groups by vendor and GPU family);
    uploads unchanged."""
    if name not in bundled_profiles():  # an upload's label: never looked up as a path
        return name
    family = bundled_family(name)
    return f"{family_vendor(family)} {family} · {name}"


@st.cache_data(max_entries=32, show_spinner=False)
def _table(_profile: Any, profile_key: tuple, other: str, spec: Any, batch: float, preset: str,
           fabric: str | None = None) -> pd.DataFrame:
    """compare_table of the sidebar scenario (the whole draft step where an engine runs it, priced with the
    preset's draft as the verdict), both profiles over the sidebar's fabric."""
    sc = spec.scenario(batch)
    second = load_profile(other) if fabric is None else profile_on_fabric(load_profile(other), fabric)
    return compare_table(sc, [_profile, second], arch=sidebar_arch(preset, int(sc.draft_vocab), spec.hidden))


def compare_panel(ev: Any) -> None:
    """The expander under the verdict (app.py)."""
    with st.expander("Compare profiles"):
        names = [n for _, n in profiles_by_family()]
        others = [n for n in names if n != ev.profile.name] or names
        if st.session_state.get("compare_with") not in (None, *others):  # a link's choice that is now the profile
            del st.session_state["compare_with"]
        other = st.selectbox("Compare with", others, key="compare_with", format_func=profile_label,
                             index=others.index("b200-hgx-nvlink") if "b200-hgx-nvlink" in others else 0)
        if not st.toggle("Show the side-by-side table", key="compare_show"):
            st.caption("Prices this scenario (TP, batch, vocab, K, dtype, engine) on both profiles: time, saving "
                       "versus full_all_gather and crossover batch per strategy (the whole draft step per decode "
                       "step where an engine runs it, else per draft call).")
            return
        fabric = text_fabric(ev.profile_text)
        key = (ev.inputs.profile, len(ev.profile_text), hash(ev.profile_text), fabric)
        try:
            table = _table(ev.profile, key, other, ev.inputs.spec, float(ev.inputs.batch), ev.inputs.preset, fabric)
        except (InputError, ValueError) as exc:
            st.error(plain(in_dashboard_words(str(exc))))
            return
        shown = compare_long_table(table)  # one narrow table per profile: nothing cut at 800 or 1440 px
        kinds_of = dict(zip(table["profile"], table["kind"]))
        for name in dict.fromkeys(shown["profile"]):
            st.markdown(f"**{plain(name)}** ({plain(kinds_of[name])})")
            part = shown[shown["profile"] == name].drop(columns=["profile"]).reset_index(drop=True)
            st.dataframe(display(part), width="stretch", hide_index=True,
                         column_config={c: st.column_config.Column(COMPARE_LABELS[c]) for c in part.columns})
        kinds = ", ".join(f"{n}: {k}" for n, k in dict(zip(table["profile"], table["kind"])).items())
        per = ("per decode step (the whole draft step: the K draft calls as the engine composes them)"
               if whole_step_is_the_answer(table) else "per draft call (the logits path alone)")
        st.caption(plain(f"time and saving (vs full_all_gather) in µs {per} at batch {ev.inputs.batch}; "
                         "crossover batch = the batch where the saving "
                         f"changes sign (empty: none in 1..65536). Kinds: {kinds} (derived = public figures, "
                         "not measured)."))
        buf = io.StringIO()
        write_csv(table, buf)
        st.download_button("Compare CSV", buf.getvalue(), "compare_profiles.csv", "text/csv", key="compare_csv")
