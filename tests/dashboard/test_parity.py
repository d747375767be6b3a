"""One question, one answer (issue 35): the dashboard and the CLI give the same decision, saving and crossover for
the same question - every engine x 3 presets x 2 profiles through the dashboard's own evaluation (`evaluate`, what
every tile reads), the Recommendation and Impact tabs in Streamlit's AppTest from URL state, and the CLI's JSON."""

from __future__ import annotations

import dataclasses
import json

import pytest
from streamlit.testing.v1 import AppTest

from costmodel.cli.main import main
from costmodel.io.formatting import format_us
from costmodel.io.plain import markdown_text
from costmodel.model.engines import ENGINES
from dashboard.state import Inputs
from dashboard.verdict import evaluate
from tests.conftest import ROOT

FOCUS = "local_argmax_pairs"
PRESETS = ("llama4-maverick", "deepseek-v3", "qwen3-8b-eagle3")
PROFILES = ("h200-sxm-nvlink", "h100-sxm-nvlink")
WORKLOAD = ROOT / "data" / "examples" / "chat-diurnal.csv"


def cli_json(capsys, *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def inputs_for(profile: str, preset: str, engine: str, **changes) -> Inputs:
    return dataclasses.replace(Inputs(profile=profile).with_preset(preset), engine=engine, tp=8, k=3, batch=64,
                               **changes)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("preset", PRESETS)
def test_every_engine_same_answer_on_the_dashboard_and_the_cli(capsys, profile, preset):
    for engine in ENGINES:
        cli = cli_json(capsys, "predict", "--profile", profile, "--preset", preset, "--engine", engine, "--tp", "8",
                       "--batch", "64", "--num-spec-tokens", "3", "--no-placements")
        v = evaluate(inputs_for(profile, preset, engine), {}).verdict
        want = cli["strategies"][FOCUS]
        case = (profile, preset, engine)
        assert v.fastest == cli["best"], case
        assert v.focus_saving_decode_us == pytest.approx(want["saving_per_decode_step_us"], abs=0.1), case
        assert v.focus_saving_us == pytest.approx(want["saving_per_draft_call_us"], abs=0.1), case
        cross = want["crossover_batch"]
        assert (v.crossover_batch is None) == (cross is None), case
        if cross is not None:
            assert v.crossover_batch == pytest.approx(cross, rel=1e-3), case
        assert v.interval is not None and v.interval.verdict == want["verdict"], case  # the decision
        iv = want["interval"]["saving_per_decode_step_us"]
        assert (v.interval.saving_per_decode_step_us.low, v.interval.saving_per_decode_step_us.high) == (
            pytest.approx(iv["low"], abs=0.1), pytest.approx(iv["high"], abs=0.1)), case
        assert (v.quantity == "whole draft step") == (engine != "none"), case


def run_app(query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("profile, preset, engine", [("h100-sxm-nvlink", "llama4-maverick", "vllm"),
                                                      ("h200-sxm-nvlink", "deepseek-v3", "vllm"),
                                                      ("h100-sxm-nvlink", "qwen3-8b-eagle3", "none")])
def test_recommendation_tab_is_the_cli_recommend(capsys, profile, preset, engine):
    """The issue's case: the Recommendation tab said "uncertain - keep the default (off)" where `recommend --engine
    vllm` said "turn use_local_argmax_reduction on" (the tab dropped the engine's draft); and DeepSeek-V3's config
    said "eagle" where the CLI said "mtp"."""
    cli = cli_json(capsys, "recommend", "--workload", str(WORKLOAD), "--profile", profile, "--preset", preset,
                   "--engine", engine, "--tp", "8", "--num-spec-tokens", "3")
    at = run_app({"profile": profile, "preset": preset, "engine": engine, "tp": "8", "k": "3",
                  "tab": "Recommendation", "workload": WORKLOAD.name})
    boxes = [*at.success, *at.warning, *at.info]
    assert any(b.value == markdown_text(cli["headline"]) for b in boxes), [b.value for b in boxes]
    tile = [m for m in at.metric if m.label == "Saving / decode step"][-1]  # the tab's (the verdict's comes first)
    assert tile.value == format_us(cli["strategies"][FOCUS]["expected_saving_per_decode_step_us"], sign=True)
    vllm = next(c["text"] for c in cli["configs"] if c["engine"] == "vllm")
    assert any(code.value == vllm for code in at.code)
    if preset == "deepseek-v3":
        assert '"method": "mtp"' in vllm


def test_impact_tab_is_the_headline_and_the_cli(capsys):
    """The Impact tab's ITL equals `predict --itl-ms` (it showed the per-call saving's ITL, 61.651 vs 61.570 ms)."""
    cli = cli_json(capsys, "predict", "--profile", "h100-sxm-nvlink", "--preset", "llama4-maverick", "--tp", "8",
                   "--batch", "64", "--num-spec-tokens", "3", "--itl-ms", "61.9", "--acceptance-length", "3",
                   "--no-placements")
    at = run_app({"profile": "h100-sxm-nvlink", "preset": "llama4-maverick", "tp": "8", "k": "3", "batch": "64",
                  "itl": "61.9", "accept": "3", "tab": "Impact"})
    itl = next(m for m in at.metric if m.label == "ITL after")
    assert itl.value == f"{cli['strategies'][FOCUS]['impact']['itl_after_ms']:.3f} ms"


def test_an_impossible_url_is_one_line_not_a_traceback():
    """?preset=custom&vocab=2147483647&draft_vocab=2147483647&tp=1 showed Streamlit's exception box (the draft's
    vocabulary was first checked deep in the sweep); the question is validated where it is built."""
    at = run_app({"preset": "custom", "vocab": "2147483647", "draft_vocab": "2147483647", "tp": "1"})
    assert not at.exception


def test_a_custom_hidden_size_is_the_clis_hidden(capsys):
    """The sidebar's hidden size prices the draft as `--hidden` does (`question.sidebar_arch`): the verdict and the
    CLI agree, and the answer names the overridden draft."""
    cli = cli_json(capsys, "predict", "--preset", "llama4-maverick", "--hidden", "8192", "--tp", "8", "--batch", "64",
                   "--num-spec-tokens", "3", "--no-placements")
    ev = evaluate(inputs_for("h200-sxm-nvlink", "llama4-maverick", "vllm", hidden=8192), {})
    assert ev.verdict.focus_saving_decode_us == pytest.approx(
        cli["strategies"][FOCUS]["saving_per_decode_step_us"], abs=0.1)
    assert cli["question"]["draft_arch"].endswith("overridden: hidden=8192")
