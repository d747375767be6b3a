"""The Serving A/B tab: `simulate --bench RUN.json` for the sidebar's question (costmodel.serving.table,
the CLI's reader, bounds and `simulate_ab`): the A/B table, each metric's predicted change against the run's noise
band, and the table as CSV. Layout only; an uploaded file is parsed as strict JSON, never executed or rendered."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import lru_cache
from typing import Any

import pandas as pd
import streamlit as st

from costmodel import InputError
from costmodel.io.plain import markdown_text as plain
from costmodel.serving.ab import SimConfig
from costmodel.serving.limits import MAX_BATCHED_TOKENS, MAX_NUM_SEQS
from costmodel.serving.run import parse_bench_text
from costmodel.serving.table import (
    CLI_CONFIG,
    ab_rows,
    bench_text,
    change_rows,
    noise_line,
    setup_lines,
    simulate_bench,
)

from .data import _CACHE, example_benches
from .question import question_of
from .state import Inputs, ScenarioSpec, in_dashboard_words
from .tables import micro
from .verdict import Evaluation
from .views import ON_PAGE, FilePicker, chart, download, pick_file, show_table

BENCH_TYPES = ("json",)


@lru_cache(maxsize=64)
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@st.cache_data(**_CACHE)
def _simulated(profile_text: str, spec: ScenarioSpec, batch: int, preset: str, itl_ms: float | None,
               acceptance_length: float | None, name: str, digest: str, config: SimConfig, _inputs: Inputs,
               _text: str) -> dict[str, Any]:
    """`simulate_bench` keyed by plain values (the bench text by its digest; `_inputs` and `_text` are what the
    other arguments name)."""
    return simulate_bench(_text, name, question_of(profile_text, _inputs), config)


def serving_ab(profile_text: str, inputs: Inputs, name: str, text: str,
               config: SimConfig = CLI_CONFIG) -> dict[str, Any]:
    """The A/B dict `simulate --bench name --json` prints for the sidebar's question (before its NaN -> null);
    `config`: the tab's max_num_seqs / max_num_batched_tokens inputs (None: inferred from the run / vLLM's)."""
    return _simulated(profile_text, inputs.spec, int(inputs.batch), inputs.preset, inputs.itl_ms,
                      inputs.acceptance_length, name, _digest(text), config, inputs, text)


def _engine_inputs() -> SimConfig:
    """The tab's two engine inputs, as simulate's --max-num-seqs / --max-num-batched-tokens (blank: the run's
    inferred cap, else vLLM's default; the same bounds as the flags)."""
    left, right = st.columns(2)
    seqs = left.number_input("max_num_seqs (blank: inferred from the run)", min_value=1, max_value=MAX_NUM_SEQS,
                             value=None, step=1, key="serving_max_num_seqs")
    tokens = right.number_input("max_num_batched_tokens (blank: vLLM's default)", min_value=1,
                                max_value=MAX_BATCHED_TOKENS, value=None, step=256, key="serving_max_batched_tokens")
    return replace(CLI_CONFIG, max_num_seqs=None if seqs is None else int(seqs),
                   max_batched_tokens=None if tokens is None else int(tokens))


def _bench_text(data: bytes, name: str) -> str:
    text = bench_text(data, name)  # the reader's size limit, UTF-8
    parse_bench_text(text, name)
    return text


BENCH_PICKER = FilePicker("bench", "Bench run", "...or upload a `vllm bench serve --save-result` JSON", BENCH_TYPES,
                          _bench_text, "No bench run: upload one.")


def serving_tab(ev: Evaluation) -> None:
    st.markdown("**Serving A/B**: replay a `vllm bench serve --save-result` run per strategy the engine can run "
                "(what `python -m costmodel simulate --bench RUN.json` prints): each metric's predicted value with its "
                "90% interval, its change against the replay of the strategy the run ran (the engine's default), and "
                "whether one A/B run of this size can see it. Priced with the sidebar's profile and scenario; the "
                "acceptance length comes from the run (else the sidebar's).")
    picked = pick_file(BENCH_PICKER, example_benches())
    if picked is None:
        return
    name, text = picked
    config = _engine_inputs()
    try:
        with st.spinner("replaying the run per strategy"):
            ab = serving_ab(ev.profile_text, ev.inputs, name, text, config)
    except InputError as exc:
        st.error(plain(in_dashboard_words(str(exc))))
        return
    st.caption(plain(micro(". ".join(setup_lines(ab)) + ".")))
    table = pd.DataFrame(ab_rows(ab))
    st.markdown(f"**A/B table** (measured: the run's own metric; value and 90% interval: the replay; change: vs the "
                f"{ab['reference']} replay - the strategy the run ran -, seed by seed)")
    show_table(table, column_order=ON_PAGE["serving_ab"])  # the change's interval and noise: the CSV, the text below
    download(table, "serving_ab", ev=ev)
    det = ab["detectable"]
    st.markdown(f"**Predicted change per metric** (points; whiskers: the 90% interval; grey: the noise band, the "
                f"change one A/B of {det['requests']} requests resolves)")
    chart("serving_change_chart", pd.DataFrame(change_rows(ab)))  # its container's width
    st.caption(plain(noise_line(ab) + "."))
