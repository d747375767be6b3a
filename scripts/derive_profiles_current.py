"""Write the derived profiles for current GPUs (issue 10): B200 / B300 HGX, GB200 NVL72, H20, L40S and
RTX PRO 6000 (PCIe).  Run:  python scripts/derive_profiles_current.py

Every number is a constant of NCCL's tuning model, a vendor datasheet figure or a published measurement, each
cited next to it (and in the profile's `citations`), or a stated assumption. Nothing here was measured by this
project: provenance.kind = "derived", source "derived from public figures, not measured". The NCCL derivation
(ring regimes, select "min", NVLS per TP size, ramps from one cited point) and the parameter ensemble are those of
scripts/derive_profiles.py, imported from it; the kernel model is the H200 fit carried to each GPU by
costmodel.evidence.gpu_kernel_fit.derive_model (element rates x SMs x clock, byte rates x memory bandwidth).

Multi-node (every profile): a node is one NVLink / PCIe domain of `gpus_per_node` GPUs (72 for a GB200 NVL72 rack:
the trays share one NVLink domain, so TP 8..72 runs without InfiniBand). Across nodes the ring's bus bandwidth is
capped by the network, `nics_per_node x nic_gbps x NET_EFF` (NCCL runs one ring per NIC and every node-boundary
crossing carries S f(p) / nics; not one NIC's figure); all_reduce across nodes uses NCCL's Tree (each node sends and
receives S once), busbw = 2(p-1)/p x the same figure, taken at p = 2 x gpus_per_node. Each ring step that crosses
a node costs hwLat[NET] instead of hwLat[NVLink / PCI] (alpha_per_node_us).

Not derived: mi300x-xgmi - no RCCL rccl-tests table or tuning constants were found in the sources searched, so
there is no figure to build it from.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import derive_profiles as dp  # noqa: E402

from costmodel.evidence.gpu_kernel_fit import GPU_SPECS, _rounded, derive_model  # noqa: E402
from costmodel.model.collectives import bus_factor  # noqa: E402
from costmodel.profiles.kernel_params import model_from_dict  # noqa: E402

DATE = "2026-12-01"

# -- NCCL constants beyond scripts/derive_profiles.py -------------------------------------------------------------
# src/graph/topo.h: SM100_NVLINK_BW 40.0 GB/s per NVLink 5 link (SM90: 20.6); 18 links per B200 / GB200 GPU.
NVLINK5_PER_LINK_GBPS, NVLINK5_LINKS = 40.0, 18
# src/graph/tuning.cc (2.23+): llMaxBws Blackwell-N1 = 2 x 141 = 282 GB/s; perChMaxRingLL128Bws Blackwell 2 x 36.7.
LL_MAX_GBPS = {"hopper": 141.0, "ampere": 87.7, "blackwell": 282.0}
LL128_PER_CHANNEL_GBPS = {"hopper": 36.7, "ampere": 20.0, "blackwell": 73.4}
# hwLat[PCI] (LL / LL128 / Simple) from tuning.cc; LL128 is enabled by default only when every path is NVLink
# (tuning.cc: pEnable for LL128 requires typeIntra == PATH_NVL), so PCIe profiles have LL and Simple only.
RING_PCI_HOP_US = {"LL": 1.0, "LL128": 2.5, "Simple": 5.7}
# NCCL's PCIe link bandwidth in its topology: Gen4 x16 = 24 GB/s (the "PCI[24.0]" links of NCCL's topology dump in
# NVIDIA/nccl-tests#307); Gen5 x16 = 2 x 24 (assumption: twice Gen4, as the PCIe line rate doubles).
PCI_GEN4_GBPS, PCI_GEN5_GBPS = 24.0, 48.0

# -- network (multi-node) -------------------------------------------------------------------------------------------
# Efficiency of the scale-out network: 0.93 from the published 2 x 8 H100 a3-mega (8 x 200 Gb/s GPUDirect-TCPXO)
# all_gather busbw 185.34 GB/s at 4 GiB (dstackai/dstack docs/examples/clusters/gcp.md @ d2fdd171) / (8 x 25 GB/s);
# the same figure for all_reduce's Tree: 2 x 8 B200 GCP A4 (8 x 400 Gb/s RoCE) 683.52 GB/s at 8 GiB = 0.91 x
# 2(15/16) x 8 x 50 GB/s (same gcp.md). NET_EFF = 0.9 (both in-sample in data/reference).
NET_EFF = 0.9


def net_busbw(nics: int, nic_gbps: float, op: str, gpus_per_node: int) -> float:
    """Bus bandwidth across nodes: NICs x NIC bw x NET_EFF (ring); all_reduce (Tree) x 2(p-1)/p at two nodes."""
    ring = nics * nic_gbps * NET_EFF
    if op == "all_reduce":
        p = 2 * gpus_per_node
        return round(ring * 2 * (p - 1) / p, 2)
    return round(ring, 2)


# -- GPUs: (SMs, memory GB/s, SM boost MHz, dense BF16 TFLOPs, citation) -----------------------------------------------
GPUS: dict[str, tuple[int, float, float, float, str]] = {
    "b200": (148, 8000.0, 1965.0, 2250.0,
             "NVIDIA HGX B200 datasheet: 8 TB/s HBM3e per GPU, FP16/BF16 4.5 PFLOPS with sparsity (2.25 dense), "
             "NVLink 5 1.8 TB/s per GPU (900 GB/s one way); 148 SMs (Blackwell: 2 dies x 74 SMs); SM boost 1,965 MHz "
             "is an assumption (not in the datasheet)"),
    "b300": (160, 8000.0, 1965.0, 2250.0,
             "NVIDIA HGX B300 datasheet / Blackwell Ultra technical blog: 160 SMs, 288 GB HBM3e at 8 TB/s, NVLink 5 "
             "1.8 TB/s; dense BF16 taken as B200's 2.25 PFLOPS; SM boost 1,965 MHz assumed as B200"),
    "gb200": (148, 8000.0, 1965.0, 2500.0,
              "NVIDIA GB200 NVL72 datasheet: 72 Blackwell GPUs in one NVLink domain (130 TB/s, 1.8 TB/s per GPU), "
              "8 TB/s HBM3e per GPU, FP16/BF16 360 PFLOPS sparse per rack (2.5 PFLOPS dense per GPU); 148 SMs and "
              "1,965 MHz assumed as B200"),
    "h20": (78, 4000.0, 1980.0, 148.0,
            "NVIDIA H20: 96 GB HBM3 at 4.0 TB/s, 148 TFLOPS dense BF16, NVLink 900 GB/s (18 NVLink 4 links, as H100 "
            "SXM); 78 SMs (GH100 cut down, as reported by vendors' spec sheets); clock assumed as H100's 1,980 MHz"),
    "l40s": (142, 864.0, 2520.0, 362.0,
             "NVIDIA L40S datasheet: 142 SMs (AD102), 48 GB GDDR6 at 864 GB/s, 2,520 MHz boost, 362 TFLOPS BF16 "
             "dense (733 with sparsity), PCIe Gen4 x16 (64 GB/s both ways), no NVLink"),
    "rtx": (188, 1597.0, 2617.0, 500.0,
            "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: 188 SMs (GB202), 96 GB GDDR7 at 1,597 GB/s, "
            "PCIe Gen5 x16, no NVLink; BF16 dense 500 TFLOPS = the datasheet's 4 PFLOPS FP4 with sparsity / 8; boost "
            "2,617 MHz (datasheet); a public BF16 GEMM run reached 417 TFLOPS "
            "(zzc0721/torch-performance-test-data#162)"),
}
NAMES = {"b200": "NVIDIA B200", "b300": "NVIDIA B300", "gb200": "NVIDIA GB200", "h20": "NVIDIA H20",
         "l40s": "NVIDIA L40S", "rtx": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}


def kernel_section(key: str) -> dict:
    """The H200 kernel fit (and its bootstrap replicates) carried to GPU `key` (as kernel_sections does for H100)."""
    h200 = dp.fitted_kernel_sections()["h200"]
    sm0, hbm0, clk0, tf0, _ = GPU_SPECS["h200"]
    sm, hbm, clk, tf, cite = GPUS[key]
    why = ("derived from the H200 kernel fit (measured on one H200 by a standalone torch probe, 2026-11-30): element "
           f"rates x SMs x clock, byte rates x memory bandwidth; {cite}")

    def derive(obj: dict) -> dict:
        m = model_from_dict(obj)
        return _rounded(derive_model(m, gpu=NAMES[key], sm_count=sm, hbm_gbps=hbm, sm_clock_ratio=clk / clk0,
                                     source=why))

    lm = h200["lm_head"]
    lm_d = {"floor_us": lm["floor_us"], "weight_gbps": round(lm["weight_gbps"] * hbm / hbm0, 1),
            "tflops": round(lm["tflops"] * tf / tf0, 1), "provenance": "derived",
            "source": f"the H200 lm_head fit scaled by memory bandwidth and dense BF16 TFLOPs; {cite}"}
    host = {**h200["host"], "source": "assumed equal to the H200 probe's (host-side costs: CPU, driver and Python, "
            "not the GPU); " + h200["host"]["source"]}
    return {"model": derive(h200["model"]), "host": host, "lm_head": lm_d, "tables": [],
            "replicates": [derive(r) for r in h200["replicates"]], "cv": None}


# -- collectives ----------------------------------------------------------------------------------------------------
def ring(op: str, arch: str, model_busbw: float, simple_busbw: float, s_half: dict[str, float], hop: dict[str, float],
         net_hop: dict[str, float], protocols: tuple[str, ...] = ("LL", "LL128", "Simple")) -> list[dict]:
    """LL / LL128 / Simple ring regimes by NCCL 2.23+ rules (scripts/derive_profiles.py NCCL_RULES) on a fabric with
    per-hop latency `hop` (NVLink or PCI) and NCCL's model bandwidth `model_busbw`."""
    bw = {"LL": min(LL_MAX_GBPS[arch], 0.5 * model_busbw),
          "LL128": min(0.92 * model_busbw, 16 * LL128_PER_CHANNEL_GBPS[arch]), "Simple": simple_busbw}
    base_steps, per_peer = dp.RING_STEPS[op]
    return [dp.fitted_ll128(op, arch, hop, model_busbw, {
             "name": proto, "alpha_base_us": round(dp.RING_BASE_US[proto] + base_steps * hop[proto], 4),
             "alpha_per_peer_us": per_peer * hop[proto],
             "alpha_per_node_us": round(per_peer * max(0.0, net_hop[proto] - hop[proto]), 4),
             "busbw_gbps": round(min(bw[proto], simple_busbw) if proto != "Simple" else bw[proto], 2),
             "s_half_bytes": int(s_half.get(proto, 0.0)),
             **({"inter_node_max_gbps": dp.LL_MAX_NET_GBPS} if proto == "LL" else {})}) for proto in protocols]


