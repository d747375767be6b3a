"""Write the bundled *derived* profiles (data/profiles/{h100,h200,a100}-sxm-nvlink.json).

Every number below is either a constant of NCCL's tuning model (src/graph/tuning.cc,
NCCL 2.2x) or a published figure, as collected in shared/context/nccl-model.md,
or a stated assumption. Nothing here was measured by this project:
provenance.kind = "derived". Run:  python scripts/derive_profiles.py [--collectives-only]
The B200 / B300 / GB200 NVL72 / H20 / L40S / RTX PRO 6000 profiles (issue 10) are written by
scripts/derive_profiles_current.py, which imports this module (rerun it after changing either).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costmodel.evidence.gpu_kernel_fit import GPU_SPECS, kernel_sections  # noqa: E402
from costmodel.model.collectives import bus_factor  # noqa: E402
from costmodel.model.fabrics import usable_nics  # noqa: E402
from costmodel.profiles.compact import compact_members  # noqa: E402
from costmodel.profiles.parse_curves import CANDIDATE_COLUMNS  # noqa: E402  (per bracket; the rest per family)
from costmodel.profiles.store import save_profile  # noqa: E402

DATE = "2026-11-30"
TP_SIZES = range(2, 9)  # one curve per TP size inside an 8-GPU node (NCCL picks the protocol at the actual p)

# NCCL tuning model, src/graph/tuning.cc of the NCCL 2.23-2.27 line (the version with PAT and a Blackwell
# row in llMaxBws; the published tables are NCCL 2.26.2 / 2.27). ncclTopoTuneModel:
#   ring latency   = baseLat[proto] + nsteps * hwLat[NVLink][proto]  (+ inter-node steps at hwLat[NET])
#                    nsteps = 2(p-1) all_reduce, p-1 all_gather / reduce_scatter, p broadcast / reduce
#   ring busBw     = nChannels * bwIntra, then per protocol
#                    LL    = min(llMaxBw, 0.5 * busBw)                       (every ring collective)
#                    LL128 = min(0.92 * busBw, nChannels * perChMaxRingLL128Bw)
#                    algBw = busBw * nRanks / nsteps  (= our busbw convention: t = S f(p) / busbw)
#   NVLS (all_reduce, one node, Hopper+): latency = hwLat[NVLink][NVLS] = 25 us (baseLat 0), algBw =
#                    nChannels * bw * 5/6, independent of p (busbw = algBw * 2(p-1)/p); disabled on > 1 node
#                    without CollNet, and on Ampere (no NVSwitch multicast).
#   ncclTopoGetAlgoTime: time = lat + nBytes / (1000 * algBw); the tuner takes the least time (our select "min").
# Older NCCL (<= 2.22, e.g. NVIDIA/nccl@b6475625) used LL = busBw/3 (all_gather, broadcast) or /4 (all_reduce)
# and llMaxBw(Hopper) = 87.7 GB/s: NCCL_RULES keeps both so a profile can name the version it models.
NCCL_RULES = {
    "2.23+": {"ll_factor": {"all_gather": 0.5, "gather": 0.5, "broadcast": 0.5, "all_reduce": 0.5},
              "ll_max_gbps": {"hopper": 141.0, "ampere": 87.7}, "nvls_us": 25.0},
    "<=2.22": {"ll_factor": {"all_gather": 1 / 3, "gather": 1 / 3, "broadcast": 1 / 3, "all_reduce": 1 / 4},
               "ll_max_gbps": {"hopper": 87.7, "ampere": 87.7}, "nvls_us": 23.0},
}
NCCL_VERSION = "2.23+"
RING_BASE_US = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}
RING_NVLINK_HOP_US = {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}
RING_NET_HOP_US = {"LL": 2.7, "LL128": 4.0, "Simple": 14.0}
NVLS_NET_US = 18.0
LL128_PER_CHANNEL_GBPS = {"hopper": 36.7, "ampere": 20.0}  # perChMaxRingLL128Bws[arch][N1]
# LL across nodes: llMaxBws is indexed by the CPU vendor once nNodes > 1 (tuning.cc: index1 = nNodes == 1 ?
# compCapIndex : AMD ? 1 : 0; index2 = nNodes <= 2 ? nNodes - 1 : 2): Intel-N2 39.0 GB/s (AMD 22.5; N4 20.4 / 19.0)
LL_MAX_NET_GBPS = 39.0
# nsteps per peer and per-node steps of the ring (broadcast: nsteps = p = 1 + (p - 1))
RING_STEPS = {"all_gather": (0, 1), "gather": (0, 1), "broadcast": (1, 1), "all_reduce": (0, 2)}

# Launch overheads the NCCL model leaves out (nccl-model.md, published figures):
# 4x H100 all-reduce graph floor 13-16 us vs a 10.2 us model latency -> ~4 us;
# eager floor ~23 us -> ~9 us more than graph.
LAUNCH_US, EAGER_OVERHEAD_US = 4.0, 9.0
# Across nodes (issue 10): bus bandwidth = NICs per node x NIC bandwidth x efficiency (NCCL runs one ring per NIC;
# every node-boundary crossing carries S f(p) / nics), not one NIC's figure; all_reduce runs NCCL's Tree across
# nodes (each node sends and receives S once): 2(p-1)/p x that, taken at p = 16 (two nodes). HGX H100 / H200: 8 x
# 400 Gb/s ConnectX-7 (one per GPU); DGX A100: 8 x 200 Gb/s HDR. Efficiency 0.9: published 2 x 8 H100 a3-mega
# (8 x 200 Gb/s TCPXO) all_gather busbw 185.34 GB/s and 2 x 8 B200 (8 x 400 Gb/s) all_reduce 683.52 GB/s
# (dstackai/dstack gcp.md; scripts/derive_profiles_current.py NET_EFF).
NICS_PER_NODE = {"hopper": (8, 50.0), "ampere": (8, 25.0)}  # (NICs, GB/s per NIC)
NET_EFF = 0.9


def inter_node_busbw(op: str, arch: str, gpus_per_node: int = 8) -> float:
    """NICs x NIC GB/s x NET_EFF (ring); x 2(p-1)/p at p = 2 x gpus_per_node for all_reduce (NCCL Tree)."""
    nics, nic = NICS_PER_NODE[arch]
    p = 2 * gpus_per_node
    return round(nics * nic * NET_EFF * (2 * (p - 1) / p if op == "all_reduce" else 1.0), 2)

CITATIONS = [
    "NCCL src/graph/tuning.cc (2.23-2.27 line): baseLat, hwLat[NVLink/NET], LL = min(llMaxBw, 0.5 busBw), "
    "llMaxBw(Hopper, 1 node) = 141 GB/s, (Ampere) = 87.7 GB/s, LL128 = min(0.92 busBw, nCh x 36.7 GB/s), "
    "NVLS latency 25 us and algBw = nCh x bw x 5/6; the tuner picks the least predicted time per call",
    "Hopper NVLink busBw 20.6 GB/s x 18 links = 370.8 GB/s (NCCL's ring model bandwidth)",
    "8x H200 SXM, NCCL 2.27: all-gather busbw 361.4 GB/s at 16 GiB; all-reduce NVLS 480 GB/s; all-reduce "
    "busbw 128 MiB 402 GB/s (ramp); NCCL switched all-reduce from Ring/LL (<= 1 MiB) to NVLS (>= 2 MiB)",
    "8x H100 SXM: all-gather busbw saturates near 350-360 GB/s (NCCL maintainer)",
    "NVIDIA/nccl issue #1455 (8x H100 SXM, -b 2G -e 4G): ring busbw 365-370 GB/s for 2-8 GPUs; NVLS busbw "
    "365-370 for 2-4 GPUs, 420 / 440 / 460 / 480 GB/s for 5 / 6 / 7 / 8 GPUs",
    "NVIDIA/Megatron-LM PR #5596: 8x H100 NCCL all-gather kernel device time 128 MiB 385.3 us (ramp)",
    "4x H100 all-reduce: eager floor ~23 us, CUDA-graph floor ~13-16 us",
    "HBM: H100 SXM 3.35 TB/s, H200 4.8 TB/s; device copies reach 75-85%",
    "CUDA-graph replay ~1-3 us per kernel; eager launches from Python ~5-20 us",
]
# NVLS all-reduce busbw per TP size, NVIDIA/nccl issue #1455 (8x H100 SXM); 2-4 GPUs: NVLS ~= ring (367.5)
NVLS_BUSBW_BY_P = {2: 367.5, 3: 367.5, 4: 367.5, 5: 420.0, 6: 440.0, 7: 460.0, 8: 480.0}


def s_half_from_point(time_us: float, size_bytes: float, p: int, op: str, alpha_us: float, busbw: float) -> float:
    """Ramp s_half from one cited (size, time) point:  t = alpha + f(p) (S + s_half) / busbw  solved for s_half."""
    f = float(bus_factor(op, p))
    return max(0.0, (time_us - alpha_us) * busbw * 1e3 / f - size_bytes)


# Hopper all_gather LL128 inside one NVSwitch node (issue 17 item 5). NCCL's ring model (baseLat 14 us + 1.9 us per
# peer, 0.92 x busBw) priced 4x H100 all-gathers 10-15% too fast at 1-32 MiB per rank and 8x H100 ones up to 12% too
# slow at the same total bytes: measured, the two take the same time at the same total size (8 MiB: 47.3 us at 4
# GPUs, 47.0 us at 8), i.e. the latency does not grow with the peers. Fitted (least squares on log(model / measured),
# per-peer latency bounded at >= 0) on the device-bound rows of 8-128 MiB in total of the two published
# single-process nccl-tests tables: 4x H100 (waynehacking8/nccl-collectives-bench results/quiet/all_gather.txt @
# 8ab7496d, NCCL 2.29.2) and 8x H100 ring (togethercomputer/together-nccl-tests all_gather_ring.out @ 6698e53c,
# NCCL 2.26.2); those rows are in-sample (data/reference/nccl-tests/MANIFEST.csv in_sample_bytes). Either table
# alone gives the same bandwidth (0.826 / 0.815 x 370.8 GB/s); fitted on one, the other's worst row of >= 4 MiB in
# total is 7.6% off (8 GPUs) / 13.7% (4 GPUs), against 12.4% / 14.8% with NCCL's constants (docs/accuracy.md).
# Time = launch_us + 21.1 + f(p) S / (0.826 x 370.8 GB/s); LL and Simple keep NCCL's rules.
HOPPER_ALL_GATHER_LL128 = {"alpha_base_us": 21.1, "alpha_per_peer_us": 0.0, "busbw_scale": 0.826}


def fitted_ll128(op: str, arch: str, hop: dict[str, float], nccl_busbw: float, regime: dict) -> dict:
    """`regime` (a ring regime dict) with HOPPER_ALL_GATHER_LL128 put in where it applies: the LL128 all_gather of
    a Hopper GPU on NVLink (`hop` is RING_NVLINK_HOP_US); every other regime unchanged."""
    if not (regime["name"] == "LL128" and op == "all_gather" and arch == "hopper" and hop == RING_NVLINK_HOP_US):
        return regime
    fit = HOPPER_ALL_GATHER_LL128
    return {**regime, "alpha_base_us": fit["alpha_base_us"], "alpha_per_peer_us": fit["alpha_per_peer_us"],
            "busbw_gbps": round(fit["busbw_scale"] * nccl_busbw, 2)}


def ring_regimes(op: str, arch: str, nccl_busbw: float, simple_busbw: dict[str, float], s_half: dict[str, float],
                 rules: dict) -> list[dict]:
    """LL / LL128 / Simple ring regimes of `op` by NCCL's rules (see NCCL_RULES); busbw in nccl-tests units.

    simple_busbw: the published ring Simple busbw per collective ("all_reduce", and "all_gather" for the rest).
    """
    bw = {"LL": min(rules["ll_max_gbps"][arch], rules["ll_factor"][op] * nccl_busbw),
          "LL128": min(0.92 * nccl_busbw, 16 * LL128_PER_CHANNEL_GBPS[arch]),
          "Simple": simple_busbw["all_reduce" if op == "all_reduce" else "all_gather"]}
    base_steps, per_peer = RING_STEPS[op]
    regimes = []
    for proto in ("LL", "LL128", "Simple"):
        hop = RING_NVLINK_HOP_US[proto]
        regimes.append({
            "name": proto,
            "alpha_base_us": round(RING_BASE_US[proto] + base_steps * hop, 4),
            "alpha_per_peer_us": per_peer * hop,
            "alpha_per_node_us": per_peer * (RING_NET_HOP_US[proto] - hop),
            "busbw_gbps": round(bw[proto], 2),
            "s_half_bytes": int(s_half.get(proto, 0.0)),
            **({"inter_node_max_gbps": LL_MAX_NET_GBPS} if proto == "LL" else {}),
        })
    return [fitted_ll128(op, arch, RING_NVLINK_HOP_US, nccl_busbw, r) for r in regimes]


def place_breakpoints(op: str, regimes: list[dict], p: int) -> list[dict]:
    """Every regime, with max_bytes = the S where it stops being the fastest at p ranks (null: fastest up to any
    size, or never fastest at p). Select "min" prices by the minimum, so these only document NCCL's switch points
    at p; a regime never fastest at this p is kept (it matters when another is removed, e.g. NVLS off)."""
    f = float(bus_factor(op, p))

    def alpha(r):
        return r["alpha_base_us"] + r["alpha_per_peer_us"] * (p - 1) + f * r.get("s_half_bytes", 0) / r[
            "busbw_gbps"] * 1e-3

    def slope(r):
        return f / r["busbw_gbps"] * 1e-3

    # lower envelope of the lines alpha + slope * S over S > 0
    hull: list[dict] = []
    for r in sorted(regimes, key=lambda r: (alpha(r), slope(r))):
        if hull and slope(r) >= slope(hull[-1]):
            continue
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (alpha(r) - alpha(a)) / (slope(a) - slope(r)) <= (alpha(b) - alpha(a)) / (slope(a) - slope(b)):
                hull.pop()
            else:
                break
        hull.append(r)
    ends = {id(cur): max(1, int(round((alpha(nxt) - alpha(cur)) / (slope(cur) - slope(nxt)))))
            for cur, nxt in zip(hull, hull[1:])}
    return [{**r, "max_bytes": ends.get(id(r))} for r in regimes]


def curve(op: str, regimes: list[dict], p: int | None, arch: str = "hopper") -> dict:
    """One select-"min" curve: world_size p on one node, or generic (p None, any node count; priced at p = 8)."""
    return {"op": op, "world_size": p, "mode": None, "nodes": None if p is None else 1, "select": "min",
            "launch_us": LAUNCH_US, "eager_overhead_us": EAGER_OVERHEAD_US,
            "inter_node_busbw_gbps": inter_node_busbw(op, arch), "provenance": "derived",
            "regimes": place_breakpoints(op, regimes, p or 8)}


def nvls_regime(p: int, s_half: float, rules: dict, scale: float = 1.0) -> dict:
    """NVLS all-reduce at p ranks: busbw from NVLS_BUSBW_BY_P (scaled to the GPU's published 8-GPU figure)."""
    return {"name": "NVLS", "alpha_base_us": rules["nvls_us"], "alpha_per_peer_us": 0.0,
            "alpha_per_node_us": NVLS_NET_US, "busbw_gbps": round(NVLS_BUSBW_BY_P[p] * scale, 2),
            "s_half_bytes": int(s_half)}


# -- all_reduce across nodes: NCCL's Ring, Tree and NVLS-Tree, chosen as NCCL's tuner chooses (issue 9 item 5) ---------
# NCCL src/graph/tuning.cc, ncclTopoTuneModel (per algorithm x protocol latency and bandwidth) and ncclTopoGetAlgoTime
# (time = lat + nBytes / (1000 algBw), the Tree correction factor and the ring plateau), 2.23+ line (the Blackwell row)
# and, for "<=2.22", NVIDIA/nccl@b6475625. Per (algorithm, protocol), at n nodes of k = p / n GPUs:
#   Ring    busBw as on one node (LL: min(llMaxBw, factor busBw), llMaxBw indexed by the CPU once nNodes > 1:
#           Intel N2 39.0 / N4 20.4 GB/s), capped by the NICs (one ring per NIC: every node crossing carries the ring's
#           bytes); lat = baseLat + (2(p-1) - nInter) max(hwLat[intra], netOverhead) + nInter hwLat[NET]
#           (nInter = 2(n-1) from 2.23, 2n before; netOverhead 1 us on Intel, x3 for Simple; with one GPU per node
#           2.23+ takes hwLat[NET][Tree]); Simple's lat x 1.4 across nodes ("plateau effect of ring", GetAlgoTime).
#   Tree    bw = bwIntra at <= 2 nodes, bwInter beyond; busBw = min(0.92 nCh bw, nCh perChMaxTreeBw[N2|N4]);
#           LL = min(busBw / 3.8, llMaxBw), LL128 = min(busBw 120/128, nCh perChMaxTreeLL128Bw); algBw = busBw / 2
#           (the two trees), at most the NICs' bandwidth (each node sends and receives S once over its NICs);
#           lat = baseLat + 2 ((k-1) hwLat[intra][Tree] + log2(n) hwLat[NET][Tree]); the tuner multiplies Tree's
#           bw by treeCorrectionFactor[proto][log2(nBytes / 64)] (below 512 MiB) when it chooses.
#   NVLSTree (Hopper+, NVSwitch; off on one node and with one GPU per node): NVLS inside the node, a tree across
#           nodes: algBw = 5/6 nCh min(bwIntra, bwInter (/2 beyond 2 nodes)) -> min(the NVLS algBw at k GPUs,
#           the NICs' bandwidth (/2 beyond 2 nodes)); lat = hwLat[NVLink][NVLSTree] + 2 log2(n) hwLat[NET][NVLSTree].
# Our busbw convention: t = f(p) S / busbw, so a ring's busBw is ours and a tree's is f(p) x algBw.
# Assumed, not in tuning.cc: 16 channels (as the ring LL128 cap above), graph latencyInter 0 (InfiniBand / RoCE
# report no extra network latency), an Intel host CPU, GPUDirect RDMA with each NIC on its GPU's PCIe switch
# (LL128 enabled), k of the node's NICs in use with k GPUs per node, the Tree graph's balanced pattern (no x 0.85).
TREE_RULES = {
    "2.23+": {"tree_base_us": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
              "tree_hop_us": {"nvlink": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
                              "pci": {"LL": 1.0, "LL128": 1.9, "Simple": 4.0}},
              "tree_net_us": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
              "nvls_tree_us": 25.0, "nvls_tree_net_us": 14.0, "ring_ll_net_factor": 0.5,
              "ring_inter_steps": lambda n: 2 * (n - 1), "ppn1_tree_net_lat": True},
    "<=2.22": {"tree_base_us": {"LL": 6.8, "LL128": 14.0, "Simple": 0.0},
               "tree_hop_us": {"nvlink": {"LL": 0.6, "LL128": 1.25, "Simple": 28.0},
                               "pci": {"LL": 1.0, "LL128": 1.9, "Simple": 28.0}},
               "tree_net_us": {"LL": 5.0, "LL128": 8.5, "Simple": 28.0},
               "nvls_tree_us": 23.0, "nvls_tree_net_us": 14.0, "ring_ll_net_factor": 0.25,
               "ring_inter_steps": lambda n: 2 * n, "ppn1_tree_net_lat": False},
}
LL_MAX_NET_GBPS_BY_NODES = {2: 39.0, 4: 20.4}  # llMaxBws[Intel][N2 / N4]
PER_CH_TREE_GBPS = {"hopper": (41.4, 36.0), "ampere": (23.6, 17.8), "blackwell": (82.8, 72.0)}  # perChMaxTreeBws N2/N4
PER_CH_TREE_LL128_GBPS = {"hopper": (36.7, 29.0), "ampere": (20.0, 20.0), "blackwell": (73.4, 58.0)}
PER_CH_RING_LL128_GBPS = {"hopper": 36.7, "ampere": 20.0, "blackwell": 73.4}
NET_OVERHEAD_US = 1.0  # getNetOverhead: x86 Intel (AMD 2.0)
RING_PLATEAU = 1.4  # ncclTopoGetAlgoTime: ring Simple all_reduce across nodes, compute capability >= 8.0
# ncclTopoGetAlgoTime treeCorrectionFactor[LL / LL128 / Simple][log2(nBytes >> 6)], powers of two from 64 B to 256 MiB
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}
# one all_reduce curve per (p, n) for n = 2, 4, 8, 16 nodes of k = 1, 2, 4, 8 GPUs (p = n k; other placements, e.g. 3
# nodes or 6 GPUs per node, keep the generic ring curve: its NICs-capped busbw and per-node hop latency). 16 nodes: the
# published p5en 16 x 8 table (its 16 B floor, 167 us, is a Tree's 2 log2(16) network hops, not a ring's 30)
MULTI_NODE_COUNTS, MULTI_NODE_GPUS = (2, 4, 8, 16), (1, 2, 4, 8)
# LL128 across nodes: NCCL enables it only where the NIC path is PXB, or PXN on sm_90+ (tuning.cc
# ncclTopoTuneModel, "Enable LL128 by default only on ..."); the published 2-node tables (2 x 8 B200 Lambda IB and
# GCP A4 RoCE, 2 x 8 H100 Nebius IB) all step from ~45-67 us at 256 KiB to ~100-115 us at 1 MiB per rank - the
# LL -> Simple switch, with no LL128 middle - so the cross-node candidates leave LL128 out (an assumption from
# those tables' shape, not fitted to any of their values).
INTER_NODE_LL128 = False
TREE_NET_PROTO = {"LL": 1 / 3.8, "LL128": 120 / 128, "Simple": 1.0}  # Tree busBw per protocol over Simple's (tuning.cc)
CHOICE_GRID_PER_OCTAVE = 32  # sizes per octave where the NCCL choice is evaluated (breakpoints to ~2%)
# NVLS-Tree across nodes, the network pipeline (issue 19 item 2). NCCL src/enqueue.cc (calcCollChunking, the
# NCCL_ALGO_NVLS_TREE branch): chunkSize = comm->nvlsChunkSize (NCCL_NVLS_CHUNKSIZE, 128 KiB: src/transport/nvls.cc),
# at most 64 KiB from 4 nodes (NVLSTREE_MAX_CHUNKSIZE -2), then 64 KiB while nBytes < 4 concurrentOps chunkSize and
# 32 KiB while nBytes < concurrentOps chunkSize, concurrentOps = nChannels x nvls.nHeads; NVLS channels
# NVLS_NCHANNELS_SM90 16 / NVLS_NCHANNELS_SM100 32 on more than one node (nvls.cc ncclNvlsChannels). Priced as a
# pipeline fill: the transfer ends one round of concurrentOps chunks after its last byte enters the network, so the
# ramp gains concurrentOps x chunkSize(S) bytes (s_half in S units: that / algBw of time) on top of the one-node NVLS
# ramp. Assumptions: the two stages' fills add; nHeads = the node's GPUs with a NIC (one NVLS head per NIC).
NVLS_TREE_CHANNELS = {"hopper": 16, "blackwell": 32}
# ... checked only on 8-GPU nodes (the published 2-node tables); with more GPUs per node (NVL72 racks of 16-72) the
# heads, and so the pipeline's size, are not known (NCCL_MAX_NVLS_ARITY and the NVLS graph search were not read), so
# those curves keep the one-node ramp (a larger assumed ramp at 2 racks of 32 than at 4 racks of 16 also priced the
# fewer racks slower)
NVLS_TREE_HEADS_CHECKED = 8
NVLS_TREE_CHUNK_BYTES = 128 * 1024


