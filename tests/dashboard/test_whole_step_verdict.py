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
    assert v.focus_saving_decode_us == pytest.approx(ws["strategies"]["local_argmax_pairs"]["saving_us"])
    assert v.interval is not None and "whole draft step" in v.headline()
    assert evaluate(inputs, {}).verdict.quantity == "whole draft step"


def test_engine_none_keeps_the_per_call_verdict():
    inputs = Inputs()
    assert inputs.engine == "none"
    assert whole_step_verdict(bundled_profile_text(inputs.profile), inputs) is None
    assert evaluate(inputs, {}).verdict.quantity == "per draft call"
