"""Crossover wording (issue 18 item 4): one function's words, TP 1 identical, every sign change listed."""

from __future__ import annotations

import pytest

from costmodel.model.crossover import Crossover, crossover, crossover_words, crossovers
from costmodel.model.scenario import Scenario
from costmodel.model.strategies import STRATEGIES
from costmodel.profiles.store import load_profile

ALT = tuple(s for s in STRATEGIES if s != "full_all_gather")


def test_tp1_is_identical_with_no_roots():
    """Before: every strategy reported 'crossover 1.0' at TP 1 (236 roots in the JSON)."""
    profile = load_profile("h200-sxm-nvlink")
    sc = Scenario(tp=1, batch=1)
    for name, c in crossovers(sc, ALT, profile).items():
        assert (c.status, c.batch, c.roots) == ("identical", None, ()), name
        assert c.text == "identical at TP 1 (nothing to gather)"
        single = crossover(sc, name, profile)
        assert (single.status, single.roots, single.text) == (c.status, c.roots, c.text)


@pytest.mark.parametrize(("status", "roots", "direction", "words"), [
    ("wins_everywhere", (), None, "wins at every batch in range"),
    ("loses_everywhere", (), None, "never wins in range"),
    ("crossover", (35.51,), "wins_above", "35.5 (wins above)"),
    ("crossover", (3.1, 40.2, 977.0), "wins_above", "sign changes at 3.1, 40.2, 977 (wins above 3.1)"),
])
def test_words(status, roots, direction, words):
    assert crossover_words(status, roots, direction) == words
    c = Crossover("local_argmax_pairs", roots[0] if roots else None, direction, roots, (1.0, 65536.0), status)
    assert c.text == words and c.to_dict()["text"] == words


def test_one_crossover_computation_for_cli_and_grid_search():
    profile = load_profile("h100-sxm-nvlink")
    for tp, engine in ((2, "none"), (8, "vllm"), (8, "sglang")):
        sc = Scenario(tp=tp, batch=1, engine=engine, hidden=5120)
        many = crossovers(sc, ALT, profile)
        for name in ALT:
            one = crossover(sc, name, profile)
            assert one.status == many[name].status and one.text == many[name].text, (tp, engine, name)
            assert one.roots == pytest.approx(many[name].roots, rel=1e-9)
