"""What a rerun no longer redoes gives the same output: a CSV download is encoded when clicked (its data is a
callable that returns exactly the eager bytes), and the sweep charts' specs cached on the profile and scenario
are the specs built from the table."""

from __future__ import annotations

import dataclasses

import pandas as pd

from costmodel.answers.per_call import sweep_table
from costmodel.answers.provenance import with_provenance
from dashboard import verdict as verdict_module
from dashboard import views
from dashboard.data import sweep_frame
from dashboard.state import Inputs
from dashboard.tables import csv_bytes
from dashboard.verdict import evaluate, whole_step_verdict


def _captured_download(monkeypatch, frame: pd.DataFrame, ev=None) -> dict:
    seen: dict = {}

    def fake_button(label, data, **kwargs):
        seen.update(label=label, data=data, **kwargs)

    monkeypatch.setattr(views.st, "download_button", fake_button)
    views.download(frame, "time_vs_batch", ev=ev)
    return seen


def test_download_data_is_deferred_and_is_the_eager_csv(monkeypatch):
    ev = evaluate(Inputs(engine="none"), {})
    frame = ev.crossovers
    seen = _captured_download(monkeypatch, frame, ev)
    assert callable(seen["data"]) and seen["file_name"] == "time_vs_batch.csv" and seen["mime"] == "text/csv"
    eager = csv_bytes(with_provenance(frame, ev.profile, ev.inputs.spec.scenario(float(ev.inputs.batch))))
    assert seen["data"]() == eager
    assert b"provenance" in eager.splitlines()[0]
    plain = _captured_download(monkeypatch, frame)  # without an Evaluation: the frame alone
    assert plain["data"]() == csv_bytes(frame)


def test_keyed_sweep_chart_spec_equals_the_spec_built_from_the_table():
    ev = evaluate(Inputs(engine="none"), {})
    inputs = ev.inputs
    table = sweep_table(sweep_frame(ev.profile_text, inputs.spec, inputs.batch_min, inputs.batch_max))
    key = (ev.profile_text, inputs.spec, inputs.batch_min, inputs.batch_max)
    for name in ("sweep_chart", "saving_chart"):
        for cross, band in ((ev.verdict.crossover_batch, None), (37.5, (20.0, 80.0))):
            keyed = views._keyed_chart_spec(name, key, (cross, band), table)
            assert keyed == views.chart_spec(name, table, cross, band)
    other = inputs.spec.with_(tp=2)  # another scenario: another key, another spec
    table2 = sweep_table(sweep_frame(ev.profile_text, other, inputs.batch_min, inputs.batch_max))
    key2 = (ev.profile_text, other, inputs.batch_min, inputs.batch_max)
    assert views._keyed_chart_spec("sweep_chart", key2, (None, None), table2) != views._keyed_chart_spec(
        "sweep_chart", key, (None, None), table)


def test_whole_step_verdict_skips_the_per_call_interval_it_would_not_show(monkeypatch):
    """Engine set: the verdict is the whole draft step with its own interval, so the per-call interval (an
    ensemble pass for each new scenario) is not priced; engine none: it is, and it is the verdict's."""
    calls: list = []
    real = verdict_module.saving_interval

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(verdict_module, "saving_interval", counted)
    inputs = dataclasses.replace(Inputs(), engine="vllm", batch=16.0)
    ev = evaluate(inputs, {})
    assert ev.verdict == whole_step_verdict(ev.profile_text, inputs) and ev.verdict.interval is not None
    assert calls == []
    plain = evaluate(Inputs(engine="none"), {})
    assert len(calls) == 1 and plain.verdict.interval == real(plain.profile_text, plain.inputs.spec,
                                                              float(plain.inputs.batch))
