"""Compact profiles (issue 21 item 2): small files, the same members, the same numbers (costmodel/profiles/compact.py).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import math
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.evidence.intervals import propagate
from costmodel.io.errors import InputError
from costmodel.profiles import compact, ensemble_checks
from costmodel.profiles.compact import (
    LazyMembers,
    compact_document,
    compact_members,
    drawn_extremes,
    expand_columns,
    expand_document,
    members,
)
from costmodel.profiles.parse import _profile_schema, parse_profile, profile_from_dict
from costmodel.profiles.replicates import replicate_profiles
from costmodel.profiles.store import PROFILE_DIR, bundled_profiles, load_profile

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
FROZEN = json.loads((DATA / "frozen_numbers.json").read_text())
FROZEN_REPLICATES = json.loads((DATA / "frozen_replicates.json").read_text())["profiles"]
MAX_PROFILE_KB = 300


def _freeze_module():
    spec = importlib.util.spec_from_file_location("freeze_numbers", ROOT / "scripts" / "freeze_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _doc(name: str) -> dict:
    return json.loads((PROFILE_DIR / f"{name}.json").read_text())


def _assert_same(got, want, where: str = "") -> None:
    """Equal structure; numbers to rtol 1e-12 (they are computed by the same code: in practice bit for bit)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for k in want:
            _assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=0.0), f"{where}: {got!r} != {want!r}"
    else:
        assert got == want, where


def test_every_bundled_profile_is_at_most_300_kb():
    sizes = {p.name: p.stat().st_size for p in PROFILE_DIR.glob("*.json")}
    assert len(sizes) == len(bundled_profiles()) + 1  # + schema.json
    too_big = {k: v for k, v in sizes.items() if v > MAX_PROFILE_KB * 1000}
    assert not too_big


@pytest.mark.parametrize("name", bundled_profiles())
def test_predictions_and_intervals_are_todays(name):
    """predict totals, propagate / interval_table / point_intervals: the numbers frozen before compaction."""
    assert set(FROZEN) == set(bundled_profiles())
    _assert_same(_freeze_module().frozen_numbers(name), FROZEN[name], name)


@pytest.mark.parametrize("name", bundled_profiles())
def test_compact_form_expands_to_the_old_replicate_lists(name):
    doc = _doc(name)
    assert "bootstrap" not in doc and doc["ensemble"]["method"] in ("uniform-ranges-v1", "columns-v1")
    reps = members(doc)
    text = json.dumps(reps, separators=(",", ":"))
    assert len(reps) == FROZEN_REPLICATES[name]["n"]
    assert hashlib.sha256(text.encode()).hexdigest() == FROZEN_REPLICATES[name]["sha256"]
    prof = load_profile(name)
    assert isinstance(prof.bootstrap, LazyMembers) and len(prof.bootstrap) == len(reps)
    assert list(prof.bootstrap) == reps
    verbose = expand_document(doc)
    assert list(verbose) == [("bootstrap" if k == "ensemble" else k) for k in doc]  # where `ensemble` was
    assert verbose["bootstrap"] == reps
    if doc["ensemble"]["method"] == "columns-v1":  # a stored ensemble: the converter gives this document back
        assert compact_document(verbose) == doc


def test_derive_scripts_store_the_seed_and_ranges_not_the_members():
    doc = _doc("h200-sxm-nvlink")
    ens = doc["ensemble"]
    assert ens["method"] == "uniform-ranges-v1" and ens["n"] == 100 and ens["seed"] == 0
    assert ens["ranges"]["simple_busbw_scale"] == [0.97, 1.0]
    # only the kernel model's refits are stored, one column per parameter that differs
    assert {tuple(c["path"][:2]) for c in ens["stored"]["columns"]} == {("kernels", "model")}
    assert all(len(c["values"]) == 100 for c in ens["stored"]["columns"])


def test_the_verbose_list_still_loads_and_prices_the_same():
    name = "l40s-pcie"
    compact = load_profile(name)
    verbose = parse_profile(json.dumps(expand_document(_doc(name))), source="verbose")
    assert isinstance(verbose.bootstrap, tuple) and list(verbose.bootstrap) == list(compact.bootstrap)
    from costmodel import Scenario

    sc = Scenario(vocab=202048, tp=4, batch=32)
    a = propagate(sc, compact, with_discrepancy=False)
    b = propagate(sc, verbose, with_discrepancy=False)
    assert {k: v.to_dict() for k, v in a.items()} == {k: v.to_dict() for k, v in b.items()}
    assert len(replicate_profiles(compact)) == 100


