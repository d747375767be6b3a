"""Workload parsing (CSV, vLLM /metrics, vllm bench serve JSON) and the weighted recommendation."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import InputError, Scenario, load_profile, predict
from costmodel.answers.recommend import FLAG_STRATEGY, impact_change, recommend
from costmodel.answers.workload import Workload
from costmodel.model.components import BASELINE, STRATEGIES
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.presets import preset
from costmodel.profiles.replicates import replicate_profiles
from costmodel.serving.workload import load_workload, parse_workload
from tests.conftest import ROOT

EXAMPLES = ROOT / "data" / "examples"
MAVERICK = {**preset("llama4-maverick"), "tp": 8, "num_spec_tokens": 5}


def scrape(running: dict[str, float], waiting: float = 2.0) -> str:
    """One vLLM /metrics scrape (text format) with a gauge per engine and some unrelated series."""
    lines = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
             "# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{engine="{e}",model_name="m"}} {v}' for e, v in running.items()]
    lines += ["# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
              "# TYPE vllm:num_requests_waiting gauge",
              f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}',
              "# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.",
              "# TYPE vllm:iteration_tokens_total histogram",
              'vllm:iteration_tokens_total_bucket{le="1.0",model_name="m"} 3.0',
              'vllm:iteration_tokens_total_bucket{le="+Inf",model_name="m"} 9.0',
              'vllm:iteration_tokens_total_count{model_name="m"} 9.0',
              'vllm:iteration_tokens_total_sum{model_name="m"} 400.0']
    return "\n".join(lines) + "\n"


# -- workloads -----------------------------------------------------------------------------------------
def test_csv_workload_sums_duplicates_and_normalises():
    wl = parse_workload("# a comment\nbatch,weight,note\n8,1,a\n1,2,b\n8,3,c\n64,0,d\n", "w.csv")
    assert wl.source == "csv" and wl.batch.tolist() == [1, 8] and wl.weight.tolist() == pytest.approx([1 / 3, 2 / 3])
    assert wl.mean_batch == pytest.approx(1 / 3 + 16 / 3)


@pytest.mark.parametrize("text, needle", [
    ("batch,share\n1,1\n", "missing weight"),
    ("batch,weight\n1.5,1\n", "row 2"),
    ("batch,weight\n4,abc\n", "row 2"),
    ("batch,weight\n0,1\n", "batch must be"),
    ("batch,weight\n4,-1\n", "weights"),
    ("batch,weight\n4,0\n", "weights"),
])
def test_bad_csv_workloads_are_one_line_errors(text, needle):
    with pytest.raises(InputError, match=needle):
        parse_workload(text, "w.csv", "csv")


def test_metrics_scrapes_use_every_running_sample_and_drop_idle():
    text = scrape({"0": 12, "1": 3}) + scrape({"0": 0, "1": 3}) + scrape({"0": 12, "1": 40})
    wl = parse_workload(text, "scrapes.txt")
    assert wl.source == "vllm-metrics" and wl.observations == 6
    # samples 12, 3, (0 dropped), 3, 12, 40 -> B 3: 2/5, 12: 2/5, 40: 1/5
    assert wl.batch.tolist() == [3, 12, 40] and wl.weight.tolist() == pytest.approx([0.4, 0.4, 0.2])


def test_metrics_without_the_gauge_or_all_idle_is_an_error():
    with pytest.raises(InputError, match="no vllm:num_requests_running"):
        parse_workload("# TYPE foo gauge\nfoo 1\n", "m.txt", "vllm-metrics")
    with pytest.raises(InputError, match="idle"):
        parse_workload(scrape({"0": 0}), "m.txt")
    with pytest.raises(InputError, match="non-negative integer"):
        parse_workload(scrape({"0": 2.5}), "m.txt")


def test_bench_json_littles_law_by_hand():
    # 3 requests, decode time 2 + 1.5 + 1 = 4.5 s over 2 s -> mean batch 2.25 -> B 2 (0.75), B 3 (0.25)
    data = {"duration": 2.0, "completed": 3, "input_lens": [8, 8, 8], "output_lens": [5, 4, 3], "mean_itl_ms": 120.0,
            "itls": [[0.5, 0.5, 1.0], [0.5, 1.0], [1.0]]}
    wl = parse_workload(json.dumps(data), "b.json")
    assert wl.source == "vllm-bench" and wl.batch.tolist() == [2, 3]
    assert wl.weight.tolist() == pytest.approx([0.75, 0.25]) and wl.mean_batch == pytest.approx(2.25)
    # tokens per streamed chunk: (4 + 3 + 2) / 6 chunks
    assert wl.hints == pytest.approx({"itl_ms": 120.0, "acceptance_length": 1.5})
    capped = parse_workload(json.dumps({**data, "max_concurrency": 2}), "b.json")
    assert capped.batch.tolist() == [2] and "capped" in capped.method
    no_itls = {k: v for k, v in data.items() if k != "itls"} | {"mean_tpot_ms": 500.0}
    # (4 + 3 + 2) tokens x 0.5 s / 2 s = 2.25 again
    assert parse_workload(json.dumps(no_itls), "b.json").mean_batch == pytest.approx(2.25)
    with pytest.raises(InputError, match="needs per-request input_lens and output_lens"):
        parse_workload(json.dumps({"completed": 3}), "b.json")
    with pytest.raises(InputError, match="duration"):
        parse_workload(json.dumps({k: v for k, v in data.items() if k != "duration"}), "b.json")


def test_example_workloads_load():
    csv = load_workload(EXAMPLES / "chat-diurnal.csv")
    assert csv.batch.size >= 10 and csv.weight.sum() == pytest.approx(1)
    bench = load_workload(EXAMPLES / "vllm-cpu-spec-k3.json")
    assert bench.source == "vllm-bench" and 1 <= bench.mean_batch <= 16
    with pytest.raises(InputError, match="no such file"):
        load_workload(EXAMPLES / "missing.csv")


# -- the recommendation ------------------------------------------------------------------------------------
def test_expected_saving_is_the_step_weighted_mean_and_shares_add_up():
    profile = load_profile(None)
    wl = Workload(np.array([1, 16, 256]), np.array([0.5, 0.3, 0.2]), "csv", "w")
    rec = recommend(MAVERICK, wl, profile, with_discrepancy=False)
    pred = predict(Scenario(**MAVERICK, batch=np.array([1.0, 16.0, 256.0])), profile)
    for s in STRATEGIES:
        expected = float(np.dot([0.5, 0.3, 0.2], pred.saving_per_decode_step_us(s)))
        assert rec.strategies[s].expected_saving_per_decode_step_us == pytest.approx(expected)
    assert sum(o.win_share for o in rec.strategies.values()) == pytest.approx(1.0)
    best = pred.best()
    assert rec.strategies[FLAG_STRATEGY].win_share == pytest.approx(float(np.dot([0.5, 0.3, 0.2],
                                                                                 best == FLAG_STRATEGY)))
    # the interval (parameter uncertainty only): percentiles of the same weighted mean under every replicate
    values = [float(np.dot([0.5, 0.3, 0.2], predict(pred.scenario, rep).saving_per_decode_step_us(FLAG_STRATEGY)))
              for rep in replicate_profiles(profile)]
    lo, hi = rec.strategies[FLAG_STRATEGY].interval_us
    assert (lo, hi) == pytest.approx(tuple(np.percentile(values, [5, 95])))
    assert rec.strategies[BASELINE].verdict == "baseline" and rec.strategies[BASELINE].interval_us is None
    json.dumps(rec.to_dict())  # serialisable


def test_one_batch_interval_equals_the_predict_interval():
    """With model discrepancy (the default), a one-batch workload's interval is predict's 90% interval."""
    from costmodel.evidence.intervals import propagate

    profile = load_profile(None)
    rec = recommend(MAVERICK, Workload(np.array([64]), np.array([1.0]), "csv", "b64"), profile)
    unc = propagate(Scenario(**MAVERICK, batch=64.0), profile, with_crossover=False)
    for s in STRATEGIES[1:]:
        iv = unc[s].saving_per_decode_step_us
        assert rec.strategies[s].interval_us == pytest.approx((iv.low, iv.high))
    assert "discrepancy" in rec.interval_source


def test_decision_follows_the_interval_and_the_config_says_so():
    profile = load_profile(None)
    big = recommend(MAVERICK, Workload(np.array([512]), np.array([1.0]), "csv", "big"), profile)
    assert big.decision == "enable" and big.recommended == FLAG_STRATEGY
    assert big.strategies[FLAG_STRATEGY].interval_us[0] > 0
    vllm = next(c for c in big.configs if c.engine == "vllm")
    cfg = json.loads(vllm.text.split("'")[1])
    assert cfg["use_local_argmax_reduction"] is True and cfg["num_speculative_tokens"] == 5
    assert not next(c for c in big.configs if c.engine == "sglang").available
    # one batch: the workload answer equals predict at that batch
    single = predict(Scenario(**MAVERICK, batch=512.0), profile)
    assert big.strategies[FLAG_STRATEGY].expected_saving_per_decode_step_us == pytest.approx(
        float(single.saving_per_decode_step_us(FLAG_STRATEGY)))
    for rec in (big, recommend(MAVERICK, Workload(np.array([1]), np.array([1.0]), "csv", "b1"), profile)):
        flag = rec.strategies[FLAG_STRATEGY]
        want = ("enable" if flag.interval_us[0] > 0 else "keep off" if flag.interval_us[1] < 0 else "uncertain")
        assert rec.decision == want
        cfg = json.loads(next(c for c in rec.configs if c.engine == "vllm").text.split("'")[1])
        assert cfg["use_local_argmax_reduction"] is (want == "enable")


def test_impact_numbers_and_bounds():
    im = impact_change(2700.0, 25.0, 3.0)  # 25 -> 22.3 ms
    assert im.itl_after_ms == pytest.approx(22.3) and im.itl_reduction_pct == pytest.approx(10.8)
    assert im.output_throughput_gain_pct == pytest.approx(100 * (25 / 22.3 - 1))  # 12.1%
    assert im.tpot_before_ms == pytest.approx(25 / 3) and im.tpot_after_ms == pytest.approx(22.3 / 3)
    wl = Workload(np.array([64]), np.array([1.0]), "csv", "w")
    with pytest.raises(InputError, match="--acceptance-length"):
        recommend(MAVERICK, wl, itl_ms=25.0)
    with pytest.raises(InputError, match="1..6"):
        recommend(MAVERICK, wl, itl_ms=25.0, acceptance_length=6.5)
    rec = recommend(MAVERICK, wl, itl_ms=25.0, acceptance_length=3.0)
    flag = rec.strategies[FLAG_STRATEGY]
    assert flag.impact.itl_after_ms == pytest.approx(25.0 - flag.expected_saving_per_decode_step_us / 1000)
    lo, hi = flag.impact.output_throughput_gain_pct_interval
    s_lo, s_hi = flag.interval_us
    assert (lo, hi) == pytest.approx((100 * (25 / (25 - s_lo / 1000) - 1), 100 * (25 / (25 - s_hi / 1000) - 1)))


# -- the CLI -----------------------------------------------------------------------------------------------
def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "costmodel", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180)


@pytest.mark.parametrize("example", ["chat-diurnal.csv", "vllm-cpu-spec-k3.json"])
def test_cli_recommend_on_the_examples(example):
    proc = run_cli("recommend", "--workload", str(EXAMPLES / example), "--preset", "llama4-maverick", "--tp", "8",
                   "--num-spec-tokens", "5", "--itl-ms", "25", "--acceptance-length", "3")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "RECOMMENDATION:" in text and "90% interval" in text and "--speculative-config" in text
    assert "use_local_argmax_reduction" in text and "output throughput" in text and "sglang" in text


def test_cli_recommend_on_a_metrics_scrape_json_and_csv(tmp_path):
    metrics = tmp_path / "scrapes.txt"
    metrics.write_text(scrape({"0": 8}) + scrape({"0": 64}) + scrape({"0": 64}))
    out = tmp_path / "per_batch.csv"
    proc = run_cli("recommend", "--workload", str(metrics), "--preset", "llama3-8b-eagle3", "--tp", "4",
                   "--num-spec-tokens", "3", "--json", "--csv", str(out))
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["workload"]["source"] == "vllm-metrics"
    assert rec["workload"]["batch"] == [8, 64] and rec["workload"]["weight"] == pytest.approx([1 / 3, 2 / 3])
    assert rec["decision"] in ("enable", "keep off", "uncertain") and rec["scenario"]["d2t"] is True
    assert json.loads(rec["configs"][0]["text"].split("'")[1])["method"] == "eagle3"
    table = pd.read_csv(out)
    assert table.batch.tolist() == [8, 64] and (table.tp == 4).all() and (table.vocab == 128256).all()
    for column in ("profile", "draft_vocab", "nodes", "dtype", "num_spec_tokens", "mode", "drafting", "impl"):
        assert column in table.columns


@pytest.mark.parametrize("args, needle", [
    (["--workload", "nope.csv"], "nope.csv"),
    (["--workload", str(EXAMPLES / "chat-diurnal.csv"), "--itl-ms", "25"], "--acceptance-length"),
    (["--workload", str(EXAMPLES / "chat-diurnal.csv"), "--batch", "4"], "unrecognized"),
    (["--workload", str(EXAMPLES / "chat-diurnal.csv"), "--tp", "3"], "tp"),
])
def test_cli_recommend_bad_input_is_one_line(args, needle):
    proc = run_cli("recommend", *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr


def test_recommendation_frame_stands_alone():
    wl = Workload(np.array([4, 64]), np.array([1.0, 3.0]), "csv", "w")
    rec = recommend(MAVERICK, wl, itl_ms=25.0, acceptance_length=3.0)
    frame = rec.to_frame()
    assert frame.strategy.tolist() == list(STRATEGIES)
    for column in ("profile", "vocab", "draft_vocab", "tp", "nodes", "dtype", "num_spec_tokens", "mode", "engine",
                   "workload", "mean_batch", "interval_low_us", "itl_reduction_pct", "output_throughput_gain_pct"):
        assert column in frame.columns, column
    row = frame.set_index("strategy").loc[FLAG_STRATEGY]
    assert row.expected_saving_per_decode_step_us == pytest.approx(
        rec.strategies[FLAG_STRATEGY].expected_saving_per_decode_step_us)
    assert row.mean_batch == pytest.approx(0.25 * 4 + 0.75 * 64) and (frame.tp == 8).all()


# -- properties (a profile without replicates keeps them fast) -----------------------------------------------
POINT_PROFILE = profile_from_dict({k: v for k, v in load_profile(None).raw.items()
                                   if k not in ("bootstrap", "ensemble")},
                                  source="h200 without replicates")
MIXES = st.lists(st.tuples(st.integers(1, 4096), st.floats(0.01, 100.0)), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(mix=MIXES)
def test_expected_saving_is_a_convex_combination_and_splitting_rows_changes_nothing(mix):
    batch = np.array([b for b, _ in mix])
    weight = np.array([w for _, w in mix])
    rec = recommend(MAVERICK, Workload(batch, weight, "csv", "w"), POINT_PROFILE, with_discrepancy=False)
    per_batch = predict(Scenario(**MAVERICK, batch=batch.astype(float)), POINT_PROFILE)
    for s in STRATEGIES:
        values = np.asarray(per_batch.saving_per_decode_step_us(s), dtype=float)
        e = rec.strategies[s].expected_saving_per_decode_step_us
        assert values.min() - 1e-6 <= e <= values.max() + 1e-6
        assert rec.strategies[s].interval_us is None  # no replicates, no interval
    assert sum(o.win_share for o in rec.strategies.values()) == pytest.approx(1.0)
    # the same mix written with every row split in two halves (and shuffled) is the same workload
    split = Workload(np.concatenate([batch, batch[::-1]]), np.concatenate([weight / 2, (weight / 2)[::-1]]), "csv", "w")
    again = recommend(MAVERICK, split, POINT_PROFILE, with_discrepancy=False)
    for s in STRATEGIES:
        assert again.strategies[s].expected_saving_per_decode_step_us == pytest.approx(
            rec.strategies[s].expected_saving_per_decode_step_us)
    assert again.decision == rec.decision


def test_verify_adds_the_verification_group_to_every_expected_saving():
    from costmodel.model.verification import decode_step

    profile = load_profile(None)
    wl = Workload(np.array([8, 64]), np.array([0.25, 0.75]), "csv", "w")
    rec = recommend(MAVERICK, wl, profile, with_discrepancy=False, verify=True, greedy_fraction=0.5)
    plain = recommend(MAVERICK, wl, profile, with_discrepancy=False)
    step = decode_step(Scenario(**MAVERICK, batch=np.array([8.0, 64.0])), profile, verify=True, greedy_fraction=0.5)
    for s in STRATEGIES[1:]:
        expected = float(np.dot([0.25, 0.75], step.saving_us(s)))
        assert rec.strategies[s].expected_saving_per_decode_step_us == pytest.approx(expected)
    # the verification group's share: F x (baseline - strategy) over the B x (K + 1) target rows, weighted
    ver = step.verification
    extra = float(np.dot([0.25, 0.75], 0.5 * (ver.total_us(BASELINE) - ver.total_us(FLAG_STRATEGY))))
    assert extra > 0 and (rec.strategies[FLAG_STRATEGY].expected_saving_per_decode_step_us
                          - plain.strategies[FLAG_STRATEGY].expected_saving_per_decode_step_us) == pytest.approx(extra)
    assert rec.verification == {"enabled": True, "greedy_fraction": 0.5, "rows_per_batch_row": 6,
                                "vocab": MAVERICK["vocab"], "dtype": "bf16"}
    assert any("verification" in n for n in rec.config_notes) and plain.config_notes == ()
    assert {f"{FLAG_STRATEGY}_verify_saving_us"} <= set(rec.per_batch.columns)


def test_cli_recommend_header_and_config_name_top_k_collective_and_verify(tmp_path):
    wl = tmp_path / "w.csv"
    wl.write_text("batch,weight\n8,1\n64,2\n")
    from costmodel.cli.main import main

    base = ["recommend", "--workload", str(wl), "--preset", "llama4-maverick", "--tp", "8", "--num-spec-tokens", "5"]
    import contextlib
    import io

    def run(*extra: str) -> str:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main([*base, *extra]) == 0
        return buf.getvalue()

    greedy = run()
    assert "top-k 1  collective nccl" in greedy and "not settable" not in greedy
    assert '"use_local_argmax_reduction": true' in greedy
    text = run("--top-k", "8", "--collective", "oneshot", "--verify", "--greedy-fraction", "0.5")
    header = text.splitlines()[1]
    assert "top-k 8  collective oneshot" in header and "greedy verification (6 target rows" in header
    assert "F = 0.5" in header
    assert "RECOMMENDATION: top-k 8: local_argmax_pairs (8 pairs per rank)" in text
    assert "--speculative-config" not in text  # vLLM's switch is greedy-only: nothing to paste at top-k 8
    notes = [line for line in text.splitlines() if line.strip().startswith("not settable")]
    assert len(notes) == 3 and "top-k 8" in notes[0] and "oneshot" in notes[1] and "verification" in notes[2]
    res = json.loads(run("--top-k", "8", "--collective", "oneshot", "--json"))
    assert res["scenario"]["top_k"] == 8 and res["scenario"]["collective"] == "oneshot"
    assert not res["verification"]["enabled"] and len(res["config_notes"]) == 2
    assert not [c for c in res["configs"] if c["engine"] == "vllm"][0]["available"]


def test_a_single_metrics_scrape_says_it_is_one_sample(tmp_path, capsys):
    """issue 18: one scrape (one busy gauge) is one moment, not a distribution - recommend and the dashboard say so
    (the workload's method text); two busy gauges are two samples and read as before."""
    one = parse_workload(scrape({"0": 12}), "one.txt")
    assert one.observations == 1 and "ONE sample (batch 12)" in one.method and "not a distribution" in one.method
    two = parse_workload(scrape({"0": 12, "1": 20}), "two.txt")
    assert "ONE sample" not in two.method and "2 busy samples" in two.method
    path = tmp_path / "one.txt"
    path.write_text(scrape({"0": 12}))
    from costmodel.cli.main import main

    assert main(["recommend", "--workload", str(path)]) == 0
    assert "ONE sample (batch 12)" in capsys.readouterr().out


def test_model_runner_v2_gets_the_flag_to_paste():
    """Current vLLM's Model Runner V2 reads use_local_argmax_reduction (DraftModelSpeculator._greedy_sample_draft,
    vllm-project/vllm#46448): --engine vllm-v2 gets the same vLLM config as --engine vllm, with a note naming the
    V2 releases before it."""
    profile = load_profile(None)
    wl = Workload(np.array([64]), np.array([1.0]), "csv", "b64")
    v2 = recommend({**MAVERICK, "engine": "vllm-v2"}, wl, profile, with_discrepancy=False)
    v1 = recommend({**MAVERICK, "engine": "vllm"}, wl, profile, with_discrepancy=False)
    cfg = {c.engine: c for c in v2.configs}, {c.engine: c for c in v1.configs}
    assert cfg[0]["vllm"].available and '"use_local_argmax_reduction": true' in cfg[0]["vllm"].text
    assert cfg[0]["vllm"].text == cfg[1]["vllm"].text
    assert not v2.headline.startswith("vLLM Model Runner V2")
    assert any("#46448" in n for n in v2.config_notes) and not any("#46448" in n for n in v1.config_notes)


def test_an_mtp_draft_config_names_no_draft_model(capsys):
    """Issue 43 item 6: DeepSeek-V3's config to paste asked for "<your draft model>", but an MTP draft is the
    target checkpoint's own MTP layers (vLLM takes the target when `model` is unset); EAGLE still asks for one."""
    from costmodel.cli.main import main

    for preset_name, method, named in (("deepseek-v3", "mtp", False), ("llama4-maverick", "eagle", True)):
        assert main(["recommend", "--workload", str(EXAMPLES / "chat-diurnal.csv"), "--preset", preset_name,
                     "--engine", "vllm", "--tp", "8", "--num-spec-tokens", "3", "--json"]) == 0
        vllm = next(c for c in json.loads(capsys.readouterr().out)["configs"] if c["engine"] == "vllm")
        cfg = json.loads(vllm["text"].split("'")[1])
        assert cfg["method"] == method and cfg["num_speculative_tokens"] == 3
        assert ("model" in cfg) is named and ("<your draft model>" in vllm["text"]) is named
