"""The batch-sweep chart and its CSV show the whole draft step per decode step where an engine runs the step
(costmodel.answers.step_sweep_frame), per draft call with the reason elsewhere; the breakdown says which quantity.
Expected numbers are recomputed with costmodel (whole_step_totals, whole_step_answer, predict), never hard-coded."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from costmodel import BASELINE, STRATEGIES, predict
from costmodel.answers.step_sweep_frame import COLUMNS, step_sweep, step_sweep_frame
from costmodel.answers.sweep_step import ANSWERS
from costmodel.answers.whole_step import NO_ARCH, PER_CALL, QUANTITY, applies, whole_step_answer, whole_step_totals
from costmodel.model.drafter import DraftArch
from costmodel.profiles.presets import preset_draft
from dashboard import data, fidelity, state, tables, views
from dashboard.sweep_answer import BREAKDOWN_ONE_CALL, sweep_answer_of
from dashboard.verdict import evaluate

APP = str(Path(__file__).resolve().parents[2] / "app.py")
FOCUS = "local_argmax_pairs"


def run_app(query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def arch_of(inputs: state.Inputs) -> DraftArch:
    """The preset's draft, as the verdict prices it (an independent reading of the preset table)."""
    return DraftArch.from_fields({**preset_draft(inputs.preset), "vocab": int(inputs.draft_vocab)})


def drawn(at: AppTest, name: str) -> dict:
    return at.session_state["_drawn"][name]


def line_values(spec: dict, field: str) -> pd.DataFrame:
    """The (batch, strategy, field) rows of the chart's line layer."""
    layer = next(lay for lay in spec["layer"] if lay.get("mark", {}).get("type") == "line")
    return pd.DataFrame(layer["data"]["values"])[["batch", "strategy", field]]


# -- the answers module --------------------------------------------------------------------------------------
def test_step_sweep_frame_is_whole_step_totals_and_matches_predict_json_by_hand():
    inputs = dataclasses.replace(state.Inputs(), engine="vllm")
    profile = data.profile_from_text(data.bundled_profile_text(inputs.profile))
    sc, arch = inputs.spec.scenario(1.0), arch_of(inputs)
    batches = np.array([1.0, 8.0, 64.0, 512.0])
    frame = step_sweep_frame(sc, profile, arch, batches)
    assert list(frame.columns) == list(COLUMNS) and set(frame["answer"]) == {"whole draft step"}
    totals, valid, calls = whole_step_totals(sc.with_(batch=batches), profile, arch)
    for name in STRATEGIES:
        rows = frame[frame["strategy"] == name]
        np.testing.assert_allclose(rows["whole_draft_step_us"], totals[name])
        np.testing.assert_allclose(rows["saving_per_decode_step_us"], totals[BASELINE] - totals[name])
        assert list(rows["valid"]) == list(valid[name]) and set(rows["calls_per_decode_step"]) == {calls}
    # by hand at batch 64: predict --engine vllm's whole step (whole_step_answer at that one batch)
    ws = whole_step_answer(sc.with_(batch=64.0), profile, arch, intervals=False)
    row = frame[(frame["batch"] == 64.0) & (frame["strategy"] == FOCUS)].iloc[0]
    assert row["whole_draft_step_us"] == pytest.approx(ws["strategies"][FOCUS]["whole_draft_step_us"])
    assert row["saving_per_decode_step_us"] == pytest.approx(ws["strategies"][FOCUS]["saving_per_decode_step_us"])
    base = ws["strategies"][BASELINE]["whole_draft_step_us"]
    assert row["saving_pct"] == pytest.approx(100 * ws["strategies"][FOCUS]["saving_per_decode_step_us"] / base)


def test_step_sweep_says_why_the_per_call_answer_stands():
    inputs = state.Inputs(engine="none")
    profile = data.profile_from_text(data.bundled_profile_text(inputs.profile))
    none = step_sweep(inputs.spec.scenario(1.0), profile, arch_of(inputs), [1.0, 2.0])
    assert none.frame is None and none.answer == ANSWERS[0] and none.why.startswith("engine none")
    vllm = inputs.spec.with_(engine="vllm")
    tp1 = step_sweep(vllm.with_(tp=1).scenario(1.0), profile, arch_of(inputs), [1.0, 2.0])
    assert tp1.frame is None and tp1.why == applies(vllm.with_(tp=1).scenario(1.0), profile)
    assert step_sweep(vllm.scenario(1.0), profile, None, [1.0]).why == NO_ARCH
    assert step_sweep(vllm.scenario(1.0), profile, arch_of(inputs), [1.0]).answer == ANSWERS[1]