def nvls_tree_chunk_bytes(size_bytes: np.ndarray, concurrent_ops: int, n: int) -> np.ndarray:
    """chunkSize NCCL's NVLS-Tree uses for an all_reduce of S = size_bytes over n nodes (see NVLS_TREE_CHUNK_BYTES)."""
    size = np.asarray(size_bytes, dtype=float)
    chunk = np.full(size.shape, float(NVLS_TREE_CHUNK_BYTES if n < 4 else min(NVLS_TREE_CHUNK_BYTES, 65536)))
    for times, above, to in ((32, 262144, 262144), (16, 131072, 131072), (4, 65536, 65536), (1, 32768, 32768)):
        chunk = np.where((size < times * concurrent_ops * chunk) & (chunk > above), to, chunk)
    return chunk


def net_pipeline_bytes(regime: dict, size_bytes: np.ndarray, n: int) -> np.ndarray:
    """Bytes the regime's ramp gains across nodes at S (NVLS-Tree: concurrentOps x chunkSize(S); else 0)."""
    ops = regime.get("_net_ops")
    size = np.asarray(size_bytes, dtype=float)
    return np.zeros(size.shape) if ops is None else ops * nvls_tree_chunk_bytes(size, ops, n)


def tree_correction(proto: str, size_bytes: np.ndarray) -> np.ndarray:
    """treeCorrectionFactor at S bytes: index log2i(S >> 6), 1 below 64 B (index 0 there), none from 512 MiB up."""
    table = np.asarray(TREE_CORRECTION[proto])
    idx = np.floor(np.log2(np.maximum(np.asarray(size_bytes, dtype=float) / 64.0, 1.0))).astype(int)
    return np.where(idx < len(table), table[np.minimum(idx, len(table) - 1)], 1.0)


