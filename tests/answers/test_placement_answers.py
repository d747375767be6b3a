"""The placement answers: the table's rows, --placement refusal, the recommended triple, the CLI end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from costmodel.answers.placement import (
    chosen_placement,
    draft_step_crossovers,
    placement_sweep,
    placement_table,
    recommend_placement,
)
from costmodel.io.errors import InputError
from costmodel.model.draft_step import check_fits, draft_step, draft_steps, engine_support, parse_placement
from costmodel.model.drafter import DraftArch
from costmodel.model.scenario import Scenario
from costmodel.profiles.presets import preset, preset_draft
from costmodel.profiles.store import load_profile

H100 = load_profile("h100-sxm-nvlink")
ARCH = DraftArch.from_fields(preset_draft("llama3-70b-eagle3"))


def test_table_rows_and_components_add_up():
    sc = Scenario(**preset("llama3-70b-eagle3"), tp=8, batch=4, num_spec_tokens=3, engine="vllm")
    table = placement_table(sc, H100, ARCH)
    names = [r["placement"] for r in table["rows"]]
    assert names == ["target", "tp1", "dp", "q=2", "q=4"]
    for r in table["rows"]:
        c = r["components_us"]
        gpu = c["drafter_forward"] + c["lm_head"] + c["logits_path"] + c["token_all_gather"]
        assert r["whole_draft_step_us"] >= gpu - 1e-6  # the pipeline never beats the GPU work
        assert r["whole_draft_step_us"] == r["per_strategy_us"][r["best_strategy"]]
        assert r["whole_draft_step_us"] == min(r["per_strategy_us"].values())  # every strategy is exact here (k = 1)
    tp1 = next(r for r in table["rows"] if r["placement"] == "tp1")
    assert tp1["components_us"]["of_which_all_reduces"] == 0.0
    assert tp1["engine"].startswith("ignored")  # vLLM's EAGLE proposer ignores draft_tensor_parallel_size=1


def test_chosen_placement_refuses_what_does_not_fit():
    sc = Scenario(**preset("llama3-70b-eagle3"), tp=8, batch=256, num_spec_tokens=3)
    with pytest.raises(InputError, match="placement dp: the draft needs"):
        chosen_placement(sc, H100, ARCH, "dp", kv_len=8192, free_bytes=1e9)
    assert chosen_placement(sc, H100, ARCH, "q=4")["draft_tp"] == 4


def test_recommend_triple_among_what_the_engine_runs():
    sc = Scenario(**preset("llama3-70b-eagle3"), tp=8, batch=1, num_spec_tokens=3, engine="vllm")
    choice = recommend_placement(sc, H100, ARCH, np.array([1.0, 16.0]), np.array([1.0, 1.0]))
    assert choice.placement == "target"  # the only placement vLLM runs
    assert choice.expected_us <= choice.baseline_us + 1e-9
    assert any(r.startswith("tp1: ignored") for r in choice.refused)
    free = recommend_placement(sc, H100, ARCH, np.array([1.0, 16.0]), np.array([1.0, 1.0]), engine_only=False)
    assert free.expected_us <= choice.expected_us + 1e-9  # more placements can only help


def test_sweep_rows():
    sc = Scenario(**preset("llama3-70b-eagle3"), tp=4, batch=1, num_spec_tokens=2)
    rows = placement_sweep(sc, H100, ARCH, [1, 8, 64])
    assert len(rows) == 4 * 3  # target, tp1, dp, q=2 x 3 batches
    assert all(r["whole_draft_step_us"] > 0 for r in rows)


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "costmodel", *argv], capture_output=True, text=True, timeout=120)


def test_cli_predict_placement_json_and_refusal():
    out = _cli("predict", "--preset", "llama3-8b-eagle3", "--tp", "4", "--batch", "2", "--num-spec-tokens", "2",
               "--no-intervals", "--json", "--placement", "tp1", "--draft-layers", "2")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["placement"]["chosen"]["placement"] == "tp1"
    assert data["placement"]["arch"]["layers"] == 2
    bad = _cli("predict", "--preset", "llama3-8b-eagle3", "--tp", "4", "--no-intervals", "--placement", "tp1",
               "--gpu-free-gb", "0.5")
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0 and "does not" not in bad.stdout
    assert "placement tp1: the draft needs" in bad.stderr


def test_draft_step_crossovers_bracket_the_sign_change():
    sc = Scenario(**preset("llama3-70b-eagle3"), tp=8, batch=16, num_spec_tokens=3, engine="sglang")
    out = draft_step_crossovers(sc, H100, ARCH, max_batch=1024.0)
    step = draft_step(sc, H100, parse_placement("target", 8), ARCH)
    for name, v in out.items():
        want = float(step.total_us["full_all_gather"]) - float(step.total_us[name])
        assert v["saving_us"] == pytest.approx(want)
        for b in v["crossover_batches"]:  # the saving changes sign across each root
            lo = draft_step(sc.with_(batch=b / 1.2), H100, parse_placement("target", 8), ARCH)
            hi = draft_step(sc.with_(batch=b * 1.2), H100, parse_placement("target", 8), ARCH)
            s_lo = float(lo.total_us["full_all_gather"]) - float(lo.total_us[name])
            s_hi = float(hi.total_us["full_all_gather"]) - float(hi.total_us[name])
            assert s_lo * s_hi <= 0


def test_cli_predict_when_the_draft_cannot_shard():
    """TP 16 does not divide the default preset's (Maverick's, borrowed: no --preset) 40 draft heads: predict still
    prints its strategy table and says why the placements are not priced; asking for that placement fails in one
    line. (Named with --preset, the TP is refused outright: tests/answers/test_issue43_quantity_placement.py.)"""
    args = ["predict", "--tp", "16", "--nodes", "2", "--profile", "b200-hgx-nvlink", "--no-intervals"]
    out = _cli(*args)
    assert out.returncode == 0, out.stderr
    assert "placements not priced: draft TP 16: must divide the draft's 40 heads" in out.stdout
    bad = _cli(*args, "--placement", "target")
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "draft TP 16" in bad.stderr


@pytest.mark.parametrize("name", ["h100-sxm-nvlink", "mi300x-xgmi", "b200-hgx-nvlink"])
@pytest.mark.parametrize("engine", ["vllm", "sglang", "tokenspeed"])
def test_recommended_triple_equals_one_draft_step_per_collective_implementation(name, engine):
    """recommend_placement prices the four implementations as rows of one (impls, batches) evaluation; the
    reference prices each implementation's draft steps on its own and takes the first of equal expected times in
    (implementation, placement, strategy) order."""
    profile = load_profile(name)
    batch, weight = np.array([1.0, 8.0, 64.0, 256.0]), np.array([0.1, 0.4, 0.3, 0.2])
    sc = Scenario(**preset("llama3-70b-eagle3"), tp=8, batch=1, num_spec_tokens=3, engine=engine)
    got = recommend_placement(sc, profile, ARCH, batch, weight)
    best = None
    for impl in ("nccl", "oneshot", "multimem", "nccl-symm"):
        for step in draft_steps(sc.with_(batch=batch, collective=impl), profile, ARCH):
            if check_fits(profile, step) or not engine_support(engine, step.placement, 8).startswith("supported"):
                continue
            for strat, total in step.total_us.items():
                if np.all(step.valid.get(strat, True)):
                    value = float(weight @ np.asarray(total, dtype=float))
                    if best is None or value < best[0] - 1e-9:
                        best = (value, step.placement.name, strat, impl)
    assert (got.expected_us, got.placement, got.strategy, got.collective) == best
