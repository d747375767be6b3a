"""Write the fleet profiles of issue 19: AMD Instinct MI300X / MI325X / MI355X (xGMI, RCCL), GB300 NVL72, GeForce
RTX 4090 (PCIe, host-staged) and the re-derived RTX PRO 6000 (PCIe P2P).  Run:  python scripts/derive_profiles_fleet.py

Every number is a vendor datasheet figure, a constant of RCCL's / NCCL's tuning source or a published table row
(data/reference/published-collectives-2026/, whose rows the profile was built from are marked in_sample_bytes in
its MANIFEST.csv: scripts/write_published_2026_manifest.py), each cited next to it and in the profile's citations.
provenance.kind = "derived" ("derived from public figures, not measured"). The NCCL rules stay those of
scripts/derive_profiles.py / derive_profiles_current.py (imported, not changed); RCCL's differ and are RCCL_RULES
here.

AMD Instinct (RCCL) - what RCCL's tuner does on gfx942 / gfx950 (ROCm/rccl src/graph/tuning.cc,
ncclTopoTuneModel and ncclTopoGetAlgoTime; rcclTuningModel[comm->topo->tuning]):
* Ring with LL, LL128 and Simple: LL128 is enabled by default only on gfx90a / gfx942 / gfx950 with NVLink-class
  (xGMI) intra-node paths (the `ENABLE_LL128` block); no NVLS (no NVSwitch: xGMI is a fully connected mesh of 7
  links per GPU); Tree with Simple is skipped when every rank is on one gfx942 / gfx950 node (the `continue` in the
  algorithm loop), so one node prices rings only.
* latencies: hwLat "NVLINK" (xGMI) ring LL / LL128 / Simple 0.8 / 0.8 / 2.1 us per step and baseLat 12 / 12 / 17 us
  in the gfx942 tuning model; bandwidths busBw x bwRatio (ring Simple 1.00) with llProtoRanges bounding LL to
  <= 1 MiB and LL128 to <= 9 MiB for all_reduce. These are the tuner's heuristics, not times: baseLat alone (12 us)
  exceeds the published MI300X 8-GPU all_reduce at 128 KiB (14.6 us including the launch), so the LL / LL128 lines are
  taken from the published table itself (two rows each, in-sample) and the Simple ramp from one row; the Simple
  per-step latency is RCCL's 2.1 us; the tuner picks the least time (select "min"), as RCCL's does inside its ranges.
* the 8-GPU Simple busbw: 315.69 GB/s (the published MI300X 8 GiB row, in-sample) = 0.705 of the 7 x 64 GB/s
  one-way xGMI links; MI325X has the same xGMI (AMD datasheet: 896 GB/s aggregate), so the same figures (its
  1-node rows, 316.9-319.1 GB/s at 4-16 GiB, are held out); MI355X: 7 x 76.8 GB/s one way (1,075 GB/s aggregate),
  the MI300X ratio x 1.2 (an assumption: the same efficiency on faster links; no single-node MI355X table found).
* across nodes: the generic ring curve capped at NICs x NIC x NET_EFF (scripts/derive_profiles_current.py); RCCL's
  Tree across nodes is not modelled there.
* MI355X (gfx950) on 2 nodes x 8, all_reduce (`mi355x_two_node_all_reduce`): what RCCL runs, from its source. The
  tuner (tuning.cc ncclTopoTuneModel + ncclTopoGetAlgoTime with tuning_model_6's hwLat / bwRatio / correction
  factors; `rccl_tuner_us`) picks Tree below 256 MiB and Ring from 256 MiB for any ring-graph nChannels x bwIntra in
  320-5000 GB/s (the per-size correction factors decide it, not the unpublished bandwidth); rccl_wrap.cc
  rcclUpdateCollectiveProtocol then forces the protocol by size from 2 nodes (llProtoRanges: LL <= 131071 B, LL128
  <= 17660227 B, Simple above; rccl_common.h rcclGetSizePerRank: the whole AllReduce buffer). So: LL, Tree/LL128,
  Tree/Simple, Ring/Simple. The tuner's numbers pick, they are not times (Ring/Simple's 320 us per network step);
  the Tree lines go through two in-sample rows of the published 2 x 8 table each (1 / 8 MiB, 32 / 128 MiB), LL and
  the ring Simple are the generic curve's at p = 16; every other row is held out.
* kernels: the H200 kernel fit carried to the CU count, HBM bandwidth and clock (element rates x CUs x clock, byte
  rates x memory bandwidth) with ATen's reduce launch at a 64-wide wavefront (`warp_size` 64: Reduce.cuh caps the
  block width at at::cuda::warp_size(), 64 on CDNA). Host costs (eager vs hipGraph) are the H200 probe's, an
  assumption: no published ROCm torch host-overhead figure was found.

GB300 NVL72: the GB200 NVL72 derivation of scripts/derive_profiles_current.py (its ring, NCCL's rack = node rules)
with Blackwell Ultra figures: NVLS all_reduce busbw 832.18 GB/s at 8 GPUs (published 8x B300 out-of-place 4 GiB,
NCCL 2.29.7, in-sample), above 8 GPUs NCCL's p-independent NVLS algBw; 72 ConnectX-8 800 Gb/s NICs.

PCIe as it connects:
* GeForce RTX 4090 (no P2P between GeForce cards: NCCL stages through host memory): ring Simple busbw per TP size
  from the published 2- and 4-GPU tables (kalavai, docker; 2 GiB rows in-sample, no ramp: NCCL's LL bandwidth,
  min(llMaxBw, 0.5 x 24 GB/s), is capped at that busbw, so LL is the pick at every size), LL and Simple only (LL128
  needs NVLink), hwLat[PCI]. The Kubernetes tables (other PCIe slots) are held out.
* RTX PRO 6000 (P2P behind PCIe Gen5 switches): the published 8-GPU torch.distributed ring all_reduce busbw 46.44
  GB/s at 1 GiB (c-payne switch rig, in-sample), single-pair P2P write 56.3 GB/s, LL latency from its 64 KiB row
  (in-sample; LL bandwidth NCCL's 0.5 x 48 GB/s), 1.2 us per ring step (the same document; NCCL's hwLat[PCI]
  5.7 us Simple step would put the 4 MiB row 42% high); flat in p (the same doc: 2 and 4 concurrent
  cross-switch pairs keep 56.4 GB/s each, so no uplink
  is shared); was the RTX 5090 (GeForce, no P2P) figure of NVIDIA/nccl#1639.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import derive_profiles as dp  # noqa: E402
import derive_profiles_current as dpc  # noqa: E402

from costmodel.evidence.gpu_kernel_fit import GPU_SPECS, _rounded, derive_model  # noqa: E402
from costmodel.model.collectives import bus_factor  # noqa: E402
from costmodel.profiles.kernel_params import model_from_dict  # noqa: E402
from costmodel.profiles.store import save_profile  # noqa: E402

DATE = "2026-12-02"
MI300X_TABLE = "data/reference/published-collectives-2026/mi300xx8_all_reduce_hisohara-aac8-k8s-rccl.log"
RTX4090_TABLES = "data/reference/published-collectives-2026/rtx4090x{p}_all_reduce_kalavai-docker-g{p}.log"

# -- RCCL (ROCm/rccl src/graph/tuning.cc, ncclTopoTuneModel; gfx942 tuning model) ------------------------------------
RCCL_RULES = {
    "hop_us": {"LL": 0.8, "LL128": 0.8, "Simple": 2.1},  # hwLat[NVLINK][Ring] (xGMI is typed NVLink-class)
    "protocols": ("LL", "LL128", "Simple"),  # LL128 on gfx90a / gfx942 / gfx950 (ENABLE_LL128)
    "nvls": False, "single_node_tree_simple": False,  # no NVSwitch; Tree/Simple skipped on one gfx942/gfx950 node
    "ll_max_bytes": {"all_reduce": 1 << 20}, "ll128_max_bytes": {"all_reduce": 9437184},  # llProtoRanges (doc only)
}
# published MI300X 8-GPU all_reduce (rccl-tests develop:a7809b3, mpirun -np 8 -g 1; MI300X_TABLE): (bytes, us)
MI300X_ROWS = {131072: 14.60, 262144: 17.46, 1048576: 28.39, 4194304: 52.96, 16777216: 149.9}
MI300X_SIMPLE_8 = 315.69  # its 8 GiB row's busbw
XGMI_ONE_WAY_GBPS = {"mi300x": 7 * 64.0, "mi325x": 7 * 64.0, "mi355x": 7 * 76.8}


def line_through(p: int, op: str, a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """(busbw GB/s, alpha us at p incl. the launch) of the line t = alpha + f(p) S / busbw through two rows."""
    f = float(bus_factor(op, p))
    busbw = f * (b[0] - a[0]) / (b[1] - a[1]) * 1e-3
    return busbw, a[1] - f * a[0] / busbw * 1e-3


def rccl_ring(op: str, scale: float, net_hop: dict[str, float]) -> list[dict]:
    """RCCL ring regimes: LL and LL128 from the MI300X table's lines (their alpha spread over the 2(p-1) all_reduce
    steps, per step for the other ops), Simple at the MI300X busbw with RCCL's 2.1 us per step and its ramp; busbw
    x `scale` (link bandwidth relative to MI300X's)."""
    base_steps, per_peer = dp.RING_STEPS[op]
    out = []
    for proto, (lo, hi) in (("LL", (131072, 262144)), ("LL128", (1048576, 4194304))):
        bw, alpha8 = line_through(8, "all_reduce", (lo, MI300X_ROWS[lo]), (hi, MI300X_ROWS[hi]))
        step = (alpha8 - dp.LAUNCH_US) / 14  # all_reduce at 8 GPUs: 2 x 7 ring steps
        out.append({"name": proto, "alpha_base_us": round(base_steps * step, 4),
                    "alpha_per_peer_us": round(per_peer * step, 4),
                    "alpha_per_node_us": round(per_peer * max(0.0, net_hop[proto] - step), 4),
                    "busbw_gbps": round(bw * scale, 2), "s_half_bytes": 0,
                    **({"inter_node_max_gbps": dp.LL_MAX_NET_GBPS} if proto == "LL" else {})})
    hop = RCCL_RULES["hop_us"]["Simple"]
    alpha8 = dp.LAUNCH_US + 14 * hop
    half = dp.s_half_from_point(MI300X_ROWS[16777216], 16777216, 8, "all_reduce", alpha8, MI300X_SIMPLE_8)
    out.append({"name": "Simple", "alpha_base_us": round(base_steps * hop, 4), "alpha_per_peer_us": per_peer * hop,
                "alpha_per_node_us": round(per_peer * max(0.0, net_hop["Simple"] - hop), 4),
                "busbw_gbps": round(MI300X_SIMPLE_8 * scale, 2), "s_half_bytes": int(half * scale)})
    return out


# -- RCCL across 2 nodes on gfx950 (MI355X): algorithm, protocol and the 2 x 8 curve -----------------------------------
# ROCm/rccl src/graph/tuning.cc, tuning_model_6 (gfx950; the gfx942 model 5 differs): the tuner's constants that
# decide Ring vs Tree across nodes. (algo, proto) -> us; Simple / LL128 / LL index the protocol.
RCCL_GFX950 = {
    "base_lat_us": {"LL": 12.0, "LL128": 12.0, "Simple": 17.0},          # baseLat (Tree and Ring alike)
    "hw_lat_xgmi_us": {("Tree", "LL"): 0.9, ("Tree", "LL128"): 0.9, ("Tree", "Simple"): 2.3,
                       ("Ring", "LL"): 0.8, ("Ring", "LL128"): 0.8, ("Ring", "Simple"): 2.1},   # hwLat[NVLINK]
    "hw_lat_net_us": {("Tree", "LL"): 10.5, ("Tree", "LL128"): 10.5, ("Tree", "Simple"): 25.0,
                      ("Ring", "LL"): 9.5, ("Ring", "LL128"): 9.5, ("Ring", "Simple"): 320.0},  # hwLat[NET]
    "bw_ratio_2node": {("Tree", "LL"): 0.06, ("Tree", "LL128"): 0.06, ("Tree", "Simple"): 0.11,
                       ("Ring", "LL"): 0.08, ("Ring", "LL128"): 0.08, ("Ring", "Simple"): 1.00},  # bwRatio[0]
    # treeCorrectionFactor / ringCorrectionFactor [protocol][log2(nBytes >> 6)], 27 bins (the last for all above)
    "tree_corr": {"LL": (0.1,) * 6 + (1.0,) * 5 + (0.6, 1.0, 0.9, 1.0, 1.0) + (0.1,) * 11,
                  "LL128": (0.1,) * 6 + (1.0,) * 5 + (0.6, 1.0, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0) + (0.1,) * 7,
                  "Simple": (0.1,) * 15 + (0.7, 1.0, 0.1, 0.1, 0.1, 0.9, 0.9, 0.7, 0.8, 0.6, 0.6, 0.6)},
    "ring_corr": {"LL": (0.1,) * 11 + (1.0, 0.2, 1.0, 0.4, 0.4, 0.1, 0.2, 0.2) + (0.1,) * 8,
                  "LL128": (0.1,) * 11 + (1.0, 0.2, 1.0, 0.4, 0.4, 0.1, 0.2, 0.1) + (0.1,) * 8,
                  "Simple": (0.1,) * 22 + (1.0, 0.8, 0.8, 1.0, 1.0)},
    # llProtoRanges, AllReduce: LL (0, 131071], LL128 (131071, 17660227] bytes (sizePerRank = nBytes for AllReduce:
    # rccl_common.h rcclGetSizePerRank); rccl_wrap.cc rcclUpdateCollectiveProtocol forces them from 2 nodes (LL128's
    # limit scaled only above 2 nodes, by a version-dependent rule), Simple above
    "ll_max_bytes": 131071, "ll128_max_bytes": 17660227,
    "net_overhead_us": 2.0,  # getNetOverhead: x86 AMD host CPU (assumption: EPYC hosts); x 3 for Simple
}
RCCL_PROTOCOLS = ("LL", "LL128", "Simple")
# the tuner's busBw before bwRatio: ring graph nChannels x bwIntra (nNodes <= 2). Not published for MI355X; the pick
# below is the same for any value in RCCL_GRAPH_BW_RANGE_GBPS (tests/profiles/test_rccl_gfx950.py), so the nominal
# one is the xGMI one-way aggregate
RCCL_GRAPH_BW_GBPS = 7 * 76.8
RCCL_GRAPH_BW_RANGE_GBPS = (320.0, 5000.0)
MI355X_2NODE_TABLE = ("data/reference/published-collectives-2026/multinode/"
                      "mi355xx16_all_reduce_hisohara-aac14-pollara400-2node-rccl.log")
# its out-of-place times (us) at the rows the 2-node curve is built from (in-sample in the MANIFEST): two per Tree band
MI355X_2NODE_ROWS = {1048576: 81.37, 8388608: 166.5, 33554432: 391.8, 134217728: 1041.8}


def rccl_protocol(n_bytes: int, nodes: int) -> str | None:
    """The protocol rccl_wrap.cc `rcclUpdateCollectiveProtocol` forces for a gfx950 AllReduce of n_bytes on 2 nodes:
    LL for 0 < n <= ll_max, LL128 for ll_max < n <= ll128_max, else Simple; None on one node (the tuner's own pick
    stands). Above 2 nodes RCCL versions differ (LL128's limit x 3.8, or + (log2 N - 1) x 3145728): ValueError."""
    if nodes < 2:
        return None
    if nodes > 2:
        raise ValueError("above 2 nodes LL128's limit depends on the RCCL version: not transcribed")
    if n_bytes <= RCCL_GFX950["ll_max_bytes"]:
        return "LL"
    return "LL128" if n_bytes <= RCCL_GFX950["ll128_max_bytes"] else "Simple"


def rccl_tuner_us(algo: str, proto: str, n_bytes: int, ranks: int, nodes: int,
                  graph_bw_gbps: float = RCCL_GRAPH_BW_GBPS) -> float:
    """RCCL's predicted AllReduce time (us) for (algo, proto) on gfx950 at 2 nodes (tuning.cc ncclTopoTuneModel +
    ncclTopoGetAlgoTime; latencyInter 0, ppn = ranks / nodes > 1):

        Ring:  lat = baseLat + (2(n-1) - 2(N-1)) max(hwLat[XGMI], netOverhead) + 2(N-1) hwLat[NET]
               bw  = X bwRatio (n / (2(n-1)))         netOverhead = 2 us (x 3 for Simple)
        Tree:  lat = baseLat + 2 ((n/N - 1) hwLat[XGMI] + log2(N) hwLat[NET]),   bw = X bwRatio / 2
        time = lat + nBytes / (1000 bw corr[proto][min(26, log2(nBytes >> 6))])

    n ranks, N nodes, X = graph_bw_gbps (nChannels x bwIntra). A heuristic for the pick, not a time."""
    if nodes != 2:
        raise ValueError("bwRatio[0] (2 nodes) only: the > 2-node constants are not transcribed")
    m = RCCL_GFX950
    lat = m["base_lat_us"][proto]
    intra, inter = m["hw_lat_xgmi_us"][(algo, proto)], m["hw_lat_net_us"][(algo, proto)]
    if algo == "Ring":
        steps, inter_steps = 2 * (ranks - 1), 2 * (nodes - 1)
        overhead = m["net_overhead_us"] * (3 if proto == "Simple" else 1)
        lat += (steps - inter_steps) * max(intra, overhead) + inter_steps * inter
        bw = graph_bw_gbps * m["bw_ratio_2node"][(algo, proto)] * ranks / steps
        corr = m["ring_corr"][proto]
    else:
        lat += 2 * ((ranks // nodes - 1) * intra + math.log2(nodes) * inter)
        bw = graph_bw_gbps * m["bw_ratio_2node"][(algo, proto)] * 0.5
        corr = m["tree_corr"][proto]
    log_size = min(26, max(0, int(n_bytes >> 6).bit_length() - 1))
    return lat + n_bytes / (1000 * bw * corr[log_size])


def rccl_pick(n_bytes: int, ranks: int, nodes: int, graph_bw_gbps: float = RCCL_GRAPH_BW_GBPS) -> tuple[str, str]:
    """(algorithm, protocol) RCCL runs a gfx950 AllReduce with: the tuner's least-time algorithm over Ring / Tree x
    LL / LL128 / Simple (`rccl_tuner_us`), then the protocol `rccl_protocol` forces."""
    algo = min((rccl_tuner_us(a, p, n_bytes, ranks, nodes, graph_bw_gbps), a)
               for a in ("Tree", "Ring") for p in RCCL_PROTOCOLS)[1]
    return algo, rccl_protocol(n_bytes, nodes)


def rccl_ring_from_bytes(ranks: int, nodes: int, graph_bw_gbps: float = RCCL_GRAPH_BW_GBPS) -> int:
    """The smallest power of two from which every power of two up to 16 GiB is run as a Ring (below: Tree). The
    correction factors change only at powers of two (2^6 x bins), so the switch sits at one."""
    sizes = [1 << e for e in range(6, 35)]
    ring = [rccl_pick(s, ranks, nodes, graph_bw_gbps)[0] == "Ring" for s in sizes]
    i = len(sizes)
    while i > 0 and ring[i - 1]:
        i -= 1
    return sizes[i]


def mi355x_two_node_all_reduce(generic: list[dict]) -> dict:
    """The 2 x 8 MI355X all_reduce curve (p = 16, 2 nodes, select "breakpoints"), RCCL's picks in size order:

        LL          S <= 131071                 the generic curve's LL at p = 16, 2 nodes (alpha, busbw min(LL, 39))
        Tree-LL128  S <= 17660227               the line through the table's 1 and 8 MiB rows (in-sample)
        Tree-Simple S <  ring_from (256 MiB)    the line through its 32 and 128 MiB rows (in-sample)
        Simple      above (Ring)                the generic ring Simple at p = 16, 2 nodes (MI300X x 1.2, its ramp)

    A line: T = launch + alpha + f(16) S / busbw, busbw = f dS / dT, alpha = T_1 - launch - f S_1 / busbw."""
    p, n = 16, 2
    ring_from = rccl_ring_from_bytes(p, n)
    by_name = {r["name"]: r for r in generic}

    def at_p(r: dict, cap: float | None = None) -> dict:
        bw = r["busbw_gbps"] if cap is None else min(r["busbw_gbps"], cap)
        return {"alpha_base_us": round(r["alpha_base_us"] + r["alpha_per_peer_us"] * (p - 1)
                                       + r.get("alpha_per_node_us", 0.0) * (n - 1), 4),
                "alpha_per_peer_us": 0.0, "alpha_per_node_us": 0.0, "busbw_gbps": round(bw, 2),
                "s_half_bytes": r["s_half_bytes"]}

    def line(name: str, lo: int, hi: int, max_bytes: float) -> dict:
        bw, alpha = line_through(p, "all_reduce", (lo, MI355X_2NODE_ROWS[lo]), (hi, MI355X_2NODE_ROWS[hi]))
        return {"name": name, "alpha_base_us": round(alpha - dp.LAUNCH_US, 4), "alpha_per_peer_us": 0.0,
                "alpha_per_node_us": 0.0, "busbw_gbps": round(bw, 2), "s_half_bytes": 0, "max_bytes": max_bytes}

    regimes = [{"name": "LL", **at_p(by_name["LL"], by_name["LL"].get("inter_node_max_gbps")),
                "max_bytes": RCCL_GFX950["ll_max_bytes"]},
               line("Tree-LL128", 1048576, 8388608, RCCL_GFX950["ll128_max_bytes"]),
               line("Tree-Simple", 33554432, 134217728, ring_from - 1),
               {"name": "Simple", **at_p(by_name["Simple"]), "max_bytes": None}]
    return {"op": "all_reduce", "world_size": p, "mode": None, "nodes": n, "select": "breakpoints",
            "launch_us": dp.LAUNCH_US, "eager_overhead_us": dp.EAGER_OVERHEAD_US, "inter_node_busbw_gbps": None,
            "provenance": "derived", "regimes": regimes}


def amd_collectives(key: str, nics: int, nic_gbps: float) -> list[dict]:
    """The generic ring curves of every op (any p, one node or across nodes); for MI355X also the 2 x 8 all_reduce
    curve of RCCL's gfx950 picks (`mi355x_two_node_all_reduce`)."""
    scale = XGMI_ONE_WAY_GBPS[key] / XGMI_ONE_WAY_GBPS["mi300x"]
    out = [dpc.curve(op, rccl_ring(op, scale, dp.RING_NET_HOP_US), None, dpc.net_busbw(nics, nic_gbps, op, 8), None)
           for op in ("all_gather", "all_reduce", "gather", "broadcast")]
    if key == "mi355x":
        out.append(mi355x_two_node_all_reduce(next(c for c in out if c["op"] == "all_reduce")["regimes"]))
    return out


# published 8x RTX PRO 6000 ring all_reduce, group A (torch.distributed, eager; local-inference-lab/rtx6kpro
# hardware/wrx90-cpayne-8gpu-root-topology-comparison.md sections 6-7): (bytes, us) and the 1 GiB busbw
RTX_PRO_ROWS = {65536: 18.13}
RTX_PRO_SIMPLE = 46.44
RTX_PRO_STEP_US = 1.2  # the same document: "One NCCL ring AR step (latency-bound, <= 16 KB): 1 200 ns / step"


def rtx_pro_ring(op: str) -> list[dict]:
    """Ring regimes on the RTX PRO 6000 P2P switch rig: LL at NCCL's min(llMaxBw, 0.5 busBw) of the Gen5 link (24
    GB/s) with its alpha from the group-A 64 KiB row (eager: launch and eager overhead taken off, spread over the
    2(p-1) all_reduce steps), Simple at the 1 GiB busbw with NCCL's Simple base latency and the document's 1.2 us per
    ring step (no ramp)."""
    base_steps, per_peer = dp.RING_STEPS[op]
    ll_bw = min(dpc.LL_MAX_GBPS["blackwell"], 0.5 * dpc.PCI_GEN5_GBPS)
    size, t = next(iter(RTX_PRO_ROWS.items()))
    alpha8 = t - float(bus_factor("all_reduce", 8)) * size / ll_bw * 1e-3
    step = max(0.0, alpha8 - dp.LAUNCH_US - dp.EAGER_OVERHEAD_US) / 14
    net = dp.RING_NET_HOP_US
    return [{"name": "LL", "alpha_base_us": round(base_steps * step, 4), "alpha_per_peer_us": round(per_peer * step, 4),
             "alpha_per_node_us": round(per_peer * max(0.0, net["LL"] - step), 4), "busbw_gbps": round(ll_bw, 2),
             "s_half_bytes": 0, "inter_node_max_gbps": dp.LL_MAX_NET_GBPS},
            {"name": "Simple", "alpha_base_us": round(dp.RING_BASE_US["Simple"] + base_steps * RTX_PRO_STEP_US, 4),
             "alpha_per_peer_us": per_peer * RTX_PRO_STEP_US,
             "alpha_per_node_us": round(per_peer * max(0.0, net["Simple"] - RTX_PRO_STEP_US), 4),
             "busbw_gbps": RTX_PRO_SIMPLE, "s_half_bytes": 0}]


# -- GPUs: (CUs / SMs, memory GB/s, boost MHz, dense BF16 TFLOPs, warp size, citation) --------------------------------
GPUS: dict[str, tuple[int, float, float, float, int, str]] = {
    "mi300x": (304, 5300.0, 2100.0, 1307.4, 64,
               "AMD Instinct MI300X datasheet: 304 CUs, 192 GB HBM3 at 5.3 TB/s, peak engine clock 2,100 MHz, "
               "1,307.4 TFLOPS dense BF16, 7 Infinity Fabric (xGMI) links at 128 GB/s each (64 GB/s per direction; "
               "896 GB/s aggregate) in a fully connected 8-GPU mesh, PCIe Gen5 x16 host link; CDNA 3 wavefront 64"),
    "mi325x": (304, 6000.0, 2100.0, 1307.4, 64,
               "AMD Instinct MI325X datasheet: 304 CUs, 256 GB HBM3E at 6.0 TB/s, peak engine clock 2,100 MHz, "
               "1,307.4 TFLOPS dense BF16, the same 7 x 128 GB/s xGMI links (896 GB/s); CDNA 3 wavefront 64"),
    "mi355x": (256, 8000.0, 2400.0, 2500.0, 64,
               "AMD Instinct MI355X datasheet: 256 CUs, 288 GB HBM3E at 8.0 TB/s, peak engine clock 2,400 MHz, "
               "2.5 PFLOPS dense FP16/BF16 (5.0 with sparsity), 7 xGMI links at 153.6 GB/s (1,075 GB/s aggregate); "
               "CDNA 4 wavefront 64"),
    "gb300": (160, 8000.0, 1965.0, 2500.0, 32,
              "NVIDIA GB300 NVL72 datasheet: 72 Blackwell Ultra GPUs in one NVLink 5 domain (130 TB/s, 1.8 TB/s per "
              "GPU), 288 GB HBM3e at 8 TB/s per GPU, one ConnectX-8 800 Gb/s SuperNIC per GPU; 160 SMs (Blackwell "
              "Ultra technical blog); dense BF16 2.5 PFLOPS and 1,965 MHz assumed as GB200"),
    "rtx4090": (128, 1008.0, 2520.0, 165.2, 32,
                "NVIDIA GeForce RTX 4090 (Ada whitepaper): 128 SMs (AD102), 24 GB GDDR6X at 1,008 GB/s, boost "
                "2,520 MHz, 165.2 TFLOPS dense BF16 (FP32 accumulate 330.3 with sparsity / 2), PCIe Gen4 x16, no "
                "NVLink, no P2P between GeForce cards"),
    "rtx": (188, 1597.0, 2617.0, 500.0, 32, dpc.GPUS["rtx"][4]),
}
NAMES = {"mi300x": "AMD Instinct MI300X", "mi325x": "AMD Instinct MI325X", "mi355x": "AMD Instinct MI355X",
         "gb300": "NVIDIA GB300", "rtx4090": "NVIDIA GeForce RTX 4090",
         "rtx": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}


def kernel_section(key: str) -> dict:
    """The H200 kernel fit (and its bootstrap replicates) carried to GPU `key` (scripts/derive_profiles_current.py
    kernel_section), with the GPU's warp / wavefront width."""
    h200 = dp.fitted_kernel_sections()["h200"]
    _sm0, hbm0, clk0, tf0, _ = GPU_SPECS["h200"]
    sm, hbm, clk, tf, warp, cite = GPUS[key]
    why = ("derived from the H200 kernel fit (measured on one H200 by a standalone torch probe, 2026-11-30): element "
           "rates x SMs (CUs) x clock, byte rates x memory bandwidth, ATen's reduce launch at warp size "
           f"{warp}; {cite}")

    def derive(obj: dict) -> dict:
        m = derive_model(model_from_dict(obj), gpu=NAMES[key], sm_count=sm, hbm_gbps=hbm, sm_clock_ratio=clk / clk0,
                         source=why)
        return _rounded(replace(m, warp_size=warp))

    lm = h200["lm_head"]
    lm_d = {"floor_us": lm["floor_us"], "weight_gbps": round(lm["weight_gbps"] * hbm / hbm0, 1),
            "tflops": round(lm["tflops"] * tf / tf0, 1), "provenance": "derived",
            "source": f"the H200 lm_head fit scaled by memory bandwidth and dense BF16 TFLOPs; {cite}"}
    host = {**h200["host"], "source": "assumed equal to the H200 probe's (host-side costs: CPU, driver and Python, "
            "eager launches vs CUDA / HIP graph replay; no ROCm or GeForce host figure was found); "
            + h200["host"]["source"]}
    return {"model": derive(h200["model"]), "host": host, "lm_head": lm_d, "tables": [],
            "replicates": [derive(r) for r in h200["replicates"]], "cv": None}


def provenance(key: str, notes: str, interconnect: str, gpus_per_node: int, nics: int, nic_gbps: float,
               citations: list[str], software: dict[str, str]) -> dict:
    return {"kind": "derived", "source": "derived from public figures, not measured: " + notes,
            "gpu": NAMES[key], "interconnect": interconnect, "gpus_per_node": gpus_per_node,
            "nics_per_node": nics, "nic_gbps": nic_gbps,
            **({"nvlink_generation": dpc.NVLINK_GENERATION[key]} if key in dpc.NVLINK_GENERATION else {}),
            "software": software, "date": DATE,
            "citations": citations + [dp._REDUCE_CUH, GPUS[key][5],
                                      "kernel rates derived from the H200 fit: element rates x SMs (CUs) x clock, "
                                      "byte rates x memory bandwidth"], "files": []}


RCCL_CITATIONS = [
    "ROCm/rccl src/graph/tuning.cc ncclTopoTuneModel: rcclTuningModel[comm->topo->tuning] (gfx942 model: hwLat "
    "NVLINK ring LL / LL128 / Simple 0.8 / 0.8 / 2.1 us, baseLat 12 / 12 / 17 us, bwRatio ring Simple 1.00, "
    "llProtoRanges all_reduce LL <= 1 MiB, LL128 <= 9 MiB); LL128 enabled by default only on gfx90a / gfx942 / gfx950 "
    "with NVLink-class paths; Tree/Simple skipped when all ranks are on one gfx942 / gfx950 node; no NVLS",
    "8x MI300X all_reduce (rccl-tests develop:a7809b3, mpirun -np 8 -g 1; hisohara/ai-scripts "
    "training/01_rccl-smoketest/README.md @ 7b8b1ec2): 128 / 256 KiB 14.60 / 17.46 us (LL line), 1 / 4 MiB 28.39 / "
    "52.96 us (LL128 line), 16 MiB 149.9 us (Simple ramp), 8 GiB busbw 315.69 GB/s (Simple) - in-sample; the "
    "other rows held out",
    dpc.COMMON_CITATIONS[4], dpc.COMMON_CITATIONS[5],
]
MI355X_2NODE_NOTE = (
    "all_reduce on 2 nodes x 8 by RCCL's gfx950 picks (scripts/derive_profiles_fleet.py mi355x_two_node_all_reduce): "
    "LL <= 131071 B, Tree/LL128 <= 17660227 B, Tree/Simple below 256 MiB, Ring/Simple above; the two Tree lines "
    "through the published 2 x 8 table's 1 / 8 MiB and 32 / 128 MiB rows (in-sample), the rest held out; other "
    "placements across nodes: the generic ring, RCCL Tree not modelled.")
MI355X_2NODE_CITATIONS = [
    "ROCm/rccl src/graph/tuning.cc tuning_model_6 (gfx950): hwLat NVLINK Tree 0.9 / 0.9 / 2.3, Ring 0.8 / 0.8 / 2.1 "
    "us, NET Tree 10.5 / 10.5 / 25.0, Ring 9.5 / 9.5 / 320.0 us; bwRatio (2 nodes) Tree 0.06 / 0.06 / 0.11, Ring "
    "0.08 / 0.08 / 1.00; tree / ring correction factors per log2 size; llProtoRanges AllReduce LL (0, 131071], "
    "LL128 (131071, 17660227]; ncclTopoTuneModel / ncclTopoGetAlgoTime (Tree below 256 MiB, Ring from 256 MiB at "
    "2 x 8 for any nChannels x bwIntra in 320-5000 GB/s)",
    "ROCm/rccl rccl_wrap.cc rcclUpdateCollectiveProtocol (from 2 nodes the protocol is forced by size: LL, LL128, "
    "else Simple) and rccl_common.h rcclGetSizePerRank (AllReduce: the whole buffer)",
    "2 x 8 MI355X all_reduce, RCCL 2.26.6 / ROCm 7.0.1, 8 x AMD Pollara 400 per node (hisohara/ai-scripts "
    "training/01_rccl-smoketest/README.md @ 7b8b1ec2, AMD AAC14; " + MI355X_2NODE_TABLE + "): 1 / 8 / 32 / 128 MiB "
    "81.37 / 166.5 / 391.8 / 1041.8 us in-sample, the other rows held out",
]
PCI_CITATIONS = [dpc.COMMON_CITATIONS[0], dpc.COMMON_CITATIONS[4], dpc.COMMON_CITATIONS[5],
                 "NCCL src/graph/tuning.cc: hwLat[PCI] ring LL / Simple 1.0 / 5.7 us; LL128 only on NVLink paths; "
                 "no NVLS on PCIe", "NCCL topology: PCIe Gen4 x16 link 24 GB/s (PCI[24.0], NVIDIA/nccl-tests#307)"]


def pcie_collectives(arch: str, model_bw: float, generic: tuple[float, float] | None,
                     per_p: dict[int, tuple[float, float]], nics: int, nic_gbps: float, ring_fn=None) -> list[dict]:
    """LL + Simple ring curves over PCIe: one per op at any p ((Simple busbw, s_half) = `generic`, NCCL's rules with
    hwLat[PCI]; or `ring_fn(op)`'s regimes), plus per-TP-size all_gather / all_reduce curves where a published
    figure gives that p its own Simple busbw and ramp (`per_p`)."""
    out = []
    for op in ("all_gather", "all_reduce", "gather", "broadcast"):
        inter = dpc.net_busbw(nics, nic_gbps, op, 8)
        for p in [None] + (sorted(per_p) if op in ("all_gather", "all_reduce") else []):
            if ring_fn is not None:
                regimes = ring_fn(op)
                bw = next(r["busbw_gbps"] for r in regimes if r["name"] == "Simple")
            else:
                bw, half = generic if p is None else per_p[p]
                regimes = dpc.ring(op, arch, model_bw, bw, {"Simple": half},
                                   dict(dpc.RING_PCI_HOP_US),
                                   dp.RING_NET_HOP_US, ("LL", "Simple"))
            out.append(dpc.curve(op, regimes, p, inter, None if p is None else 1))
            if op == "all_reduce" and p is None:  # across nodes: Ring / Tree as NCCL picks them (PCIe fabric)
                out += dp.multi_node_curves(arch, "pci", model_bw, bw, regimes, None, 8,
                                            nics, nic_gbps, inter,
                                            ("LL", "Simple"))
    return out


def build() -> list[tuple[dict, float]]:
    specs = []
    for key, name, nics, nic, net in (
            ("mi300x", "mi300x-xgmi", 8, 50.0, "8 x 400 Gb/s RoCE / InfiniBand NICs (assumption: one per GPU)"),
            ("mi325x", "mi325x-xgmi", 8, 50.0, "8 x 400 Gb/s RoCE NICs (the published AAC11 cluster: 8 Broadcom "
                                               "bnxt_re per node)"),
            ("mi355x", "mi355x-xgmi", 8, 50.0, "8 x 400 Gb/s AMD Pollara 400 AI NICs (the published AAC14 cluster)")):
        title = f"8x {NAMES[key].split()[-1]} (AMD Instinct), xGMI mesh, RCCL (derived)"
        notes = (f"RCCL ring LL / LL128 / Simple on a fully connected xGMI mesh of 8 GPUs (7 links per GPU, no "
                 f"NVSwitch / NVLS); LL and LL128 lines and the Simple ramp from the published 8x MI300X rccl-tests "
                 f"table, Simple busbw {MI300X_SIMPLE_8 * XGMI_ONE_WAY_GBPS[key] / XGMI_ONE_WAY_GBPS['mi300x']:.1f} "
                 f"GB/s (MI300X's 315.69 x the xGMI link ratio); across nodes {net}; "
                 + (MI355X_2NODE_NOTE if key == "mi355x" else "RCCL Tree across nodes not modelled."))
        fabric = f"AMD Infinity Fabric (xGMI) fully connected mesh, one node of 8 GPUs; {net}"
        cites = RCCL_CITATIONS + (MI355X_2NODE_CITATIONS if key == "mi355x" else [])
        specs.append((key, name, title, amd_collectives(key, nics, nic),
                      provenance(key, notes, fabric, 8, nics, nic, cites,
                                 {"rccl": "RCCL tuning rules (scripts/derive_profiles_fleet.py RCCL_RULES)"})))
    # GB300 NVL72: the GB200 NVL72 derivation (ring, racks) with B300's NVLS figure
    nv5 = dpc.NVLINK5_PER_LINK_GBPS * dpc.NVLINK5_LINKS
    b300_8 = 832.18  # 8x B300 out-of-place all_reduce busbw at 4 GiB (NCCL 2.29.7), in-sample
    nvls = dpc.blackwell_nvls(dpc.NVL72_TP, busbw_8=b300_8)
    coll = dpc.collectives("blackwell", nv5, dpc.NVL72_RING_SIMPLE,
                           {"Simple": dpc.HOPPER_SIMPLE_HALF * nv5 / dpc.HOPPER_MODEL},
                           dict(dp.RING_NVLINK_HOP_US), 72, 100.0, 72, nvls)
    specs.append(("gb300", "gb300-nvl72", "GB300 NVL72, one 72-GPU NVLink 5 domain (derived)", coll, provenance(
        "gb300", "the GB200 NVL72 derivation (scripts/derive_profiles_current.py) with Blackwell Ultra figures: one "
        "NVLink domain of 72 GPUs, ring as GB200 (ring Simple all-reduce 839.16 GB/s: the GB200 rack's published "
        "NVLS-off run, the same NVLink 5 switch trays - an assumption); NVLS all-reduce 832.18 GB/s at 8 GPUs "
        "(published 8x B300 table), above 8 by NCCL's p-independent NVLS algBw; across racks (--nodes = racks) "
        "Ring / Tree / NVLS-Tree all-reduce and the ring all-gather by NCCL's rules, 72 x 800 Gb/s per rack.",
        "NVLink 5 multi-node NVLink domain of 72 GPUs; 72 x 800 Gb/s ConnectX-8 across racks", 72, 72, 100.0,
        dpc.COMMON_CITATIONS + [
            "8x B300 all_reduce, NCCL 2.29.7, nccl-tests 2.18.0 (eunomia-bpf/nccl-eBPF docs/tmp/"
            "experiment-results-b300.md @ 040882bf): out-of-place busbw 832.18 GB/s at 4 GiB (NVLS busbw at 8)",
            dpc.NVL72_RING_CITATION, dpc.NVL72_RACKS_CITATION],
        {"nccl": "2.23+ tuning model (scripts/derive_profiles.py NCCL_RULES; scripts/derive_profiles_fleet.py)"})))
    # GeForce RTX 4090: host-staged (no P2P), per TP size from the docker tables (2 GiB busbw, 16 MiB ramp)
    r4090 = {2: (2.24, 0.0), 4: (2.58, 0.0)}  # no ramp: LL, capped at the Simple busbw, is the pick at every size
    specs.append(("rtx4090", "rtx-4090-pcie", "RTX 4090 (GeForce), PCIe Gen4, host-staged, no P2P (derived)",
                  pcie_collectives("ampere", dpc.PCI_GEN4_GBPS, r4090[4], r4090, 1, 12.5), provenance(
        "rtx4090", "NCCL ring over PCIe Gen4 staged through host memory (GeForce cards have no P2P): LL and Simple "
        "(hwLat[PCI]; NCCL's LL = min(llMaxBw, 0.5 x 24 GB/s) capped at the achieved busbw, so LL is the pick at "
        "every size), ring busbw per TP size from the published kalavai docker tables (2 GPUs 2.24 GB/s, 4 "
        "GPUs 2.58 GB/s at 2 GiB; no ramp); other p use the 4-GPU figure; assumption: 1 x 100 "
        "Gb/s NIC per node across nodes.",
        "PCIe Gen4 x16, no NVLink and no P2P (host-staged), one node of up to 8 GPUs; 1 x 100 Gb/s across nodes", 8,
        1, 12.5, PCI_CITATIONS + [
            "GeForce RTX 4090 all_reduce, single process -g 2 / -g 4 (kalavai-net/kalavai-client scripts/README.md @ "
            "52af06bc): docker plateau busbw 2.24 (2 GPUs) / 2.58 GB/s (4 GPUs) at 2 GiB (in-sample); the "
            "Kubernetes tables (3.85 / 2.58 GB/s) held out"],
        {"nccl": "2.23+ tuning model, PCIe (scripts/derive_profiles_fleet.py)"})))
    # RTX PRO 6000: P2P behind PCIe Gen5 switches, flat in p (group A, torch.distributed: eager launches)
    rtx = rtx_pro_ring
    specs.append(("rtx", "rtx-pro-6000-pcie", "8x RTX PRO 6000 Blackwell, PCIe Gen5 switches, P2P (derived)",
                  pcie_collectives("blackwell", dpc.PCI_GEN5_GBPS, None, {}, 4, 50.0, ring_fn=rtx), provenance(
        "rtx", "NCCL ring over PCIe Gen5 with P2P through PCIe switches (NCCL_P2P_LEVEL=SYS), LL and Simple: "
        "LL at NCCL's 0.5 x the Gen5 link (24 GB/s) with its latency from the published 8-GPU rig's 64 KiB "
        "all_reduce time (torch.distributed, in-sample), Simple busbw 46.44 GB/s (its 1 GiB row, in-sample; "
        "single-pair P2P 56.3 GB/s) with NCCL's Simple base latency and the document's 1.2 us per ring step; "
        "flat in p (2 and 4 concurrent cross-switch "
        "pairs keep 56.4 GB/s each in the same document); dual-socket rigs without a topology file reach 22.2 GB/s "
        "(same repository, not modelled); assumption: 4 NICs x 400 Gb/s per node across nodes.",
        "PCIe Gen5 x16 through PCIe switches with P2P, no NVLink, one node of 8 GPUs; 4 x 400 Gb/s across nodes", 8,
        4, 50.0, PCI_CITATIONS + [
            "8x RTX PRO 6000 Blackwell, 4 c-payne PCIe Gen5 switches (local-inference-lab/rtx6kpro hardware/"
            "wrx90-cpayne-8gpu-root-topology-comparison.md @ e2c2b957): torch.distributed ring all_reduce busbw 46.44 "
            "GB/s at 1 GiB, 64 KiB 18.13 us (LL latency), 1.2 us per ring step, P2P write 56.3 GB/s per "
            "pair, NCCL 2.27.5",
            "8x RTX 5090 (PCIe Gen5, GeForce: no P2P) all-reduce busbw 28 GB/s (NVIDIA/nccl#1639): no longer used"],
        {"nccl": "2.23+ tuning model, PCIe (scripts/derive_profiles_fleet.py)"})))
    return dpc.assemble(specs, kernel_section, {k: v[1] for k, v in GPUS.items()}, first_seed=30)


def main() -> None:
    for data, _ in build():
        path = ROOT / "data" / "profiles" / f"{data['name']}.json"
        save_profile(data, path)
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
