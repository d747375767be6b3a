"""Multi-rack TP on NVL72 (issue 19): a rack is NCCL's node, and across racks NCCL's Ring / Tree / NVLS-Tree rules.

Hand-computed from NCCL 2.23+ tuning.cc (ncclTopoTuneModel, ncclTopoGetAlgoTime) constants: baseLat, hwLat[NVLink /
NET], getNetOverhead (1 us on Intel x86 and on Arm; x 3 for Simple), llMaxBw across nodes (N2 39 GB/s), the ring
plateau x 1.4, NVLS-Tree latency hwLat[NVLink][NVLSTree] + 2 log2(n) hwLat[NET][NVLSTree]."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from costmodel.model.collectives import collective_time_us, regime_name, without_regimes
from costmodel.profiles.store import load_profile, tp_placement_problem

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import derive_profiles as dp  # noqa: E402  (the derivation's own rules)

GB200 = load_profile("gb200-nvl72")
LAUNCH_US = 4.0
RING_BASE = {"LL": 6.6, "Simple": 8.4}
NVL_HOP = {"LL": 0.6, "Simple": 3.4}
NET_HOP = {"LL": 2.7, "Simple": 14.0}
NET_OVERHEAD = {"LL": 1.0, "Simple": 3.0}
RING_SIMPLE_GBPS = 839.16  # the published 72-GPU NVLS-off run's 4 GiB busbw


def test_racks_are_nodes_of_72():
    assert tp_placement_problem(GB200, 144, 2) is None and "pass --nodes 2" in tp_placement_problem(GB200, 144, 1)
    assert GB200.curve("all_gather", 144, "graph", 2).nodes == 2


def test_pair_all_gather_across_two_racks_is_nccls_ring_with_net_overhead():
    # TP 144 over 2 racks, an 8-byte (value, id) pair per rank: ring LL, nsteps 143, one inter-rack step; every
    # intra step costs max(hwLat 0.6, netOverhead 1.0) once nNodes > 1: 6.6 + 142 x 1.0 + 2.7 = 151.3 us
    lat = RING_BASE["LL"] + (144 - 2) * max(NVL_HOP["LL"], NET_OVERHEAD["LL"]) + 1 * NET_HOP["LL"]
    assert lat == pytest.approx(151.3)
    want = LAUNCH_US + lat + 143 / 144 * 8 * 144 / 39.0e3  # LL at llMaxBw[N2] = 39 GB/s
    assert regime_name(GB200, "all_gather", 8.0, 144, "graph", 2) == "LL"
    assert float(collective_time_us(GB200, "all_gather", 8.0, 144, 2)) == pytest.approx(want, rel=1e-6)
    # the rack boundary costs more than the 0.6 us steps of one rack would: above the one-rack ring LL at 72
    assert want > LAUNCH_US + RING_BASE["LL"] + 143 * NVL_HOP["LL"] + 2.1


def test_large_all_gather_across_racks_runs_the_ring_simple():
    lat = RING_BASE["Simple"] + (144 - 2) * max(NVL_HOP["Simple"], NET_OVERHEAD["Simple"]) + NET_HOP["Simple"]
    c = GB200.curve("all_gather", 144, "graph", 2)
    simple = {r.name: r for r in c.regimes}["Simple"]
    assert simple.alpha_base_us == pytest.approx(lat) and simple.busbw_gbps == pytest.approx(
        RING_SIMPLE_GBPS * 361.4 / 367.5, abs=0.05)
    assert {r.name for r in c.regimes} == {"LL", "Simple"}  # no NVLS / PAT / LL128 across racks


def test_all_reduce_across_two_racks_picks_nvls_tree_and_ring_simple_without_nvls():
    s = 16 * 2**30
    f = 2 * 143 / 144
    # NVLS-Tree: 25 + 2 log2(2) x 14 us; algBw = min(the rack's NVLS algBw, its NICs) = 739 / (2 x 7/8) GB/s
    nvls_tree = {r.name: r for r in GB200.curve("all_reduce", 144, "graph", 2).regimes}["NVLSTree"]
    assert nvls_tree.alpha_base_us + nvls_tree.alpha_per_node_us == pytest.approx(25.0 + 2 * 1 * 14.0)
    assert nvls_tree.busbw_gbps == pytest.approx(f * 739.0 / 1.75, abs=0.01)
    assert regime_name(GB200, "all_reduce", s, 144, "graph", 2) == "NVLSTree"
    # NVLS off: the ring, lat = 1.4 x (8.4 + (2 x 143 - 2) x max(3.4, 3.0) + 2 x 14.0) (the ring plateau)
    ring_lat = 1.4 * (RING_BASE["Simple"] + (2 * 143 - 2) * 3.4 + 2 * NET_HOP["Simple"])
    off = without_regimes(GB200, {"NVLS", "NVLSTree"})
    simple = {r.name: r for r in off.curve("all_reduce", 144, "graph", 2).regimes}["Simple"]
    want = LAUNCH_US + ring_lat + f * (s + simple.s_half_bytes) / RING_SIMPLE_GBPS * 1e-3
    assert float(collective_time_us(off, "all_reduce", s, 144, 2)) == pytest.approx(want, rel=1e-6)
    assert want == pytest.approx(42067, rel=0.01)  # the published 2-rack NCCL_NVLS_ENABLE=0 row


def test_nccl_would_pick_tree_at_512_mib_over_two_racks_with_nvls_off():
    """The profile's 2-rack curve holds NCCL's default pick (NVLS-Tree); with NVLS off NCCL re-picks among Ring and
    Tree - by the same rules Tree at 512 MiB (lat 8.4 + 2 (71 x 4.0 + 14) = 604.4 us, algBw 0.92 x 720 / 2)."""
    single = {r.name: {"busbw_gbps": r.busbw_gbps, "s_half_bytes": r.s_half_bytes}
              for r in GB200.curve("all_reduce", 72, "graph", 1).regimes if r.name in ("LL", "Simple")}
    regs = dp.multi_node_all_reduce_regimes("blackwell", "nvlink", 720.0, RING_SIMPLE_GBPS, single, None, 72, 2,
                                            72 * 50.0 * 0.9, ("LL", "Simple"), "2.23+")
    tree = next(r for r in regs if r["name"] == "Tree-Simple")
    assert tree["alpha_base_us"] + tree["alpha_per_node_us"] == pytest.approx(8.4 + 2 * (71 * 4.0 + 14.0))
    assert tree["busbw_gbps"] == pytest.approx(2 * 143 / 144 * 0.92 * 720.0 / 2, abs=0.01)
    pick, _ = dp.fastest(regs, 144, 2, np.array([2.0**29, 2.0**34]))
    assert [regs[i]["name"] for i in pick] == ["Tree-Simple", "Simple"]


def test_nvl72_ring_prices_the_published_one_rack_nvls_off_table():
    off = without_regimes(GB200, {"NVLS"})
    sizes = np.array([2.0**29, 2.0**30, 2.0**31, 2.0**33])
    measured = np.array([1806.7, 3108.8, 5589.1, 20299.0])  # held out (the 4 GiB row built the ring busbw)
    err = collective_time_us(off, "all_reduce", sizes, 72, 1) / measured - 1
    assert np.all(np.abs(err) < 0.03), err


def test_nvls_tree_network_pipeline_follows_nccls_chunk_size_steps():
    """2 x 8 B200, NVLS-Tree: concurrentOps = 32 NVLS channels (SM100, multi-node) x 8 heads = 256; NCCL's chunkSize
    128 KiB, 64 KiB below 4 x 256 x 128 KiB = 128 MiB, 32 KiB below 256 x 64 KiB = 16 MiB (enqueue.cc); the ramp
    gains 256 x chunkSize on top of the one-node NVLS ramp."""
    b200 = load_profile("b200-hgx-nvlink")
    curve = b200.curve("all_reduce", 16, "graph", 2)
    edges = np.array([r.max_bytes for r in curve.regimes])

    def regime(size):
        return curve.regimes[min(int(np.searchsorted(edges, size, side="left")), len(edges) - 1)]

    big, mid, small = regime(2.0**30), regime(2.0**25), regime(2.0**23)
    assert big.name == mid.name == small.name == "NVLSTree"
    intra = big.s_half_bytes - 256 * 131072
    assert mid.s_half_bytes - intra == 256 * 65536 and small.s_half_bytes - intra == 256 * 32768
    s = 2.0**23
    want = LAUNCH_US + 25.0 + 2 * 14.0 + (s + small.s_half_bytes) / (small.busbw_gbps / 1.875) * 1e-3
    assert float(collective_time_us(b200, "all_reduce", s, 16, 2)) == pytest.approx(want, rel=1e-9)
    # the published 2 x 8 B200 InfiniBand row at 8 MiB (dstack Lambda, 141.39 us, held out) within 5%
    assert want == pytest.approx(141.39, rel=0.05)
    assert dp.nvls_tree_chunk_bytes(np.array([2.0**23, 2.0**25, 2.0**30]), 256, 2).tolist() == [32768, 65536, 131072]
    assert dp.nvls_tree_chunk_bytes(np.array([2.0**30]), 256, 4).tolist() == [65536]  # 64 KiB cap from 4 nodes
