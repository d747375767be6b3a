"""The whole draft step as the answer where an engine runs the step (issue 17): predict's headline, intervals,
crossovers, and the vLLM V1 chain's host ops read from current vLLM."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from costmodel.answers.recommend import recommend
from costmodel.answers.whole_step import (
    PER_CALL,
    QUANTITY,
    _lockstep_roots,
    applies,
    whole_step_answer,
    whole_step_totals,
)
from costmodel.answers.workload import Workload
from costmodel.cli.main import main
from costmodel.evidence.intervals import propagate_draft_step
from costmodel.model.crossover import grid_roots
from costmodel.model.draft_step import Placement, draft_step
from costmodel.model.drafter import DraftArch
from costmodel.model.scenario import Scenario
from costmodel.profiles.presets import preset, preset_draft
from costmodel.profiles.store import load_profile

H200 = "h200-sxm-nvlink"


def _arch(sc: Scenario) -> DraftArch:
    return DraftArch.from_fields({**preset_draft("llama4-maverick"), "vocab": int(sc.draft_vocab)})


def _sc(**kw) -> Scenario:
    base = {"tp": 8, "batch": 16.0, "num_spec_tokens": 5, "engine": "vllm"}
    return Scenario(**preset("llama4-maverick"), **{**base, **kw})


def _host_ops_per_call(k: int) -> float:
    """d T_step / d torch_op_us of the vLLM chain made host-bound (a 1 us forward, host op 100 us)."""
    p = load_profile(H200)

    def total(h: float) -> float:
        sc = _sc(batch=1.0, num_spec_tokens=k, host_op_us=h, serving_term=False)
        step = draft_step(sc, p, Placement("target", 8), _arch(sc), forward_us=1.0, strategies=("full_all_gather",))
        return float(step.total_us["full_all_gather"])

    return total(101.0) - total(100.0)


def test_vllm_chain_counts_current_vllm_prep_ops():
    """Current vLLM (llm_base_proposer.py SpecDecodeBaseProposer.propose) launches, per later draft call, 4 prep
    ops (.int(), the fused eagle_step_update_slot_mapping_and_metadata kernel, 2 buffer copies) + 1 graph launch +
    the lm_head + full_all_gather's 1 eager torch op = 7; the first call 9 prep + 3 = 12. The older eagle.py count
    (15 later, 4 first) gave 18 and 7."""
    first = _host_ops_per_call(1)
    later = _host_ops_per_call(3) - _host_ops_per_call(2)
    assert first == pytest.approx(12.0)
    assert later == pytest.approx(7.0)


def test_host_factor_scales_the_chain_host_times():
    """The "host" factor of an ensemble member scales every host time: vLLM V1's eager chain moves by more than
    its exposed first launch; SGLang's captured decode step has one graph launch (11.53 us, the H200 profile's
    torch op: no graph_launch_us), exposed before the GPU starts, so x3 adds exactly 2 x 11.53 us."""
    p = load_profile(H200)
    for engine in ("vllm", "sglang"):
        sc = _sc(engine=engine, batch=1.0)
        one = draft_step(sc, p, Placement("target", 8), _arch(sc), factors={"host": 1.0})
        three = draft_step(sc, p, Placement("target", 8), _arch(sc), factors={"host": 3.0})
        for name in one.total_us:
            grew = float(three.total_us[name]) - float(one.total_us[name])
            if engine == "sglang":
                assert grew == pytest.approx(2 * 11.53), name
            else:
                assert grew > 2 * 11.53 + 1.0, name


def test_interval_collapses_to_the_point_without_spread():
    """No replicates and no discrepancy: every member is the point profile, so the interval is the point."""
    p = dataclasses.replace(load_profile(H200), bootstrap=())
    sc = _sc()
    unc = propagate_draft_step(sc, p, _arch(sc), with_discrepancy=False, with_crossover=False)
    step = draft_step(sc, p, Placement("target", 8), _arch(sc))
    for name, u in unc.items():
        point = float(step.total_us["full_all_gather"]) - float(step.total_us[name])
        assert u.saving_per_decode_step_us.low == pytest.approx(point)
        assert u.saving_per_decode_step_us.high == pytest.approx(point)
        assert u.saving_us.low == pytest.approx(point / 5)


def test_answer_is_the_whole_step_and_its_crossover_is_a_root():
    p = load_profile(H200)
    sc = _sc()
    assert applies(sc, p) == ""
    ans = whole_step_answer(sc, p, _arch(sc), intervals=False)
    totals = {n: s["whole_draft_step_us"] for n, s in ans["strategies"].items() if s["valid"]}
    assert ans["best"] == min(totals, key=totals.get)
    b = ans["strategies"]["local_argmax_pairs"]["crossover_batch"]
    at = draft_step(sc.with_(batch=np.array([b * 0.98, b * 1.02])), p, Placement("target", 8), _arch(sc))
    s = np.asarray(at.total_us["full_all_gather"]) - np.asarray(at.total_us["local_argmax_pairs"])
    assert s[0] * s[1] < 0  # the saving changes sign across the reported crossover


def test_engine_none_keeps_the_per_call_answer():
    p = load_profile(H200)
    assert "engine none" in applies(_sc(engine="none"), p)
    assert "TP 1" in applies(_sc(tp=1), p)


def test_predict_json_headline_uses_the_whole_step(capsys):
    main(["predict", "--preset", "llama4-maverick", "--tp", "8", "--batch", "16", "--num-spec-tokens", "5",
          "--engine", "vllm", "--json", "--no-placements"])
    out = json.loads(capsys.readouterr().out)
    ws = out["whole_draft_step"]
    assert out["best"] == ws["best"]
    local = out["strategies"]["local_argmax_pairs"]
    assert local["saving_per_decode_step_us"] == ws["strategies"]["local_argmax_pairs"]["saving_per_decode_step_us"]
    assert local["interval"] == ws["strategies"]["local_argmax_pairs"]["interval"]
    assert local["per_call"]["logits_path_saving_per_decode_step_us"] == pytest.approx(
        5 * local["per_call"]["logits_path_saving_per_call_us"])
    assert local["saving_per_decode_step_us"] == pytest.approx(5 * local["saving_per_draft_call_us"])
    assert out["crossover_batch"] == local["crossover_batch"]
    iv = local["interval"]["saving_per_decode_step_us"]
    assert iv["low"] <= local["saving_per_decode_step_us"] <= iv["high"]


def test_predict_engine_none_says_why_per_call(capsys):
    main(["predict", "--preset", "llama4-maverick", "--tp", "8", "--batch", "16", "--num-spec-tokens", "5",
          "--engine", "none", "--json", "--no-intervals", "--no-placements"])
    out = json.loads(capsys.readouterr().out)
    assert "whole_draft_step" not in out
    assert out["answer"]["quantity"] == PER_CALL


@pytest.mark.parametrize("engine, quantity", [((), QUANTITY), (("--engine", "none"), PER_CALL)])
def test_predict_sensitivity_is_of_the_answers_saving(capsys, engine, quantity):
    """`predict --sensitivity` perturbs the saving the answer gives: the whole draft step's per decode step under an
    engine (its saving_us the headline's), one draft call's with engine none."""
    main(["predict", "--preset", "llama4-maverick", "--tp", "8", "--batch", "16", "--num-spec-tokens", "5", *engine,
          "--json", "--no-intervals", "--no-placements", "--sensitivity"])
    out = json.loads(capsys.readouterr().out)
    rows = out["sensitivity"]
    assert rows and {r["quantity"] for r in rows} == {quantity}
    local = out["strategies"]["local_argmax_pairs"]
    want = local["saving_per_decode_step_us"] if quantity == QUANTITY else local["saving_per_draft_call_us"]
    assert rows[0]["saving_us"] == pytest.approx(want, rel=1e-12)


def test_recommend_ranks_the_whole_step_where_an_engine_runs_it():
    p = load_profile(H200)
    wl = Workload(np.array([1, 16, 64]), np.array([0.2, 0.5, 0.3]), "csv", name="t")
    kw = {**preset("llama4-maverick"), "tp": 8, "num_spec_tokens": 5, "engine": "vllm"}
    sc = Scenario(**kw, batch=wl.batch.astype(float))
    rec = recommend(kw, wl, p, arch=_arch(sc), with_discrepancy=False)
    assert rec.quantity == QUANTITY
    totals, _, calls = whole_step_totals(sc, p, _arch(sc))
    saving = totals["full_all_gather"] - totals["local_argmax_pairs"]
    expected = float(np.dot(wl.weight, saving))
    assert rec.flag.expected_saving_per_decode_step_us == pytest.approx(expected)
    assert rec.flag.expected_saving_per_draft_call_us == pytest.approx(expected / calls)
    lo, hi = rec.flag.interval_us
    assert lo <= expected <= hi
    none = recommend({**kw, "engine": "none"}, wl, p, arch=_arch(sc), with_discrepancy=False)
    assert none.quantity != QUANTITY  # engine none: the per-call savings x calls


def test_recommend_csv_says_what_the_savings_are_of(tmp_path, capsys):
    out = tmp_path / "rec.csv"
    assert main(["recommend", "--workload", "data/examples/chat-diurnal.csv", "--preset", "llama4-maverick", "--tp",
                 "8", "--num-spec-tokens", "5", "--engine", "vllm", "--csv", str(out)]) == 0
    table = pd.read_csv(out)
    assert set(table["quantity"]) == {QUANTITY}
    assert "savings of the whole draft step" in capsys.readouterr().out


def test_the_best_pair_says_it_is_the_logits_path_alone_when_the_whole_step_is_the_answer(capsys):
    """The per-call (strategy, collective) matrix can name another strategy than the whole-step headline; the line
    and the JSON say which quantity it ranks."""
    args = ["predict", "--preset", "llama4-maverick", "--tp", "8", "--batch", "16", "--num-spec-tokens", "5",
            "--no-intervals"]
    assert main([*args, "--engine", "vllm"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("best (strategy"))
    assert "of the logits path alone (per call x calls, not the whole draft step)" in line
    assert main([*args, "--engine", "vllm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best_pair"]["quantity"].startswith("the logits path alone")
    assert main([*args, "--engine", "none"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("best (strategy"))
    assert line.startswith("best (strategy, collective): (")


def test_lockstep_roots_are_grid_roots_refined_one_by_one():
    """Every strategy's brackets advanced together give grid_roots' roots (the same Brent iterates), exact zeros
    and the all-zero case included."""
    grid = np.geomspace(1.0, 4096.0, 25)
    funcs = {"a": lambda b: np.log(b) - np.log(37.0), "b": lambda b: np.sin(np.log(b)),
             "c": lambda b: np.zeros_like(b), "d": lambda b: np.where(b == grid[3], 0.0, b - grid[3])}
    values = {k: f(grid) for k, f in funcs.items()}
    got = _lockstep_roots(grid, values, lambda x, names: {k: funcs[k](np.asarray(x)) for k in names})
    for k, f in funcs.items():
        assert got[k] == grid_roots(grid, values[k], lambda x, f=f: float(f(np.asarray(x))))
    assert got["a"] == [pytest.approx(37.0, rel=1e-5)] and len(got["b"]) == 3 and got["c"] == []