def multi_node_all_reduce_regimes(arch: str, fabric: str, model_busbw: float, simple_busbw: float,
                                  single: dict[str, dict], nvls: tuple[float, float] | None, k: int, n: int,
                                  net_gbps: float, protocols: tuple[str, ...], version: str,
                                  heads: int | None = None) -> list[dict]:
    """Ring, Tree and NVLS-Tree all_reduce regimes at n nodes of k GPUs (see TREE_RULES), in our busbw units.
    heads: NVLS heads per node (the GPUs with a NIC) for NVLS-Tree's network pipeline (net_pipeline_bytes); None / 0:
    no such term (the one-node ramp only).

    single: the one-node ring regime per protocol (its busbw and ramp); nvls: (NVLS busbw, s_half) at k GPUs or None;
    net_gbps: NICs x NIC bandwidth x NET_EFF of one node (the k GPUs' NICs). Each regime keeps its one-node ramp's
    fill time (s_half / algBw), so the ramp costs the same microseconds at the new bandwidth."""
    tree = TREE_RULES[version]
    p, wide = k * n, 0 if n <= 2 else 1
    f = float(bus_factor("all_reduce", p))
    ll_net = LL_MAX_NET_GBPS_BY_NODES[2 if n <= 2 else 4]
    ring_hop = RING_NVLINK_HOP_US if fabric == "nvlink" else {"LL": 1.0, "LL128": 2.5, "Simple": 5.7}
    n_inter = tree["ring_inter_steps"](n)
    out = []
    for proto in protocols:  # Ring
        bw = {"LL": min(ll_net, tree["ring_ll_net_factor"] * model_busbw),
              "LL128": min(0.92 * model_busbw, 16 * PER_CH_RING_LL128_GBPS[arch]), "Simple": simple_busbw}[proto]
        bw = min(bw, net_gbps)
        intra = max(ring_hop[proto], NET_OVERHEAD_US * (3 if proto == "Simple" else 1))
        inter = (tree["tree_net_us"] if k == 1 and tree["ppn1_tree_net_lat"] else RING_NET_HOP_US)[proto]
        scale = RING_PLATEAU if proto == "Simple" else 1.0
        out.append({"name": proto, "alpha_base_us": round(scale * (RING_BASE_US[proto]
                                                                   + (2 * (p - 1) - n_inter) * intra), 4),
                    "alpha_per_peer_us": 0.0, "alpha_per_node_us": round(scale * n_inter * inter / (n - 1), 4),
                    "busbw_gbps": round(bw, 2), "net_busbw_gbps": round(net_gbps, 2),
                    "s_half_bytes": int(single[proto]["s_half_bytes"] * bw / single[proto]["busbw_gbps"])})
    tree_bw = model_busbw if n <= 2 else net_gbps
    # (at most the fabric's achieved ring Simple busbw, as every one-node protocol: on PCIe the host, not NCCL's
    # 24 / 48 GB/s link figure, bounds it)
    base_bw = min(0.92 * tree_bw, 16 * PER_CH_TREE_GBPS[arch][wide], simple_busbw)
    for proto in protocols:  # Tree
        bus = {"LL": min(base_bw / 3.8, ll_net),
               "LL128": min(base_bw * 120 / 128, 16 * PER_CH_TREE_LL128_GBPS[arch][wide]), "Simple": base_bw}[proto]
        alg = min(bus / 2, net_gbps)
        # the NICs' bound on this algBw: net_gbps itself at <= 2 nodes (each node sends and receives S once); beyond,
        # bwInter = the NICs enters busBw (0.92, / 3.8 for LL, 120/128 for LL128) and algBw = busBw / 2
        net_alg = net_gbps if n <= 2 else min(net_gbps, 0.92 * net_gbps * TREE_NET_PROTO[proto] / 2)
        hop = tree["tree_hop_us"][fabric][proto]
        out.append({"name": "Tree-" + proto, "alpha_per_peer_us": 0.0,
                    "alpha_base_us": round(tree["tree_base_us"][proto] + 2 * (k - 1) * hop, 4),
                    "alpha_per_node_us": round(float(2 * np.log2(n) * tree["tree_net_us"][proto] / (n - 1)), 4),
                    "busbw_gbps": round(f * alg, 2), "net_busbw_gbps": round(f * net_alg, 2),
                    "s_half_bytes": int(single[proto]["s_half_bytes"] * f * alg / single[proto]["busbw_gbps"])})
    if nvls is not None and k >= 2:  # NVLS-Tree
        nvls_bw, nvls_half = nvls
        nvls_alg = nvls_bw / float(bus_factor("all_reduce", k))
        alg = min(nvls_alg, net_gbps / (1 if n <= 2 else 2))
        out.append({"name": "NVLSTree", "alpha_base_us": tree["nvls_tree_us"], "alpha_per_peer_us": 0.0,
                    "alpha_per_node_us": round(float(2 * np.log2(n) * tree["nvls_tree_net_us"] / (n - 1)), 4),
                    "busbw_gbps": round(f * alg, 2), "net_busbw_gbps": round(f * net_gbps / (1 if n <= 2 else 2), 2),
                    "s_half_bytes": int(nvls_half * alg / nvls_alg),
                    **({"_net_ops": NVLS_TREE_CHANNELS.get(arch, 16) * heads} if heads else {})})
    return out


