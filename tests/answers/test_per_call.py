"""costmodel.answers.per_call: the per-call tables the dashboard shows are predict's numbers under the answer's
names, and one strategy's error does not hide the others' crossovers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from costmodel import load_profile
from costmodel.answers import per_call
from costmodel.cli.main import main
from costmodel.io.errors import InputError
from costmodel.model.scenario import Scenario

PROFILE = "h100-sxm-nvlink"
SC = Scenario(vocab=202048, draft_vocab=202048, tp=8, batch=32.0, num_spec_tokens=3, engine="none")


def test_point_frame_is_predict_json_per_call(capsys):
    assert main(["predict", "--profile", PROFILE, "--tp", "8", "--batch", "32", "--engine", "none", "--json"]) == 0
    want = json.loads(capsys.readouterr().out)["strategies"]
    frame = per_call.point_frame(SC, load_profile(PROFILE)).set_index("strategy")
    assert "saving_us" not in frame.columns  # one name per quantity: saving_per_draft_call_us
    for name, s in want.items():
        row = frame.loc[name]
        assert row["total_us"] == pytest.approx(s["total_us"], rel=1e-12)
        assert row["saving_per_draft_call_us"] == pytest.approx(s["saving_per_draft_call_us"], rel=1e-12, abs=1e-9)
        assert row["saving_per_decode_step_us"] == pytest.approx(s["saving_per_decode_step_us"], rel=1e-12,
                                                                 abs=1e-9)
    assert frame["fastest"].sum() == 1


def test_sweep_and_focus_rows_agree_with_the_point_frame():
    profile, batches = load_profile(PROFILE), np.array([1.0, 32.0, 512.0])
    table = per_call.sweep_table(per_call.sweep_frame(SC, profile, batches))
    rows = per_call.focus_rows(SC, profile, batches, "local_argmax_pairs").set_index("batch")
    point = per_call.point_frame(SC, profile).set_index("strategy")
    at32 = table[(table["batch"] == 32) & (table["strategy"] == "local_argmax_pairs")].iloc[0]
    assert at32["saving_per_draft_call_us"] == pytest.approx(point.loc["local_argmax_pairs",
                                                                       "saving_per_draft_call_us"], rel=1e-12)
    assert rows.loc[32, "saving_per_draft_call_us"] == pytest.approx(at32["saving_per_draft_call_us"], rel=1e-12)
    assert set(table["answer"]) == {"per draft call"} == set(rows["answer"])


def test_crossover_each_keeps_the_others_when_one_errs(monkeypatch):
    real = per_call.crossover

    def crossover(sc, name, profile, **kw):
        if name == "packed_allreduce_max":
            raise InputError("no fused kernel here")
        return real(sc, name, profile, **kw)

    monkeypatch.setattr(per_call, "crossover", crossover)
    got = per_call.crossover_each(SC, load_profile(PROFILE), ("local_argmax_pairs", "packed_allreduce_max"),
                                  (1.0, 65536.0))
    assert got["packed_allreduce_max"] == (None, "error: no fused kernel here")
    frame = per_call.crossover_frame(SC, load_profile(PROFILE), ("local_argmax_pairs",), (1.0, 65536.0))
    assert got["local_argmax_pairs"][1] == frame.iloc[0]["status"]
