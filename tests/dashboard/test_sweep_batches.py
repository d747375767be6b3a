"""Issue 18 (low list): the dashboard's sweep (chart and `time_vs_batch` CSV) has whole batches only."""

from __future__ import annotations

import numpy as np

from costmodel.answers import per_call
from dashboard import data, state


def test_the_sweep_csv_has_whole_batches_over_the_range():
    """Before: 73 batches over 1..4096, 60 of them fractional (1.138789, 1.29684, ...)."""
    inputs = state.Inputs()
    table = per_call.sweep_table(data.sweep_frame(data.profile_text(inputs.profile, {}), inputs.spec, 1, 4096))
    batches = np.unique(table["batch"].to_numpy(float))
    assert np.all(batches == np.round(batches)) and batches[0] == 1 and batches[-1] == 4096
    assert {1, 2, 3, 4, 8, 1024, 4096} <= set(batches) and len(batches) >= 40  # still a dense log grid
    assert np.all(np.diff(batches) > 0)