def fastest(regimes: list[dict], p: int, n: int, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index, treeCorrectionFactor) of the fastest regime at each S, as NCCL's tuner picks (ncclTopoGetAlgoTime: the
    least lat + S / (1000 algBw), Tree's algBw x treeCorrectionFactor), each regime timed as this model prices it
    (with its ramp; the launch cost is common to all). The factor is 1 for Ring and NVLS-Tree."""
    f = float(bus_factor("all_reduce", p))
    times, factors = [], []
    for r in regimes:
        corr = tree_correction(r["name"][5:], sizes) if r["name"].startswith("Tree-") else np.ones_like(sizes)
        lat = r["alpha_base_us"] + r["alpha_per_peer_us"] * (p - 1) + r["alpha_per_node_us"] * (n - 1)
        half = r["s_half_bytes"] + net_pipeline_bytes(r, sizes, n)
        times.append(lat + f * (sizes + half) / (1e3 * r["busbw_gbps"] * corr))
        factors.append(corr)
    pick = np.argmin(np.stack(times), axis=0)
    return pick, np.stack(factors)[pick, np.arange(len(sizes))]


def chosen_brackets(regimes: list[dict], p: int, n: int) -> list[dict]:
    """The fastest regime (`fastest`) per size bracket as S grows, a Tree regime once per treeCorrectionFactor step
    with its busbw x that factor (so a regime can appear more than once), each up to just below the first grid size
    where another is the pick (CHOICE_GRID_PER_OCTAVE sizes per octave, 1 B to 2^40 B; breakpoints pricing keeps the
    time monotone where a factor step makes a bracket faster); the last bracket open (max_bytes None)."""
    sizes = np.unique(np.round(np.logspace(0, 40, 40 * CHOICE_GRID_PER_OCTAVE + 1, base=2.0)))
    pick, corr = fastest(regimes, p, n, sizes)
    half = np.array([regimes[i]["s_half_bytes"] + float(net_pipeline_bytes(regimes[i], s, n))
                     for i, s in zip(pick, sizes)])
    runs = []
    for i, (idx, c, h) in enumerate(zip(pick, corr, half)):
        if runs and runs[-1][:3] == [int(idx), float(c), float(h)]:
            runs[-1][3] = i
        else:
            runs.append([int(idx), float(c), float(h), i])
    # each bracket ends just below the next grid size (exact at treeCorrectionFactor's and chunkSize's steps, powers
    # of two); a regime appears once per treeCorrectionFactor / NVLS-Tree chunkSize step
    chosen = [{**{k: v for k, v in regimes[idx].items() if not k.startswith("_")},
               "busbw_gbps": round(regimes[idx]["busbw_gbps"] * c, 2),
               "net_busbw_gbps": round(regimes[idx]["net_busbw_gbps"] * c, 2), "s_half_bytes": int(h),
               "max_bytes": int(sizes[min(last + 1, len(sizes) - 1)]) - 1} for idx, c, h, last in runs]
    chosen[-1]["max_bytes"] = None
    return chosen


def candidate_families(regimes: list[dict], p: int, n: int) -> list[dict]:
    """Every algorithm-protocol family of `regimes` alone over all sizes (`chosen_brackets` of that regime: its
    treeCorrectionFactor / chunkSize steps), one entry per family with its per-bracket CANDIDATE_COLUMNS as lists:
    what `--fabric` chooses from again (costmodel.model.fabrics.rechoose), including the families NCCL's choice
    over InfiniBand never picked at this placement."""
    out = []
    for r in regimes:
        brackets = chosen_brackets([r], p, n)
        fixed = {k: v for k, v in brackets[0].items() if k not in CANDIDATE_COLUMNS}
        out.append({**fixed, **{k: [b[k] for b in brackets] for k in CANDIDATE_COLUMNS}})
    return out


def multi_node_all_reduce_curve(regimes: list[dict], p: int, n: int, inter_gbps: float) -> dict:
    """A select "breakpoints" curve at (p, n): NCCL's choice among `regimes` per size bracket (`chosen_brackets`),
    with every family's own brackets as its "candidates" (`candidate_families`)."""
    return {"op": "all_reduce", "world_size": p, "mode": None, "nodes": n, "select": "breakpoints",
            "launch_us": LAUNCH_US, "eager_overhead_us": EAGER_OVERHEAD_US, "inter_node_busbw_gbps": inter_gbps,
            "provenance": "derived", "regimes": chosen_brackets(regimes, p, n),
            "candidates": candidate_families(regimes, p, n)}


