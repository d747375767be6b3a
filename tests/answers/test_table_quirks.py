"""Measured-table quirks (costmodel/answers/table_quirks.py; issue 18): a node that gets much faster with more work
is named wherever it prices a scenario - `predict` notes and JSON, the dashboard's warning."""

from __future__ import annotations

import json

import numpy as np

from costmodel import Scenario, load_profile
from costmodel.answers.table_quirks import QUIRK_DROP, _quirks, scenario_quirks, table_quirks
from costmodel.cli.main import main
from costmodel.profiles.types import KernelTable


def test_a_drop_beyond_half_along_cols_or_rows_is_a_quirk_and_smaller_ones_are_not():
    table = KernelTable(op="local_max", dtype="bf16", mode="graph", world_size=1, rows=(1.0, 32.0, 512.0),
                        cols=(4000.0, 8000.0, 16000.0),
                        median_us=((4.0, 5.0, 6.0),     # monotone
                                   (5.0, 28.0, 13.0),   # 28 -> 13 along the row: 13 < 0.5 x 28, a quirk
                                   (5.1, 13.9, 14.0)))  # 28 -> 13.9 down the col: 0.496x, a quirk
    found = {(q.small, q.large) for q in _quirks(table)}
    assert found == {((32.0, 8000.0), (32.0, 16000.0)), ((32.0, 8000.0), (512.0, 8000.0))}
    assert QUIRK_DROP == 0.5


def test_the_bundled_h200_local_max_node_is_named_only_where_it_prices():
    prof = load_profile("h200-sxm-nvlink")
    texts = [q.text() for q in table_quirks(prof)]
    want = ("measured table local_max bf16 graph is non-monotone: 32 x 8,000 = 28.0 us but the larger 32 x 16,000 = "
            "6.5 us (4.3x faster with more work)")
    assert any(t.startswith(want) for t in texts)
    at_16 = scenario_quirks(prof, Scenario(vocab=32000, tp=4, batch=16.0))  # rows 1-32 at shard 8,000
    assert any(t.startswith(want) for t in at_16)
    assert not any(t.startswith(want) for t in scenario_quirks(prof, Scenario(vocab=32000, tp=4, batch=16.0,
                                                                                  dtype="fp32")))
    assert scenario_quirks(prof, Scenario(vocab=202048, tp=8, batch=64.0)) == []  # the dashboard's default
    swept = scenario_quirks(prof, Scenario(vocab=32000, tp=4, batch=np.arange(1.0, 65.0)))
    assert set(at_16) <= set(swept)


def test_predict_prints_and_returns_the_quirks(capsys):
    args = ["predict", "--vocab", "32000", "--tp", "4", "--batch", "16", "--no-intervals"]
    assert main(args) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: measured table")]
    assert main([*args, "--json"]) == 0
    quirks = json.loads(capsys.readouterr().out)["table_quirks"]
    assert quirks == scenario_quirks(load_profile("h200-sxm-nvlink"), Scenario(vocab=32000, tp=4, batch=16.0))
    assert len(notes) == len(quirks) >= 1
