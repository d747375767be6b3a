"""Replicates checked completely (costmodel/profiles/consistency.py): every priced number, every curve's shape.

Each test moves one point parameter of a bundled profile outside what its replicates carry and expects the
one-line refusal naming that parameter; unpriced evidence (ci90, samples) may change freely.
"""

from __future__ import annotations

import copy
import json
import math
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.io.errors import InputError
from costmodel.profiles.compact import expand_document
from costmodel.profiles.consistency import _numbers, check_replicates
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.replicates import MAX_INTERVAL_MEMBERS, member_indices, replicate_profiles
from costmodel.profiles.store import PROFILE_DIR


@cache
def _doc(name: str) -> str:
    return json.dumps(expand_document(json.loads((PROFILE_DIR / f"{name}.json").read_text())))


def verbose(name: str) -> dict:
    """A bundled profile with its replicates as the verbose `bootstrap` list."""
    return json.loads(_doc(name))


def compact(name: str) -> dict:
    return json.loads((PROFILE_DIR / f"{name}.json").read_text())


def _curve(doc: dict, op: str, world_size=None, nodes=None) -> dict:
    return next(c for c in doc["collectives"] if c["op"] == op and c.get("world_size") == world_size
                and c.get("nodes") == nodes and (c.get("impl") or "nccl") == "nccl")


def refused(doc: dict, *words: str) -> str:
    with pytest.raises(InputError) as info:
        check_replicates(doc, "p.json")
    message = str(info.value)
    assert "\n" not in message and message.startswith("p.json: ")
    for word in words:
        assert word in message, message
    return message


def test_bundled_profiles_pass_and_their_point_is_inside_every_range():
    for name in ("h200-sxm-nvlink", "cpu-gloo", "gb200-nvl72"):
        check_replicates(verbose(name), name)


@pytest.mark.parametrize("field", ["busbw_gbps", "alpha_base_us", "s_half_bytes"])
def test_a_regime_parameter_outside_its_replicates_is_refused(field):
    doc = verbose("h200-sxm-nvlink")
    regime = next(r for r in _curve(doc, "all_gather")["regimes"] if r.get(field))
    regime[field] *= 3
    refused(doc, "all_gather [any p, graph+eager] regime", field, "outside the replicates' range")


@pytest.mark.parametrize("field", ["launch_us", "eager_overhead_us"])
def test_a_curve_parameter_outside_its_replicates_is_refused(field):
    doc = verbose("h200-sxm-nvlink")
    _curve(doc, "all_reduce")[field] = 50.0
    refused(doc, "all_reduce [any p", field)


def test_a_fitted_curve_parameter_outside_its_bootstrap_is_refused():
    doc = verbose("cpu-gloo")
    curve = next(c for c in doc["collectives"] if c["op"] == "all_gather" and c.get("world_size") == 4)
    fitted = [next(x for x in rep["collectives"] if x["op"] == "all_gather" and x.get("world_size") == 4)
              for rep in doc["bootstrap"]]
    curve["regimes"][0]["alpha_base_us"] = 2 * max(c["regimes"][0]["alpha_base_us"] for c in fitted) + 1
    refused(doc, "all_gather [p=4", "regime 0 alpha_base_us")


@pytest.mark.parametrize("path", [("reduce_gbps",), ("copy_gbps", "bf16"), ("reduce_ops", "argmax", "floor_us"),
                                  ("torch_op_us",), ("sm_count",)])
def test_a_gpu_kernel_model_parameter_outside_its_replicates_is_refused(path):
    doc = verbose("h200-sxm-nvlink")
    node = doc["kernels"]["model"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] *= 2
    refused(doc, "kernels.model." + ".".join(path))


def test_the_compact_form_is_checked_as_completely():
    doc = compact("h200-sxm-nvlink")
    doc["kernels"]["model"]["reduce_gbps"] *= 2
    with pytest.raises(InputError, match=r"kernels\.model\.reduce_gbps = .* outside the replicates' range"):
        profile_from_dict(doc, source="p.json")
    # what a uniform-ranges-v1 ensemble does not draw, its members take from the point itself: no contradiction
    doc = compact("h200-sxm-nvlink")
    _curve(doc, "all_gather")["regimes"][0]["s_half_bytes"] = 1e9
    assert profile_from_dict(doc, source="p.json").collectives


