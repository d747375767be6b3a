"""The point intervals' stored normal quantiles are scipy.stats.norm.ppf's, bit for bit (evidence.ensemble)."""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from costmodel.evidence import ensemble


def test_stored_quantiles_are_scipys():
    expected = norm.ppf((np.arange(ensemble._N_Z) + 0.5) / ensemble._N_Z)
    np.testing.assert_array_equal(ensemble._z_draws(), expected)
    assert len(ensemble._Z_QUANTILES) == ensemble._N_Z
