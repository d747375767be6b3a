"""costmodel.answers.topk: the dashboard's top-k panel tables are predict's - the same best pair (with the engine's
refusal beside it) and a crossover-by-k curve that leaves out the k a scenario refuses."""

from __future__ import annotations

import json

import pytest

from costmodel import load_profile
from costmodel.answers.point import engine_best_pair
from costmodel.answers.topk import crossover_by_k, topk_matrix
from costmodel.cli.main import main
from costmodel.model.scenario import Scenario

PROFILE = "h100-sxm-nvlink"


@pytest.mark.parametrize("top_k", [1, 8])
def test_best_pair_is_predicts(capsys, top_k):
    assert main(["predict", "--profile", PROFILE, "--tp", "8", "--batch", "16", "--top-k", str(top_k),
                 "--json"]) == 0
    want = json.loads(capsys.readouterr().out)["best_pair"]
    sc = Scenario(vocab=202048, draft_vocab=202048, tp=8, batch=16.0, num_spec_tokens=3, engine="vllm",
                  hidden=5120)
    got = engine_best_pair(topk_matrix(sc, load_profile(PROFILE), top_k, crossovers=False), "vllm", top_k)
    assert (got["strategy"], got["collective"]) == (want["strategy"], want["collective"])
    assert got["decode_step_us"] == pytest.approx(want["decode_step_us"], rel=1e-12)
    assert got.get("engine_cannot") == want.get("engine_cannot") and got["engine_cannot"]  # multimem: not vLLM's


def test_crossover_by_k_leaves_out_a_refused_k():
    sc = Scenario(vocab=1024, draft_vocab=128, d2t=True, tp=8, batch=1.0)  # k = 256 > the draft vocab: refused
    curve = crossover_by_k(sc, load_profile(PROFILE), ("nccl",), (1, 64, 256))
    assert list(curve["top_k"]) == [1, 64] and set(curve["collective"]) == {"nccl"}
