"""costmodel.evidence.interval_table: one ensemble pass at many batches equals propagate at each batch, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from costmodel import Scenario, load_profile
from costmodel.evidence.interval_table import interval_table
from costmodel.evidence.intervals import propagate

FOCUS = "local_argmax_pairs"


@pytest.mark.parametrize("profile_name, tp, nodes", [("h200-sxm-nvlink", 8, 1), ("cpu-gloo", 4, 1),
                                                     ("h200-sxm-nvlink", 16, 2)])  # 2 nodes: multi-node sigma
def test_interval_table_equals_propagate_at_every_batch(profile_name, tp, nodes):
    profile = load_profile(profile_name)
    sc = Scenario(vocab=202048, tp=tp, nodes=nodes, num_spec_tokens=1, batch=1)
    batches = np.array([300.0, 1.0, 64.0, 64.0])  # unsorted, repeated: the table sorts and de-duplicates
    table = interval_table(sc, profile, FOCUS, batches)
    assert list(table.batches) == [1.0, 64.0, 300.0]
    for b in table.batches:
        expected = propagate(sc.with_(batch=b), profile, strategies=(FOCUS,))[FOCUS]
        assert table.at(b) == expected  # saving, decode-step saving, crossover, found fraction, verdict
    assert table.at(8.0) is None  # not in the table: the caller prices that batch itself


@pytest.mark.parametrize("profile_name, tp, extra", [("h200-sxm-nvlink", 8, {}),
                                                     ("h200-sxm-nvlink", 2, {"draft_vocab": 32000, "d2t": True}),
                                                     ("h200-sxm-nvlink", 4, {"impl": "fused", "mode": "eager"}),
                                                     ("cpu-gloo", 4, {"impl": "fused"})])
def test_crossovers_share_one_grid_and_equal_crossover(profile_name, tp, extra):
    """crossover.crossovers (one grid pass for all strategies; the dashboard's crossover frame) gives exactly
    crossover.crossover of each strategy: roots, direction and status."""
    from costmodel import BASELINE, STRATEGIES
    from costmodel.model.crossover import crossover, crossovers

    profile = load_profile(profile_name)
    sc = Scenario(vocab=202048, tp=tp, num_spec_tokens=1, batch=1, **extra)
    names = tuple(s for s in STRATEGIES if s != BASELINE)
    fast = crossovers(sc, names, profile)
    assert list(fast) == list(names)
    assert fast == {name: crossover(sc, name, profile) for name in names}
    if profile_name != "cpu-gloo":  # the brentq path is exercised, not only statuses (gloo wins everywhere)
        assert any(c.status == "crossover" for c in fast.values())


@pytest.mark.parametrize("f, a, b", [(lambda x: x ** 3 - 2.0 * x - 5.0, 1.0, 4.0),
                                     (lambda x: np.log(x) - 3.7, 1.0, 65536.0),
                                     (lambda x: 1.0 / (1.0 + x) - 0.01 * np.sqrt(x), 1.0, 4096.0),
                                     (lambda x: np.tanh(x - 300.0), 17.0, 9000.0)])
def test_lockstep_brentq_equals_scipy_brentq(f, a, b):
    """brent.brentq_steps (the generator the lockstep crossover search drives) returns scipy's brentq root
    to the last bit, with the same number of function evaluations."""
    from scipy.optimize import brentq

    from costmodel.model.brent import brentq_steps

    calls = []
    expected = brentq(lambda x: calls.append(x) or float(f(x)), a, b, xtol=1e-3)
    gen, asked = brentq_steps(a, b, 1e-3), []
    x = next(gen)
    try:
        while True:
            asked.append(x)
            x = gen.send(float(f(x)))
    except StopIteration as done:
        root = done.value
    assert root == expected
    assert asked == calls
    from costmodel.model.brent import brentq as lockstep_brentq  # the scalar driver grid_roots refines with

    again = []
    assert lockstep_brentq(lambda x: again.append(x) or float(f(x)), a, b, 1e-3) == expected
    assert again == calls


def test_dashboard_profile_text_is_keyed_by_its_digest():
    """dashboard.data.profile_text: one ProfileText per text, keyed in st.cache_data by its SHA-256, so two
    profiles never share a cached result and the same text (bundled or uploaded) is one key."""
    import hashlib

    from costmodel.model.crossover import crossovers
    from dashboard import data
    from dashboard.state import Inputs

    spec = Inputs().spec
    h200 = data.profile_text("h200-sxm-nvlink", {})
    assert h200 is data.profile_text("h200-sxm-nvlink", {})
    assert h200.digest == hashlib.sha256(h200.encode()).hexdigest()
    uploaded = data.profile_text("mine", {"mine": data.bundled_profile_text("cpu-gloo")})
    assert uploaded.digest != h200.digest
    for text, name in ((h200, "h200-sxm-nvlink"), (uploaded, "cpu-gloo")):
        frame = data.crossover_frame(text, spec).set_index("strategy")
        found = crossovers(data.per_draft_call(spec).scenario(1), data.ALTERNATIVES, load_profile(name))
        assert [frame.loc[s, "status"] for s in found] == [c.status for c in found.values()]
