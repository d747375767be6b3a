"""Issue 19: RCCL's all_reduce across 2 nodes on gfx950 (MI355X) - the protocol rcclUpdateCollectiveProtocol forces,
the Ring / Tree pick of tuning.cc's tuning_model_6, and the 2 x 8 curve of mi355x-xgmi built from them
(scripts/derive_profiles_fleet.py). Every expected number is computed by hand in the comment next to it."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from costmodel.model.collectives import collective_time_us, regime_name
from costmodel.profiles.store import load_profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import derive_profiles_fleet as fleet  # noqa: E402

MIB = 1 << 20


@pytest.mark.parametrize(("n_bytes", "nodes", "want"), [
    (131071, 2, "LL"), (131072, 2, "LL128"),            # llProtoRanges AllReduce LL (0, 131071]
    (17660227, 2, "LL128"), (17660228, 2, "Simple"),    # LL128 (131071, 17660227] at 2 nodes
    (1024, 1, None),                                     # one node: the override does not run
])
def test_rccl_forces_the_protocol_by_size_across_nodes(n_bytes, nodes, want):
    assert fleet.rccl_protocol(n_bytes, nodes) == want


def test_above_two_nodes_the_version_dependent_limit_is_refused():
    with pytest.raises(ValueError):
        fleet.rccl_protocol(MIB, 4)


def test_the_tuner_times_by_hand_at_2_nodes_of_8():
    x = fleet.RCCL_GRAPH_BW_GBPS
    assert x == pytest.approx(537.6)
    # Tree / LL128 at 1 MiB: lat 12 + 2 (7 x 0.9 + 1 x 10.5) = 45.6; bw 537.6 x 0.06 / 2 = 16.128;
    # log2(2^20 >> 6) = 14 -> treeCorrectionFactor[LL128][14] = 1.0
    assert fleet.rccl_tuner_us("Tree", "LL128", MIB, 16, 2) == pytest.approx(45.6 + MIB / (1000 * 16.128))
    # Ring / Simple at 256 MiB: lat 17 + 28 x max(2.1, 2 x 3) + 2 x 320 = 825; bw 537.6 x 1.0 x 16 / 30 = 286.72;
    # bin 22 -> ringCorrectionFactor[Simple][22] = 1.0: 825 + 2^28 / 286720 = 1761.23
    assert fleet.rccl_tuner_us("Ring", "Simple", 256 * MIB, 16, 2) == pytest.approx(825 + 2**28 / 286720)
    # Tree / Simple at 256 MiB: lat 17 + 2 (7 x 2.3 + 25) = 99.2; bw 537.6 x 0.11 / 2 = 29.568; corr[22] 0.7
    assert fleet.rccl_tuner_us("Tree", "Simple", 256 * MIB, 16, 2) == pytest.approx(99.2 + 2**28 / (29568 * 0.7))
    # ... and at 128 MiB (bin 21): Tree / Simple corr 0.9 -> 99.2 + 2^27 / 26611.2 = 5142.8 beats Ring / Simple
    # corr 0.1 -> 825 + 2^27 / 28672 = 5506.2
    assert fleet.rccl_tuner_us("Tree", "Simple", 128 * MIB, 16, 2) == pytest.approx(99.2 + 2**27 / 26611.2)
    assert fleet.rccl_tuner_us("Ring", "Simple", 128 * MIB, 16, 2) == pytest.approx(825 + 2**27 / 28672)
    with pytest.raises(ValueError):
        fleet.rccl_tuner_us("Ring", "Simple", MIB, 32, 4)  # only the 2-node bwRatio is transcribed


def test_rccl_runs_tree_below_256_mib_and_the_ring_from_there():
    picks = {e: fleet.rccl_pick(1 << e, 16, 2) for e in (16, 17, 20, 24, 25, 27, 28, 30, 33)}
    assert picks == {16: ("Tree", "LL"), 17: ("Tree", "LL128"), 20: ("Tree", "LL128"), 24: ("Tree", "LL128"),
                     25: ("Tree", "Simple"), 27: ("Tree", "Simple"), 28: ("Ring", "Simple"),
                     30: ("Ring", "Simple"), 33: ("Ring", "Simple")}
    assert fleet.rccl_ring_from_bytes(16, 2) == 1 << 28


@pytest.mark.parametrize("graph_bw", [320.0, 400.0, 1000.0, 2000.0, 5000.0])
def test_the_pick_does_not_hang_on_the_unpublished_graph_bandwidth(graph_bw):
    lo, hi = fleet.RCCL_GRAPH_BW_RANGE_GBPS
    assert lo <= graph_bw <= hi
    assert fleet.rccl_ring_from_bytes(16, 2, graph_bw) == 1 << 28
    assert all(fleet.rccl_pick(1 << e, 16, 2, graph_bw)[0] == "Tree" for e in range(6, 28))


def test_outside_that_range_the_pick_moves():
    # the range is where it holds, not a guess: at 300 GB/s the 16 MiB AllReduce is a Ring, at 10 TB/s the
    # ring starts at 512 MiB
    assert fleet.rccl_pick(16 * MIB, 16, 2, 300.0)[0] == "Ring"
    assert fleet.rccl_ring_from_bytes(16, 2, 10000.0) == 1 << 29


def test_the_mi355x_two_node_curve_holds_rccls_picks_and_the_in_sample_lines():
    prof = load_profile("mi355x-xgmi")
    curve = prof.curve("all_reduce", 16, "graph", 2)
    assert (curve.world_size, curve.nodes, curve.select) == (16, 2, "breakpoints")
    assert [(r.name, r.max_bytes) for r in curve.regimes] == [
        ("LL", 131071), ("Tree-LL128", 17660227), ("Tree-Simple", 2**28 - 1), ("Simple", math.inf)]
    r = {x.name: x for x in curve.regimes}
    # Tree-LL128 through (1 MiB, 81.37 us), (8 MiB, 166.5 us): busbw 1.875 x 7 MiB / 85.13 us = 161.67 GB/s
    assert r["Tree-LL128"].busbw_gbps == pytest.approx(1.875 * 7 * MIB / 85.13e3, abs=0.005)
    # Tree-Simple through (32 MiB, 391.8 us), (128 MiB, 1041.8 us): 1.875 x 96 MiB / 650 us = 290.37 GB/s
    assert r["Tree-Simple"].busbw_gbps == pytest.approx(1.875 * 96 * MIB / 650e3, abs=0.005)
    # the ring Simple and LL are the generic curve's at p = 16, 2 nodes: alpha 4.2 x 15 + 23.8, 378.83 GB/s
    generic = {x.name: x for x in next(c for c in prof.collectives if c.op == "all_reduce" and c.world_size is None)
               .regimes}
    assert r["Simple"].alpha_base_us == pytest.approx(generic["Simple"].alpha_per_peer_us * 15
                                                      + generic["Simple"].alpha_per_node_us)
    assert r["Simple"].busbw_gbps == generic["Simple"].busbw_gbps
    assert r["LL"].busbw_gbps == 39.0  # min(LL busbw, its 39 GB/s ceiling across nodes)


def test_the_two_node_curve_prices_the_table_rows():
    prof = load_profile("mi355x-xgmi")

    def t(size: int) -> float:
        return float(collective_time_us(prof, "all_reduce", size, 16, 2, "graph"))

    for size, us in fleet.MI355X_2NODE_ROWS.items():  # in-sample rows: reproduced
        assert t(size) == pytest.approx(us, rel=1e-4)
    # held-out rows of the published table (MI355X_2NODE_TABLE): 4 MiB 118.6 us, 64 MiB 614.3 us, 1 GiB 5525 us
    assert t(4 * MIB) == pytest.approx(118.6, rel=0.01)
    assert t(64 * MIB) == pytest.approx(614.3, rel=0.01)
    assert t(1 << 30) == pytest.approx(5525.0, rel=0.02)
    # 256 MiB: the ring's own price is below the Tree band's end (128 MiB..256 MiB - 1), so the monotone envelope
    # prices it at that end: 4 + alpha + 1.875 (2^28 - 1) / 290.37 GB/s = 1908.5 us (the table: 1652.0, +15.5%)
    r = {x.name: x for x in prof.curve("all_reduce", 16, "graph", 2).regimes}["Tree-Simple"]
    assert t(256 * MIB) == pytest.approx(4.0 + r.alpha_base_us + 1.875 * (2**28 - 1) / (r.busbw_gbps * 1e3))
    assert t(256 * MIB) == pytest.approx(1908.5, abs=0.5)
    assert [regime_name(prof, "all_reduce", s, 16, "graph", 2) for s in (65536, MIB, 32 * MIB, 512 * MIB)] == [
        "LL", "Tree-LL128", "Tree-Simple", "Simple"]


def test_other_placements_and_the_gfx942_profiles_keep_the_generic_ring():
    prof = load_profile("mi355x-xgmi")
    assert prof.curve("all_reduce", 32, "graph", 4).world_size is None  # 4 nodes: not transcribed
    assert prof.curve("all_gather", 16, "graph", 2).world_size is None
    for name in ("mi300x-xgmi", "mi325x-xgmi"):
        assert all(c.world_size is None for c in load_profile(name).collectives)
