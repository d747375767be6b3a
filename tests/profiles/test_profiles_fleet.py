"""Issue 19: the fleet profiles (AMD Instinct over xGMI / RCCL, GB300 NVL72, GeForce RTX 4090 host-staged, RTX PRO
6000 with P2P), the ROCm wavefront width in the kernel model, and vendors in the listing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from costmodel.cli.main import main
from costmodel.io.errors import InputError
from costmodel.model.collectives import collective_time_us
from costmodel.model.gpu_kernels import reduce_launch
from costmodel.profiles.families import family_vendor, gpu_family, gpu_vendor
from costmodel.profiles.kernel_params import GpuKernelModel, model_from_dict
from costmodel.profiles.store import load_profile

GPUS = {"mi300x-xgmi": "AMD Instinct MI300X", "mi325x-xgmi": "AMD Instinct MI325X",
        "mi355x-xgmi": "AMD Instinct MI355X", "gb300-nvl72": "NVIDIA GB300", "rtx-4090-pcie": "NVIDIA GeForce RTX 4090"}
PROFILES = {name: load_profile(name) for name in (*GPUS, "rtx-pro-6000-pcie")}


@pytest.mark.parametrize("name", list(PROFILES))
def test_fleet_profiles_are_derived_cited_and_name_their_gpu_exactly(name):
    prof = PROFILES[name]
    v = prof.provenance
    assert v.kind == "derived" and v.source.startswith("derived from public figures, not measured")
    assert len(v.citations) >= 7 and all(isinstance(c, str) and c for c in v.citations)
    if name in GPUS:
        assert v.gpu == GPUS[name]  # data/presets/gpus.csv keys its memory by this exact string
    assert prof.kernel_model.gpu == v.gpu and len(prof.bootstrap) == 100


def test_amd_profiles_price_rccl_rings_on_a_mesh_with_a_64_wide_wavefront():
    for name in ("mi300x-xgmi", "mi325x-xgmi", "mi355x-xgmi"):
        prof = PROFILES[name]
        names = {r.name for c in prof.collectives if c.nodes in (None, 1) for r in c.regimes}
        assert names == {"LL", "LL128", "Simple"}, name  # no NVLS (no NVSwitch), no Tree on one node
        across = {(c.op, c.world_size, c.nodes): [r.name for r in c.regimes] for c in prof.collectives
                  if c.nodes not in (None, 1)}
        # RCCL's gfx950 picks across 2 nodes (tests/profiles/test_rccl_gfx950.py); none for gfx942 (no mid-size table)
        assert across == ({("all_reduce", 16, 2): ["LL", "Tree-LL128", "Tree-Simple", "Simple"]}
                          if name == "mi355x-xgmi" else {}), name
        assert prof.kernel_model.warp_size == 64
    cu = {n: PROFILES[n].kernel_model.sm_count for n in ("mi300x-xgmi", "mi325x-xgmi", "mi355x-xgmi")}
    assert cu == {"mi300x-xgmi": 304, "mi325x-xgmi": 304, "mi355x-xgmi": 256}
    simple = {n: {r.name: r.busbw_gbps for r in PROFILES[n].curve("all_reduce", 8, "graph", 1).regimes}["Simple"]
              for n in ("mi300x-xgmi", "mi355x-xgmi")}
    # MI300X: the published 8 GiB row; MI355X: x 76.8 / 64 (its xGMI links' one-way bandwidth over MI300X's)
    assert simple["mi300x-xgmi"] == 315.69 and simple["mi355x-xgmi"] == pytest.approx(315.69 * 1.2, abs=0.01)


def test_mi300x_prices_the_published_8_gib_all_reduce_by_hand():
    # graph mode: launch 4 + 14 ring steps x 2.1 us (RCCL hwLat) + 1.75 x (8 GiB + s_half) / 315.69 GB/s
    prof = PROFILES["mi300x-xgmi"]
    simple = {r.name: r for r in prof.curve("all_reduce", 8, "graph", 1).regimes}["Simple"]
    s = 8 * 2**30
    want = 4.0 + 14 * 2.1 + 1.75 * (s + simple.s_half_bytes) / 315.69e3
    assert float(collective_time_us(prof, "all_reduce", s, 8, 1, "graph")) == pytest.approx(want, rel=1e-9)
    assert want == pytest.approx(47617, rel=0.005)  # the published row


def test_gb300_nvls_per_tp_size_runs_from_the_b300_table_by_nccls_p_independent_algbw():
    prof = PROFILES["gb300-nvl72"]
    nvls = {p: {r.name: r.busbw_gbps for r in prof.curve("all_reduce", p, "graph", 1).regimes}["NVLS"]
            for p in (8, 40, 72)}
    assert nvls[8] == 832.18
    # algBw = busbw / (2 (p-1) / p) is the same at every p above 8 (tuning.cc: NVLS's 5/6 is on algBw)
    for p in (40, 72):
        assert nvls[p] == pytest.approx(832.18 / 1.75 * 2 * (p - 1) / p, abs=0.01)


def test_pcie_geforce_is_host_staged_and_rtx_pro_has_p2p():
    r4090, rtx = PROFILES["rtx-4090-pcie"], PROFILES["rtx-pro-6000-pcie"]
    for prof in (r4090, rtx):
        assert {r.name.removeprefix("Tree-") for c in prof.collectives for r in c.regimes} == {"LL", "Simple"}
    by_p = {p: {r.name: r.busbw_gbps for r in r4090.curve("all_reduce", p, "graph", 1).regimes}["Simple"]
            for p in (2, 4)}
    assert by_p == {2: 2.24, 4: 2.58}  # per TP size, from the published 2- and 4-GPU tables
    # a 64 MiB all-reduce: P2P behind switches (46.44 GB/s) vs staged through the host (2.58 GB/s)
    s = 64 * 2**20
    slow, fast = (float(collective_time_us(p, "all_reduce", s, 4, 1, "graph")) for p in (r4090, rtx))
    assert slow / fast == pytest.approx(46.44 / 2.58, rel=0.05)


def test_the_wavefront_width_changes_atens_reduce_launch_by_hand():
    # [64, 1000]: dim0 = 250 -> d0 = 128, d1 = 64. warp 32: 32 x 16 threads, 32 values each, 4 blocks (16 rows
    # per block); wavefront 64: 64 x 8 threads, 16 values each, 8 blocks
    nv = reduce_launch(np.array(64.0), np.array(1000.0), 304, 2048, 32)
    amd = reduce_launch(np.array(64.0), np.array(1000.0), 304, 2048, 64)
    assert (nv.threads, nv.values_per_thread, nv.blocks) == (512, 32, 4)
    assert (amd.threads, amd.values_per_thread, amd.blocks) == (512, 16, 8)


def test_warp_size_defaults_to_32_and_is_checked():
    base = GpuKernelModel(gpu="g", sm_count=10, hbm_gbps=100.0)
    assert base.warp_size == 32 and "warp_size" not in base.to_dict()  # old profiles round-trip unchanged
    assert model_from_dict({**base.to_dict(), "warp_size": 64}).warp_size == 64
    for bad in (0, True, 2.5):
        with pytest.raises(InputError, match="warp_size"):
            model_from_dict({**base.to_dict(), "warp_size": bad})


def test_vendors_group_the_listing():
    assert [gpu_vendor(g) for g in GPUS.values()] == ["AMD", "AMD", "AMD", "NVIDIA", "NVIDIA"]
    assert gpu_family("AMD Instinct MI355X") == "CDNA" and family_vendor("CDNA") == "AMD"
    assert gpu_vendor("cpu") == "CPU" and gpu_vendor("Some NPU") == "other"


def test_profiles_cli_lists_each_new_profile_with_its_vendor(capsys):
    assert main(["profiles", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    vendor = {r["name"]: r["vendor"] for r in rows}
    assert {n: vendor[n] for n in GPUS} == {"mi300x-xgmi": "AMD", "mi325x-xgmi": "AMD", "mi355x-xgmi": "AMD",
                                            "gb300-nvl72": "NVIDIA", "rtx-4090-pcie": "NVIDIA"}
    order = [r["vendor"] for r in rows]
    assert order == sorted(order, key=["NVIDIA", "AMD", "other", "CPU"].index)