def curve(op: str, regimes: list[dict], p: int | None, inter_gbps: float, nodes: int | None) -> dict:
    return {"op": op, "world_size": p, "mode": None, "nodes": nodes, "select": "min",
            "launch_us": dp.LAUNCH_US, "eager_overhead_us": dp.EAGER_OVERHEAD_US,
            "inter_node_busbw_gbps": inter_gbps, "provenance": "derived",
            "regimes": dp.place_breakpoints(op, regimes, p or 8)}


def nvls_small(ring_regimes: list[dict], p: int) -> list[dict]:
    """NVLS at small messages inside one NVLink domain, where NCCL's tuner prefers it to a (p-1)-step ring.

    NCCL src/graph/tuning.cc `ncclTopoTuneModel` (2.23+): AllGather's candidates are Ring, NVLS, PAT (one GPU per
    node only) and CollNetDirect (needs CollNet); AllReduce adds Tree / NVLSTree (NVLSTree off on one node, Tree's
    latency 2 (p-1) hwLat on one node, above the ring's). NVLS latency = hwLat[NVLink][NVLS][Simple] = 25 us on one
    node, independent of p, while the ring's grows by hwLat per step (LL: 6.6 + 0.6 (p-1) us all-gather, 6.6 + 1.2
    (p-1) us all-reduce), so the tuner picks NVLS for tiny messages from p = 32 (all-gather) / p = 17 (all-reduce).
    Priced as alpha 25 us with the ring LL regime's busbw (an assumption: NVLS at small sizes is latency-bound, and
    no published NVL72 table below 512 MiB checks its mid-size bandwidth; the NVLS regime with its ramp prices the
    large sizes). Empty where the ring LL latency at p is below NVLS's (every 8-GPU node). Listed first: a curve's
    regimes run in non-decreasing busbw (costmodel.profiles.replicates.constrain)."""
    ll = next(r for r in ring_regimes if r["name"] == "LL")
    nvls_us = dp.NCCL_RULES["2.23+"]["nvls_us"]
    if ll["alpha_base_us"] + ll["alpha_per_peer_us"] * (p - 1) <= nvls_us:
        return []
    return [{"name": "NVLS", "alpha_base_us": nvls_us, "alpha_per_peer_us": 0.0, "alpha_per_node_us": dp.NVLS_NET_US,
             "busbw_gbps": ll["busbw_gbps"], "s_half_bytes": 0}]


