"""The fast replicates (costmodel/profiles/drawn_replicates.py) are the slow path's (`replicates.parsed_replicates`):
the same frozen Profiles (`==`, and the same repr: floats stay floats), the same raw documents (equal, and equal as
JSON text: key order, ints vs floats), member by member, for every bundled profile; where they do not apply
(another method, stored columns beyond the kernel model, ci90, a drawn value the parser refuses) they decline
(None) and `replicate_profiles` gives what the slow path gives - its replicates or its one-line InputError."""

from __future__ import annotations

import copy
import dataclasses
import gc
import json

import pytest

from costmodel.io.errors import InputError
from costmodel.profiles.compact import LazyMembers, compact_document, expand_document
from costmodel.profiles.drawn_replicates import drawn_replicates
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.paths import bundled_profiles
from costmodel.profiles.replicates import member_indices, parsed_replicates, replicate_profiles
from costmodel.profiles.store import load_profile
from costmodel.profiles.types import Profile


def assert_same(fast: Profile, slow: Profile) -> None:
    assert fast == slow
    assert repr(fast) == repr(slow)  # types too: 1.0 == 1 but their reprs differ
    assert fast.kernel_host == slow.kernel_host  # (compare=False fields)
    assert [c.samples for c in fast.collectives] == [c.samples for c in slow.collectives]
    assert fast.raw == slow.raw
    assert json.dumps(fast.raw) == json.dumps(slow.raw)


def both(profile: Profile, indices: list[int] | None = None
         ) -> tuple[tuple[Profile, ...] | None, tuple[Profile, ...] | str]:
    """(the fast path's replicates or None, the slow path's replicates or its InputError text), of the members
    `indices` (default: those an interval prices)."""
    indices = member_indices(len(profile.bootstrap)) if indices is None else indices
    fast = drawn_replicates(profile, indices)
    try:
        slow: tuple[Profile, ...] | str = parsed_replicates(profile, indices)
    except InputError as exc:
        slow = str(exc)
    return fast, slow


def public(profile: Profile) -> list[Profile] | str:
    try:
        return replicate_profiles(profile)
    except InputError as exc:
        return str(exc)


def assert_all_same(fast, slow) -> None:
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow, strict=True):
        assert_same(a, b)


@pytest.mark.parametrize("name", bundled_profiles())
def test_every_bundled_profile_fast_replicates_are_the_parsed_ones(name):
    """Every 5th member and the last (the slow path parses each member in full: ~40 ms a member here); the
    h200 variants below compare every member."""
    profile = load_profile(name)
    priced = member_indices(len(profile.bootstrap))
    assert len(priced) == len(profile.bootstrap) >= 2
    sample = sorted({*priced[::5], priced[-1]})
    fast, slow = both(profile, sample)
    assert not isinstance(slow, str) and len(slow) == len(sample)
    if profile.raw["ensemble"]["method"] == "uniform-ranges-v1":
        assert fast is not None, "a bundled uniform-ranges-v1 profile must take the fast path"
        assert_all_same(fast, slow)
    else:
        assert fast is None  # columns-v1 (cpu-gloo): the slow path
    every = public(profile)
    assert len(every) == len(priced)
    assert_all_same([every[priced.index(i)] for i in sample], slow)


def _h200() -> dict:
    return copy.deepcopy(load_profile("h200-sxm-nvlink").raw)


def _variant() -> dict:
    """h200 with what the bundled profiles lack: a measured curve (no protocol ceiling), a regime without
    alpha_per_peer_us, int point values, a oneshot curve (Profile.impl_curves)."""
    doc = _h200()
    curves = doc["collectives"]
    curves[10]["provenance"] = "measured"  # NVLSTree 135 > Tree-Simple 94.5: the ceiling would clip it
    del curves[9]["regimes"][1]["alpha_per_peer_us"]
    curves[0]["regimes"][0]["busbw_gbps"] = 141
    doc["kernels"]["ops"]["key_pack"]["bw_gbps"] = 3698
    doc["kernels"]["graph_kernel_us"] = int(doc["kernels"]["graph_kernel_us"]) or 2
    curves[21]["impl"] = "oneshot"
    return doc


def _unchecked(doc: dict) -> Profile:
    """A Profile of `doc` as if it had loaded, without the load checks (which refuse what these cases need)."""
    base = load_profile("h200-sxm-nvlink")
    return dataclasses.replace(base, raw=doc, bootstrap=LazyMembers(doc))


