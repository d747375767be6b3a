"""The dashboard's fabric: URL state (`fabric=`), the sidebar's choice re-pricing the profile as --fabric does, and
the app run from a URL naming a fabric."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from costmodel.model.collectives import collective_time_us
from costmodel.model.fabrics import profile_on_fabric
from costmodel.profiles.store import load_profile
from dashboard import data, state
from dashboard.question import question_of

APP = str(Path(__file__).resolve().parents[2] / "app.py")
KW = {"profiles": ["h100-sxm-nvlink", "gb200-nvl72"], "presets": ["llama4-maverick"]}


def test_url_round_trip_and_refusal():
    inputs, warnings = state.parse_query_params({"fabric": "tcpxo", "nodes": "2", "tp": "16"}, **KW)
    assert warnings == [] and inputs.fabric == "tcpxo"
    assert state.to_query_params(inputs)["fabric"] == "tcpxo"
    assert "fabric" not in state.to_query_params(state.Inputs())  # the profile's own: no parameter
    bad, warnings = state.parse_query_params({"fabric": "warp-drive"}, **KW)
    assert bad.fabric == state.OWN_FABRIC and len(warnings) == 1 and "fabric='warp-drive'" in warnings[0]
    assert state.inputs_from_session({**state.session_values(inputs)}).fabric == "tcpxo"


def test_sidebar_fabric_prices_as_the_cli_flag():
    text = data.bundled_profile_text("h100-sxm-nvlink")
    keyed = data.fabric_text(text, "gib")
    assert keyed == text and keyed.digest != text.digest  # same JSON, its own cache key
    assert data.fabric_text(text, state.OWN_FABRIC) is text
    cli = profile_on_fabric(load_profile("h100-sxm-nvlink"), "gib")
    t_dash = float(collective_time_us(data.profile_from_text(keyed), "all_gather", 1024.0, 16, 2))
    t_cli = float(collective_time_us(cli, "all_gather", 1024.0, 16, 2))
    assert t_dash == pytest.approx(t_cli)
    assert t_dash > float(collective_time_us(data.profile_from_text(text), "all_gather", 1024.0, 16, 2)) + 200
    # engine none: Maverick's 40 heads do not divide TP 16, so vLLM would refuse the question (issue 43)
    inputs, _ = state.parse_query_params({"fabric": "gib", "nodes": "2", "tp": "16", "engine": "none"}, **KW)
    q = question_of(keyed, inputs)
    assert q.fabric == "gib" and question_of(text, inputs).fabric is None


def test_app_from_a_fabric_url_names_the_fabric():
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in {"engine": "none", "profile": "h100-sxm-nvlink", "tp": "16", "nodes": "2",
                       "fabric": "tcpxo"}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["fabric"] == "tcpxo"
    shown = " ".join(str(getattr(e, "value", "")) for e in [*at.caption, *at.markdown, *at.warning, *at.info])
    assert "tcpxo" in shown
