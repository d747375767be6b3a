"""The parser's fast paths build what the checked paths build: `parse_curves._plain_regime` (plain regimes) equals
`parse_curves._checked_regime` wherever it applies and defers (None) everywhere else; replicate profiles reuse their
parent's parsed kernel tables only when they hold the very same objects."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.io import safe_io
from costmodel.io.errors import InputError
from costmodel.profiles import parse, parse_curves
from costmodel.profiles.paths import bundled_profiles
from costmodel.profiles.replicates import constrain, replicate_profiles
from costmodel.profiles.store import load_profile


def checked(obj):
    try:
        return parse_curves._checked_regime(obj, "r")
    except InputError as exc:
        return exc


@pytest.mark.parametrize("name", bundled_profiles())
def test_every_bundled_regime_takes_the_plain_path_with_the_same_result(name):
    profile = load_profile(name)
    docs = [profile.raw, *(constrain({**profile.raw, **rep}) for rep in list(profile.bootstrap)[:5])]
    for doc in docs:
        for curve in doc["collectives"]:
            for regime in curve["regimes"]:
                plain = parse_curves._plain_regime(regime)
                assert plain is None or plain == checked(regime), regime


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(2**53 - 1, 2**60),
                   st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1e-300, math.inf]),
                   st.text(max_size=3), st.just({}), st.just({"alpha_base_us": [0.1, 0.2]}), st.just([]))
KEYS = ("name", "max_bytes", "alpha_base_us", "alpha_per_peer_us", "alpha_per_node_us", "busbw_gbps", "ci90",
        "s_half_bytes", "inter_node_max_gbps")


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), VALUES), st.sampled_from([{}, {"alpha_base_us": 1.5, "busbw_gbps": 80}]))
def test_plain_regime_equals_the_checked_path_or_defers(obj, base):
    obj = {**base, **obj}
    plain = parse_curves._plain_regime(obj)
    if plain is not None:
        assert plain == checked(obj)
        assert all(type(getattr(plain, f)) is float for f in ("max_bytes", "alpha_base_us", "busbw_gbps"))


def test_replicates_share_the_parents_tables_only_when_unchanged():
    profile = load_profile("h200-sxm-nvlink")
    assert profile.kernel_tables
    for rep in replicate_profiles(profile)[:3]:
        assert rep.kernel_tables is profile.kernel_tables
    other = load_profile("cpu-gloo")
    for rep in replicate_profiles(other)[:3]:
        assert rep.kernel_tables == other.kernel_tables


@pytest.mark.parametrize("bad,words", [(math.nan, "is not a finite number"), (math.inf, "is not a finite number"),
                                       (2**70, "integer outside the int64 range"), ("a\x00b", "NUL character")])
def test_the_tree_check_runs_once_whichever_way_a_document_comes_in(bad, words, monkeypatch):
    """parse_profile's text is checked by safe_io.loads_json's tree walk and profile_from_dict does not walk it again
    (tree_checked); an in-memory document (a fit's output, an edited raw dict) is walked by profile_from_dict
    itself - both refuse a bad leaf with the same one-line error."""
    raw = dict(load_profile("a100-sxm-nvlink").raw)
    raw["title"] = bad
    calls = []
    walk = safe_io.check_tree
    monkeypatch.setattr(safe_io, "check_tree", lambda *a, **k: (calls.append(1), walk(*a, **k))[1])
    with pytest.raises(InputError, match=words):
        parse.profile_from_dict(raw, source="mem.json")
    assert len(calls) == 1
    good = dict(load_profile("a100-sxm-nvlink").raw)
    calls.clear()
    assert parse.parse_profile(json.dumps(good), source="ok.json").name == good["name"]
    assert len(calls) == 1  # loads_json's walk only