# -- the page ----------------------------------------------------------------------------------------------
def test_vllm_sweep_chart_and_csv_are_the_whole_step_per_decode_step():
    at = run_app({"engine": "vllm", "batch": "64"})
    inputs = state.inputs_from_session(at.session_state)
    ev = evaluate(inputs, {})
    profile, arch = ev.profile, arch_of(inputs)
    spec = drawn(at, "sweep_chart")
    shown = line_values(spec, "whole_draft_step_us")
    batches = np.sort(shown["batch"].unique())
    np.testing.assert_array_equal(batches, data.batch_grid(inputs.batch_min, inputs.batch_max))
    totals = whole_step_totals(inputs.spec.scenario(batches), profile, arch)[0]
    for name in STRATEGIES:
        got = shown[shown["strategy"] == name].sort_values("batch")["whole_draft_step_us"]
        np.testing.assert_allclose(got, totals[name], rtol=1e-12)
    y = next(lay["encoding"]["y"] for lay in spec["layer"] if lay.get("mark", {}).get("type") == "line")
    assert "per decode step" in y["title"] and "whole draft step" in y["title"]
    assert any("Time per decode step (whole draft step) vs batch" in m.value for m in at.markdown)
    assert any(c.value.startswith("Shown") and "whole draft step" in c.value for c in at.caption)
    # the saving chart: the whole step's saving per decode step
    saving = line_values(drawn(at, "saving_chart"), "saving_per_decode_step_us")
    got = saving[saving["strategy"] == FOCUS].sort_values("batch")["saving_per_decode_step_us"]
    np.testing.assert_allclose(got, totals[BASELINE] - totals[FOCUS], rtol=1e-9)
    # the crossover rule and band: the whole step's (whole_step_answer), not the per-call crossover
    ws = whole_step_answer(inputs.spec.scenario(64.0), profile, arch)
    rule = next(lay for lay in spec["layer"] if lay.get("mark", {}).get("type") == "rule")
    band = next(lay for lay in spec["layer"] if lay.get("mark", {}).get("type") == "rect")
    assert rule["data"]["values"][0]["batch"] == pytest.approx(ws["strategies"][FOCUS]["crossover_batch"])
    cross = ev.verdict.interval.crossover_batch
    assert (band["data"]["values"][0]["low"], band["data"]["values"][0]["high"]) == pytest.approx(
        (cross.low, cross.high))
    assert ws["strategies"][FOCUS]["interval"]["crossover_batch"]["low"] == pytest.approx(cross.low)
    # the CSV the download button serves: the same numbers, the answer column, the provenance
    table, step, _ = sweep_answer_of(ev)
    assert step.why == ""
    out = pd.read_csv(io.BytesIO(tables.csv_bytes(views.download_frame(table, ev))))
    assert {"batch", "strategy", "whole_draft_step_us", "saving_per_decode_step_us", "saving_pct", "valid",
            "answer", "provenance"} <= set(out.columns)
    assert "total_us" not in out.columns and set(out["answer"]) == {"whole draft step"}
    row = out[(out["batch"] == 64) & (out["strategy"] == FOCUS)].iloc[0]
    assert row["whole_draft_step_us"] == pytest.approx(ws["strategies"][FOCUS]["whole_draft_step_us"])