def test_variants_the_bundled_profiles_lack_take_the_fast_path_with_the_same_result():
    doc = _variant()
    profile = profile_from_dict(doc, source="variant")
    assert profile.impl_curves and profile.collectives[0].regimes[0].busbw_gbps == 141.0
    fast, slow = both(profile)
    assert fast is not None
    assert_all_same(fast, slow)
    measured = [r.collectives[10] for r in fast]
    assert any(c.regimes[1].busbw_gbps > c.regimes[2].busbw_gbps for c in measured)  # not clipped


def test_more_members_than_priced_and_no_stored_columns():
    doc = _h200()
    doc["ensemble"] = {k: v for k, v in doc["ensemble"].items() if k != "stored"} | {"n": 250}
    profile = profile_from_dict(doc, source="n250")
    fast, slow = both(profile)
    assert fast is not None and len(fast) == len(member_indices(250)) < 250
    assert_all_same(fast, slow)
    assert all(r.kernel_model == profile.kernel_model for r in fast)


def test_hbm_ceiling_on_kernel_bandwidths():
    """kernels.hbm_gbps (an int, below some ops' bandwidths): min(bw, hbm) is the int in the document, its float
    parsed, as constrain and the parser make them (the schema has no such key: an unchecked profile)."""
    doc = _h200()
    doc["kernels"]["hbm_gbps"] = 2000
    fast, slow = both(_unchecked(doc))
    assert fast is not None
    assert_all_same(fast, slow)
    assert any(type(spec["bw_gbps"]) is int for spec in fast[0].raw["kernels"]["ops"].values())
    assert all(op.bw_gbps <= 2000.0 for r in fast for op in r.kernel_ops.values())


def test_a_busbw_that_rounds_to_zero_is_refused_as_the_slow_path_refuses_it():
    doc = _h200()
    doc["collectives"][0]["regimes"][0]["busbw_gbps"] = 0.005  # round(0.005 s, 2): 0.0 for s < 1
    profile = _unchecked(doc)
    fast, slow = both(profile)
    assert fast is None
    assert isinstance(slow, str) and "busbw_gbps: must be > 0, got 0.0" in slow and "\n" not in slow
    assert public(profile) == slow


@pytest.mark.parametrize("case", ["verbose bootstrap list", "columns-v1", "ci90", "stored tables"])
def test_what_the_fast_path_leaves_to_the_slow_one_gives_the_slow_result(case):
    doc = _h200()
    if case == "verbose bootstrap list":
        doc = expand_document(doc)
    elif case == "columns-v1":
        doc = compact_document(expand_document(doc))
        assert doc["ensemble"]["method"] == "columns-v1"
    elif case == "ci90":
        doc["collectives"][3]["regimes"][1]["ci90"] = {"busbw_gbps": [300.0, 380.0]}
    else:  # the stored member replaces kernels.tables (a part the fast path takes from the parent)
        doc["ensemble"]["stored"]["template"]["kernels"]["tables"] = copy.deepcopy(doc["kernels"]["tables"])
    profile = profile_from_dict(doc, source=case)
    fast, slow = both(profile)
    assert fast is None
    assert not isinstance(slow, str)
    assert_all_same(public(profile), slow)



def test_building_replicates_restores_the_collector():
    """replicates._gc_paused: the collector is on again after a build when it was on, off when it was off, and
    nothing is left frozen by it (what another part froze before - the dashboard freezes its loaded objects,
    dashboard/data.py, in the same test process - stays frozen, untouched)."""
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    replicate_profiles(profile_from_dict(_h200(), source="gc-on"))
    assert gc.isenabled() and still_frozen(frozen)
    gc.disable()
    try:
        replicate_profiles(profile_from_dict(_h200(), source="gc-off"))
        assert not gc.isenabled() and still_frozen(frozen)
    finally:
        gc.enable()


def still_frozen(before: int) -> bool:
    """The permanent generation as a build found it: empty stays empty; otherwise nothing was added (a freeze adds
    every tracked object) and it was not emptied (an unfreeze) - frozen objects that die leave it, so it may shrink."""
    now = gc.get_freeze_count()
    return now == 0 if before == 0 else 0 < now <= before


def test_building_replicates_leaves_what_others_froze_frozen():
    """With objects frozen by someone else, a build neither freezes more nor unfreezes them."""
    before = gc.get_freeze_count()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        replicate_profiles(profile_from_dict(_h200(), source="gc-frozen"))
        assert still_frozen(frozen) and gc.isenabled()
    finally:
        if before == 0:  # only what this test froze (the dashboard's frozen objects, if any, stay so)
            gc.unfreeze()
