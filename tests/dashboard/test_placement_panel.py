"""The draft placement panel: off by default, and when on, the placement table and its chart from costmodel."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def test_placement_panel_prices_every_placement():
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    at.toggle(key="placement_show").set_value(True).run()
    assert not at.exception, at.exception
    frames = [df.value for df in at.dataframe if "placement" in df.value.columns]
    assert frames, "no placement table"
    table = frames[0]
    assert list(table["placement"])[:3] == ["target", "tp1", "dp"]  # TP 8 by default: + q=2, q=4
    assert (table["whole draft step us"] > 0).all()
    assert any("Drafter forward" in c.value and "common to every strategy" in c.value for c in at.caption)
    at.number_input(key="placement_layers").set_value(4).run()  # a custom draft: 4 layers cost more
    assert not at.exception, at.exception
    deeper = [df.value for df in at.dataframe if "placement" in df.value.columns][0]
    assert float(deeper["forward us"].iloc[0]) > float(table["forward us"].iloc[0])
