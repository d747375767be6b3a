"""The draft placement panel: where should the draft run (target TP, TP 1, data-parallel, draft TP N)?

An expander under the verdict (off by default): the draft architecture (the preset's, editable), the placement
table at the chosen batch (whole draft step, components, memory, engine support) and a chart of the whole draft
step (us per decode step) per placement over the batch range. Every number comes from `costmodel.answers.placement`;
nothing is modelled here.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from costmodel import InputError
from costmodel.answers.placement import placement_sweep, placement_table
from costmodel.io.plain import markdown_text as plain
from costmodel.model.drafter import DraftArch
from costmodel.profiles.presets import preset_draft

from .state import in_dashboard_words
from .tables import micro

ARCH_FIELDS = (("layers", "Draft layers"), ("hidden", "Draft hidden"), ("heads", "Heads"),
               ("kv_heads", "KV heads"), ("head_dim", "Head dim"), ("intermediate", "Intermediate"))


def _default_arch(ev: Any) -> dict[str, Any]:
    try:
        fields = preset_draft(ev.inputs.preset)
    except InputError:  # custom model: a one-layer draft of the hidden size (Llama-style shapes)
        h = int(ev.inputs.hidden)
        fields = {"layers": 1, "hidden": h, "heads": max(h // 128, 1), "kv_heads": 8, "head_dim": 128,
                  "intermediate": 4 * h}
    return {**fields, "vocab": int(ev.inputs.draft_vocab)}


@st.cache_data(max_entries=32, show_spinner=False)
def _table(_profile: Any, profile_key: tuple, spec: Any, batch: float, arch: DraftArch, kv_len: int,
           forward_us: float | None) -> dict[str, Any]:
    return placement_table(spec.scenario(batch), _profile, arch, kv_len=kv_len, forward_us=forward_us)


@st.cache_data(max_entries=32, show_spinner=False)
def _sweep(_profile: Any, profile_key: tuple, spec: Any, batches: tuple, arch: DraftArch, kv_len: int,
           forward_us: float | None) -> pd.DataFrame:
    return pd.DataFrame(placement_sweep(spec.scenario(1.0), _profile, arch, batches, kv_len=kv_len,
                                        forward_us=forward_us))


def table_frame(table: dict[str, Any]) -> pd.DataFrame:
    """The placement table as a frame (one row per placement)."""
    rows = []
    for r in table["rows"]:
        c, m = r["components_us"], r["memory"]
        rows.append({"placement": r["placement"], "draft TP": r["draft_tp"], "whole draft step us":
                     r["whole_draft_step_us"],
                     "forward us": c["drafter_forward"], "all-reduces us": c["of_which_all_reduces"],
                     "lm_head us": c["lm_head"], "logits us": c["logits_path"], "gather us": c["token_all_gather"],
                     "extra GB/GPU": m["extra_weight_bytes_per_gpu"] / 1e9,
                     "KV MB/seq": m["kv_bytes_per_sequence"] / 1e6, "best strategy": r["best_strategy"],
                     "fits": r["fits"] is None, "engine": r["engine"].split(":")[0]})
    return pd.DataFrame(rows)


def placement_panel(ev: Any) -> None:
    """The expander (app.py)."""
    with st.expander("Draft placement: target TP, TP 1, data-parallel, draft TP N"):
        if not st.toggle("Price the draft placements", key="placement_show"):
            st.caption("The whole draft step (drafter forward, lm_head, logits path, K calls pipelined as the "
                       "engine runs them) per placement, with the draft's memory per GPU.")
            return
        base = _default_arch(ev)
        cols = st.columns(len(ARCH_FIELDS))
        fields = {k: int(col.number_input(label, min_value=1, value=int(base[k]), step=1, key=f"placement_{k}"))
                  for col, (k, label) in zip(cols, ARCH_FIELDS)}
        c1, c2 = st.columns(2)
        kv_len = int(c1.number_input("KV length (tokens)", min_value=1, value=2048, step=256, key="placement_kv"))
        fwd = c2.number_input("Measured forward (µs per draft call, optional)", min_value=0.0, value=None,
                              key="placement_forward_us", placeholder="derived")
        key = (ev.inputs.profile, len(ev.profile_text), hash(ev.profile_text))
        try:
            arch = DraftArch.from_fields({**base, **fields})
            table = _table(ev.profile, key, ev.inputs.spec, float(ev.inputs.batch), arch, kv_len,
                           None if not fwd else float(fwd))
            lo, hi = ev.inputs.batch_min, ev.inputs.batch_max
            batches = tuple(np.unique(np.round(np.geomspace(lo, hi, 16))).tolist())
            sweep = _sweep(ev.profile, key, ev.inputs.spec, batches, arch, kv_len, None if not fwd else float(fwd))
        except (InputError, ValueError) as exc:
            st.error(plain(in_dashboard_words(str(exc))))
            return
        st.caption(plain(micro(f"Drafter forward (context, common to every strategy): "
                               f"{table['drafter_forward_us']:.1f} us per draft call at the target's TP - "
                               f"{table['drafter_forward_source']}.")))
        frame = table_frame(table).round(2)
        st.dataframe(frame, width="stretch", hide_index=True,  # headers "whole draft step µs", ... (the page's unit)
                     column_config={c: st.column_config.Column(micro(c)) for c in frame.columns if micro(c) != c})
        chart = alt.Chart(sweep).mark_line(point=True).encode(
            x=alt.X("batch:Q", scale=alt.Scale(type="log"), title="batch (sequences)"),
            y=alt.Y("whole_draft_step_us:Q", title="best strategy's whole draft step (µs)"),
            color="placement:N",
            tooltip=["placement", "batch", alt.Tooltip("whole_draft_step_us:Q", title="whole draft step (µs)"),
                     "best_strategy"])
        st.altair_chart(chart, width="stretch")
        st.caption("Engines: vLLM runs the draft at the target's TP only (draft_tensor_parallel_size=1 is ignored "
                   "by the EAGLE proposer), SGLang and TensorRT-LLM likewise; see docs/placement.md.")