def test_engine_none_keeps_the_per_call_chart_and_says_why():
    at = run_app({"batch": "64", "engine": "none"})
    inputs = state.inputs_from_session(at.session_state)
    assert inputs.engine == "none"
    spec = drawn(at, "sweep_chart")
    shown = line_values(spec, "total_us")
    batches = np.sort(shown["batch"].unique())
    pred = predict(inputs.spec.scenario(batches), data.profile_from_text(data.bundled_profile_text(inputs.profile)))
    for name in STRATEGIES:
        got = shown[shown["strategy"] == name].sort_values("batch")["total_us"]
        np.testing.assert_allclose(got, pred.total_us(name), rtol=1e-12)
    y = next(lay["encoding"]["y"] for lay in spec["layer"] if lay.get("mark", {}).get("type") == "line")
    assert y["title"] == "time per draft call (µs)"
    assert any("Time per draft call vs batch" in m.value for m in at.markdown)
    caption = next(c.value for c in at.caption if c.value.startswith("Shown"))
    assert "per draft call" in caption and "engine none" in caption
    ev = evaluate(inputs, {})
    table, step, _ = sweep_answer_of(ev)
    shown = views.sweep_quantity(step)[1]  # predict's quantity text, in the page's "µs"
    assert f"Shown: {tables.micro(PER_CALL)}" in shown and tables.micro(step.why) in shown
    out = pd.read_csv(io.BytesIO(tables.csv_bytes(views.download_frame(table, ev))))
    assert {"total_us", "saving_per_draft_call_us", "answer", "why_not_whole_draft_step",
            "provenance"} <= set(out.columns)
    assert set(out["answer"]) == {"per draft call"}
    assert out["why_not_whole_draft_step"].isna().all()  # engine none: the per-call answer is the one asked for


def test_tp1_under_an_engine_is_per_call_with_the_reason():
    at = run_app({"engine": "vllm", "tp": "1"})
    caption = next(c.value for c in at.caption if c.value.startswith("Shown"))
    assert "per draft call" in caption and "TP 1" in caption
    ev = evaluate(state.inputs_from_session(at.session_state), {})
    table, step, _ = sweep_answer_of(ev)
    assert step.why.startswith("TP 1") and set(table["why_not_whole_draft_step"]) == {step.why}
    assert ev.verdict.quantity == "per draft call" and set(table["answer"]) == {"per draft call"}


def test_breakdown_under_an_engine_is_labelled_one_draft_call():
    at = run_app({"engine": "vllm", "tab": "Breakdown"})
    spec = drawn(at, "breakdown_chart")
    assert BREAKDOWN_ONE_CALL in json.dumps(spec, ensure_ascii=False)
    assert any("one draft call's logits path" in m.value for m in at.markdown)
    none = run_app({"tab": "Breakdown", "engine": "none"})
    assert "time per draft call (µs)" in json.dumps(drawn(none, "breakdown_chart"), ensure_ascii=False)


def test_quantity_texts_are_predicts():
    assert QUANTITY.startswith("whole draft step") and PER_CALL.startswith("per draft call")


def test_whole_step_charts_are_valid_vega_lite_and_export():
    import altair as alt

    from dashboard.export import chart_png, report_html

    at = run_app({"engine": "vllm"})
    for name in ("sweep_chart", "saving_chart"):
        alt.LayerChart.from_dict(drawn(at, name), validate=True)
    assert chart_png(drawn(at, "sweep_chart"))[:8] == b"\x89PNG\r\n\x1a\n"  # the Export menu's PNG
    html = report_html(evaluate(state.inputs_from_session(at.session_state), {}))
    assert "Time per decode step (whole draft step) vs batch" in html and "one draft call&#x27;s logits path" in html
    assert "Every strategy at batch 64: the whole draft step" in html and "time / decode step" in html
    assert "time / draft call" not in html  # the verdict table is the whole step's, not one call's