def multi_node_curves(arch: str, fabric: str, model_busbw: float, simple_busbw: float, single: list[dict],
                      nvls: dict[int, tuple[float, float]] | None, gpus_per_node: int, nics: int, nic_gbps: float,
                      inter_gbps: float, protocols: tuple[str, ...], version: str = NCCL_VERSION,
                      counts: tuple[int, ...] = MULTI_NODE_COUNTS,
                      gpus: tuple[int, ...] = MULTI_NODE_GPUS) -> list[dict]:
    """all_reduce curves for n in `counts` nodes of k in `gpus` (<= gpus_per_node) GPUs (p = n k); defaults
    MULTI_NODE_COUNTS x MULTI_NODE_GPUS (an NVL72 rack passes its own k, scripts/derive_profiles_current.py).

    A regime's latency at (p, n) is kept at least its latency at (p, fewer nodes): NCCL's Tree latency falls by
    2 ((k/2) hwLat[intra] - hwLat[NET]) when the same p spreads over twice the nodes (4 us for Tree Simple at 8 -> 4
    GPUs per node), which would let more nodes price faster; we keep the larger (an upper bound by <= 4 us)."""
    by_name = {r["name"]: r for r in single}
    protocols = tuple(q for q in protocols if q != "LL128" or INTER_NODE_LL128)
    out, seen = [], {}
    for n in counts:
        for k in (k for k in gpus if k <= gpus_per_node):
            net = usable_nics(nics, k, gpus_per_node) * nic_gbps * NET_EFF  # min(nics, k) where nics <= GPUs
            regimes = multi_node_all_reduce_regimes(arch, fabric, model_busbw, simple_busbw, by_name,
                                                    None if nvls is None or k < 2 else nvls[k], k, n, net,
                                                    protocols, version,
                                                    heads=min(nics, k) if k <= NVLS_TREE_HEADS_CHECKED else 0)
            for r in regimes:
                lat = r["alpha_base_us"] + r["alpha_per_node_us"] * (n - 1)
                lo = seen.get((n * k, r["name"]), lat)
                r["alpha_base_us"] = round(r["alpha_base_us"] + max(0.0, lo - lat), 4)
                seen[(n * k, r["name"])] = max(lo, lat)
            out.append(multi_node_all_reduce_curve(regimes, n * k, n, inter_gbps))
    return out


