"""dashboard.tables.preset_labels: the compact preset names of the sidebar's closed box (the browser test checks
they fit it uncut)."""

from __future__ import annotations

import pandas as pd

from costmodel.profiles.presets import presets
from dashboard.tables import PRESET_LABEL_CHARS, preset_labels


def test_bundled_preset_labels_are_unique_short_and_lead_with_the_draft_kind():
    table = presets()
    labels = preset_labels(table)
    assert list(labels) == list(table.index)
    assert len(set(labels.values())) == len(labels)
    assert max(map(len, labels.values())) <= PRESET_LABEL_CHARS
    for name, label in labels.items():
        kind, model = label.split(" · ")
        assert kind == table.loc[name, "draft"].split()[0]
        assert table.loc[name, "model"].startswith(model)
    assert labels["llama4-maverick"] == "EAGLE · Llama 4 Maverick"
    assert labels["llama4-maverick-eagle3"] == "EAGLE-3 · Llama 4 Maverick"
    assert labels["llama3-8b"] == "EAGLE · Llama 3.1 8B"  # short enough: the full model name stays


def test_a_long_model_name_keeps_the_words_that_tell_it_apart():
    table = pd.DataFrame({"model": ["Model Family Alpha 17B-128E-Instruct", "Model Family Beta 17B-16E-Instruct",
                                    "Model Family Alpha 17B-128E-Instruct"],
                          "draft": ["EAGLE sharing", "EAGLE sharing", "EAGLE-3 reduced"]},
                         index=["alpha", "beta", "alpha-eagle3"])
    assert preset_labels(table) == {"alpha": "EAGLE · Model Family Alpha", "beta": "EAGLE · Model Family Beta",
                                    "alpha-eagle3": "EAGLE-3 · Model Family Alpha"}
    clash = pd.DataFrame({"model": ["Model Family Alpha 17B-128E-Instruct"] * 2, "draft": ["EAGLE a", "EAGLE b"]},
                         index=["one", "two"])
    assert preset_labels(clash) == {"one": "EAGLE · Model Family Alpha 17B-128E-Instruct (one)",
                                    "two": "EAGLE · Model Family Alpha 17B-128E-Instruct (two)"}
