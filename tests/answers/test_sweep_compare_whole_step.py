"""issue 17: under --engine, `sweep` and `compare` answer with the whole draft step, the same numbers as `predict`;
engine none keeps the per-call numbers."""

from __future__ import annotations

import io
import json
import math

import pandas as pd
import pytest

from costmodel import BASELINE, STRATEGIES, Scenario, load_profile
from costmodel.answers import sweep_step
from costmodel.answers.compare import compare_table, compare_wide
from costmodel.answers.whole_step import PER_CALL, QUANTITY
from costmodel.cli.main import main
from costmodel.model.predict import predict
from dashboard.question import sidebar_arch
from dashboard.tables import COMPARE_LABELS, compare_long_table


def _sweep(capsys, *flags: str) -> pd.DataFrame:
    assert main(["sweep", *flags]) == 0
    return pd.read_csv(io.StringIO(capsys.readouterr().out))


def _predict(capsys, *flags: str) -> dict:
    assert main(["predict", *flags, "--json", "--no-intervals", "--no-placements"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("profile", "engine", "preset", "batches", "ks"), [
    ("h200-sxm-nvlink", "vllm", "llama4-maverick", (1, 64, 256), (3, 5)),
    ("h100-sxm-nvlink", "sglang", "llama3-8b-eagle3", (2, 48), (4,)),
    ("b200-hgx-nvlink", "trtllm", "llama4-maverick", (16, 1024), (2,)),
    ("h200-sxm-nvlink", "vllm-v2", "qwen3-8b-eagle3", (8,), (3,)),
])
def test_a_sweep_row_under_an_engine_is_predicts_whole_draft_step(capsys, profile, engine, preset, batches, ks):
    table = _sweep(capsys, "--profile", profile, "--engine", engine, "--preset", preset, "--tp", "8",
                   "--batch", ",".join(map(str, batches)), "--num-spec-tokens", ",".join(map(str, ks)))
    assert set(table["answer"]) == {"whole draft step"} and table["why_not_whole_draft_step"].isna().all()
    for b in batches:
        for k in ks:
            got = table[(table["batch"] == b) & (table["num_spec_tokens"] == k)].set_index("strategy")
            want = _predict(capsys, "--profile", profile, "--engine", engine, "--preset", preset, "--tp", "8",
                            "--batch", str(b), "--num-spec-tokens", str(k))
            assert want["answer"]["quantity"] == QUANTITY
            for name, entry in want["strategies"].items():
                assert got.loc[name, "whole_draft_step_us"] == pytest.approx(entry["whole_draft_step_us"], rel=1e-12,
                                                                             abs=1e-9)
                # one name per quantity (issue 35): the answer's saving under predict's own names
                for key in ("saving_per_decode_step_us", "saving_per_draft_call_us"):
                    assert got.loc[name, key] == pytest.approx(entry[key], rel=1e-12, abs=1e-9)
                # the per-call columns stay the logits path alone, per draft call (predict's per-call numbers)
                assert got.loc[name, "total_us"] == pytest.approx(entry["total_us"], rel=1e-12)
                assert got.loc[name, "logits_path_saving_per_call_us"] == pytest.approx(
                    entry["per_call"]["logits_path_saving_per_call_us"], rel=1e-12, abs=1e-9)
            assert got.loc[BASELINE, "saving_per_decode_step_us"] == 0.0
            assert set(got["mode"]) == {"engine"}  # the engine's plan, not one --mode


def test_engine_none_keeps_the_per_call_numbers_and_has_no_whole_step(capsys):
    table = _sweep(capsys, "--profile", "h200-sxm-nvlink", "--tp", "2,8", "--batch", "1,64", "--vocab", "202048",
                   "--engine", "none")
    assert set(table["answer"]) == {"per draft call"} and table["whole_draft_step_us"].isna().all()
    assert table["why_not_whole_draft_step"].isna().all()
    prof = load_profile("h200-sxm-nvlink")
    for (tp, b), rows in table.groupby(["tp", "batch"]):
        k = int(rows["num_spec_tokens"].iloc[0])  # the CLI's default K
        pred = predict(Scenario(vocab=202048, tp=int(tp), batch=float(b), num_spec_tokens=k), prof)
        got = rows.set_index("strategy")
        for name, r in pred.strategies.items():
            assert got.loc[name, "total_us"] == pytest.approx(float(r.total_us), rel=1e-12)
            assert got.loc[name, "saving_per_draft_call_us"] == pytest.approx(float(pred.saving_us(name)),
                                                                              rel=1e-12, abs=1e-9)
            assert got.loc[name, "saving_per_decode_step_us"] == pytest.approx(
                float(pred.saving_per_decode_step_us(name)), rel=1e-12, abs=1e-9)


def test_rows_where_the_whole_step_does_not_apply_say_why(capsys):
    table = _sweep(capsys, "--engine", "vllm", "--tp", "1,8", "--batch", "4", "--vocab", "202048")
    one, eight = table[table["tp"] == 1], table[table["tp"] == 8]
    assert set(one["answer"]) == {"per draft call"} and one["whole_draft_step_us"].isna().all()
    assert set(one["why_not_whole_draft_step"]) == {"TP 1: nothing to gather, every strategy is the same draft call"}
    assert set(eight["answer"]) == {"whole draft step"} and eight["whole_draft_step_us"].notna().all()


def test_whole_step_totals_runs_once_per_group_not_per_row(capsys, monkeypatch):
    calls = []
    real = sweep_step.whole_step_totals

    def counting(sc, *args, **kw):
        calls.append(sc.size)
        return real(sc, *args, **kw)

    monkeypatch.setattr(sweep_step, "whole_step_totals", counting)
    table = _sweep(capsys, "--engine", "vllm", "--tp", "2,8", "--num-spec-tokens", "2,3,5", "--batch", "1:40",
                   "--vocab", "202048")
    assert calls == [40] * 6  # 2 TP x 3 K groups, each its 40 batches in one call
    assert len(table) == 2 * 3 * 40 * len(STRATEGIES)


def test_each_preset_of_a_sweep_prices_its_own_draft(capsys):
    table = _sweep(capsys, "--engine", "vllm", "--preset", "llama4-maverick,qwen3-8b-eagle3", "--tp", "8",
                   "--batch", "32")
    for preset, vocab in (("llama4-maverick", 202048), ("qwen3-8b-eagle3", 151936)):
        want = _predict(capsys, "--engine", "vllm", "--preset", preset, "--tp", "8", "--batch", "32")
        got = table[table["vocab"] == vocab].set_index("strategy")["whole_draft_step_us"]
        assert got.to_dict() == pytest.approx({n: e["whole_draft_step_us"] for n, e in want["strategies"].items()},
                                              rel=1e-12)


def test_compare_under_an_engine_is_predicts_whole_draft_step_per_profile(capsys, tmp_path):
    names = ["h100-sxm-nvlink", "b200-hgx-nvlink"]
    assert main(["compare", *names, "--preset", "llama4-maverick", "--tp", "8", "--batch", "64",
                 "--num-spec-tokens", "5", "--engine", "vllm", "--csv", str(tmp_path / "cmp.csv")]) == 0
    out = capsys.readouterr().out
    assert "the answer - whole draft step" in out and "us/decode step [1]" in out
    table = pd.read_csv(tmp_path / "cmp.csv")
    for name in names:
        want = _predict(capsys, "--profile", name, "--preset", "llama4-maverick", "--tp", "8", "--batch", "64",
                        "--num-spec-tokens", "5", "--engine", "vllm")
        got = table[table["profile"] == name].set_index("strategy")
        assert set(got["quantity"]) == {QUANTITY}
        for s, entry in want["strategies"].items():
            assert got.loc[s, "whole_draft_step_us"] == pytest.approx(entry["whole_draft_step_us"], rel=1e-9)
            for key in ("saving_per_decode_step_us", "saving_per_draft_call_us"):  # predict's names, its numbers
                assert got.loc[s, key] == pytest.approx(entry[key], rel=1e-9, abs=1e-9)
            assert got.loc[s, "total_us"] == pytest.approx(entry["total_us"], rel=1e-9)  # per call, as before
            assert got.loc[s, "logits_path_saving_per_call_us"] == pytest.approx(
                entry["per_call"]["logits_path_saving_per_call_us"], rel=1e-9, abs=1e-9)
            if s != BASELINE:
                cross = entry["crossover_batch"]
                assert (math.isnan(got.loc[s, "crossover_batch"]) if cross is None
                        else got.loc[s, "crossover_batch"] == pytest.approx(cross, rel=1e-9))
                assert got.loc[s, "crossover"] == entry["crossover"]["text"]


def test_compare_engine_none_is_per_call():
    profiles = [load_profile("h200-sxm-nvlink"), load_profile("h100-sxm-nvlink")]
    sc = Scenario(vocab=202048, tp=8, batch=16)
    table = compare_table(sc, profiles)
    assert set(table["quantity"]) == {PER_CALL} and table["whole_draft_step_us"].isna().all()
    for prof in profiles:
        pred = predict(sc, prof)
        got = table[table["profile"] == prof.name].set_index("strategy")
        for name, r in pred.strategies.items():
            assert got.loc[name, "total_us"] == float(r.total_us)
    assert "total_us[h200-sxm-nvlink]" in compare_wide(table).columns


def test_the_dashboard_compare_table_shows_the_whole_step_under_an_engine():
    sc = Scenario(vocab=202048, tp=8, batch=64, num_spec_tokens=5, engine="sglang")
    table = compare_table(sc, [load_profile("h200-sxm-nvlink"), load_profile("b200-hgx-nvlink")],
                          arch=sidebar_arch("llama4-maverick", 202048, None))
    long = compare_long_table(table)
    assert list(long.columns) == ["strategy", "profile", "whole_draft_step_us", "saving_per_decode_step_us",
                                  "crossover_batch"]
    for _, row in long.iterrows():
        src = table[(table.profile == row["profile"]) & (table.strategy == row["strategy"])].iloc[0]
        assert row["whole_draft_step_us"] == src["whole_draft_step_us"] and row["saving_per_decode_step_us"] == src[
            "saving_per_decode_step_us"]
    assert max(len(label) for label in COMPARE_LABELS.values()) <= 15
    per_call = compare_long_table(compare_table(sc.with_(engine="none"), [load_profile("h200-sxm-nvlink")]))
    assert "total_us" in per_call.columns


@pytest.mark.parametrize("flags", [("--kv-len", "32768"), ("--forward-us", "150"), ("--draft-layers", "3"),
                                   ("--kv-len", "512", "--draft-intermediate", "8192")])
def test_sweep_and_compare_take_predicts_drafter_flags(capsys, tmp_path, flags):
    """--kv-len / --forward-us / --draft-* reach sweep's and compare's whole step: the numbers predict gives with
    the same flags, and not those of the default drafter; the rows record the KV length and the measured forward."""
    common = ["--engine", "vllm", "--preset", "llama4-maverick", "--tp", "8", "--num-spec-tokens", "5"]
    table = _sweep(capsys, *common, "--batch", "4,64", *flags)
    assert main(["compare", "h100-sxm-nvlink", "h200-sxm-nvlink", *common, "--batch", "64", *flags,
                 "--csv", str(tmp_path / "cmp.csv")]) == 0
    capsys.readouterr()
    cmp = pd.read_csv(tmp_path / "cmp.csv")
    given = dict(zip(flags[::2], flags[1::2], strict=True))
    for b in (4, 64):
        want = _predict(capsys, *common, "--batch", str(b), *flags)
        default = _predict(capsys, *common, "--batch", str(b))
        got = table[table["batch"] == b].set_index("strategy")
        for name, entry in want["strategies"].items():
            assert got.loc[name, "whole_draft_step_us"] == pytest.approx(entry["whole_draft_step_us"], rel=1e-12)
            if b == 64:  # at B = 4 the vLLM chain can be host-bound: a drafter change need not show there
                assert got.loc[name, "whole_draft_step_us"] != pytest.approx(
                    default["strategies"][name]["whole_draft_step_us"], rel=1e-6)
        assert set(got["draft_kv_len"]) == {float(given.get("--kv-len", 2048))}
        forward = got["draft_forward_us"]
        assert (set(forward) == {150.0}) if "--forward-us" in given else forward.isna().all()
    want = {p: _predict(capsys, *common, "--batch", "64", *flags, "--profile", p)
            for p in ("h100-sxm-nvlink", "h200-sxm-nvlink")}
    for p, result in want.items():
        got = cmp[cmp["profile"] == p].set_index("strategy")
        for name, entry in result["strategies"].items():
            assert got.loc[name, "whole_draft_step_us"] == pytest.approx(entry["whole_draft_step_us"], rel=1e-9)
        assert set(got["draft_kv_len"]) == {float(given.get("--kv-len", 2048))}

