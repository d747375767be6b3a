"""The replicates' physical constraints (costmodel/profiles/replicates.constrain) and what they do to intervals.

The bandwidth ceiling (busbw_i <= min over later regimes) is NCCL's protocol order: it applies to derived curves
and not to measured ones, whose fitted segments may get slower with size (issue 18: clipping the cpu-gloo
all_gather p=2 replicates to their tail's 0.08-0.11 GB/s put the 90% interval above its own point prediction).
"""

from __future__ import annotations

import numpy as np

from costmodel.model.collectives import collective_time_us
from costmodel.profiles.replicates import constrain, replicate_profiles
from costmodel.profiles.store import load_profile


def _doc(provenance: str) -> dict:
    return {"collectives": [{"op": "all_gather", "provenance": provenance, "regimes": [
        {"name": "R1", "max_bytes": 1000, "busbw_gbps": 0.7, "alpha_base_us": 500.0},
        {"name": "R2", "busbw_gbps": 0.1, "alpha_base_us": -2.0}]}]}


def test_measured_segments_keep_their_bandwidths_derived_protocols_are_clipped():
    measured = constrain(_doc("measured"))["collectives"][0]["regimes"]
    derived = constrain(_doc("derived"))["collectives"][0]["regimes"]
    assert [r["busbw_gbps"] for r in measured] == [0.7, 0.1]
    assert [r["busbw_gbps"] for r in derived] == [0.1, 0.1]
    assert measured[1]["alpha_base_us"] == 0.0 == derived[1]["alpha_base_us"]  # latencies >= 0 for both


def test_cpu_gloo_replicates_straddle_their_point_prediction():
    """Over the measured all_gather p=2 sizes (64 KB - 16 MB per rank, where R1 / R2 / R3 at 0.73 / 0.46 / 0.24
    GB/s price), the point prediction lies inside the replicates' 5th-95th percentile, and their median is within
    25% of it (clipped to the tail's bandwidth, the median was 1.6-4x the point above 1 MB)."""
    prof = load_profile("cpu-gloo")
    sizes = np.geomspace(64e3, 16e6, 9)
    point = collective_time_us(prof, "all_gather", sizes, 2, mode="eager")
    reps = np.array([collective_time_us(r, "all_gather", sizes, 2, mode="eager") for r in replicate_profiles(prof)])
    lo, med, hi = np.percentile(reps, [5, 50, 95], axis=0)
    assert np.all(lo <= point) and np.all(point <= hi)
    assert np.all(np.abs(med / point - 1) < 0.25)