def collectives(arch: str, nccl_busbw: float, simple_busbw: dict[str, float], s_half: dict[str, float],
                nvls_busbw_8: float | None, version: str = NCCL_VERSION) -> list[dict]:
    """One generic ring curve per op (select "min": NCCL's protocol choice at any p, any node count) plus, where
    NVLS exists, one all_reduce curve per TP size p = 2..8 on one node (NVLS bandwidth depends on p)."""
    out = []
    for op in ("all_gather", "all_reduce", "gather", "broadcast"):
        ring = ring_regimes(op, arch, nccl_busbw, simple_busbw, s_half, NCCL_RULES[version])
        out.append(curve(op, ring, None, arch))
        if op == "all_reduce" and nvls_busbw_8 is not None:
            scale = nvls_busbw_8 / NVLS_BUSBW_BY_P[8]
            out += [curve(op, ring + [nvls_regime(p, s_half.get("NVLS", 0.0), NCCL_RULES[version], scale)], p,
                          arch) for p in TP_SIZES]
        if op == "all_reduce":  # across nodes: Ring / Tree / NVLS-Tree as NCCL's tuner picks them
            nvls = None if nvls_busbw_8 is None else {
                k: (round(NVLS_BUSBW_BY_P[k] * nvls_busbw_8 / NVLS_BUSBW_BY_P[8], 2), s_half.get("NVLS", 0.0))
                for k in TP_SIZES}
            nics, nic = NICS_PER_NODE[arch]
            out += multi_node_curves(arch, "nvlink", nccl_busbw, simple_busbw["all_reduce"], ring, nvls, 8, nics, nic,
                                     inter_node_busbw(op, arch), ("LL", "LL128", "Simple"), version)
    return out