def collectives(arch: str, model_busbw: float, simple: dict[str, float], s_half: dict[str, float],
                hop: dict[str, float], nics: int, nic_gbps: float, gpus_per_node: int,
                nvls: dict[int, tuple[float, float]] | None, protocols=("LL", "LL128", "Simple")) -> list[dict]:
    """Generic ring curve per op (any p, any node count) + NVLS all_reduce curves per TP size on one node.

    nvls: {p: (busbw at p, s_half at p)}; None = no NVLS (PCIe, or no NVSwitch multicast)."""
    out = []
    for op in ("all_gather", "all_reduce", "gather", "broadcast"):
        inter = net_busbw(nics, nic_gbps, op, gpus_per_node)
        regimes = ring(op, arch, model_busbw, simple["all_reduce" if op == "all_reduce" else "all_gather"], s_half,
                       hop, dp.RING_NET_HOP_US, protocols)
        out.append(curve(op, regimes, None, inter, None))
        if op == "all_reduce" and nvls:
            for p, (bw, half) in sorted(nvls.items()):
                reg = {"name": "NVLS", "alpha_base_us": dp.NCCL_RULES["2.23+"]["nvls_us"], "alpha_per_peer_us": 0.0,
                       "alpha_per_node_us": dp.NVLS_NET_US, "busbw_gbps": round(bw, 2), "s_half_bytes": int(half)}
                out.append(curve(op, nvls_small(regimes, p) + regimes + [reg], p, inter, 1))
        if op == "all_gather" and nvls:  # NVLS all-gather: only where its latency beats the ring's (large p)
            for p in sorted(q for q in nvls if nvls_small(regimes, q)):
                out.append(curve(op, nvls_small(regimes, p) + regimes, p, inter, 1))
        if op == "all_reduce":  # across nodes: Ring / Tree / NVLS-Tree as NCCL picks them
            fabric = "nvlink" if hop == dp.RING_NVLINK_HOP_US else "pci"
            grid = {} if gpus_per_node <= 8 else {"counts": NVL72_RACKS, "gpus": NVL72_RACK_GPUS}  # NVL72: racks
            out += dp.multi_node_curves(arch, fabric, model_busbw, simple["all_reduce"], regimes, nvls, gpus_per_node,
                                        nics, nic_gbps, inter, protocols, **grid)
        if op == "all_gather" and gpus_per_node > 8:  # across NVL72 racks: NCCL's ring with its net overhead
            out += multi_node_ring_curves(op, regimes, NVL72_RACKS, NVL72_RACK_GPUS, gpus_per_node, nics, nic_gbps,
                                          inter)
    return out


