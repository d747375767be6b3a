"""Issue 38 (item 5): the Serving A/B tab is `simulate --bench RUN.json` for the sidebar's question - the same table
as the CLI's JSON, a bad upload is one error line that keeps the last good run, and the run is in the URL."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from costmodel.cli.main import main
from costmodel.io.plain import WORD_JOINER
from costmodel.serving.table import noise_line, setup_lines
from dashboard import data, state
from dashboard.tables import micro
from tests.conftest import ROOT
from tests.dashboard.test_parity import run_app

TAB = "Serving A/B"
EXAMPLE = ROOT / "data" / "examples" / "vllm-cpu-spec-k3.json"
FOCUS = "local_argmax_pairs"


def ab_table(at: AppTest) -> pd.DataFrame:
    found = [d.value for d in at.dataframe if "verdict" in d.value.columns and "low_90" in d.value.columns]
    assert len(found) == 1, f"{len(found)} A/B tables"
    return found[0]


def errors(at: AppTest) -> list[str]:
    return [e.value.replace("\\", "").replace(WORD_JOINER, "") for e in at.error]


def test_the_tab_shows_the_clis_simulate_numbers(capsys):
    assert main(["simulate", "--bench", str(EXAMPLE), "--preset", "llama4-maverick", "--tp", "8", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    at = run_app({"tab": TAB, "preset": "llama4-maverick", "tp": "8"})
    assert not at.error
    assert at.selectbox(key="bench").value == EXAMPLE.name
    table = ab_table(at).set_index(["metric", "strategy"])
    for metric in ("mean_itl_ms", "output_throughput"):
        want = cli["strategies"][FOCUS][metric]
        row = table.loc[(metric, FOCUS)]
        assert (row["value"], row["low_90"], row["high_90"]) == (
            pytest.approx(want["value"], rel=1e-9), pytest.approx(want["low"], rel=1e-9),
            pytest.approx(want["high"], rel=1e-9)), metric
        assert row["measured"] == pytest.approx(cli["baseline"][metric], rel=1e-9)
        change = cli["changes_pct"][FOCUS][metric]
        assert (row["change_low_pct"], row["change_high_pct"]) == (pytest.approx(change["low"], rel=1e-9),
                                                                   pytest.approx(change["high"], rel=1e-9))
        assert str(row["visible"]) == str(cli["detectable"]["strategies"][FOCUS][metric]["visible"])  # as text
    assert len(table) == len(cli["metrics"]) * len(cli["strategies"])
    # the CLI's lines on what it read from the run (server, token budget, arrivals, step fit, front end, noise):
    # the same sentences in the tab's captions (the unit spelled µs there)
    shown = " ".join(c.value.replace("\\", "").replace(WORD_JOINER, "") for c in at.caption)
    for line in [*setup_lines(cli), noise_line(cli)]:
        assert micro(line) in shown, line
    assert "inferred max_num_seqs 8" in shown and "engine steps" in shown
    assert any(b.label == "Download CSV" for b in at.get("download_button"))
    at.run()  # the chosen run is in the URL (the next rerun writes it, as the workload)
    assert at.query_params["tab"] == TAB and at.query_params["bench"] == EXAMPLE.name


def test_a_bad_upload_is_one_error_line_and_keeps_the_last_good_run():
    at = run_app({"tab": TAB, "engine": "none"})
    at.file_uploader(key="bench_upload").set_value(("mine.json", EXAMPLE.read_bytes(), "application/json")).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="bench").value == "mine.json"
    good = ab_table(at)
    for name, body, start in (("bad.json", b"not json {", "bench bad.json: "),
                              ("arrays.json", b'{"duration": 10.0, "completed": 3}',
                               "bench arrays.json: needs per-request input_lens and output_lens")):
        at.file_uploader(key="bench_upload").set_value((name, body, "application/json")).run()
        assert not at.exception
        assert len(errors(at)) == 1 and errors(at)[0].startswith(start), errors(at)
        assert "\n" not in errors(at)[0]
        assert at.selectbox(key="bench").value == "mine.json"
        pd.testing.assert_frame_equal(ab_table(at), good)


def test_the_tab_renders_for_engine_none():
    at = run_app({"tab": TAB, "engine": "none", "itl": "12.5", "accept": "3.2"})
    assert not at.error
    table = ab_table(at)
    assert set(table["strategy"]) >= {"full_all_gather", FOCUS}
    assert any("per-call logits path" in c.value.replace("\\", "") for c in at.caption)


def test_the_bench_run_round_trips_through_the_url():
    names = list(data.example_benches())
    assert EXAMPLE.name in names and "chat-diurnal.csv" not in names
    full = state.Inputs(tab=TAB, bench=EXAMPLE.name)
    params = state.to_query_params(full)
    assert params["bench"] == EXAMPLE.name and params["tab"] == TAB
    kw = {"profiles": ["h200-sxm-nvlink"], "presets": ["llama4-maverick"], "benches": names}
    assert state.parse_query_params(params, **kw) == (full, [])
    back, warnings = state.parse_query_params({"bench": "mine.json"}, **kw)
    assert back == state.Inputs() and len(warnings) == 1 and "upload it again" in warnings[0]
    assert "bench" not in state.to_query_params(state.Inputs())


def test_the_engine_inputs_are_simulates_flags(capsys):
    """The tab's max_num_seqs / max_num_batched_tokens inputs are simulate's --max-num-seqs / --max-num-batched-tokens:
    the same table, and the same server line in the caption."""
    flags = ["--preset", "llama4-maverick", "--tp", "8", "--max-num-seqs", "4", "--max-num-batched-tokens", "4096"]
    assert main(["simulate", "--bench", str(EXAMPLE), *flags, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    at = run_app({"tab": TAB, "preset": "llama4-maverick", "tp": "8"})
    at.number_input(key="serving_max_num_seqs").set_value(4)
    at.number_input(key="serving_max_batched_tokens").set_value(4096).run()
    assert not at.error
    row = ab_table(at).set_index(["metric", "strategy"]).loc[("output_throughput", FOCUS)]
    assert row["value"] == pytest.approx(cli["strategies"][FOCUS]["output_throughput"]["value"], rel=1e-9)
    assert cli["slots"] == 4 and cli["server"].startswith("max_num_seqs 4 (--max-num-seqs)")
    assert any("max_num_seqs 4" in c.value.replace("\\", "") for c in at.caption)
