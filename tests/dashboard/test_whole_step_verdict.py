"""The dashboard's verdict is the whole draft step where an engine runs the step (costmodel.answers.whole_step),
the per-call verdict elsewhere; the dashboard prices nothing itself."""

from __future__ import annotations

import dataclasses

import pytest

from costmodel.answers.whole_step import whole_step_answer
from costmodel.model.drafter import DraftArch
from costmodel.profiles.presets import preset_draft
from dashboard.data import bundled_profile_text, profile_from_text
from dashboard.state import Inputs
from dashboard.verdict import evaluate, whole_step_verdict


def test_vllm_verdict_is_the_whole_step():
    inputs = dataclasses.replace(Inputs(), engine="vllm", batch=16.0)
    text = bundled_profile_text(inputs.profile)
    v = whole_step_verdict(text, inputs)
    assert v is not None and v.quantity == "whole draft step"
    sc = inputs.spec.scenario(16.0)
    arch = DraftArch.from_fields({**preset_draft(inputs.preset), "vocab": int(sc.draft_vocab)})
    ws = whole_step_answer(sc, profile_from_text(text), arch, intervals=False)
    assert v.fastest == ws["best"]
    local = ws["strategies"]["local_argmax_pairs"]
    assert v.focus_saving_decode_us == pytest.approx(local["saving_per_decode_step_us"])
    assert v.interval is not None and "whole draft step" in v.headline()
    assert evaluate(inputs, {}).verdict.quantity == "whole draft step"


def test_engine_none_keeps_the_per_call_verdict():
    inputs = Inputs(engine="none")
    assert inputs.engine == "none"
    assert whole_step_verdict(bundled_profile_text(inputs.profile), inputs) is None
    assert evaluate(inputs, {}).verdict.quantity == "per draft call"


def test_tables_under_an_engine_are_the_whole_step():
    """Under an engine the verdict table (Breakdown tab, report) and the crossover expander show the whole draft
    step's numbers - whole_step_answer's, per decode step - not the per-call frames they showed before."""
    inputs = dataclasses.replace(Inputs(), engine="vllm", batch=64.0)
    ev = evaluate(inputs, {})
    assert ev.whole_step
    sc = inputs.spec.scenario(64.0)
    arch = DraftArch.from_fields({**preset_draft(inputs.preset), "vocab": int(sc.draft_vocab)})
    ws = whole_step_answer(sc, profile_from_text(ev.profile_text), arch, intervals=False)["strategies"]
    table = ev.verdict_table().set_index("strategy")
    assert set(table.index) == set(ws)
    for name, s in ws.items():
        row = table.loc[name]
        assert row["whole_draft_step_us"] == pytest.approx(s["whole_draft_step_us"], rel=1e-12)
        assert row["saving_per_decode_step_us"] == pytest.approx(s["saving_per_decode_step_us"], rel=1e-12, abs=1e-9)
        assert row["saving_per_draft_call_us"] == pytest.approx(s["saving_per_draft_call_us"], rel=1e-12, abs=1e-9)
        assert row["tp"] == inputs.tp and row["batch"] == 64.0  # the scenario columns of the per-call frame
    cross = ev.crossover_table().set_index("strategy")
    assert "full_all_gather" not in cross.index and set(cross.index) == set(ws) - {"full_all_gather"}
    for name in cross.index:
        assert cross.loc[name, "status"] == ws[name]["crossover"]["status"]
        want = ws[name]["crossover_batch"]
        got = cross.loc[name, "crossover_batch"]
        assert (want is None and got != got) or got == pytest.approx(want, rel=1e-12)
    # the per-call crossovers differ from the whole step's (the drafter forward hides host launches)
    per_call = ev.crossovers.set_index("strategy")
    assert per_call.loc["local_argmax_pairs", "crossover_batch"] != cross.loc["local_argmax_pairs", "crossover_batch"]


def test_tables_without_an_engine_stay_per_call():
    ev = evaluate(Inputs(engine="none"), {})
    assert not ev.whole_step
    assert "total_us" in ev.verdict_table().columns
    assert ev.crossover_table() is ev.crossovers