def kernels(hbm_gbps: float, section: dict | None = None) -> dict:
    """The kernels section: the GPU kernel model (costmodel.model.gpu_kernels; fitted on the H200 probe tables, derived
    for H100 / A100 from it - costmodel.evidence.gpu_kernel_fit.kernel_sections) plus a roofline for the ops it does not
    price (fused Triton kernels), its small-kernel cost and copy rate taken from the model."""
    copy_bw, reduce_bw = 0.8 * hbm_gbps, 0.6 * hbm_gbps  # assumption: copies 80%, reductions 60% of HBM
    graph_us, eager_us = 2.0, 8.0
    if section is not None:
        model = section["model"]
        copy_bw, reduce_bw = model["copy_gbps"]["bf16"], model["reduce_gbps"]
        graph_us, eager_us = model["small_us"], model["torch_op_us"]
    ops = {  # launches = torch kernels an engine runs for the step (see costmodel/model/strategies.py)
        "local_argmax": (6, reduce_bw), "key_pack": (6, reduce_bw), "relayout_copy": (1, copy_bw),
        "argmax": (1, reduce_bw), "relayout_argmax": (2, reduce_bw), "chunked_argmax": (4, reduce_bw),
        "pair_reduce": (4, reduce_bw), "key_unpack": (2, reduce_bw), "d2t_scatter": (2, copy_bw),
        "d2t_lookup": (2, reduce_bw),
        # fused Triton variants: one split-vocab pass + one combine; one-kernel reduce / unpack
        "local_argmax_fused": (2, reduce_bw), "key_pack_fused": (2, reduce_bw),
        "pair_reduce_fused": (1, reduce_bw), "key_unpack_fused": (1, reduce_bw),
    }
    out = {"graph_kernel_us": round(graph_us, 4), "eager_launch_us": round(eager_us, 4),
           "ops": {op: {"launches": n, "fixed_us": 0.0, "bw_gbps": round(bw, 1), "provenance": "derived"}
                   for op, (n, bw) in ops.items()},
           "tables": []}
    if section is not None:
        out.update(model=section["model"], lm_head=section["lm_head"], tables=section["tables"])
        if section["cv"] is not None:  # leave-one-batch / vocab-out error per op (costmodel.evidence.gpu_kernel_fit)
            out["model_cv"] = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
                               for row in section["cv"].to_dict("records")]
        if section["host"]:
            out["host"] = section["host"]
    return out


@functools.cache
def fitted_kernel_sections() -> dict:
    """kernel_sections(n_replicates=100, seed=0), fitted on first use and then shared (callers may add a GPU's
    section to it): a fit of several seconds that importing this module for its rules does not pay."""
    return kernel_sections(n_replicates=100, seed=0)


_REDUCE_CUH = ("pytorch/pytorch aten/src/ATen/native/cuda/Reduce.cuh: ReduceConfig::set_block_dimension and "
               "setReduceConfig (512 threads, vt0 = 4, warp split at 16 values per thread, block split at 256)")
KERNEL_CITATIONS = {key: [_REDUCE_CUH, GPU_SPECS[key][4]] + ([] if key == "h200" else [
    "kernel rates derived from the H200 fit: element rates x SMs x SM clock, byte rates x HBM bandwidth"])
    for key in GPU_SPECS}


def kernel_provenance(name: str, provenance: dict) -> dict:
    """H200: "mixed" - kernels measured on one H200 (the probe), collectives derived. Others: derived kernels."""
    key = name.split("-")[0]
    section = fitted_kernel_sections().get(key)
    if section is None:
        return provenance
    model = section["model"]
    provenance = {**provenance, "citations": list(provenance["citations"]) + KERNEL_CITATIONS[key]}
    if section["tables"]:
        return {**provenance, "kind": "mixed",
                "source": "mixed: kernels measured on one H200 (standalone probe, 2026-11-30), collectives derived. "
                          "Kernels: " + model["source"] + "; collectives: " + provenance["source"],
                "software": {**provenance.get("software", {}), "kernels": "torch 2.11.0+cu130, CUDA 13.0"},
                # schema rows of the kernel ops only (lm_head.csv is context, c10d_world1.csv host costs: kernels.host)
                "files": ["data/calibration/h200-2026-11-30/kernels.csv"]}
    return {**provenance, "source": provenance["source"] + " Kernels: " + model["source"] + "."}


def profile(name: str, title: str, gpu: str, hbm_gbps: float, coll: list[dict], notes: str,
            citations: list[str], version: str = NCCL_VERSION) -> dict:
    nics, nic = NICS_PER_NODE["ampere" if "A100" in gpu else "hopper"]
    return {
        "schema_version": 1,
        "name": name,
        "title": title.replace("(derived)", "(kernels measured, collectives derived)")
        if name.startswith("h200") else title,
        "provenance": kernel_provenance(name, {
            "kind": "derived",
            "source": "derived from public figures, not measured: " + notes,
            "gpu": gpu, "interconnect": f"NVLink + NVSwitch, one node of 8 GPUs; {nics} x {nic * 8:g} Gb/s NICs across "
                                        "nodes", "gpus_per_node": 8, "nics_per_node": nics, "nic_gbps": nic,
            "nvlink_generation": 3 if "A100" in gpu else 4,  # NVLink 3 (A100) / 4 (H100, H200): model.peer_sync
            "software": {"nccl": f"{version} tuning model (scripts/derive_profiles.py NCCL_RULES)"},
            "date": DATE, "citations": citations, "files": [],
        }),
        "collectives": coll,
        "kernels": kernels(hbm_gbps, fitted_kernel_sections().get(name.split("-")[0])),
    }


# Parameter ranges for the derived ensemble (uniform draws; the cited range where one exists,
# else the stated assumption): what a user should believe about a profile nobody measured.
N_REPLICATES = 100
RANGES = {
    "launch_us": (2.8, 5.8),            # graph floors 13-16 us vs the 10.2 us model latency
    "eager_overhead_us": (7.0, 11.0),   # eager floor ~23 us; assumption +-2 us
    "simple_busbw_scale": (0.97, 1.0),  # 350-360 GB/s published ceiling (H100); same spread elsewhere
    "ll_busbw_scale": (0.8, 1.2),       # assumption: LL/LL128 reach their model bandwidth +-20%
    "hop_scale": (0.8, 1.2),            # assumption: per-hop latencies +-20%
    "copy_eff": (0.75, 0.85),           # device copies reach 75-85% of HBM
    "reduce_eff": (0.5, 0.7),           # assumption: reductions 50-70% of HBM
    "graph_kernel_us": (1.0, 3.0),      # CUDA-graph replay ~1-3 us per kernel
    "eager_launch_us": (5.0, 12.0),     # eager launches ~5-20 us; engines sit in the lower half
}


