"""`parse_curves._plain_curve` (the fast path of `curve_from_dict`) builds exactly what the checked path builds
wherever it applies, and defers (None) for anything the checked path refuses or handles specially (samples, ci90,
bad values)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.io.errors import InputError
from costmodel.profiles import parse_curves
from costmodel.profiles.paths import bundled_profiles
from costmodel.profiles.replicates import constrain
from costmodel.profiles.store import load_profile


def checked(obj):
    """curve_from_dict with the fast path switched off: the field-by-field checks only."""
    original = parse_curves._plain_curve
    parse_curves._plain_curve = lambda _obj: None
    try:
        return parse_curves.curve_from_dict(obj, "c")
    except InputError as exc:
        return exc
    finally:
        parse_curves._plain_curve = original


def same(a, b) -> bool:
    return a == b and repr(a) == repr(b) and a.samples == b.samples


@pytest.mark.parametrize("name", bundled_profiles())
def test_every_bundled_curve_gives_the_checked_result(name):
    profile = load_profile(name)
    docs = [profile.raw, *(constrain({**profile.raw, **rep}) for rep in list(profile.bootstrap)[:5])]
    fast = 0
    for doc in docs:
        for curve in doc["collectives"]:
            plain = parse_curves._plain_curve(curve)
            assert plain is None or same(plain, checked(curve)), curve
            fast += plain is not None
    assert fast > 0  # the replicates' plain curves do take it


REGIME = {"name": "Simple", "alpha_base_us": 10.0, "busbw_gbps": 100.0}
FAMILY = {"name": "Simple", "alpha_base_us": 10.0, "max_bytes": [1000, None], "busbw_gbps": [50.0, 100.0],
          "net_busbw_gbps": [90.0, 180.0], "s_half_bytes": [0, 5]}  # a candidate family: two brackets
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0.0, -0.0, math.inf, "all_gather", "graph", "eager", "min", "breakpoints",
                                    "nccl", "multimem", "measured", "derived", "x"]),
                   st.just([]), st.just({}), st.just([REGIME]),
                   st.just([{**REGIME, "max_bytes": 1000.0}, REGIME]),
                   st.just([{**REGIME, "max_bytes": 1000.0}, {**REGIME, "max_bytes": 10.0}, REGIME]),
                   st.just([{**REGIME, "ci90": {"busbw_gbps": [90, 110]}}]),
                   st.just({"bytes_per_rank": [1], "n": [1], "median_us": [1.0], "p10_us": [1.0], "p90_us": [1.0],
                            "raw_us": [[1.0]]}),
                   st.just([FAMILY]), st.just([FAMILY, {**FAMILY, "name": "Tree-LL"}]),
                   st.just([{**FAMILY, "busbw_gbps": [50.0]}]), st.just([{**FAMILY, "max_bytes": [None, 10]}]),
                   st.just([{**FAMILY, "max_bytes": [10, 10, None], "busbw_gbps": [1.0, 2.0, 3.0]}]),
                   st.just([{**FAMILY, "busbw_gbps": [50.0, float("nan")]}]), st.just([REGIME]))
KEYS = ("op", "world_size", "mode", "regimes", "select", "nodes", "impl", "provenance", "from_base", "launch_us",
        "eager_overhead_us", "inter_node_busbw_gbps", "samples", "candidates")


@settings(max_examples=800, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), VALUES),
       st.sampled_from([{}, {"op": "all_gather", "regimes": [REGIME]},
                        {"op": "all_reduce", "world_size": 8, "mode": "graph", "regimes": [REGIME]}]))
def test_plain_curve_equals_the_checked_path_or_defers(obj, base):
    obj = {**base, **obj}
    plain = parse_curves._plain_curve(obj)
    if plain is not None:
        assert same(plain, checked(obj))
        assert type(plain.launch_us) is float and type(plain.eager_overhead_us) is float


def test_candidates_parse_to_one_regime_per_bracket_and_refuse_bad_families_in_one_line():
    curve = parse_curves.curve_from_dict({"op": "all_reduce", "world_size": 16, "nodes": 2, "regimes": [REGIME],
                                          "candidates": [FAMILY]}, "c")
    assert [(r.max_bytes, r.busbw_gbps, r.net_busbw_gbps, r.s_half_bytes) for r in curve.candidates] == [
        (1000.0, 50.0, 90.0, 0.0), (math.inf, 100.0, 180.0, 5.0)]
    assert {r.alpha_base_us for r in curve.candidates} == {10.0}
    for bad, says in (([{**FAMILY, "busbw_gbps": [50.0]}], "one entry per bracket"),
                      ([{**FAMILY, "max_bytes": [None, 10]}], "must increase"),
                      ([{**FAMILY, "busbw_gbps": []}], "non-empty lists"), ("x", "list of families")):
        err = checked({"op": "all_reduce", "regimes": [REGIME], "candidates": bad})
        assert isinstance(err, InputError) and says in str(err) and "\n" not in str(err), bad