def test_columns_round_trip_exactly_and_refuse_what_they_cannot_hold():
    reps = [{"collectives": [{"op": "all_gather", "regimes": [{"busbw_gbps": bw, "alpha_base_us": 1}]}],
             "kernels": {"ops": {"argmax": {"bw_gbps": 10.0 + i, "launches": 1}}}}
            for i, bw in enumerate((1.5, 2.0, 0.1 + 0.2))]
    stored = compact_members(reps)
    assert [c["path"] for c in stored["columns"]] == [["collectives", 0, "regimes", 0, "busbw_gbps"],
                                                      ["kernels", "ops", "argmax", "bw_gbps"]]
    back = json.loads(json.dumps(stored))  # through JSON text: every float by its shortest repr
    assert json.dumps(expand_columns(back, 3)) == json.dumps(reps)
    mixed = copy.deepcopy(reps)
    mixed[1]["collectives"][0]["regimes"][0]["alpha_base_us"] = 1.0  # 1 vs 1.0: kept apart
    assert json.dumps(expand_columns(compact_members(mixed), 3)) == json.dumps(mixed)
    for bad in ([reps[0], {"collectives": []}], [reps[0], {**reps[1], "note": "x"}]):
        with pytest.raises(ValueError):
            compact_members(bad)
    named = copy.deepcopy(reps)
    named[2]["collectives"][0]["op"] = "all_reduce"
    with pytest.raises(ValueError, match="non-numeric"):
        compact_members(named)


JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, -0.0, 1.0, 0.1 + 0.2, 0.3]),
                        st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["", "a", "\ud800"]),
                        st.just({}), st.just([]), st.just([1, 2.0]))


@given(values=st.lists(JSON_LEAVES, min_size=1, max_size=4))
@settings(max_examples=400, deadline=None)
def test_leaf_key_equals_exactly_where_the_json_texts_do(values):
    """compact_members groups a column's values by `_text_key` instead of encoding each: two values get one key
    exactly when their `_dumps` texts are equal, and the key raises where `_dumps` raises (NaN, infinities)."""
    try:
        texts = [compact._dumps(v) for v in values]
    except ValueError:
        with pytest.raises(ValueError):
            [compact._text_key(v) for v in values]
        return
    keys = [compact._text_key(v) for v in values]
    assert [[a == b for b in texts] for a in texts] == [[a == b for b in keys] for a in keys]


