"""Top-k drafting / greedy verification / collective implementations: the strategy x collective matrix.

Off by default (a toggle): when on, prices every strategy under every collective implementation at the chosen
batch (`costmodel.model.verification.matrix`, per decode step, with verification when asked), names the best
(strategy, collective) pair, offers the matrix as CSV and draws the local_argmax_pairs crossover batch as a
function of k. No modelling here: every number comes from costmodel. oneshot / multimem are derived from
published figures (costmodel/model/collective_impls.py) unless the profile has their measured curves (the captions say).
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import streamlit as st

from costmodel import InputError
from costmodel.answers.answer import LOGITS_PATH_PAIR
from costmodel.answers.point import engine_best_pair
from costmodel.answers.topk import crossover_by_k, topk_matrix
from costmodel.io.formatting import format_us
from costmodel.io.plain import markdown_text as plain
from costmodel.io.safe_io import write_csv
from costmodel.model.collective_impls import IMPLS, provenance_text

from .charts import crossover_by_k_chart
from .state import in_dashboard_words

BEST = "best available"
COLLECTIVE_CHOICES = (BEST, *IMPLS)


@st.cache_data(max_entries=32, show_spinner=False)
def _matrix(_profile: Any, profile_key: tuple, spec: Any, batch: float, top_k: int, verify: bool,
            fraction: float, with_crossovers: bool = True) -> pd.DataFrame:
    """costmodel.answers.topk.topk_matrix, cached per (profile text, scenario, k, verification)."""
    return topk_matrix(spec.scenario(batch), _profile, top_k, verify=verify, greedy_fraction=fraction,
                       crossovers=with_crossovers)


@st.cache_data(max_entries=32, show_spinner=False)
def _crossover_by_k(_profile: Any, profile_key: tuple, spec: Any, batch: float, collectives: tuple) -> pd.DataFrame:
    """costmodel.answers.topk.crossover_by_k, cached."""
    return crossover_by_k(spec.scenario(batch), _profile, collectives)


def best_pair_caption(ev: Any) -> str | None:
    """One line for the main verdict: the best (strategy, collective) pair at the chosen batch, per decode step.
    Uses the panel's top-k / verification choices when the matrix is shown, else top-k 1 without verification;
    None when the scenario cannot be priced as a matrix."""
    shown = bool(st.session_state.get("topk_show"))
    k = int(st.session_state.get("topk_k", 1)) if shown else 1
    verify = bool(st.session_state.get("topk_verify", False)) if shown else False
    fraction = float(st.session_state.get("topk_fraction", 1.0)) if verify else 1.0
    key = (ev.inputs.profile, len(ev.profile_text), hash(ev.profile_text))
    try:
        sc0 = ev.inputs.spec.scenario(float(ev.inputs.batch))
        table = _matrix(ev.profile, key, ev.inputs.spec, float(ev.inputs.batch), k, verify, fraction,
                        with_crossovers=False)  # the pair needs no crossover search
        best = engine_best_pair(table, ev.inputs.engine, k)
    except (InputError, ValueError):
        return None
    derived = "" if best["collective"] == "nccl" else (
        f" - the headline above ranks the strategies with NCCL collectives only; {best['collective']}'s parameters "
        f"are {provenance_text(ev.profile, (best['collective'],), int(sc0.tp), int(sc0.nodes))}")
    fallback = "" if best["native"] else ", some collectives fall back to NCCL"
    cannot = f" Not runnable under this engine: {best['engine_cannot']}." if best.get("engine_cannot") else ""
    quantity = f" - {LOGITS_PATH_PAIR}, not the whole draft step of the tiles" if ev.whole_step else ""
    return (f"Best (strategy, collective) over every collective implementation, per decode step at batch "
            f"{ev.inputs.batch}, top-k {k}{' with greedy verification' if verify else ''}: "
            f"({best['strategy']}, {best['collective']}) {format_us(best['decode_step_us'])}, "
            f"{format_us(best['saving_vs_nccl_baseline_us'], sign=True)} vs (full_all_gather, nccl)"
            f"{quantity}{fallback}{derived}.{cannot}")


def topk_panel(ev: Any) -> None:
    """The expander under the verdict (app.py)."""
    with st.expander("Top-k drafting, greedy verification and collective implementations"):
        if not st.toggle("Show the strategy x collective matrix", key="topk_show"):
            st.caption("Prices every strategy under NCCL, one-shot (symmetric memory) and multimem (NVLS) "
                       "collectives, with top-k candidates and target-side greedy verification.")
            return
        c1, c2, c3, c4 = st.columns(4)
        k = int(c1.number_input("Top-k", min_value=1, max_value=4096, value=1, step=1, key="topk_k"))
        chosen = c2.selectbox("Collective", COLLECTIVE_CHOICES, key="topk_collective")
        verify = c3.toggle("Greedy verification", key="topk_verify",
                           help="B x (K + 1) target rows per decode step over the target vocab")
        fraction = float(c4.slider("Greedy fraction", 0.0, 1.0, 1.0, 0.05, key="topk_fraction",
                                   disabled=not verify))
        key = (ev.inputs.profile, len(ev.profile_text), hash(ev.profile_text))
        try:
            sc0 = ev.inputs.spec.scenario(float(ev.inputs.batch))
            table = _matrix(ev.profile, key, ev.inputs.spec, float(ev.inputs.batch), k, verify, fraction)
            shown = table if chosen == BEST else table[table.collective == chosen]
            best = engine_best_pair(shown, ev.inputs.engine, k)
            curve = _crossover_by_k(ev.profile, key, ev.inputs.spec, float(ev.inputs.batch),
                                    IMPLS if chosen == BEST else (chosen,))
        except (InputError, ValueError) as exc:
            st.error(plain(in_dashboard_words(str(exc))))
            return
        fallback = "" if best["native"] else " (some of its collectives fall back to NCCL)"
        st.success(plain(f"Best (strategy, collective) at batch {ev.inputs.batch}, top-k {k}: "
                         f"({best['strategy']}, {best['collective']}) {format_us(best['decode_step_us'])} per "
                         f"decode step, {format_us(best['saving_vs_nccl_baseline_us'], sign=True)} vs "
                         "(full_all_gather, nccl)"
                         f"{fallback}."
                         + (f" Not runnable under this engine: {best['engine_cannot']}."
                            if best.get("engine_cannot") else "")))
        pivot = shown.pivot(index="strategy", columns="collective", values="decode_step_us")
        st.dataframe(pivot.round(1), width="stretch")
        invalid = sorted(set(shown.strategy[~shown.valid]))
        st.caption(plain("µs per decode step (draft x calls" + (" + verification" if verify else "") + "). "
                         "oneshot / multimem: " + provenance_text(ev.profile, IMPLS, int(sc0.tp), int(sc0.nodes))
                         + "; "
                         "unavailable ones fall back to NCCL." + (f" Not exact here: {', '.join(invalid)}."
                                                                   if invalid else "")))
        buf = io.StringIO()
        write_csv(table, buf)
        st.download_button("Matrix CSV", buf.getvalue(), "strategy_collective_matrix.csv", "text/csv",
                           key="topk_matrix_csv")
        if not curve.empty:
            st.caption("local_argmax_pairs crossover batch by top-k (none: no crossover in range)")
            st.vega_lite_chart(spec=crossover_by_k_chart(curve), width="stretch")
            buf = io.StringIO()
            write_csv(curve, buf)
            st.download_button("Crossover by k CSV", buf.getvalue(), "crossover_by_k.csv", "text/csv",
                               key="topk_crossover_csv")