def multi_node_ring_regime(r: dict, p: int, n: int, net_gbps: float, ppn1: bool) -> dict:
    """One ring regime of all_gather at p ranks over n > 1 nodes, by NCCL's rules (tuning.cc ncclTopoTuneModel):

        lat = baseLat + (nsteps - nInter) max(hwLat[intra], netOverhead) + nInter hwLat[NET]
              nsteps = p - 1, nInter = n - 1, netOverhead = getNetOverhead (1 us on Intel x86 and on Arm / Grace;
              x 3 for Simple), hwLat[NET] of the ring (of the Tree when one GPU per node: "ppn=1 latencies are
              fully exposed")
        busBw = the one-node ring busbw, LL at most llMaxBw[Intel or Arm][N2 = 39 | N4 = 20.4 GB/s] (index1 = 0 once
              nNodes > 1 unless the CPU is AMD), and at most the node's NICs (net_gbps, one ring per NIC)

    `r` is the one-node regime (alpha_base_us = baseLat, alpha_per_peer_us = hwLat[intra] per step); the ramp keeps
    its fill time s_half / busbw. All in alpha_base_us: the curve is for exactly (p, n)."""
    proto = r["name"]
    intra = max(r["alpha_per_peer_us"], dp.NET_OVERHEAD_US * (3 if proto == "Simple" else 1))
    inter = (dp.TREE_RULES["2.23+"]["tree_net_us"] if ppn1 else dp.RING_NET_HOP_US)[proto]
    bw = min(r["busbw_gbps"], net_gbps)
    if proto == "LL":
        bw = min(bw, dp.LL_MAX_NET_GBPS_BY_NODES[2 if n <= 2 else 4])
    return {"name": proto, "alpha_base_us": round(r["alpha_base_us"] + (p - n) * intra + (n - 1) * inter, 4),
            "alpha_per_peer_us": 0.0, "alpha_per_node_us": 0.0, "busbw_gbps": round(bw, 2),
            "s_half_bytes": int(r["s_half_bytes"] * bw / r["busbw_gbps"])}


def multi_node_ring_curves(op: str, single: list[dict], counts: tuple[int, ...], gpus: tuple[int, ...],
                           gpus_per_node: int, nics: int, nic_gbps: float, inter_gbps: float) -> list[dict]:
    """all_gather curves at (p = n k, n nodes) for n in `counts`, k in `gpus` (<= gpus_per_node): the ring only -
    NCCL's other all_gather algorithms are off across nodes here (tuning.cc: NVLS and CollNetDirect need CollNet's
    iallgather once nNodes > 1, PAT needs one GPU per node); LL128 as the all_reduce curves (dp.INTER_NODE_LL128).
    Each regime: `multi_node_ring_regime`, k of the node's NICs in use."""
    kept = [r for r in single if r["name"] != "LL128" or dp.INTER_NODE_LL128]
    out = []
    for n in counts:
        for k in (k for k in gpus if k <= gpus_per_node):
            net = dp.usable_nics(nics, k, gpus_per_node) * nic_gbps * NET_EFF
            regimes = [multi_node_ring_regime(r, n * k, n, net, k == 1) for r in kept]
            out.append({**curve(op, regimes, n * k, inter_gbps, n)})
    return out


