"""Dashboard tests: the app through streamlit.testing.v1.AppTest, and the pure helpers in dashboard/.

Expected numbers are recomputed here with costmodel for the scenario the widgets show, never hard-coded.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from costmodel import BASELINE, STRATEGIES, InputError, Scenario, collective_time_us, crossover, load_profile, predict
from costmodel.answers import per_call
from costmodel.answers.explain import format_explanation
from costmodel.answers.point import impact_rows
from costmodel.answers.recommend import impact_change, recommend
from costmodel.answers.sensitivity import elasticities
from costmodel.answers.whole_step import whole_step_answer
from costmodel.evidence.intervals import propagate
from costmodel.io.formatting import MISSING, format_batch, format_interval_us, format_ms, format_us
from costmodel.io.plain import WORD_JOINER, markdown_text
from costmodel.model.drafter import DraftArch
from costmodel.model.kernels import kernel_context
from costmodel.profiles.presets import preset, preset_draft, presets
from costmodel.serving.workload import parse_workload
from dashboard import charts as dashboard_charts
from dashboard import data, state, tables, uploads
from dashboard.multi_upload import base_parameters
from dashboard.question import answer_of
from dashboard.verdict import evaluate, provenance_line

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
FOCUS = "local_argmax_pairs"


def run_app(query: dict[str, str] | None = None) -> AppTest:
    """The app from URL state. These tests price the per-call answer, so they pin engine none unless the query
    names an engine; the default (vLLM's whole draft step, issue 35) is tested by test_defaults_answer_in_vllms_terms
    and tests/dashboard/test_parity.py."""
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in {"engine": "none", **(query or {})}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def shown_scenario(at: AppTest, batch: float | None = None) -> Scenario:
    """The costmodel scenario the sidebar widgets currently describe."""
    w = {k: at.session_state[k] for k in ("vocab", "draft_vocab", "d2t", "hidden", "tp", "nodes", "dtype", "k",
                                           "drafting", "mode", "impl", "engine", "batch")}
    return Scenario(vocab=w["vocab"], draft_vocab=w["draft_vocab"], d2t=w["d2t"], hidden=w["hidden"],
                    dtype=w["dtype"], tp=int(w["tp"]), nodes=w["nodes"], num_spec_tokens=w["k"],
                    drafting=w["drafting"], mode=w["mode"], impl=w["impl"], engine=w["engine"],
                    batch=w["batch"] if batch is None else batch)


def fastest(pred) -> str:
    """Prediction.best() of a single scenario as a name (a 0-d array or a str)."""
    return str(np.asarray(pred.best()).reshape(-1)[0])


def headline(at: AppTest) -> str:
    return next(h.value for h in at.subheader if h.value.startswith("Fastest at batch"))


def comparison(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith(f"{FOCUS} is "))


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    """The one st.dataframe on the page that has `column`."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, f"{len(found)} tables with column {column!r}"
    return found[0]


def captions(at: AppTest) -> list[str]:
    return [unescape(c.value) for c in at.caption]


def resolved(text: str) -> str:
    """Markdown source with its backslash escapes resolved (the word joiners of costmodel.io.plain kept)."""
    return re.sub(r"\\([^0-9A-Za-z\s])", r"\1", text)


def unescape(text: str) -> str:
    """Text as the reader sees it: user-controlled strings are Markdown-escaped (a backslash before punctuation,
    an invisible word joiner after ':' and '@')."""
    return resolved(text).replace(WORD_JOINER, "")


def errors(at: AppTest) -> list[str]:
    return [unescape(e.value) for e in at.error]


# -- the app ------------------------------------------------------------------------------------------
def test_defaults_run_clean_and_match_costmodel():
    at = run_app()
    assert not at.error
    sc = shown_scenario(at)
    profile = load_profile(at.session_state["profile"])
    pred = predict(sc, profile)
    assert headline(at) == f"Fastest at batch {at.session_state['batch']}: {fastest(pred)}"
    assert metric(at, "Saving / draft call") == format_us(pred.saving_us(FOCUS).item(), sign=True)
    assert metric(at, "Saving / decode step") == format_us(pred.saving_per_decode_step_us(FOCUS).item(), sign=True)
    cross = crossover(sc, FOCUS, profile)
    assert metric(at, "Crossover batch") == format_batch(cross.batch)
    # the provenance of the bundled profile is stated plainly (measured / partly measured / derived)
    sentence = provenance_line(profile)[1]
    assert "measured" in sentence and any(sentence in unescape(m.value) for m in at.markdown)
    # the kernels' provenance and the lm_head GEMM time (context, common to every strategy) as predict gives them
    ctx = kernel_context(profile, sc)
    assert ctx["lm_head_us"] is not None
    assert any(f"lm_head GEMM (context, common to every strategy): {format_us(ctx['lm_head_us'])}" in c
               and ctx["kernels"] in c for c in captions(at))
    # the state is mirrored in the URL
    assert at.query_params["batch"] == str(at.session_state["batch"])
    assert at.query_params["profile"] == at.session_state["profile"]


def test_defaults_answer_in_vllms_terms():
    """With no URL state the dashboard answers the CLI's default question: vLLM's whole draft step."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception and at.session_state["engine"] == "vllm"
    assert "(the whole draft step, as the engine composes its K calls)" in headline(at)


def test_verdict_flips_at_the_crossover():
    at = run_app()
    sc = shown_scenario(at)
    profile = load_profile(at.session_state["profile"])
    cross = crossover(sc, FOCUS, profile)
    assert cross.direction == "wins_above" and len(cross.roots) == 1
    below, above = max(1, math.floor(cross.batch) - 1), math.ceil(cross.batch) + 1
    assert below < cross.batch < above
    texts = {}
    for batch in (below, above):
        at.number_input(key="batch").set_value(batch).run()
        assert not at.exception and not at.error
        best = fastest(predict(sc.with_(batch=batch), profile))
        assert headline(at).split(" - uncertain")[0] == f"Fastest at batch {batch}: {best}"
        texts[batch] = (headline(at), comparison(at))
    assert f"{FOCUS} is slower than {BASELINE}" in texts[below][1]
    assert f"{FOCUS} is faster than {BASELINE}" in texts[above][1]
    assert texts[below][0] != texts[above][0]


def test_no_crossover_interval_where_the_point_has_no_crossover():
    """Issue 43 item 6: where the point answer has no crossover ("wins at every batch in range"), the crossover
    tile's caption printed "90% interval: 1 to 4" - the range of the replicates that do cross; it now says the
    point has none and how many replicates cross, and the sweep charts draw no crossover band."""
    at = run_app({"profile": "h200-sxm-nvlink", "preset": "llama3-8b", "tp": "2", "batch": "8"})
    assert not at.exception
    sc = shown_scenario(at)
    profile = load_profile(at.session_state["profile"])
    assert crossover(sc, FOCUS, profile).batch is None  # the case: no point crossover ...
    u = propagate(sc, profile, level=0.9)[FOCUS]
    assert u.crossover_batch is not None and 0 < u.crossover_found_fraction < 1  # ... but some replicates cross
    shown = captions(at)
    cross = f"90% interval: {format_batch(u.crossover_batch.low)} to {format_batch(u.crossover_batch.high)}"
    assert not any(c.startswith(cross) for c in shown), shown
    want = (f"no crossover at the point estimate ({u.crossover_found_fraction:.0%} of replicates cross in "
            "batch 1-65,536)")
    assert want in shown, shown
    specs = [c.proto.spec for c in at.get("vega_lite_chart")]
    assert specs and not any("crossover interval from" in spec for spec in specs)  # no band in the sweep charts


def test_default_verdict_shows_the_intervals_of_the_derived_ensemble():
    at = run_app()
    sc = shown_scenario(at)
    profile = load_profile(at.session_state["profile"])
    u = propagate(sc, profile, level=0.9)[FOCUS]
    shown = captions(at)
    assert f"90% interval: {format_interval_us(u.saving_us.low, u.saving_us.high)}" in shown
    decode = u.saving_per_decode_step_us
    assert f"90% interval: {format_interval_us(decode.low, decode.high)}" in shown
    cross = f"90% interval: {format_batch(u.crossover_batch.low)} to {format_batch(u.crossover_batch.high)}"
    assert any(c == cross or c.startswith(f"{cross} (") for c in shown)  # "(97% of replicates cross)" may follow
    method = profile.raw["bootstrap_method"]
    assert method.startswith("derived ensemble")
    assert any(method in c and f"{len(profile.bootstrap)} replicates" in c for c in shown)
    assert not any("not computed yet" in c for c in shown)
    assert u.verdict == "faster" and "uncertain" not in headline(at)


def test_near_the_crossover_the_verdict_is_uncertain():
    at = run_app()
    sc = shown_scenario(at)
    profile = load_profile(at.session_state["profile"])
    batch = round(crossover(sc, FOCUS, profile).batch)
    u = propagate(sc.with_(batch=batch), profile, level=0.9)[FOCUS]
    assert u.saving_us.straddles_zero()  # the scenario really is uncertain: the test can fail
    at.number_input(key="batch").set_value(batch).run()
    assert not at.exception and not at.error
    assert headline(at).endswith(f" - uncertain: the 90% interval of the {FOCUS} saving spans 0")
    assert f"90% interval: {format_interval_us(u.saving_us.low, u.saving_us.high)}" in captions(at)
    assert "either side may win" in comparison(at)


def test_sensitivity_view_matches_costmodel():
    at = run_app({"tab": "Sensitivity"})
    assert not at.error and at.query_params["tab"] == "Sensitivity"
    sc = shown_scenario(at)
    profile = load_profile(at.session_state["profile"])
    expected = elasticities(sc, profile, FOCUS)
    shown = frame_with(at, "elasticity")
    assert len(shown) == len(expected)
    assert shown.iloc[0]["parameter"] == expected.iloc[0]["parameter"]
    assert shown.iloc[0]["elasticity"] == pytest.approx(expected.iloc[0]["elasticity"])
    assert shown.iloc[0]["saving_us"] == pytest.approx(pred_saving := predict(sc, profile).saving_us(FOCUS).item())
    assert pred_saving != 0
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1  # the bar chart of the top 12
    bars = json.loads(charts[0].proto.spec)["layer"][0]["encoding"]["y"]
    assert bars["field"] == "parameter" and bars["sort"] == list(expected["parameter"][:12])
    how = next(e for e in at.expander if e.label == "How is this computed?")
    assert how.code[0].value == format_explanation(predict(sc, profile))


def reference_rows(profile: str | None) -> int:
    frames = [pd.read_csv(path) for path in sorted((ROOT / "data/reference").glob("*.csv"))]
    named = pd.concat(frames, ignore_index=True)["profile"].fillna("")
    return int((named == profile).sum()) if profile else int((named != "").sum())


def test_validation_table_for_the_selected_profile():
    at = run_app({"tab": "Calibration", "profile": "h200-sxm-nvlink"})
    assert not at.error
    rows = frame_with(at, "rel_error_pct")
    assert len(rows) == reference_rows("h200-sxm-nvlink") > 0
    assert set(rows["profile"]) == {"h200-sxm-nvlink"}
    assert set(rows["check"]) <= {"in-sample", "held-out"}
    assert rows["rel_error_pct"].to_numpy() == pytest.approx(
        100 * (rows["predicted_us"] - rows["measured_us"]).to_numpy() / rows["measured_us"].to_numpy())
    summ = frame_with(at, "p90_abs_rel_error_pct")
    per_file = summ[summ["file"] != "all"]
    assert per_file["n"].sum() == len(rows)
    held = rows.loc[rows["check"] == "held-out", "rel_error_pct"].abs()
    overall = summ[summ["file"] == "all"].iloc[0]
    assert overall["median_abs_rel_error_pct"] == pytest.approx(held.median())
    # a profile no reference row names: said so, and the table of every named bundled profile is offered
    doc = json.loads((ROOT / "data/profiles/h100-sxm-nvlink.json").read_text())
    doc["name"] = "my-cluster"
    at.file_uploader(key="upload").set_value(("mine.json", json.dumps(doc).encode(), "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert any("No reference row names the profile 'upload: my-cluster'" in unescape(i.value) for i in at.info)
    rows = frame_with(at, "rel_error_pct")
    assert len(rows) == reference_rows(None)
    assert {"h200-sxm-nvlink", "h100-sxm-nvlink"} <= set(rows["profile"])


def test_the_first_page_computes_no_closed_expander():
    """issue 43 item 4: what the first page does not show is not computed before its first paint. The batch sweep
    tab's crossover tables and the fused-kernel panel are computed only once their expander is opened (it reruns),
    and then show the answer's crossovers."""
    at = run_app({"engine": "vllm"})
    crossover_columns = [d for d in at.dataframe if "crossover_batch" in d.value.columns]
    assert crossover_columns == []  # neither the crossovers nor the fused panel (crossover_batch_torch / _fused)
    assert [e.label for e in at.expander if e.label.startswith(("Crossover batches", "Fused kernels"))] == [
        "Crossover batches of every strategy vs the baseline (whole draft step)",
        "Fused kernels: crossover batch with torch ops vs the fused Triton kernels"]
    at.session_state["crossovers_open"] = True
    at.run()
    assert not at.exception and not at.error
    shown = [d.value for d in at.dataframe if "crossover_batch" in d.value.columns]
    assert len(shown) == 2  # the whole draft step's, and per draft call (context)
    assert all(FOCUS in set(table["strategy"]) for table in shown)


def test_fused_panel_shows_both_crossovers():
    at = run_app()
    assert not [d for d in at.dataframe if "crossover_batch_fused" in d.value.columns]  # closed: not computed (#43)
    at.session_state["fused_open"] = True  # the user opens the expander (it reruns: views.lazy_expander)
    at.run()
    sc = shown_scenario(at, batch=1)
    profile = load_profile(at.session_state["profile"])
    panel = frame_with(at, "crossover_batch_fused").set_index("strategy")
    assert list(panel.index) == [FOCUS, "packed_allreduce_max"]
    for name in panel.index:
        for impl in ("torch", "fused"):
            c = crossover(sc.with_(impl=impl), name, profile, batch_range=(1.0, 65536.0))
            assert panel.loc[name, f"status_{impl}"] == c.status
            shown = panel.loc[name, f"crossover_batch_{impl}"]
            if isinstance(shown, str):  # a column with a gap is shown as text: no "None" on the page
                assert shown == (MISSING if c.batch is None else format_batch(c.batch))
            else:
                assert c.batch is not None and shown == pytest.approx(c.batch)
    prov = profile.kernel_ops["local_argmax_fused"].provenance
    assert any(f"fused-kernel parameters (local_argmax_fused) are {prov}" in c for c in captions(at))
    # the sidebar's torch/fused switch changes the verdict, not the side-by-side panel
    at.radio(key="impl").set_value("fused").run()
    assert not at.error and at.query_params["impl"] == "fused"
    after = frame_with(at, "crossover_batch_fused").set_index("strategy")
    pd.testing.assert_frame_equal(after, panel)
    cross = crossover(sc.with_(impl="fused"), FOCUS, profile)
    assert metric(at, "Crossover batch") == ("none" if cross.batch is None else format_batch(cross.batch))


def test_query_params_restore_the_view():
    query = {"preset": "custom", "vocab": "151936", "draft_vocab": "32000", "d2t": "1", "hidden": "4096",
             "tp": "4", "dtype": "fp32", "k": "5", "drafting": "parallel", "mode": "eager", "batch": "300",
             "bmin": "2", "bmax": "1024", "itl": "20", "accept": "3.5", "tab": "Impact"}
    at = run_app(query)
    assert not at.error and not at.warning
    assert at.selectbox(key="preset").value == "custom"
    assert at.number_input(key="vocab").value == 151936
    assert at.number_input(key="draft_vocab").value == 32000
    assert at.toggle(key="d2t").value is True
    assert at.selectbox(key="tp").value == 4
    assert at.selectbox(key="dtype").value == "fp32"
    assert at.number_input(key="k").value == 5
    assert at.radio(key="drafting").value == "parallel"
    assert at.radio(key="mode").value == "eager"
    assert at.number_input(key="batch").value == 300
    assert at.select_slider(key="batch_range").value == (2, 1024)
    assert at.number_input(key="itl_ms").value == 20.0
    assert at.session_state["tab"] == "Impact"
    sc = Scenario(vocab=151936, draft_vocab=32000, d2t=True, hidden=4096, tp=4, dtype="fp32", num_spec_tokens=5,
                  drafting="parallel", mode="eager", batch=300)
    pred = predict(sc, load_profile())
    assert headline(at) == f"Fastest at batch 300: {fastest(pred)}"
    assert metric(at, "Saving / decode step") == format_us(pred.saving_per_decode_step_us(FOCUS).item(), sign=True)
    # the Impact tab is open and uses answers.recommend.impact_change with the restored ITL / acceptance length
    expected = impact_change(pred.saving_per_decode_step_us(FOCUS).item(), 20.0, 3.5, FOCUS)
    assert metric(at, "ITL after") == format_ms(expected.itl_after_ms, decimals=3)
    # and the URL written back is the one we came with
    written = {k: at.query_params[k] for k in query}
    assert written == query


def test_invalid_query_params_are_ignored_with_a_warning():
    at = run_app({"tp": "abc", "dtype": "fp8", "bogus": "1", "batch": "128", "vocab": "1000"})
    warnings = " | ".join(unescape(w.value) for w in at.warning)
    assert "tp='abc'" in warnings and "dtype='fp8'" in warnings and "'bogus'" in warnings
    assert "vocab" in warnings  # custom-model fields need preset=custom
    assert at.selectbox(key="tp").value == state.Inputs.tp
    assert at.number_input(key="batch").value == 128  # the valid parameter is still applied
    assert not at.error


def test_impossible_inputs_show_an_error_and_keep_the_last_good_view():
    at = run_app()
    good = headline(at)
    at.number_input(key="nodes").set_value(3).run()  # 3 nodes cannot split TP 8
    assert not at.exception
    assert errors(at) == ["nodes: must divide the TP size"]
    assert headline(at) == good  # the last good inputs are still shown
    at.number_input(key="nodes").set_value(1).run()
    assert not at.error
    at.number_input(key="draft_vocab").set_value(300000).run()  # larger than the target vocab
    assert not at.exception
    assert at.selectbox(key="preset").value == "custom"  # editing a model number leaves the preset
    assert len(errors(at)) == 1 and errors(at)[0].startswith("draft_vocab:")
    assert headline(at) == good


def test_impossible_tp_from_a_link_shows_an_error():
    good = headline(run_app({"engine": "vllm"}))
    at = run_app({"tp": "3", "engine": "vllm"})  # a TP size typed into the box / in a link: 3 does not divide 202048
    assert at.selectbox(key="tp").value == 3
    assert len(errors(at)) == 1 and "TP size 3 does not divide the padded draft vocab 202048" in errors(at)[0]
    assert headline(at) == good  # the default inputs are the last good ones of a new session


def test_bad_upload_shows_an_error_and_a_good_one_is_selected():
    at = run_app()
    before = headline(at)
    at.file_uploader(key="upload").set_value(("broken.json", b'{"schema_version": 1, "name": 3', "application/json"))
    at.run()
    assert not at.exception
    assert len(errors(at)) == 1 and errors(at)[0].startswith("broken.json: not valid JSON")
    assert headline(at) == before and at.session_state["profile"] == state.Inputs.profile
    doc = json.loads((ROOT / "data/profiles/h100-sxm-nvlink.json").read_text())
    doc["name"] = "my-cluster"
    at.file_uploader(key="upload").set_value(("mine.json", json.dumps(doc).encode(), "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert at.selectbox(key="profile").value == "upload: my-cluster"
    expected = fastest(predict(shown_scenario(at), load_profile("h100-sxm-nvlink")))
    assert headline(at).endswith(expected)


def test_preset_choice_fills_the_model_numbers():
    at = run_app()
    at.selectbox(key="preset").set_value("qwen3-8b-eagle3").run()
    assert not at.exception and not at.error
    expected = preset("qwen3-8b-eagle3")
    assert at.number_input(key="vocab").value == expected["vocab"]
    assert at.number_input(key="draft_vocab").value == expected["draft_vocab"]
    assert at.toggle(key="d2t").value is expected["d2t"]
    best = fastest(predict(shown_scenario(at), load_profile()))
    assert headline(at) == f"Fastest at batch {at.session_state['batch']}: {best}"
    assert at.query_params["preset"] == "qwen3-8b-eagle3" and "vocab" not in at.query_params


def nccl_tests_log(world_size: int = 8, alpha_us: float = 15.0, busbw_gbps: float = 300.0) -> str:
    """A small all_gather_perf log in nccl-tests' print format, times from t = alpha + S (p-1)/p / busbw."""
    lines = ["# nccl-tests version 2.17.6", "# Collective test starting: all_gather_perf",
             f"# nThread 1 nGpus {world_size} minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid   1000 on      node0 device {r:2d} [0000:00:00] NVIDIA H200"
              for r in range(world_size)]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time"
                   "   algbw   busbw  #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)"
              "  (GB/s)  (GB/s)"]
    for per_rank in 2 ** np.arange(10, 27):
        size = int(per_rank) * world_size
        t = alpha_us + size * (world_size - 1) / world_size / (busbw_gbps * 1e3)
        lines.append(f"{size:12d}  {int(per_rank) // 4:12d}     float    none      -1  {t:7.2f}    1.00    1.00"
                     f"      0  {t:7.2f}    1.00    1.00      0")
    lines.append("# Collective test concluded: all_gather_perf")
    return "\n".join(lines) + "\n"


def test_nccl_tests_log_upload_is_fitted_and_plotted():
    pytest.importorskip("calibration.fitting.fit")
    pytest.importorskip("calibration.logs.import_nccl_tests")
    at = run_app({"tab": "Calibration"})
    at.file_uploader(key="upload").set_value(("ag8.log", nccl_tests_log().encode(), "text/plain"))
    at.run()
    assert not at.exception and not at.error
    assert at.selectbox(key="profile").value == "upload: ag8"
    assert any(m.value.startswith("**Measured vs fitted**") for m in at.markdown)
    assert any("partly measured on NVIDIA H200" in m.value for m in at.markdown)
    points, notes = data.measured_points(at.session_state["_uploads"]["upload: ag8"],
                                         at.session_state["_measurements"]["upload: ag8"])
    assert len(points) == 17 and notes == []
    assert points["rel_error_pct"].abs().max() < 2.0  # the model's own shape fits these points closely


@pytest.mark.parametrize("tab", state.TABS)
def test_every_tab_renders(tab):
    at = run_app({"tab": tab, "itl": "15", "accept": "2.5"})
    assert not at.error
    assert at.session_state["tab"] == tab


def test_app_never_imports_torch():
    """Nor vl-convert on a render: it loads on the first PNG / SVG conversion (dashboard/export.py)."""
    code = ("import sys; from streamlit.testing.v1 import AppTest; "
            f"at = AppTest.from_file({APP!r}, default_timeout=60); at.run(); assert not at.exception; "
            "assert 'vl_convert' not in sys.modules, 'vl_convert loaded by a render'\n"
            "import dashboard.charts, dashboard.views\n"
            "try:\n    import calibration.fitting.fit, calibration.logs.import_nccl_tests  # what an upload imports\n"
            "except ImportError:\n    pass\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


# -- query parameters <-> inputs --------------------------------------------------------------------------
PROFILES = ["a100-sxm-nvlink", "h100-sxm-nvlink", "h200-sxm-nvlink"]


def test_query_params_round_trip():
    presets_ = list(presets().index)
    cases = [state.Inputs(),
             state.Inputs().with_preset("qwen3-8b-eagle3"),
             state.Inputs(profile="a100-sxm-nvlink", preset="custom", vocab=1000, draft_vocab=640, d2t=True,
                          hidden=64, tp=16, nodes=2, dtype="fp16", k=7, drafting="parallel", mode="eager",
                          impl="fused", engine="sglang", batch=5, batch_min=4, batch_max=64, itl_ms=9.5,
                          acceptance_length=1.5, tab="Heatmaps"),
             state.Inputs(batch_min=64, batch_max=64)]  # the range slider allows equal ends
    for inputs in cases:
        params = state.to_query_params(inputs)
        assert all(isinstance(v, str) for v in params.values())
        back, warnings = state.parse_query_params(params, profiles=PROFILES, presets=presets_)
        assert warnings == [] and back == inputs
        assert state.inputs_from_session(state.session_values(inputs)) == inputs


def test_cache_keys_ignore_what_never_changes_a_per_draft_call_price():
    spec = state.Inputs(hidden=5120, k=5, engine="none").spec
    assert data.per_draft_call(spec) == data.per_draft_call(spec.with_(hidden=8192, num_spec_tokens=2))
    parallel = spec.with_(drafting="parallel")
    assert data.per_draft_call(parallel).num_spec_tokens == 5  # parallel: B*K rows per call
    vllm = spec.with_(engine="vllm")  # the hidden size prices vLLM's head start (the lm_head GEMM)
    assert data.per_draft_call(vllm).hidden == 5120


def test_dashboard_vllm_crossover_is_the_clis():
    """Before: the dashboard dropped the hidden size, so vLLM's head start was 0 there (crossover 48.0) and the
    lm_head GEMM in the CLI (35.5 at hidden 5120, h200-sxm-nvlink, TP 8)."""
    inputs = state.Inputs(engine="vllm", hidden=5120)
    frame = data.crossover_frame(data.profile_text(inputs.profile, {}), inputs.spec)
    got = float(frame.set_index("strategy").loc[data.FOCUS, "crossover_batch"])
    cli = crossover(inputs.spec.scenario(1.0).with_(num_spec_tokens=3), data.FOCUS, data.profile_from_text(
        data.profile_text(inputs.profile, {})), batch_range=data.CROSSOVER_RANGE)
    assert got == pytest.approx(cli.batch, rel=1e-9)


def test_preset_params_fill_the_model_numbers():
    back, warnings = state.parse_query_params({"preset": "qwen3-8b-eagle3"}, profiles=PROFILES,
                                              presets=list(presets().index))
    assert warnings == []
    expected = preset("qwen3-8b-eagle3")
    assert (back.vocab, back.draft_vocab, back.d2t, back.hidden) == (
        expected["vocab"], expected["draft_vocab"], expected["d2t"], expected["hidden"])


def test_bad_query_params_fall_back_one_by_one():
    params = {"batch": "0", "k": "2.5", "bmin": "64", "bmax": "8", "profile": "upload: x", "tab": "Nope",
              "itl": "nan", "nodes": "2"}
    back, warnings = state.parse_query_params(params, profiles=PROFILES, presets=["llama4-maverick"])
    assert back == state.Inputs(nodes=2)
    assert len(warnings) == 6  # batch, k, tab, itl, profile, the bmin/bmax pair


def test_session_rejects_a_typed_tp_that_is_not_a_number():
    values = state.session_values(state.Inputs()) | {"tp": "two"}
    with pytest.raises(InputError, match="tp: expected a positive integer"):
        state.inputs_from_session(values)
    assert state.inputs_from_session(values | {"tp": "12"}).tp == 12


# -- uploads -------------------------------------------------------------------------------------------
def measurement_csv(profile_name: str = "h200-sxm-nvlink", scale: float = 1.0) -> pd.DataFrame:
    """Collective rows priced by a bundled profile (times `scale`), in the measurement schema."""
    profile = load_profile(profile_name)
    rows = []
    for ws in (2, 8):
        for b in 2 ** np.arange(8, 24, 3):
            t = scale * float(collective_time_us(profile, "all_gather", b, ws, 1, "graph"))
            rows.append({"op": "all_gather", "gpu": "test", "dtype": "bf16", "mode": "graph", "world_size": ws,
                         "nodes": 1, "bytes_per_rank": int(b), "median_us": t})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("name, payload, message", [
    ("p.yaml", b"a: 1", "expected a .json profile"),
    ("p.json", b"   ", "empty file"),
    ("p.json", b"\xff\xfe{}", "not UTF-8"),
    ("p.json", b"[1, 2]", "a profile must be a JSON object"),
    ("p.json", b'{"schema_version": 1, "name": "x", "provenance": {"kind": "derived", "source": "s", "gpu": "g"},'
               b' "collectives": [], "kernels": {"graph_kernel_us": NaN, "eager_launch_us": 1, "ops": {}}}',
     "NaN is not a JSON number"),
    ("m.csv", b"op,mode\nall_gather,graph\n", "missing column(s) world_size, median_us"),
    ("m.csv", b"op,mode,world_size,bytes_per_rank,median_us\nall_gather,graph,8,1024,nan\n", "median_us row 2"),
    ("m.csv", b'op,mode\n"unterminated', "m.csv"),
])
def test_parse_upload_rejects_bad_files(name, payload, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        uploads.parse_upload(name, payload)


def test_parse_upload_rejects_oversized_files():
    with pytest.raises(InputError, match="larger than the 20 MB limit"):
        uploads.parse_upload("big.json", b" " * (uploads.MAX_UPLOAD_BYTES + 1))


def test_measurement_upload_without_calibration_fit(monkeypatch):
    monkeypatch.setitem(sys.modules, "calibration.fitting.fit", None)  # import now raises ImportError
    payload = measurement_csv().to_csv(index=False).encode()
    with pytest.raises(InputError, match=uploads.NEEDS_FIT):
        uploads.parse_upload("m.csv", payload)


def test_measurement_upload_is_fitted(monkeypatch):
    """The upload plumbing: validated frame in, profile dict out, measurements kept for the calibration tab."""
    seen = {}

    def fake_fit(frame, *, name):
        seen.update(name=name, rows=len(frame), cols=set(frame.columns))
        return json.loads((ROOT / "data/profiles/a100-sxm-nvlink.json").read_text()) | {"name": name}

    import calibration.fitting.fit as real

    fake = type(sys)("calibration.fitting.fit")
    fake.fit_measurements = fake_fit
    fake.bin_repeats = lambda frame: frame  # no repeated points here
    fake.MAX_GROUP_SIZES = getattr(real, "MAX_GROUP_SIZES", 10**6)  # the upload's size limit per curve
    monkeypatch.setitem(sys.modules, "calibration.fitting.fit", fake)
    frame = measurement_csv()
    up = uploads.parse_upload("cluster-7.csv", frame.to_csv(index=False).encode())
    assert seen["name"] == "cluster-7" and seen["rows"] == len(frame) and "backend" in seen["cols"]
    assert up.label == "upload: cluster-7" and up.profile.name == "cluster-7"
    assert pd.read_csv(io.StringIO(up.measurements_csv))["median_us"].tolist() == frame["median_us"].tolist()


# -- tables and their CSV --------------------------------------------------------------------------------
def parse_csv(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(tables.csv_bytes(frame)))


@pytest.fixture(scope="module")
def ev():
    return evaluate(state.Inputs(batch=96, engine="none"), {})


def test_verdict_csv(ev):
    out = parse_csv(tables.verdict_table(ev.point, ev.crossovers))
    pred = predict(ev.inputs.spec.scenario(96), ev.profile)
    assert list(out["strategy"]) == list(STRATEGIES)
    for name in STRATEGIES:
        row = out[out["strategy"] == name].iloc[0]
        assert row["total_us"] == pytest.approx(pred.total_us(name).item())
        assert row["saving_per_draft_call_us"] == pytest.approx(pred.saving_us(name).item())
        assert row["saving_per_decode_step_us"] == pytest.approx(3 * pred.saving_us(name).item())
        assert bool(row["fastest"]) == (name == fastest(pred))
    focus = out[out["strategy"] == FOCUS].iloc[0]
    assert focus["crossover_batch"] == pytest.approx(crossover(pred.scenario, FOCUS, ev.profile).batch)
    assert np.isnan(out[out["strategy"] == BASELINE].iloc[0]["crossover_batch"])


def test_breakdown_csv_sums_to_the_totals(ev):
    out = parse_csv(tables.breakdown_table(ev.point))
    assert {"strategy", "component", "time_us", "share_pct"} <= set(out.columns)
    pred = predict(ev.inputs.spec.scenario(96), ev.profile)
    for name, group in out.groupby("strategy"):
        assert group["time_us"].sum() == pytest.approx(pred.total_us(name).item())
        assert group["share_pct"].sum() == pytest.approx(100.0)
    comps = out[out["strategy"] == BASELINE].set_index("component")["time_us"]
    assert comps["all_gather"] == pytest.approx(pred.strategies[BASELINE].components_us["all_gather"].item())


def test_sweep_csv(ev):
    out = parse_csv(per_call.sweep_table(data.sweep_frame(ev.profile_text, ev.inputs.spec, 1, 4096)))
    assert out["batch"].min() == 1 and out["batch"].max() == 4096
    assert {1, 2, 1024, 4096} <= set(out["batch"])
    sample = out[(out["batch"] == 1024) & (out["strategy"] == FOCUS)].iloc[0]
    pred = predict(ev.inputs.spec.scenario(1024.0), ev.profile)
    assert sample["total_us"] == pytest.approx(pred.total_us(FOCUS).item())
    assert sample["saving_pct"] == pytest.approx(pred.saving_pct(FOCUS).item())


def test_heatmap_csvs(ev):
    batches = data.heat_batches(1, 256)
    assert batches == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    spec = ev.inputs.spec
    vocab = parse_csv(pd.concat([data.heat_vocab_row(ev.profile_text, spec, v, batches)
                                 for v in data.heat_vocabs(spec)]))
    cell = vocab[(vocab["draft_vocab"] == 32000) & (vocab["batch"] == 128)].iloc[0]
    sc = Scenario(vocab=spec.vocab, draft_vocab=32000, d2t=True, tp=spec.tp, num_spec_tokens=3, batch=128)
    assert cell["saving_per_decode_step_us"] == pytest.approx(
        predict(sc, ev.profile).saving_per_decode_step_us(FOCUS).item())
    tp = parse_csv(pd.concat([data.heat_tp_row(ev.profile_text, spec, p, batches)
                              for p in data.heat_tps(spec, ev.profile)]))
    # TP 16 does not fit one 8-GPU node: the CLI refuses it, so the heatmap does not price it (issue 18)
    assert ev.profile.provenance.gpus_per_node == 8 and spec.nodes == 1
    assert sorted(tp["tp"].unique()) == [1, 2, 4, 8]
    assert 16 in data.heat_tps(dataclasses.replace(spec, tp=16, nodes=2), ev.profile)
    cell = tp[(tp["tp"] == 2) & (tp["batch"] == 8)].iloc[0]
    sc = Scenario(vocab=spec.vocab, tp=2, num_spec_tokens=3, batch=8)
    assert cell["saving_per_draft_call_us"] == pytest.approx(predict(sc, ev.profile).saving_us(FOCUS).item())
    assert cell["fastest_strategy"] == fastest(predict(sc, ev.profile))


def test_impact_csv(ev):
    """The Impact tab's rows are the Answer's (costmodel.answers.point.impact_rows): ITL - saving / 1000 with the
    saving of the answer's quantity, TPOT = ITL / acceptance length; the acceptance length is checked where the
    question is built (1..K+1)."""
    inputs = dataclasses.replace(ev.inputs, itl_ms=12.0, acceptance_length=2.0)
    result = answer_of(ev.profile_text, inputs).point
    out = parse_csv(pd.DataFrame(impact_rows(result)))
    assert list(out["strategy"]) == list(STRATEGIES[1:])  # every alternative strategy
    saving = result["strategies"][FOCUS]["saving_per_decode_step_us"]
    row = out[out["strategy"] == FOCUS].iloc[0]
    assert row["itl_after_ms"] == pytest.approx(12.0 - saving / 1000)
    assert row["tpot_before_ms"] == pytest.approx(6.0)
    assert row["itl_reduction_pct"] == pytest.approx(100 * (saving / 1000) / 12.0)
    assert row["output_throughput_gain_pct"] == pytest.approx(100 * (12.0 / (12.0 - saving / 1000) - 1))
    for bad in (0.5, 4.01):  # K = 3: 1..4 tokens per decode step
        with pytest.raises(InputError, match=r"acceptance-length: must be in 1..K\+1 = 1..4"):
            answer_of(ev.profile_text, dataclasses.replace(inputs, acceptance_length=bad))
    assert len(impact_rows(answer_of(ev.profile_text, dataclasses.replace(inputs, acceptance_length=4.0)).point)) == 4


def test_impact_names_the_itl_reduction_and_the_speed_up():
    """25 -> 22.3 ms (a saving of 2,700 us per decode step) is a 10.8% ITL reduction and a 12.1% speed-up."""
    im = impact_change(2700.0, 25.0, 2.0, FOCUS).to_dict()
    result = {"strategies": {BASELINE: {"saving_per_decode_step_us": 0.0},
                             FOCUS: {"saving_per_decode_step_us": 2700.0, "impact": im}}}
    row = impact_rows(result)[0]
    assert row["itl_after_ms"] == pytest.approx(22.3)
    assert round(row["itl_reduction_pct"], 1) == 10.8
    assert round(row["output_throughput_gain_pct"], 1) == 12.1
    assert math.isnan(row["output_throughput_gain_low_pct"])  # no interval given: none invented


def test_impact_tab_shows_every_strategy_with_intervals_and_bounds_the_acceptance_length():
    at = run_app({"tab": "Impact", "itl": "25", "accept": "3", "k": "3"})
    assert not at.error
    shown = frame_with(at, "output_throughput_gain_pct")
    assert list(shown["strategy"]) == list(STRATEGIES[1:])
    u = propagate(shown_scenario(at), load_profile(at.session_state["profile"]), level=0.9, with_crossover=False)
    focus = shown.set_index("strategy").loc[FOCUS]
    assert focus["saving_low_us"] == pytest.approx(u[FOCUS].saving_per_decode_step_us.low)
    assert focus["output_throughput_gain_low_pct"] < focus["output_throughput_gain_pct"] \
        < focus["output_throughput_gain_high_pct"]
    at.number_input(key="acceptance_length").set_value(4.5).run()  # above K + 1 = 4
    assert not at.exception
    assert errors(at) == [  # the sidebar input's label, not the CLI flag (issue 43: state.in_dashboard_words)
        "“Mean acceptance length (tokens / decode step)”: must be in 1..K+1 = 1..4 tokens per decode step with K = 3, "
        "got 4.5"]


def test_calibration_points_and_residuals(tmp_path):
    frame = measurement_csv(scale=2.0)  # measured = 2 x the profile prediction -> error -50 %
    (tmp_path / "runs").mkdir()
    frame.to_csv(tmp_path / "runs" / "ag.csv", index=False)
    doc = json.loads((ROOT / "data/profiles/h200-sxm-nvlink.json").read_text())
    doc["provenance"]["files"] = ["runs/ag.csv", "runs/missing.csv", "../outside.csv", "notes.txt"]
    text = json.dumps(doc)
    points, notes = data.measured_points(text, None, str(tmp_path))
    assert len(points) == len(frame)
    assert points["rel_error_pct"].to_numpy() == pytest.approx(-50.0)  # predicted = measured / 2
    assert set(points["file"]) == {"runs/ag.csv"}
    assert notes == ["runs/missing.csv: not in this checkout", "../outside.csv: outside the repository, not read"]
    curves = data.fitted_curves(text, points)
    assert set(curves["world_size"]) == {2, 8}
    profile = data.profile_from_text(text)
    row = curves.iloc[5]
    assert row["predicted_us"] == pytest.approx(float(collective_time_us(
        profile, "all_gather", row["bytes_per_rank"], int(row["world_size"]), 1, "graph")))
    # an uploaded measurement CSV is plotted too; world size 1 rows are named, not plotted as -100% errors
    single = frame.iloc[:2].assign(world_size=1)
    points, notes = data.measured_points(text, pd.concat([frame, single]).to_csv(index=False), str(tmp_path))
    assert set(points["file"]) == {"runs/ag.csv", "upload"} and (points["world_size"] > 1).all()
    assert any(n.startswith("upload: 2 collective rows at world size 1 not plotted") for n in notes)
    assert "rel_error_pct" in parse_csv(points).columns


def test_provenance_and_fit_report_tables():
    profile = load_profile()
    prov = tables.provenance_table(profile)
    assert set(prov["provenance"]) <= {"derived", "measured"}
    assert len(prov) == len(profile.collectives) + len(profile.kernel_ops) + len(profile.kernel_tables)
    report = parse_csv(tables.records_table([{"op": "all_gather", "n_points": 3, "breakpoints_bytes": [10, 20]}]))
    assert report.iloc[0]["breakpoints_bytes"] == "[10, 20]" and report.iloc[0]["n_points"] == 3


# -- issue 12: right at a glance -------------------------------------------------------------------------
def test_tiles_name_their_strategy_and_a_baseline_win_is_not_a_green_zero():
    at = run_app({"batch": "2"})
    assert not at.error
    sc = shown_scenario(at)
    pred = predict(sc, load_profile(at.session_state["profile"]))
    best = fastest(pred)
    assert best == BASELINE  # batch 2: the full all-gather wins, the case the issue reports
    shown = captions(at)
    assert shown.count(FOCUS) == 3 and f"fastest: {BASELINE}" in shown
    tile = next(m for m in at.metric if m.label == "Best saving / decode step")
    assert tile.value == "baseline" and tile.delta == "keep the default"
    assert tile.proto.color == at.metric[1].proto.color  # the same 'off' colour as the neutral tiles
    assert not any(m.value.startswith("+0") for m in at.metric)
    # a large saving is shown in ms, with separators, not cut off
    at.number_input(key="batch").set_value(65536).run()
    saving = predict(sc.with_(batch=65536), load_profile(at.session_state["profile"])).saving_per_decode_step_us(FOCUS)
    assert saving.item() > 1000
    assert metric(at, "Saving / decode step") == format_us(saving.item(), sign=True)
    assert metric(at, "Saving / decode step").endswith(" ms") and len(metric(at, "Saving / decode step")) <= 12


def test_sensitivity_colour_follows_the_sign_of_the_saving_change():
    at = run_app({"tab": "Sensitivity", "batch": "2"})
    assert not at.error
    sc = shown_scenario(at)
    profile = load_profile(at.session_state["profile"])
    assert predict(sc, profile).saving_us(FOCUS).item() < 0  # negative saving: elasticity and change signs differ
    table = elasticities(sc, profile, FOCUS).head(12)
    drawn = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert drawn["layer"][0]["encoding"]["y"]["sort"] == list(table["parameter"])  # the app draws this table
    spec = dashboard_charts.sensitivity_chart(table).to_dict()
    bars = spec["layer"][0]
    assert bars["encoding"]["color"]["field"] == "effect"
    rows = spec["datasets"][bars["data"]["name"]]
    assert len(rows) == len(table)
    for row in rows:  # the saving is negative: its words are the loss's (issue 43 item 6)
        assert row["effect"] == ("narrows the loss" if row["saving_change_us_per_1pct"] >= 0 else
                                 "widens the loss")
    assert bars["encoding"]["color"]["scale"]["domain"] == ["narrows the loss", "widens the loss"]
    assert any(r["elasticity"] > 0 > r["saving_change_us_per_1pct"] for r in rows)  # the case the issue reports
    assert any("the saving is negative here, so positive widens the loss" in m.value for m in at.markdown)
    # every bar labelled: the axis keeps every parameter, and each bar carries its value
    assert bars["encoding"]["y"]["axis"]["labelOverlap"] is False
    labelled = sum(len(spec["datasets"][layer["data"]["name"]]) for layer in spec["layer"][1:3])
    assert labelled == len(rows)


def test_tables_are_formatted_for_people_and_the_csv_keeps_raw_values():
    frame = pd.DataFrame({"strategy": ["a", "b"], "saving_per_decode_step_us": [51090.19, -0.5],
                          "crossover_batch": [5.634, None], "status": ["wins_everywhere", "crossover"],
                          "wire_bytes_per_rank": [3229696.0, 512.0]})
    shown = tables.display(frame).to_html()
    for text in ("+51.1 ms", "-0.50 µs", "5.6", "wins at every batch", "crosses over", "3.08 MiB", "512 B"):
        assert text in shown
    assert "None" not in shown and "nan" not in shown and "wins_everywhere" not in shown
    assert parse_csv(frame)["saving_per_decode_step_us"].tolist() == [51090.19, -0.5]
    assert tables.column_labels(frame)["saving_per_decode_step_us"] == "saving per decode step (µs)"


def test_tp_above_the_gpus_per_node_is_refused_as_the_cli_refuses_it():
    """One validation for every face (issue 35): TP 16 on one 8-GPU node is the CLI's one-line error here too
    (the dashboard used to warn and price it)."""
    at = run_app({"tp": "16"})
    want = ("tp 16 on 1 node(s) needs 16 GPUs per node, but profile h200-sxm-nvlink has 8 GPUs per node: set "
            "“Nodes” to 2 (or more)")  # the CLI's "pass --nodes 2" in the sidebar's words (issue 43)
    assert errors(at) == [want]
    at.number_input(key="nodes").set_value(2).run()
    assert not errors(at)


# -- untrusted text: no link, image or autolink from a name, a profile field or a query parameter ---------------
EVIL = "![i](https://evil.example/i.png) [click](https://evil.example) mail@evil.example www.evil.example"
MARKDOWN_ELEMENTS = ("markdown", "caption", "warning", "info", "error", "success", "subheader", "title", "header")
LINK_SYNTAX = re.compile(r"(?<!\\)(\]\(|!\[|<)")  # an unescaped link / image / HTML / autolink opening
AUTOLINK = re.compile(r"https?://|www\.|[-.\w+]+@[-\w]+\.", re.IGNORECASE | re.ASCII)  # GFM autolink literals


def markdown_sources(at: AppTest) -> list[str]:
    return [el.value for kind in MARKDOWN_ELEMENTS for el in getattr(at, kind)]


def assert_no_link_forms(at: AppTest) -> None:
    """No Markdown element of the page can form a link or an image: no unescaped `](`, `![` or `<`, and no GFM
    autolink literal in the text once the escapes are resolved."""
    for source in markdown_sources(at):
        assert not LINK_SYNTAX.search(source), source
        assert not AUTOLINK.search(resolved(source)), source


def test_hostile_query_params_show_as_plain_text():
    query = {"tab": "[click](https://evil.example)", "preset": "mail@evil.example",
             "profile": "![i](https://evil.example/i.png)", "x<img>": "1", "www.evil.example": "a@b.co"}
    at = run_app(query)
    assert not at.error
    warnings = [w.value for w in at.warning]
    for name in ("tab", "preset", "profile"):  # each is named, neutralised, and reads as it was typed
        assert any(markdown_text(f"{name}={query[name]!r}") in w for w in warnings), name
        assert any(f"{name}={query[name]!r}" in unescape(w) for w in warnings), name
    assert any(markdown_text("'x<img>'") in w for w in warnings)
    assert any(markdown_text("'www.evil.example'") in w for w in warnings)
    assert_no_link_forms(at)


def hostile_profile() -> bytes:
    doc = json.loads((ROOT / "data/profiles/h100-sxm-nvlink.json").read_text())
    doc.update(name=EVIL + " \x1b]8;;x\x07", title=EVIL)
    doc["provenance"].update(source=EVIL, gpu=EVIL, interconnect=EVIL, citations=[EVIL, "see mail@evil.example"])
    return json.dumps(doc).encode()


def test_hostile_profile_fields_show_as_plain_text():
    at = run_app({"tab": "Calibration"})
    at.file_uploader(key="upload").set_value(("evil.json", hostile_profile(), "application/json")).run()
    assert not at.exception and not at.error
    assert at.session_state["profile"].startswith("upload: ![i]")
    inert = markdown_text(EVIL)
    sources = [m.value for m in at.markdown]
    assert any(f"**{inert}**" in m for m in sources)  # the title in the provenance badge
    assert inert in sources  # provenance.source
    assert any(f"GPU: {inert}" in m and f"interconnect: {inert}" in m for m in sources)
    assert any(f"- {inert}" in m and markdown_text("see mail@evil.example") in m for m in sources)  # citations
    assert any(EVIL in unescape(m) for m in sources)  # what the reader sees is the text as uploaded
    assert_no_link_forms(at)
    at.session_state["tab"] = "Heatmaps"
    at.run()
    assert not at.exception
    assert any(m.value.startswith("**Saving of") for m in at.markdown)  # the Heatmaps tab is drawn
    assert_no_link_forms(at)


def test_hostile_nccl_tests_gpu_and_file_names_show_as_plain_text():
    pytest.importorskip("calibration.fitting.fit")
    pytest.importorskip("calibration.logs.import_nccl_tests")
    gpu = "NVIDIA ![g](https://evil.example/g.png) www.evil.example"
    at = run_app({"tab": "Calibration"})
    log = nccl_tests_log().replace("NVIDIA H200", gpu).encode()
    at.file_uploader(key="upload").set_value(("mail@evil.example.log", log, "text/plain")).run()
    assert not at.exception and not at.error
    assert at.session_state["profile"] == "upload: mail@evil.example"  # the file's stem names the profile
    sources = [m.value for m in at.markdown]
    assert any(f"partly measured on {markdown_text(gpu)}" in m for m in sources)  # the badge
    assert any(f"GPU: {markdown_text(gpu)}" in m for m in sources)  # the provenance facts
    assert any(markdown_text("mail@evil.example (fitted from mail@evil.example.log") in m for m in sources)
    assert_no_link_forms(at)


def test_parallel_drafting_labels():
    at = run_app({"drafting": "parallel", "k": "4", "batch": "16"})
    tile = next(m for m in at.metric if m.label == "Saving / decode step")
    assert tile.delta == "1 draft call of 16×4 = 64 rows"
    at.radio(key="drafting").set_value("serial").run()
    tile = next(m for m in at.metric if m.label == "Saving / decode step")
    assert tile.delta == "4 draft calls of 16 rows"


def test_sweep_charts_mark_the_batch_the_crossover_and_its_band():
    at = run_app({"batch": "100"})
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")[:2]]
    for spec in specs:
        marker = spec["layer"][-1]
        assert marker["data"]["values"] == [{"batch": 100.0, "label": "batch 100"}]
        marks = [layer["mark"] for layer in spec["layer"] if "mark" in layer]
        types = [m["type"] if isinstance(m, dict) else m for m in marks]
        assert "rect" in types and "rule" in types  # the crossover interval band and the crossover rule
    saving_axis = next(layer["encoding"]["y"]["axis"] for layer in specs[1]["layer"]
                       if "axis" in layer.get("encoding", {}).get("y", {}))
    import altair as alt

    for spec in specs:  # the plain-dict charts are valid Vega-Lite (with the batch marker)
        alt.LayerChart.from_dict(spec, validate=True)
    assert 0.0 in saving_axis["values"] and all(v == 0 or math.log10(abs(v)).is_integer()
                                                for v in saving_axis["values"])


def test_multi_file_upload_yields_one_profile_with_the_base_named():
    """A collectives CSV, a kernels CSV and an nccl-tests log of one cluster: fitted into ONE profile, the rest
    from the base profile the user picked, and the page says which parameters came from it."""
    pytest.importorskip("calibration.fitting.fit")
    collectives = measurement_csv().assign(gpu="NVIDIA H200")
    kernels = pd.read_csv(ROOT / "data/calibration/cpu-kernels/kernels.csv").assign(gpu="NVIDIA H200")
    kernels = kernels[kernels["op"] == "local_argmax"].head(12)
    at = run_app()
    at.selectbox(key="upload_base").set_value("h100-sxm-nvlink").run()
    at.file_uploader(key="upload").set_value([
        ("coll.csv", collectives.to_csv(index=False).encode(), "text/csv"),
        ("kern.csv", kernels.to_csv(index=False).encode(), "text/csv"),
        ("ag8.log", nccl_tests_log().encode(), "text/plain")])
    at.run()
    assert not at.exception and not at.error
    uploaded = [p for p in at.selectbox(key="profile").options if p.startswith("upload: ")]
    assert uploaded == ["upload: coll+kern+ag8"]  # one profile, not three
    assert at.selectbox(key="profile").value == uploaded[0]
    profile = data.profile_from_text(at.session_state["_uploads"][uploaded[0]])
    parts = tables.provenance_table(profile)
    measured = parts[parts["provenance"] == "measured"]
    assert {"all_gather"} <= set(measured.loc[measured["part"] == "collective", "name"])
    assert "local_argmax" in set(measured.loc[measured["part"] == "kernel", "name"])
    assert "base h100-sxm-nvlink" in profile.title
    from_base = parts[parts["provenance"] != "measured"]
    note = next(c for c in captions(at) if c.startswith(f"From the base profile h100-sxm-nvlink ({len(from_base)} "
                                                        "parts): "))
    # a short note, not a run-on list of every part: the first four, then how many more (the Calibration tab)
    taken = base_parameters(profile)
    assert len(taken) == len(from_base) > 4 and ", ".join(taken[:4]) in note
    assert note.endswith(f" and {len(taken) - 4} more (Calibration tab).")
    # the measurements of all three files are plotted together
    points, _ = data.measured_points(at.session_state["_uploads"][uploaded[0]],
                                     at.session_state["_measurements"][uploaded[0]])
    assert len(points) == len(collectives) + 17


def test_recommendation_panel_matches_costmodel_recommend():
    at = run_app({"tab": "Recommendation", "k": "5", "itl": "25", "accept": "3"})
    assert not at.error
    name = at.session_state["workload"]
    assert name in data.example_workloads()
    wl = parse_workload((ROOT / "data/examples" / name).read_text(), name)
    sc = shown_scenario(at)
    kwargs = {f: getattr(sc, f).item() if hasattr(getattr(sc, f), "item") else getattr(sc, f)
              for f in ("vocab", "draft_vocab", "d2t", "dtype", "tp", "nodes", "num_spec_tokens", "drafting", "mode",
                        "impl")}
    rec = recommend(kwargs, wl, load_profile(at.session_state["profile"]), itl_ms=25.0, acceptance_length=3.0)
    boxes = [b.value for b in (*at.success, *at.warning, *at.info)]
    assert any(unescape(b) == rec.headline for b in boxes)
    flag = rec.flag
    tile = next(m for m in at.metric if m.label == "Saving / decode step" and m.value ==
                format_us(flag.expected_saving_per_decode_step_us, sign=True))
    assert tile is not None and flag.interval_us is not None
    assert f"90% interval: {format_interval_us(*flag.interval_us)}" in captions(at)
    assert at.code[0].value == next(c.text for c in rec.configs if c.engine == "vllm")
    assert '"use_local_argmax_reduction": ' in at.code[0].value
    table = frame_with(at, "win_share_pct").set_index("strategy")
    assert table.loc[FOCUS, "win_share_pct"] == pytest.approx(100 * flag.win_share)
    assert table["win_share_pct"].sum() == pytest.approx(100.0)
    # a bad workload upload is one error line and keeps the panel
    at.file_uploader(key="workload_upload").set_value(("w.csv", b"batch,weight\n0,1\n", "text/csv")).run()
    assert not at.exception
    assert any(e.startswith("workload w.csv: batch must be an integer") for e in errors(at))


def test_exports_png_svg_and_an_offline_html_report(ev):
    pytest.importorskip("vl_convert")
    import struct

    from dashboard import export

    table = per_call.sweep_table(data.sweep_frame(ev.profile_text, ev.inputs.spec, 1, 4096))
    spec = dashboard_charts.with_batch_marker(dashboard_charts.sweep_chart(table, 5.0, (3.0, 8.0)), 96)
    svg = export.chart_svg(spec)
    width, height = (float(re.search(rf'{k}="([0-9.]+)"', svg).group(1)) for k in ("width", "height"))
    png = export.chart_png(spec, scale=2)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (round(2 * width), round(2 * height))
    assert width >= export.EXPORT_WIDTH_PX  # a stretched chart gets a real width in a file
    page = export.report_html(ev)
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 3
    assert "<script" not in page.lower() and not re.search(r"(?:src|href)=[\"']https?:", page)
    assert ev.verdict.headline() in page and ev.profile.name in page and "Provenance" in page


@pytest.mark.parametrize("value, signed, text", [
    (0.0, True, "0 µs"), (5.634, False, "5.63 µs"), (88.14, True, "+88.1 µs"), (264.43, True, "+264 µs"),
    (-12.3, True, "-12.3 µs"), (999.4, False, "999 µs"), (1234.5, False, "1.23 ms"), (51090.19, True, "+51.1 ms"),
    (1234567.0, False, "1,235 ms"), (float("nan"), True, MISSING), (None, True, MISSING),
])
def test_durations_for_people(value, signed, text):
    assert format_us(value, sign=signed) == text


def test_numbers_percentages_bytes_batches_for_people():
    from costmodel.io.formatting import format_bytes, format_number, format_pct, status_text

    assert [format_number(v) for v in (0.004, 5.634, 1024.0, 65536.0)] == ["0", "5.63", "1,024", "65,536"]
    assert [format_pct(v) for v in (71.04, -12.1, 3500.0, 0.01)] == ["+71.0%", "-12.1%", "+3,500%", "0%"]
    assert [format_bytes(v) for v in (8, 1536, 3.06 * 2**20)] == ["8 B", "1.50 KiB", "3.06 MiB"]
    assert [format_batch(v) for v in (5.634, 64.0, 4096.0, 150.4)] == ["5.6", "64", "4,096", "150"]
    assert format_interval_us(72.89, 102.9) == "+72.9 to +103 µs"
    assert format_interval_us(-2000.0, 51090.0) == "-2.00 to +51.1 ms"  # one unit: that of the larger end
    assert format_ms(22.3, decimals=3) == "22.300 ms"
    assert status_text("wins_everywhere") == "wins at every batch" and status_text(None) == MISSING


def test_engine_choice_prices_what_the_engine_executes():
    at = run_app({"engine": "vllm", "batch": "16"})
    assert not at.error and at.selectbox(key="engine").value == "vllm"
    assert at.radio(key="mode").proto.disabled  # the engine decides graph vs eager per component
    sc = shown_scenario(at)
    assert sc.engine.item() == "vllm" if hasattr(sc.engine, "item") else sc.engine == "vllm"
    pred = predict(sc, load_profile(at.session_state["profile"]))
    eager = predict(sc.with_(engine="none", mode="eager"), load_profile(at.session_state["profile"]))
    graph = predict(sc.with_(engine="none", mode="graph"), load_profile(at.session_state["profile"]))
    assert eager.saving_us(FOCUS).item() != graph.saving_us(FOCUS).item()  # the choice matters here
    # an engine runs the step: the verdict is the whole draft step's (costmodel.answers.whole_step), per call
    arch = DraftArch.from_fields({**preset_draft(at.session_state["preset"]), "vocab": int(sc.draft_vocab)})
    ws = whole_step_answer(sc, load_profile(at.session_state["profile"]), arch, intervals=False)
    focus = ws["strategies"][FOCUS]
    assert metric(at, "Saving / draft call") == format_us(focus["saving_per_draft_call_us"], sign=True)
    assert ws["strategies"][FOCUS]["saving_per_draft_call_us"] != pytest.approx(pred.saving_us(FOCUS).item())
    assert at.query_params["engine"] == "vllm"


def test_header_shows_the_clis_sources_line():
    from costmodel.answers.provenance import scenario_source_lines

    at = run_app({"profile": "cpu-gloo", "tp": "4"})
    want = scenario_source_lines(load_profile("cpu-gloo"), shown_scenario(at))
    assert want[0].startswith("sources: all_gather, all_reduce, gather, broadcast measured")
    assert markdown_text(want[0]) in [c.value for c in at.caption]


def test_h100_logs_on_the_h200_base_get_a_gpu_badge_and_the_fabric_warning():
    """issue 18: an upload measured on another GPU than its base is badged, and a base curve pricing an op the
    upload measured at another p is a warning box (the CLI's warning line)."""
    pytest.importorskip("calibration.fitting.fit")
    pytest.importorskip("calibration.logs.import_nccl_tests")
    at = run_app({"tp": "4"})
    log = nccl_tests_log().replace("NVIDIA H200", "NVIDIA H100 80GB HBM3").encode()
    at.file_uploader(key="upload").set_value(("h100.log", log, "text/plain")).run()
    assert not at.exception and not at.error
    badge = [unescape(m.value) for m in at.markdown if "another GPU's base" in m.value]
    assert len(badge) == 1 and "NVIDIA H100 80GB HBM3" in badge[0] and "NVIDIA H200 SXM" in badge[0]
    warnings = [unescape(w.value) for w in at.warning]
    assert any("all_gather at TP 4" in w and "not measured in this profile (measured: p 8" in w for w in warnings)


def test_url_carries_the_panels_and_the_workload():
    """issue 18: the top-k / collective / verification panel, the compare selection and the workload are in the
    URL (only where they differ from the panel's default) and a copied link restores them."""
    query = {"topk": "1", "topk_k": "4", "coll": "oneshot", "verify": "1", "greedy": "0.5",
             "cmp": "h100-sxm-nvlink", "cmp_show": "1", "tab": "Recommendation", "workload": "chat-diurnal.csv"}
    at = run_app(query)
    assert not at.error and not at.warning
    assert at.toggle(key="topk_show").value and at.number_input(key="topk_k").value == 4
    assert at.selectbox(key="topk_collective").value == "oneshot" and at.toggle(key="topk_verify").value
    assert at.slider(key="topk_fraction").value == 0.5
    assert at.selectbox(key="compare_with").value == "h100-sxm-nvlink" and at.toggle(key="compare_show").value
    assert at.selectbox(key="workload").value == "chat-diurnal.csv"
    assert {k: at.query_params[k] for k in query} == query
    at.number_input(key="topk_k").set_value(8).run()
    at.toggle(key="compare_show").set_value(False).run()
    assert at.query_params["topk_k"] == "8" and "cmp_show" not in at.query_params  # back at its default
    plain_app = run_app()
    assert not {"topk", "topk_k", "coll", "verify", "greedy", "cmp", "cmp_show", "workload"} & set(
        plain_app.query_params)


def test_panel_params_that_cannot_be_restored_are_warnings():
    back, warnings = state.parse_query_params({"cmp": "nope", "workload": "mine.csv", "coll": "pigeon",
                                               "greedy": "2", "topk_k": "0"}, profiles=PROFILES,
                                              presets=["llama4-maverick"], workloads=["chat-diurnal.csv"])
    assert back == state.Inputs() and len(warnings) == 5
    assert ("ignored query parameter workload='mine.csv': not an example workload (uploaded files live only in the "
            "session that uploaded them; upload it again)") in warnings
    full = state.Inputs(topk_show=True, topk_k=16, topk_collective="multimem", topk_verify=True, topk_fraction=0.25,
                        compare_with="a100-sxm-nvlink", compare_show=True, workload="chat-diurnal.csv")
    params = state.to_query_params(full)
    assert state.parse_query_params(params, profiles=PROFILES, presets=["llama4-maverick"],
                                    workloads=["chat-diurnal.csv"]) == (full, [])
    assert state.inputs_from_session(state.session_values(full)) == full


def test_a_non_monotone_measured_table_is_a_warning_in_the_header():
    """issue 18: H200 local_max bf16 32 x 8,000 = 28.0 us next to 32 x 16,000 = 6.5 us prices batch 16 at TP 4,
    vocab 32,000 (the saving jumped there with no flag); the sweep tab names it for the charts' range."""
    at = run_app({"preset": "custom", "vocab": "32000", "draft_vocab": "32000", "tp": "4", "batch": "16"})
    warning = [unescape(w.value) for w in at.warning if "non-monotone measured table" in unescape(w.value)]
    assert len(warning) == 1 and "local_max bf16 graph is non-monotone: 32 x 8,000 = 28.0 µs" in warning[0]
    assert any("non-monotone measured table node(s) price batches in this range" in c for c in captions(at))
    default = run_app()
    assert not [w for w in default.warning if "non-monotone" in unescape(w.value)]


@pytest.mark.parametrize("name", ["sweep_chart", "saving_chart"])
def test_sweep_charts_keep_a_wide_plot_in_a_narrow_container(name):
    """At 800 px the main column holds a 468 px chart (measured in Chromium, tests/dashboard/test_browser.py); fitted
    to it as Streamlit fits a stretched chart, the plot is >= 200 px wide (was ~70: 190 px of padding for the end
    labels on top of autosize's own room for them) and the y axis shows whole decades / round symlog ticks."""
    import vl_convert

    inputs = state.Inputs()
    table = per_call.sweep_table(data.sweep_frame(data.profile_text(inputs.profile, {}), inputs.spec,
                                                inputs.batch_min, inputs.batch_max))
    spec = getattr(dashboard_charts, name)(table, 3.5, None)
    svg = vl_convert.vegalite_to_svg({**spec, "width": 468, "autosize": {"type": "fit", "contains": "padding"}})
    x_axis = re.search(r'role-axis-domain" pointer-events="none"><line transform="translate\(0,0\)" x2="([\d.]+)" '
                       r'y2="0"', svg)
    assert x_axis is not None and float(x_axis.group(1)) >= 200
    ticks = next(layer["encoding"]["y"]["axis"]["values"] for layer in spec["layer"]
                 if "values" in layer.get("encoding", {}).get("y", {}).get("axis", {}))
    if name == "sweep_chart":
        assert all(math.log10(t).is_integer() for t in ticks) and 1000.0 in ticks
    else:
        assert 0.0 in ticks and all(t == 0 or math.log10(abs(t)).is_integer() for t in ticks)


def test_best_pair_line_says_why_it_differs_from_the_headline():
    at = run_app()
    line = next(c for c in captions(at) if c.startswith("Best (strategy, collective)"))
    pair = line.split(": (", 1)[1].split(")")[0]
    if not pair.endswith(", nccl"):  # another collective wins: the line says the headline is NCCL-only
        assert "the headline above ranks the strategies with NCCL collectives only" in line
    assert " us" not in line and "µs" in line  # the page's unit


def test_html_report_states_engine_impact_and_sources():
    pytest.importorskip("vl_convert")
    from dashboard import export

    inputs = state.Inputs(engine="vllm", itl_ms=12.5, acceptance_length=3.0)
    ev = evaluate(inputs, {})
    page = unescape(export.report_html(ev))
    im = impact_change(ev.verdict.focus_saving_decode_us, 12.5, 3.0, FOCUS)
    assert "engine" in page and "vllm" in page
    assert f"ITL {im.itl_before_ms:.3f} -&gt; {im.itl_after_ms:.3f} ms" in page or \
        f"ITL {im.itl_before_ms:.3f} -> {im.itl_after_ms:.3f} ms" in page
    assert "sources: all_gather" in page
    plain_page = unescape(export.report_html(evaluate(state.Inputs(engine="none"), {})))
    assert "Impact: not computed" in plain_page and "none (every component graph)" in plain_page


def test_breakdown_stacks_components_in_execution_order():
    """issue 18: the bars were stacked alphabetically; now in the order each strategy runs its components, the
    order `predict` lists them in (the CLI's '= all_gather ..., relayout_copy ..., argmax ...')."""
    inputs = state.Inputs()
    table = tables.breakdown_table(evaluate(inputs, {}).point)
    pred = predict(inputs.spec.scenario(float(inputs.batch)), load_profile(inputs.profile))
    for name, r in pred.strategies.items():
        want = [c for c, v in r.components_us.items() if float(np.asarray(v).reshape(-1)[0]) > 0]
        assert list(table.loc[table["strategy"] == name, "component"]) == want, name
    spec = dashboard_charts.breakdown_chart(table).to_dict()
    assert spec["layer"][0]["encoding"]["order"]["field"] == "step"


def test_error_lines_name_the_dashboard_inputs_not_cli_flags():
    """issue 43: dashboard error lines said "--acceptance-length: must be in 1..K+1 ..." - a CLI flag no dashboard
    reader types. The one validation stays the CLI's; every st.error line names the input that sets the value
    (the Impact tab's line: test_impact_tab_shows_every_strategy_with_intervals_and_bounds_the_acceptance_length)."""
    assert state.in_dashboard_words("--itl-ms: needs --acceptance-length too (1..K+1); --bogus stays") == (
        "“Baseline ITL (ms)”: needs “Mean acceptance length (tokens / decode step)” too (1..K+1); --bogus stays")
    assert state.in_dashboard_words("needs 16 GPUs per node: pass --nodes 2 (or more); pass --out FILE") == (
        "needs 16 GPUs per node: set “Nodes” to 2 (or more); pass --out FILE")
    sources = [ROOT / "app.py", *sorted((ROOT / "dashboard").glob("*.py"))]
    shown = [line for path in sources for line in path.read_text().splitlines() if "st.error(" in line]
    assert len(shown) >= 10 and all("in_dashboard_words(" in line for line in shown), shown
