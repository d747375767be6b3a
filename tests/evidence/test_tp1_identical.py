"""issue 18: at TP 1 every strategy is the same path - the interval says "identical", with no crossover (it said
"crossover 1.0..1.0 -> uncertain": every grid point of an all-zero saving counted as an exact-zero root)."""

from __future__ import annotations

import numpy as np

from costmodel import Scenario, load_profile
from costmodel.evidence.intervals import Interval, propagate, saving_verdict
from costmodel.model.crossover import grid_roots


def test_an_all_zero_saving_has_no_root_but_a_touching_zero_still_counts():
    grid = np.geomspace(1, 64, 7)
    assert grid_roots(grid, np.zeros(7)) == []
    assert grid_roots(grid, np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0])) == [float(grid[1])]


def test_saving_verdict_words():
    assert saving_verdict(np.zeros(5), Interval(0.0, 0.0, 0.9)) == "identical"
    assert saving_verdict(np.array([0.0, 1e-9]), Interval(0.0, 1e-9, 0.9)) == "uncertain"
    assert saving_verdict(np.array([1.0, 2.0]), Interval(1.0, 2.0, 0.9)) == "faster"
    assert saving_verdict(np.array([-1.0, -2.0]), Interval(-2.0, -1.0, 0.9)) == "slower"


def test_tp1_intervals_say_identical_without_a_crossover():
    out = propagate(Scenario(vocab=202048, tp=1, batch=16), load_profile("h200-sxm-nvlink"), grid_points=17)
    for s in out.values():
        assert s.verdict == "identical" and s.crossover_batch is None and s.crossover_found_fraction == 0.0
