"""At TP 1 nothing is gathered and an engine runs one selection whatever the flag: every strategy prices the
engine's own selection kernel (SGLang's split-vocab argmax or its softmax + max, tokenspeed's bandwidth-bound
argmax), so the saving is 0 - as predict's crossover column says ("identical at TP 1"). Before, the local paths
priced ATen's argmax at p = 1 under SGLang while the baseline priced the split-vocab argmax (7 us apart)."""

from __future__ import annotations

import numpy as np
import pytest

from costmodel import BASELINE, Scenario, load_profile, predict
from costmodel.model.engines import ENGINES


@pytest.mark.parametrize("profile", ["h200-sxm-nvlink", "b200-hgx-nvlink", "mi300x-xgmi"])
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("top_k", [1, 4])
def test_every_strategy_is_the_baselines_selection_at_tp1(profile, engine, top_k):
    batch = np.array([1.0, 16.0, 300.0])
    pred = predict(Scenario(vocab=202048, tp=1, batch=batch, engine=engine, top_k=top_k), load_profile(profile))
    base = pred.total_us(BASELINE)
    for name, result in pred.strategies.items():
        valid = np.broadcast_to(result.valid, batch.shape)
        np.testing.assert_allclose(np.where(valid, result.total_us, base), base, rtol=1e-12, err_msg=name)


def test_the_recipes_kernel_is_what_tp1_prices_under_sglang():
    """The split-vocab argmax (a bandwidth-bound pass + one finalize launch) is cheaper than ATen's one-block
    reduction at one row: the p = 1 local path now prices it too, and stays above 0."""
    prof = load_profile("h200-sxm-nvlink")
    sg = predict(Scenario(vocab=202048, tp=1, batch=1.0, engine="sglang"), prof)
    none = predict(Scenario(vocab=202048, tp=1, batch=1.0), prof)
    assert 0 < float(sg.total_us("local_argmax_pairs")) < float(none.total_us("local_argmax_pairs"))
