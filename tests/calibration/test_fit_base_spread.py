"""Issue 18: the parts a fitted profile keeps from its base keep the base's uncertainty in its ensemble."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.fitting.fit import fit_measurements
from costmodel.model.engines import host_costs
from costmodel.model.kernels import kernel_time_us
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.replicates import replicate_profiles
from costmodel.profiles.store import load_profile, save_profile

from .test_fit import ONE, collective_rows

H200 = "NVIDIA H200 SXM"
SHAPE = dict(rows=16.0, cols=25256.0, world_size=8, dtype="bf16", elem_bytes=2, mode="graph")


def _kernel_terms_us(profile, op: str) -> np.ndarray:
    return np.array([float(kernel_time_us(p, op, **SHAPE).time_us) for p in replicate_profiles(profile)])


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A collectives-only calibration (all_gather at p 8) fitted onto the H200 base, saved and loaded back
    (the compact ensemble round trip)."""
    doc = fit_measurements(collective_rows("all_gather", 8, "graph", ONE, gpu=H200), name="mine", bootstrap=200,
                           base_profile=load_profile("h200-sxm-nvlink"))
    path = tmp_path_factory.mktemp("fit") / "mine.json"
    save_profile(doc, path)
    return load_profile(str(path))


@pytest.mark.parametrize("op", ["argmax", "key_pack", "local_argmax", "relayout_copy", "pair_reduce"])
def test_kernel_term_spread_equals_the_bases(fitted, op):
    """Before: every member priced the kept GPU kernel model at the base's point value (zero spread)."""
    base = load_profile("h200-sxm-nvlink")
    ours, theirs = _kernel_terms_us(fitted, op), _kernel_terms_us(base, op)
    assert len(ours) == len(theirs) == 100
    assert np.ptp(theirs) > 0  # the base's kernel model does vary over its members
    np.testing.assert_allclose(np.percentile(ours, [5, 50, 95]), np.percentile(theirs, [5, 50, 95]), rtol=1e-12)


def test_kept_collectives_keep_the_bases_spread_and_the_measured_curve_its_own(fitted):
    base = load_profile("h200-sxm-nvlink")
    kept = [p.curve("all_reduce", 8, "graph").regimes[0].busbw_gbps for p in replicate_profiles(fitted)]
    ref = [p.curve("all_reduce", 8, "graph").regimes[0].busbw_gbps for p in replicate_profiles(base)]
    assert fitted.curve("all_reduce", 8, "graph").from_base == "h200-sxm-nvlink"
    assert sorted(kept) == sorted(ref) and len(set(kept)) > 1
    measured = {p.curve("all_gather", 8, "graph").regimes[0].alpha_base_us for p in replicate_profiles(fitted)}
    assert len(measured) > 1 and all(p.curve("all_gather", 8, "graph").provenance == "measured"
                                     for p in replicate_profiles(fitted))


def test_kept_parts_stay_the_bases_at_the_point_and_the_host_figures_follow_its_members(fitted):
    base = load_profile("h200-sxm-nvlink")
    assert fitted.kernel_model == base.kernel_model and fitted.lm_head == base.lm_head
    assert host_costs(fitted) == host_costs(base)
    assert [host_costs(p) for p in replicate_profiles(fitted)] == [host_costs(p) for p in replicate_profiles(base)]


def test_a_base_without_members_leaves_the_fit_members_alone():
    base = load_profile("h200-sxm-nvlink")
    bare = profile_from_dict({k: v for k, v in base.raw.items() if k not in ("ensemble", "bootstrap",
                                                                                "bootstrap_method")},
                             source="bare base")
    doc = fit_measurements(collective_rows("all_gather", 8, "graph", ONE, gpu=H200), name="mine", bootstrap=20,
                           base_profile=bare)
    assert all("kernels" not in rep for rep in doc["bootstrap"])
    assert {c["op"] for rep in doc["bootstrap"] for c in rep["collectives"]} == {"all_gather"}