def test_lm_head_and_host_costs_are_compared_when_replicates_carry_them():
    doc = verbose("h200-sxm-nvlink")
    for i, rep in enumerate(doc["bootstrap"]):
        rep["kernels"]["lm_head"] = {**doc["kernels"]["lm_head"], "floor_us": 3.0 + i / 100}
        rep["kernels"]["host"] = {**copy.deepcopy(doc["kernels"]["host"]), "c10d_call_us": 20.0 + i / 10}
    check_replicates(doc, "p.json")  # the point (3.789, 23.4) lies inside both ranges
    moved = copy.deepcopy(doc)
    moved["kernels"]["lm_head"]["floor_us"] = 9.0
    refused(moved, "kernels.lm_head.floor_us = 9")
    moved = copy.deepcopy(doc)
    moved["kernels"]["host"]["c10d_table"]["median_us"][0] = 1000.0
    refused(moved, "kernels.host.c10d_table.median_us.0")


def test_a_replicate_curve_with_another_shape_is_refused():
    doc = verbose("h200-sxm-nvlink")
    point = _curve(doc, "all_gather")
    point["regimes"] = point["regimes"][1:]  # the point curve lost its first protocol regime
    refused(doc, "bootstrap[0] curve all_gather", "the point curve")
    doc = verbose("h200-sxm-nvlink")
    _curve(doc, "all_gather")["regimes"][0]["max_bytes"] *= 2
    refused(doc, "breakpoints")


def test_one_replicate_is_refused_and_none_is_fine():
    doc = verbose("cpu-gloo")
    doc["bootstrap"] = doc["bootstrap"][:1]
    refused(doc, "1 bootstrap replicate; an interval needs at least 2")
    doc["bootstrap"] = []
    check_replicates(doc, "p.json")


def test_unpriced_evidence_may_differ():
    doc = verbose("cpu-gloo")
    curve = next(c for c in doc["collectives"] if c.get("samples"))
    curve["samples"]["median_us"] = [v * 5 for v in curve["samples"]["median_us"]]
    for regime in curve["regimes"]:
        regime["ci90"] = {"busbw_gbps": [1.0, 2.0]}
    check_replicates(doc, "p.json")


def test_intervals_price_at_most_max_interval_members_evenly_spaced():
    assert member_indices(100) == list(range(100))
    picked = member_indices(3145)
    assert len(picked) == MAX_INTERVAL_MEMBERS and picked[0] == 0 and picked[-1] == 3144
    assert all(0 < b - a <= 16 for a, b in zip(picked, picked[1:]))
    doc = verbose("cpu-gloo")
    doc["bootstrap"] = doc["bootstrap"] * 10  # 500 replicates
    doc["name"] = "many"
    reps = replicate_profiles(profile_from_dict(doc, source="many.json"))
    assert len(reps) == MAX_INTERVAL_MEMBERS


def _numbers_reference(node, path, out, skip=()):
    """The plain recursion `consistency._numbers` must match: isinstance tests, bools excluded, finite only."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k not in skip:
                _numbers_reference(v, (*path, k), out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _numbers_reference(v, (*path, i), out)
    elif isinstance(node, (int, float)) and not isinstance(node, bool) and math.isfinite(node):
        out[path] = float(node)


class _Float(float):
    pass


class _Dict(dict):
    pass


LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                   st.text(max_size=2), st.floats(-1e9, 1e9).map(_Float), st.integers(0, 9).map(np.int64),
                   st.floats(allow_nan=True).map(np.float64))
TREES = st.recursive(LEAVES, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.sampled_from("abcd"), kids, max_size=4),
    st.dictionaries(st.sampled_from("ab"), kids, max_size=3).map(_Dict)), max_leaves=25)


@given(tree=TREES, skip=st.sampled_from([(), ("a",), ("a", "c")]))
@settings(max_examples=300, deadline=None)
def test_numbers_takes_the_same_leaves_as_the_plain_recursion(tree, skip):
    """`_numbers`' exact-type fast path (json.loads' dict / list / float / int) and its isinstance fallback
    (subclasses, numpy scalars) collect exactly the plain recursion's (path, value) pairs, bools and non-finite
    values left out, with the same float values (bit for bit: -0.0 stays -0.0)."""
    got, want = {}, {}
    _numbers(tree, ("root",), got, skip)
    _numbers_reference(tree, ("root",), want, skip)
    assert got.keys() == want.keys()
    assert all(type(got[k]) is float or isinstance(got[k], float) for k in got)
    assert [np.float64(v).tobytes() for v in got.values()] == [np.float64(v).tobytes() for v in want.values()]