def s_half_point(time_us: float, size: float, p: int, op: str, alpha_us: float, busbw: float) -> float:
    f = float(bus_factor(op, p))
    return max(0.0, (time_us - alpha_us) * busbw * 1e3 / f - size)


EAGER_NVLS_ALPHA = dp.LAUNCH_US + dp.EAGER_OVERHEAD_US + dp.NCCL_RULES["2.23+"]["nvls_us"]
# Hopper figures reused (scripts/derive_profiles.py): ring Simple ramp from Megatron-LM PR #5596, achieved / model
# ratios of the published 8x H200 all-gather (361.4 / 370.8) and NVIDIA/nccl#1455 ring all-reduce (367.5 / 370.8).
HOPPER_MODEL = 370.8
HOPPER_SIMPLE_HALF = dp.s_half_from_point(385.3, 128 * 2**20, 8, "all_gather",
                                          dp.RING_BASE_US["Simple"] + 7 * dp.RING_NVLINK_HOP_US["Simple"], 355.0)
AG_RATIO, AR_RATIO = 361.4 / HOPPER_MODEL, 367.5 / HOPPER_MODEL

# B200 8-GPU all-reduce (shared/measurements/published-nccl-tests/b200x8_all_reduce_gke-a4-readme-edited.log, one
# process -g 8): plateau 729.25 / 736.53 / 738.97 GB/s at 1 / 2 / 4 GiB -> NVLS busbw 739 at 8 GPUs; ramp from its
# 128 MiB row (396.9 us). The 8 / 16 GiB rows (839.82 / 845.44) jump above the plateau; held out.
B200_NVLS_8 = 739.0
B200_NVLS_HALF = s_half_point(396.9, 128 * 2**20, 8, "all_reduce", EAGER_NVLS_ALPHA, B200_NVLS_8)
# GB200 NVL72, all 72 GPUs, all_reduce, NCCL 2.26.2, NCCL_NVLS_ENABLE=0 (coreweave/nccl-tests README.md @ cb865533
# lines 256-275; PR #43 published the same run - byte-identical rows, Pid 14840 on slurm-gb200-207-171): a RING figure,
# not NVLS (NVLS was off). Ring Simple all_reduce busbw on one NVL72 rack = its 4 GiB row, 839.16 GB/s (in-sample): the
# real NVLink 5 (18 x 50 GB/s) ring runs above NCCL's 18 x SM100_NVLINK_BW = 720 GB/s model. all_gather's ring: x the
# Hopper all_gather / all_reduce ratio (361.4 / 367.5, an assumption). The other rows (512 MiB - 8 GiB) are held out.
NVL72_RING_AR_SIMPLE = 839.16
NVL72_RING_SIMPLE = {"all_gather": round(NVL72_RING_AR_SIMPLE * AG_RATIO / AR_RATIO, 1),
                     "all_reduce": NVL72_RING_AR_SIMPLE}
# Multi-rack TP: a "node" of NCCL's tuner is one NVLink domain. NCCL counts nodes by the ring graph's first rank
# (init.cc initTransportsRank: ranks sharing topoRanks.ringRecv[0] are one node) and fuses the topology of an MNNVL
# clique into one system (graph/topo.cc ncclTopoGetSystem, comm->MNNVL), so one NVL72 rack = one node of 72 and
# `--nodes` counts racks. Curves per (racks, GPUs per rack) at these (other placements: the generic ring curve).
NVL72_RACKS = (2, 4, 8)
NVL72_RACK_GPUS = (1, 2, 4, 8, 16, 18, 32, 36, 64, 72)
NVL72_RING_CITATION = (
    "GB200 NVL72, 72 GPUs, all_reduce, NCCL 2.26.2, NCCL_NVLS_ENABLE=0 (coreweave/nccl-tests README.md @ "
    "cb86553328f8c9ed6f9d682971f5f9b17a926ab4 lines 256-275; the same run as the coreweave/nccl-tests PR #43 "
    "table): 4 GiB busbw 839.16 GB/s = ring Simple all-reduce busbw on one rack (in-sample)")
NVL72_RACKS_CITATION = (
    "NCCL's node = one NVLink domain: init.cc initTransportsRank counts nodes by topoRanks.ringRecv[0]; an MNNVL "
    "clique's topology is fused into one system (ncclTopoGetSystem, comm->MNNVL); across racks tuning.cc "
    "ncclTopoTuneModel: ring lat = baseLat + (nsteps - nInter) max(hwLat, netOverhead) + nInter hwLat[NET], Tree, "
    "NVLSTree, NVLS / CollNet / PAT all_gather off across nodes without CollNet or with > 1 GPU per node")