@given(members=st.lists(st.fixed_dictionaries({"a": JSON_LEAVES, "b": st.lists(JSON_LEAVES, min_size=2, max_size=2)}),
                        min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_compact_members_stores_the_leaves_whose_texts_differ(members):
    """What compact_members stores (or refuses) is what the per-leaf `_dumps` comparison says: a column for each
    leaf whose texts differ, all numbers, and the columns decode to the members' own texts."""
    try:
        stored = compact_members(members)
    except ValueError:
        stored = None
    leaves = [dict(compact.json_leaves(m)) for m in members]
    shapes_equal = all(compact._shape(m) == compact._shape(members[0]) for m in members)
    try:
        differ = [p for p in leaves[0] if len({compact._dumps(lv[p]) for lv in leaves}) > 1] if shapes_equal else None
    except ValueError:
        differ = None
    if stored is None:
        assert differ is None or any(not all(compact.is_number(lv[p]) for lv in leaves) for p in differ)
        return
    assert [tuple(c["path"]) for c in stored["columns"]] == differ
    assert [compact._dumps(m) for m in expand_columns(stored, len(members))] == [compact._dumps(m) for m in members]


def _refused(doc: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        profile_from_dict(doc, source="p")


def test_a_compact_ensemble_is_checked_on_load_like_its_members():
    h200 = _doc("h200-sxm-nvlink")
    bad = copy.deepcopy(h200)
    bad["ensemble"]["ranges"]["simple_busbw_scale"] = [2.0, 3.0]  # every member's Simple busbw above the point
    with pytest.raises(InputError, match="contradict the point estimate") as compact_err:
        profile_from_dict(bad, source="p")
    with pytest.raises(InputError, match="contradict the point estimate") as verbose_err:
        profile_from_dict(expand_document(bad), source="p")
    assert str(compact_err.value) == str(verbose_err.value)  # the same check on the extremes as on the members
    cases = {
        "ranges low above high": (lambda d: d["ensemble"]["ranges"].update(hop_scale=[1.2, 0.8]), "low 1.2 above"),
        "unknown range": (lambda d: d["ensemble"]["ranges"].update(nope=[1.0, 2.0]), r"ranges\.nope"),
        "missing range": (lambda d: d["ensemble"]["ranges"].pop("hop_scale"), r"ranges\.hop_scale: missing"),
        "range 0": (lambda d: d["ensemble"]["ranges"].update(hop_scale=[0, 1.0]), r"ranges\.hop_scale"),
        "drawn busbw out of bounds": (lambda d: d["ensemble"]["ranges"].update(ll_busbw_scale=[1e5, 1e6]),
                                      "above the maximum"),
        "no seed": (lambda d: d["ensemble"].pop("seed"), r"ensemble\.seed: missing"),
        "values short": (lambda d: d["ensemble"]["stored"]["columns"][0]["values"].pop(), "99 values for n = 100"),
        "value below its bound": (lambda d: d["ensemble"]["stored"]["columns"][0]["values"].__setitem__(5, -1.0),
                                  r"stored\.columns\[0\]\.values"),
        "path not in template": (lambda d: d["ensemble"]["stored"]["columns"][0].update(path=["kernels", "x"]),
                                 "not a leaf of the template"),
        "both forms": (lambda d: d.update(bootstrap=[]), "not both"),
        "stored overlaps the draws": (lambda d: d["ensemble"]["stored"]["template"]["kernels"].update(ops={}),
                                      r"template\.kernels\.ops: drawn by uniform-ranges-v1"),
        "method": (lambda d: d["ensemble"].update(method="magic-v9"), "is not one of"),
        "n 0": (lambda d: d["ensemble"].update(n=0), r"ensemble\.n"),
        "value a string": (lambda d: d["ensemble"]["stored"]["columns"][1]["values"].__setitem__(0, "1"),
                           "not of type number"),
    }
    for case, (mutate, match) in cases.items():
        doc = copy.deepcopy(h200)
        mutate(doc)
        try:
            _refused(doc, match)
        except BaseException as exc:
            raise AssertionError(case) from exc
    gloo = _doc("cpu-gloo")
    assert gloo["ensemble"]["stored"]["columns"][1]["path"][-1] == "busbw_gbps"
    gloo["ensemble"]["stored"]["columns"][1]["values"][3] = 0  # a replicate busbw of 0 is refused, as in a list
    _refused(gloo, r"stored\.columns\[1\]\.values \(member\.collectives\[0\]\.regimes\[0\]\.busbw_gbps\)")


def test_bundled_compact_profiles_pass_the_published_json_schema():
    schema = json.loads((PROFILE_DIR / "schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for name in ("cpu-gloo", "h200-sxm-nvlink"):
        validator.validate(_doc(name))
    bad = _doc("cpu-gloo")
    bad["ensemble"]["stored"]["columns"][0]["values"][0] = "x"
    assert not validator.is_valid(bad)


def test_loading_a_compact_profile_builds_no_member():
    """Why load + validation is fast (the 50 ms target is measured by scripts/bench_profile_load.py, reported in
    docs/performance.md, not timed here): parsing checks a compact ensemble without building its members."""
    for name in bundled_profiles():
        profile = parse_profile((PROFILE_DIR / f"{name}.json").read_bytes(), source=name)
        assert isinstance(profile.bootstrap, LazyMembers) and profile.bootstrap._items is None, name
        assert len(profile.bootstrap) == profile.raw["ensemble"]["n"] and profile.bootstrap._items is None, name
        assert profile.bootstrap[0] and profile.bootstrap._items is not None, name


def test_leaf_schema_cache_gives_each_path_its_own_schema():
    """`ensemble_checks._leaf_schema`'s cache (keyed by the path without its list indices) returns, for every stored
    and drawn leaf of every bundled ensemble, the schema the uncached walk finds - the profile schema types arrays by
    `items` alone (no per-index `prefixItems`), which is what makes the indices irrelevant."""
    root = _profile_schema()
    assert "prefixItems" not in json.dumps(root)
    member = root["$defs"]["member"]
    cache: dict = {}
    checked = 0
    for name in bundled_profiles():
        doc = load_profile(name).raw
        ens = doc["ensemble"]
        paths = [tuple(c["path"]) for c in (ens.get("stored") or {}).get("columns", [])]
        if "ranges" in ens:
            paths += list(drawn_extremes(doc, ens["ranges"], ens["seed"], ens["n"]))
        for path in paths:
            assert ensemble_checks._leaf_schema(member, root, path, cache) == \
                ensemble_checks._leaf_schema(member, root, path), (name, path)
            checked += 1
    assert checked > 1000 and 1 < len(cache) < checked