# -- the heatmaps under an engine -----------------------------------------------------------------------------
def test_heatmap_rows_under_an_engine_are_the_whole_step_and_per_call_without_one():
    inputs = dataclasses.replace(state.Inputs(), engine="vllm")
    text = data.bundled_profile_text(inputs.profile)
    profile = data.profile_from_text(text)
    spec, arch = inputs.spec, arch_of(inputs)
    batches = (1, 16, 256)
    row = data.heat_tp_row(text, spec, 8, batches, arch)
    totals = whole_step_totals(spec.with_(tp=8).scenario(np.asarray(batches, dtype=float)), profile, arch)[0]
    want = totals[BASELINE] - totals[FOCUS]
    assert set(row["answer"]) == {"whole draft step"}
    np.testing.assert_array_equal(row["saving_per_decode_step_us"].to_numpy(), want)
    calls = int(spec.num_spec_tokens)  # serial drafting: K calls per decode step
    np.testing.assert_allclose(row["saving_per_draft_call_us"].to_numpy(), want / calls, rtol=1e-12)
    fastest = [min(STRATEGIES, key=lambda s, i=i: (totals[s][i], STRATEGIES.index(s))) for i in range(len(batches))]
    assert list(row["fastest_strategy"]) == fastest
    # a draft vocab row prices the draft with that lm_head vocabulary (and d2t on below the target vocab)
    vrow = data.heat_vocab_row(text, spec, 32000, batches, arch)
    vt = whole_step_totals(spec.with_(draft_vocab=32000, d2t=True).scenario(np.asarray(batches, dtype=float)), profile,
                           dataclasses.replace(arch, vocab=32000))[0]
    np.testing.assert_array_equal(vrow["saving_per_decode_step_us"].to_numpy(), vt[BASELINE] - vt[FOCUS])
    # TP 1: the whole step is not the answer there - the row is refused (skipped and named), never mixed in
    with pytest.raises(data.InputError, match="TP 1"):
        data.heat_tp_row(text, spec, 1, batches, arch)
    # engine none (no arch): predict's per-call saving
    none = data.heat_tp_row(text, dataclasses.replace(spec, engine="none"), 8, batches)
    pred = predict(dataclasses.replace(spec, engine="none", tp=8).scenario(np.asarray(batches, dtype=float)), profile)
    np.testing.assert_array_equal(none["saving_per_decode_step_us"].to_numpy(), pred.saving_per_decode_step_us(FOCUS))
    assert set(none["answer"]) == {"per draft call"}


def test_the_heatmaps_tab_under_an_engine_says_whole_draft_step_and_draws_its_numbers():
    at = run_app({"engine": "sglang", "tab": "Heatmaps"})
    assert any(m.value.startswith("**Saving of") and "whole draft step" in m.value for m in at.markdown)
    spec = drawn(at, "saving_batch_x_tp")
    cells = pd.DataFrame(spec["datasets"][spec["data"]["name"]])
    assert 1 not in set(cells["tp"])  # TP 1 is not the whole step: skipped, and the tab says why
    assert any(c.value.startswith("TP 1") and "not priced as the whole draft step" in c.value for c in at.caption)
    inputs = state.inputs_from_session(at.session_state)
    text = data.bundled_profile_text(inputs.profile)
    row = data.heat_tp_row(text, inputs.spec, int(inputs.tp), data.heat_batches(inputs.batch_min, inputs.batch_max),
                           arch_of(inputs))
    got = cells[cells["tp"] == int(inputs.tp)].set_index("batch")["saving_per_decode_step_us"]
    assert got.to_dict() == pytest.approx(row.set_index("batch")["saving_per_decode_step_us"].to_dict(), rel=1e-12)
    at2 = run_app({"tab": "Heatmaps", "engine": "none"})
    assert any(m.value.startswith("**Saving of") and "logits path alone" in m.value for m in at2.markdown)


def test_the_sensitivity_tab_under_an_engine_is_the_whole_step():
    """Under an engine the Sensitivity tab perturbs the verdict's quantity: the whole draft step's saving per decode
    step (its table's saving_us is the verdict's), priced with the verdict's draft; per draft call without one."""
    at = run_app({"engine": "vllm", "tab": "Sensitivity"})
    assert any(c.value.startswith("The whole draft step's saving per decode step") for c in at.caption)
    inputs = state.inputs_from_session(at.session_state)
    ev = evaluate(inputs, {})
    table = fidelity.sensitivity_frame(ev.profile_text, inputs.spec, float(inputs.batch), FOCUS, arch_of(inputs))
    assert set(table["quantity"]) == {QUANTITY}
    assert table["saving_us"].iloc[0] == pytest.approx(ev.verdict.focus_saving_decode_us, rel=1e-12)
    assert at.dataframe[0].value["parameter"].tolist() == table["parameter"].tolist()
    none = run_app({"tab": "Sensitivity", "engine": "none"})
    assert not any(c.value.startswith("The whole draft step's saving") for c in none.caption)