def ensemble(data: dict, hbm_gbps: float, seed: int) -> dict:
    """The derived ensemble (stored as profile["ensemble"]): every uncertain parameter drawn from RANGES.

    Stored compactly (costmodel.profiles.compact, method uniform-ranges-v1): the seed, the number of members and the
    ranges, from which loading redraws the members (the draw code lives in costmodel.profiles.compact
    `uniform_ranges_v1_members`, so profiles and scripts cannot drift apart). The GPU kernel model's replicates
    are refits on bootstrap resamples of the H200 probe tables (carried to the other GPUs by the same
    derivation: `kernel_sections`' "replicates"), too slow to redo on load: stored as columns, only the numbers
    that differ between members. hbm_gbps: unused (the kernel ranges are relative to the point values)."""
    section = fitted_kernel_sections().get(data["name"].split("-")[0])
    out = {"method": "uniform-ranges-v1", "n": N_REPLICATES, "seed": seed,
           "ranges": {k: list(v) for k, v in RANGES.items()}}
    if section is not None:
        models = section["replicates"]
        out["stored"] = compact_members([{"kernels": {"model": models[i % len(models)]}}
                                         for i in range(N_REPLICATES)])
    return out


def main() -> None:
    hopper_busbw = 370.8  # NCCL's Hopper ring model bandwidth (CITATIONS[1]); LL / LL128 derive from it
    # Ramps (s_half), each from one cited mid-size point (those points are in-sample in data/reference):
    # H100 ring Simple from Megatron-LM PR #5596 (8x H100 all-gather 128 MiB: 385.3 us kernel device time);
    # H200 NVLS from the published 8x H200 all-reduce busbw 402 GB/s at 128 MiB (torch, eager);
    # A100 ring Simple from the published 4x A100 all-reduce 16 MB: 196 us (eager).
    simple_alpha_8 = RING_BASE_US["Simple"] + 7 * RING_NVLINK_HOP_US["Simple"]
    hopper_simple = s_half_from_point(385.3, 128 * 2**20, 8, "all_gather", simple_alpha_8, 355.0)
    h200_nvls = s_half_from_point(128 * 2**20 * 1.75 / 402.0e3, 128 * 2**20, 8, "all_reduce",
                                  LAUNCH_US + EAGER_OVERHEAD_US + NCCL_RULES[NCCL_VERSION]["nvls_us"], 480.0)
    a100_alpha_4 = LAUNCH_US + EAGER_OVERHEAD_US + RING_BASE_US["Simple"] + 6 * RING_NVLINK_HOP_US["Simple"]
    a100_simple = s_half_from_point(196.0, 2**24, 4, "all_reduce", a100_alpha_4, 230.0)
    hopper_ramps = {"Simple": hopper_simple, "NVLS": h200_nvls}
    # A100: with a Simple-only ramp LL128 (no ramp) undercuts the cited 16 MB point by 20%, so the point says
    # both bandwidth protocols ramp: the same s_half for LL128 and Simple reproduces it (Simple is then chosen).
    a100_ramps = {"LL128": a100_simple, "Simple": a100_simple}
    out = [
        profile("h200-sxm-nvlink", "8x H200 SXM, NVLink 4 (derived)", "NVIDIA H200 SXM", 4800.0,
                collectives("hopper", hopper_busbw, {"all_gather": 361.4, "all_reduce": 367.5}, hopper_ramps, 480.0),
                "NCCL 2.23+ tuning rules per TP size (the tuner's fastest protocol at the actual p); ring Simple "
                "busbw 361.4 GB/s and all-reduce NVLS 480 GB/s at 8 GPUs from published 8x H200 runs, NVLS per "
                "TP size from NVIDIA/nccl#1455; mid-size ramps from one cited point each.", CITATIONS),
        profile("h100-sxm-nvlink", "8x H100 SXM, NVLink 4 (derived)", "NVIDIA H100 80GB HBM3", 3350.0,
                collectives("hopper", hopper_busbw, {"all_gather": 355.0, "all_reduce": 367.5}, hopper_ramps, 480.0),
                "NCCL 2.23+ tuning rules per TP size; ring Simple busbw 355 GB/s (published 350-360); NVLS "
                "all-reduce per TP size from NVIDIA/nccl#1455 (NCCL uses it by default on one NVSwitch node; "
                "runs with NCCL_ALGO=RING or NVLS off price without it); ramps as for H200.", CITATIONS),
        profile("a100-sxm-nvlink", "8x A100 SXM, NVLink 3 (derived)", "NVIDIA A100-SXM4-80GB", 2039.0,
                collectives("ampere", 230.0, {"all_gather": 230.0, "all_reduce": 230.0}, a100_ramps, None,
                            version="<=2.22"),
                "NCCL <= 2.22 tuning rules per TP size (the published 8x A100 table ran NCCL 2.19.3): LL = "
                "min(87.7, busBw/4) for all-reduce, busBw/3 otherwise, LL128 at 20 GB/s per channel; Simple "
                "busbw 230 GB/s "
                "(published A100 all-reduce busbw ~200-230 GB/s); no NVLS; ramp "
                "from the published 4x A100 16 MB all-reduce.",
                CITATIONS[:1] + ["A100 SXM (NVLink 3, 300 GB/s one-way): all-reduce busbw ~200-230 GB/s; 4x A100 "
                                 "all-reduce 16 MB 196 us (ramp)",
                                 "A100 80GB SXM datasheet: 2,039 GB/s HBM2e"] + CITATIONS[6:7] + CITATIONS[8:],
                version="<=2.22"),
    ]
    for seed, (data, hbm) in enumerate(zip(out, (4800.0, 3350.0, 2039.0), strict=True)):
        data["bootstrap_method"] = ("derived ensemble, not a statistical bootstrap: " + str(N_REPLICATES)
                                    + " uniform draws of the uncertain parameters over the cited ranges "
                                    "(scripts/derive_profiles.py RANGES)")
        data["ensemble"] = ensemble(data, hbm, seed)
        write(data)


def write(data: dict) -> None:
    """Save a derived profile document as data/profiles/NAME.json; with --collectives-only on the command line,
    only its "collectives" go into the bundled file, whose kernels and ensemble stay as they are (the kernel
    bootstrap replicates are refits whose last digits depend on the CPU's BLAS build: rerunning the whole script
    on another machine rewrites them)."""
    path = ROOT / "data" / "profiles" / f"{data['name']}.json"
    if "--collectives-only" in sys.argv[1:]:
        data = {**json.loads(path.read_text()), "collectives": data["collectives"]}
    save_profile(data, path)
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