# PCIe: 8x RTX 5090 (PCIe Gen5, GB202 as the RTX PRO 6000) all-reduce busbw 28 GB/s at 8 GPUs, 35 at 4 GPUs
# (NVIDIA/nccl#1639; maintainer: "On PCI systems, the performance you get is usually determined by the bandwidth
# your CPU and memory can deliver"). RTX PRO 6000: Simple busbw 28. L40S (Gen4): 28 x 24 / 48 = 14 (assumption:
# the same achieved / model ratio on Gen4). The 4-GPU figure is held out.
PCIE_GEN5_SIMPLE = 28.0
PCIE_GEN4_SIMPLE = PCIE_GEN5_SIMPLE * PCI_GEN4_GBPS / PCI_GEN5_GBPS


def nvls_busbw_at(p: int, busbw_8: float) -> float:
    """NVLS all_reduce busbw at p from its 8-GPU figure by NCCL's rule: NVLS's algBw = nChannels x bw x 5/6 does not
    depend on p (tuning.cc ncclTopoTuneModel, the NVLS ratio 5/6 applied to algBw, no nsteps term), so the busbw
    scales as 2(p-1)/p: busbw_8 x (2(p-1)/p) / (2 x 7/8)."""
    return busbw_8 * float(bus_factor("all_reduce", p)) / float(bus_factor("all_reduce", 8))


def blackwell_nvls(tp_sizes, busbw_8: float = B200_NVLS_8) -> dict[int, tuple[float, float]]:
    """NVLS busbw per TP size: p <= 8 NVIDIA/nccl#1455's per-p shape scaled to `busbw_8` (B200's 739) at 8; p > 8 (NVL72
    only) NCCL's p-independent NVLS algBw (`nvls_busbw_at`) with the 8-GPU ramp (no published NVLS table above 8 GPUs:
    the NVL72 tables ran with NVLS off)."""
    out = {}
    for p in tp_sizes:
        if p <= 8:
            out[p] = (dp.NVLS_BUSBW_BY_P[p] * busbw_8 / dp.NVLS_BUSBW_BY_P[8], B200_NVLS_HALF)
        else:
            out[p] = (round(nvls_busbw_at(p, busbw_8), 2), B200_NVLS_HALF)
    return out


NVL72_TP = sorted(set(range(2, 9)) | {p for p in range(9, 73) if p % 4 == 0} | {9, 18, 36})

COMMON_CITATIONS = [
    "NCCL src/graph/tuning.cc (2.23+): baseLat, hwLat[NVLink/PCI/NET], LL = min(llMaxBw, 0.5 busBw), llMaxBws "
    "Hopper-N1 141 / Blackwell-N1 282 GB/s, LL128 = min(0.92 busBw, nCh x perChMaxRingLL128Bw (Hopper 36.7, "
    "Blackwell 2 x 36.7)), NVLS latency 25 us; LL128 only on NVLink paths; the tuner picks the least time",
    "NCCL src/graph/topo.h: SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.0 GB/s per link",
    "NVIDIA/nccl issue #1455 (8x H100): NVLS busbw 367.5 (2-4 GPUs), 420 / 440 / 460 / 480 GB/s (5 / 6 / 7 / 8)",
    "NVIDIA/Megatron-LM PR #5596: 8x H100 all-gather 128 MiB kernel device time 385.3 us (ring Simple ramp)",
    "4x H100 all-reduce: eager floor ~23 us, CUDA-graph floor ~13-16 us (launch / eager overheads)",
    "multi-node efficiency 0.9: 2 x 8 H100 a3-mega (8 x 200 Gb/s GPUDirect-TCPXO) all_gather busbw 185.34 GB/s at "
    "4 GiB; 2 x 8 B200 GCP A4 (8 x 400 Gb/s RoCE) all_reduce 683.52 GB/s at 8 GiB (dstackai/dstack "
    "mkdocs/docs/examples/clusters/gcp.md @ d2fdd1710eb92ef437455d82364887bffa3f75ea)",
]


# NVLink generation per GPU (provenance.nvlink_generation: the flag round of custom collectives,
# costmodel.model.peer_sync); PCIe cards have none. Datasheets: B200 / B300 / GB200 / GB300 NVLink 5, H20 NVLink 4.
NVLINK_GENERATION = {"b200": 5, "b300": 5, "gb200": 5, "gb300": 5, "h20": 4}


def provenance(key: str, notes: str, interconnect: str, gpus_per_node: int, nics: int, nic_gbps: float,
               citations: list[str]) -> dict:
    return {"kind": "derived", "source": "derived from public figures, not measured: " + notes,
            "gpu": NAMES[key], "interconnect": interconnect, "gpus_per_node": gpus_per_node,
            "nics_per_node": nics, "nic_gbps": nic_gbps,
            **({"nvlink_generation": NVLINK_GENERATION[key]} if key in NVLINK_GENERATION else {}),
            "software": {"nccl": "2.23+ tuning model (scripts/derive_profiles.py NCCL_RULES; "
                                 "scripts/derive_profiles_current.py)"},
            "date": DATE, "citations": COMMON_CITATIONS + citations + [
                dp._REDUCE_CUH, GPUS[key][4],
                "kernel rates derived from the H200 fit: element rates x SMs x SM clock, byte rates x memory "
                "bandwidth"],
            "files": []}


def build() -> list[tuple[dict, float]]:
    nv5 = NVLINK5_PER_LINK_GBPS * NVLINK5_LINKS  # 720 GB/s NCCL ring model bandwidth
    nv5_simple = {"all_gather": round(nv5 * AG_RATIO, 1), "all_reduce": round(nv5 * AR_RATIO, 1)}
    bw_half = {"Simple": HOPPER_SIMPLE_HALF * nv5 / HOPPER_MODEL}  # assumption: ramp scales with the bandwidth
    nvl = dict(dp.RING_NVLINK_HOP_US)
    b200_cite = ["8x B200 all_reduce (one process -g 8; shared/measurements/published-nccl-tests/"
                 "b200x8_all_reduce_gke-a4-readme-edited.log): 128 MiB 396.9 us (NVLS ramp), busbw 729-739 GB/s at "
                 "1-4 GiB (NVLS busbw at 8 GPUs)",
                 "8 x 400 Gb/s NICs per HGX B200 node (ConnectX-7, one per GPU; NVIDIA/nccl-tests#389: 2 x 8 B200 "
                 "with ConnectX-7 NDR 400 Gb/s)"]
    specs = []
    for key, name, title in (("b200", "b200-hgx-nvlink", "8x B200 HGX, NVLink 5 (derived)"),
                             ("b300", "b300-hgx-nvlink", "8x B300 HGX, NVLink 5 (derived)")):
        coll = collectives("blackwell", nv5, nv5_simple, bw_half, nvl, 8, 50.0, 8, blackwell_nvls(range(2, 9)))
        notes = ("NCCL 2.23+ tuning rules per TP size on NVLink 5 (18 x 40 GB/s = 720 GB/s model busBw; ring Simple at "
                 "Hopper's achieved / model ratio); NVLS all-reduce 739 GB/s at 8 GPUs from a published 8x B200 table"
                 + ("" if key == "b200" else " (B200's: no published B300 collective table was found)")
                 + "; 8 NICs x 400 Gb/s per node across nodes.")
        fabric = "NVLink 5 + NVSwitch, one node of 8 GPUs; 8 x 400 Gb/s InfiniBand across nodes"
        specs.append((key, name, title, coll, provenance(key, notes, fabric, 8, 8, 50.0, b200_cite)))
    coll = collectives("blackwell", nv5, NVL72_RING_SIMPLE, bw_half, nvl, 72, 50.0, 72, blackwell_nvls(NVL72_TP))
    specs.append(("gb200", "gb200-nvl72", "GB200 NVL72, one 72-GPU NVLink 5 domain (derived)", coll, provenance(
        "gb200", "one NVLink domain of 72 GPUs (18 compute trays x 4 GPUs share the NVLink switch trays), TP 2..72 "
        "priced on NVLink without InfiniBand; ring latencies as B200, ring Simple all-reduce busbw 839.16 GB/s (the "
        "published 72-GPU run with NVLS off); NVLS all-reduce per TP size from B200's 739 at 8 by NCCL's "
        "p-independent NVLS algBw; across racks (--nodes = racks: NCCL's node is the NVLink domain) Ring / Tree / "
        "NVLS-Tree all-reduce and the ring all-gather by NCCL's rules, 72 NICs x 400 Gb/s per rack.",
        "NVLink 5 multi-node NVLink domain of 72 GPUs; 72 x 400 Gb/s across racks", 72, 72, 50.0,
        b200_cite[:1] + [NVL72_RING_CITATION, NVL72_RACKS_CITATION,
                         "GB200 NVL72: one ConnectX-7 400 Gb/s NIC per GPU (4 per compute tray)"])))
    h_simple = {"all_gather": 355.0, "all_reduce": 367.5}
    h_half = {"Simple": HOPPER_SIMPLE_HALF}
    h200_nvls_half = dp.s_half_from_point(128 * 2**20 * 1.75 / 402.0e3, 128 * 2**20, 8, "all_reduce",
                                          EAGER_NVLS_ALPHA, 480.0)
    coll = collectives("hopper", HOPPER_MODEL, h_simple, h_half, nvl, 8, 50.0, 8,
                       {p: (dp.NVLS_BUSBW_BY_P[p], h200_nvls_half) for p in range(2, 9)})
    specs.append(("h20", "h20-hgx-nvlink", "8x H20 HGX, NVLink 4 (derived)", coll, provenance(
        "h20", "the H100 SXM NCCL derivation (the same 18 NVLink 4 links and NVSwitch: ring Simple 355 / 367.5 GB/s, "
        "NVLS per TP size from NVIDIA/nccl#1455); the kernels on H20's 78 SMs and 4.0 TB/s; 8 x 400 Gb/s across nodes.",
        "NVLink 4 + NVSwitch, one node of 8 GPUs; 8 x 400 Gb/s InfiniBand across nodes", 8, 8, 50.0,
        ["8x H100 SXM all-gather busbw 350-360 GB/s (NCCL maintainer); 8x H200 all-reduce 128 MiB 402 GB/s (NVLS ramp)",
         "2 x 8 H20 with 16 ConnectX-7 NDR NICs (NVIDIA/nccl#1244): 8 NICs x 400 Gb/s per node",
         "H20 intra-node all-reduce 8 B 12.5 us (deepseek-ai/DeepEP#303; held out)"])))
    pci = dict(RING_PCI_HOP_US)
    for key, name, title, model_bw, simple_bw, arch, nics, nic, gen in (
            ("l40s", "l40s-pcie", "8x L40S, PCIe Gen4, no NVLink (derived)", PCI_GEN4_GBPS, PCIE_GEN4_SIMPLE, "ampere",
             2, 25.0, "Gen4"),
            ("rtx", "rtx-pro-6000-pcie", "8x RTX PRO 6000 Blackwell, PCIe Gen5, no NVLink (derived)", PCI_GEN5_GBPS,
             PCIE_GEN5_SIMPLE, "blackwell", 4, 50.0, "Gen5")):
        coll = collectives(arch, model_bw, {"all_gather": simple_bw, "all_reduce": simple_bw}, {}, pci, nics, nic, 8,
                           None, protocols=("LL", "Simple"))
        specs.append((key, name, title, coll, provenance(
            key, f"NCCL ring over PCIe {gen} through the host / PCIe switches (hwLat[PCI], LL and Simple only - NCCL "
            f"enables LL128 only on NVLink; no NVLS); NCCL model busBw {model_bw:g} GB/s, ring Simple busbw "
            f"{simple_bw:g} GB/s (" + ("published 8x RTX 5090 PCIe Gen5 all-reduce, NVIDIA/nccl#1639)" if key == "rtx"
                                       else "the 8x RTX 5090 Gen5 figure x 24 / 48 for Gen4: an assumption)")
            + f"; assumption: {nics} NICs x {nic * 8:g} Gb/s per node across nodes.",
            f"PCIe {gen} x16 through the host / PCIe switches, no NVLink, one node of 8 GPUs", 8, nics, nic,
            ["8x RTX 5090 (PCIe Gen5) all-reduce busbw 28 GB/s at 8 GPUs, 35 GB/s at 4 (NVIDIA/nccl#1639)",
             "NCCL topology: PCIe Gen4 x16 link 24 GB/s (PCI[24.0], NVIDIA/nccl-tests#307)"])))
    return assemble(specs, kernel_section, {k: v[1] for k, v in GPUS.items()}, first_seed=10)


def assemble(specs: list, section_of, hbm_gbps: dict[str, float], first_seed: int) -> list[tuple[dict, float]]:
    """The profile documents of `specs` ((key, name, title, collectives, provenance) each): the kernels section of
    `section_of(key)` at the GPU's HBM bandwidth `hbm_gbps[key]`, and the derived ensemble seeded first_seed, +1, ..
    (shared with scripts/derive_profiles_fleet.py)."""
    out = []
    for seed, (key, name, title, coll, prov) in enumerate(specs, start=first_seed):
        section = section_of(key)
        dp.fitted_kernel_sections()[name.split("-")[0]] = section  # dp.ensemble / dp.kernels look it up by prefix
        data = {"schema_version": 1, "name": name, "title": title,
                "provenance": {**prov, "source": prov["source"] + " Kernels: " + section["model"]["source"] + "."},
                "collectives": coll, "kernels": dp.kernels(hbm_gbps[key], section)}
        data["bootstrap_method"] = ("derived ensemble, not a statistical bootstrap: " + str(dp.N_REPLICATES)
                                    + " uniform draws of the uncertain parameters over the cited ranges "
                                    "(scripts/derive_profiles.py RANGES)")
        data["ensemble"] = dp.ensemble(data, hbm_gbps[key], seed)
        out.append((data, hbm_gbps[key]))
    return out


# re-derived from the RTX PRO 6000 tables of published-collectives-2026 (P2P behind PCIe switches) by
# scripts/derive_profiles_fleet.py, which writes it; the block above keeps the old RTX 5090-based derivation for
# reference only
WRITTEN_ELSEWHERE = ("rtx-pro-6000-pcie",)


def main() -> None:
    for data, _ in build():
        if data["name"] in WRITTEN_ELSEWHERE:
            continue
        dp.write(data)


if __name__ == "__main__":
    main()
