"""Write the bundled *derived* profiles (data/profiles/{h100,h200,a100}-sxm-nvlink.json).

Every number below is either a constant of NCCL's tuning model (src/graph/tuning.cc,
NCCL 2.2x) or a published figure, as collected in shared/context/nccl-model.md,
or a stated assumption. Nothing here was measured by this project:
provenance.kind = "derived". Run:  python scripts/derive_profiles.py
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costmodel.collectives import bus_factor  # noqa: E402
from costmodel.profile import save_profile  # noqa: E402

DATE = "2026-11-30"
TYPICAL_P = 8  # breakpoints are placed where adjacent regimes cross on an 8-GPU node

# NCCL tuning model, ring, per protocol (LL, LL128, Simple): base latency and
# per-hop hardware latency on NVLink and on the network (us).
RING_BASE_US = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}
RING_NVLINK_HOP_US = {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}
RING_NET_HOP_US = {"LL": 2.7, "LL128": 4.0, "Simple": 14.0}
NVLS_HW_US, NVLS_NET_US = 25.0, 18.0

# Launch overheads the NCCL model leaves out (nccl-model.md, published figures):
# 4x H100 all-reduce graph floor 13-16 us vs a 10.2 us model latency -> ~4 us;
# eager floor ~23 us -> ~9 us more than graph.
LAUNCH_US, EAGER_OVERHEAD_US = 4.0, 9.0
# Assumption: one 400 Gb/s NIC per GPU at ~90% efficiency across nodes.
INTER_NODE_BUSBW_GBPS = 45.0

CITATIONS = [
    "NCCL src/graph/tuning.cc (2.2x): baseLat, hwLat[NVLink/NET], llMaxBw(Hopper)=141 GB/s, "
    "LL128 = 0.92 x busBw, per-channel Hopper NVLink 20.6 GB/s x 18 = 370.8 GB/s",
    "8x H200 SXM, NCCL 2.27: all-gather busbw 361.4 GB/s at 16 GiB; all-reduce NVLS 480 GB/s",
    "8x H100 SXM: all-gather busbw saturates near 350-360 GB/s (NCCL maintainer)",
    "4x H100 all-reduce: eager floor ~23 us, CUDA-graph floor ~13-16 us",
    "HBM: H100 SXM 3.35 TB/s, H200 4.8 TB/s; device copies reach 75-85%",
    "CUDA-graph replay ~1-3 us per kernel; eager launches from Python ~5-20 us",
]


def ring_regimes(op: str, busbw: dict[str, float], per_step: float = 1.0) -> list[dict]:
    regimes = []
    for proto in ("LL", "LL128", "Simple"):
        regimes.append({
            "name": proto,
            "alpha_base_us": RING_BASE_US[proto],
            "alpha_per_peer_us": per_step * RING_NVLINK_HOP_US[proto],
            "alpha_per_node_us": per_step * (RING_NET_HOP_US[proto] - RING_NVLINK_HOP_US[proto]),
            "busbw_gbps": busbw[proto],
        })
    return regimes


def place_breakpoints(op: str, regimes: list[dict], p: int = TYPICAL_P) -> list[dict]:
    """Drop dominated regimes, then set max_bytes where adjacent regimes cross at p ranks."""
    f = float(bus_factor(op, p))

    def alpha(r):
        return r["alpha_base_us"] + r["alpha_per_peer_us"] * (p - 1)

    def slope(r):
        return f / r["busbw_gbps"] * 1e-3

    kept = [r for r in regimes if not any(alpha(o) <= alpha(r) and slope(o) <= slope(r) and o is not r
                                          for o in regimes)]
    kept.sort(key=alpha)
    out = []
    for cur, nxt in zip(kept, kept[1:]):
        crossing = (alpha(nxt) - alpha(cur)) / (slope(cur) - slope(nxt))
        out.append({**cur, "max_bytes": int(round(crossing))})
    out.append({**kept[-1], "max_bytes": None})
    return out


def curve(op: str, regimes: list[dict]) -> dict:
    return {"op": op, "world_size": None, "mode": None, "launch_us": LAUNCH_US,
            "eager_overhead_us": EAGER_OVERHEAD_US, "inter_node_busbw_gbps": INTER_NODE_BUSBW_GBPS,
            "provenance": "derived", "regimes": place_breakpoints(op, regimes)}


def kernels(hbm_gbps: float) -> dict:
    copy_bw, reduce_bw = 0.8 * hbm_gbps, 0.6 * hbm_gbps  # assumption: copies 80%, reductions 60% of HBM
    ops = {  # launches = torch kernels an engine runs for the step (see costmodel/strategies.py)
        "local_argmax": (6, reduce_bw), "key_pack": (6, reduce_bw), "relayout_copy": (1, copy_bw),
        "argmax": (1, reduce_bw), "relayout_argmax": (2, reduce_bw), "chunked_argmax": (4, reduce_bw),
        "pair_reduce": (4, reduce_bw), "key_unpack": (2, reduce_bw), "d2t_scatter": (2, copy_bw),
        "d2t_lookup": (2, reduce_bw),
        # fused Triton variants: one split-vocab pass + one combine; one-kernel reduce / unpack
        "local_argmax_fused": (2, reduce_bw), "key_pack_fused": (2, reduce_bw),
        "pair_reduce_fused": (1, reduce_bw), "key_unpack_fused": (1, reduce_bw),
    }
    return {"graph_kernel_us": 2.0, "eager_launch_us": 8.0,
            "ops": {op: {"launches": n, "fixed_us": 0.0, "bw_gbps": round(bw, 1), "provenance": "derived"}
                    for op, (n, bw) in ops.items()},
            "tables": []}


def profile(name: str, title: str, gpu: str, hbm_gbps: float, simple_busbw: float, ll_busbw: float,
            ll128_busbw: float, allreduce_big: dict | None, notes: str, citations: list[str]) -> dict:
    bw = {"LL": ll_busbw, "LL128": ll128_busbw, "Simple": simple_busbw}
    ar = ring_regimes("all_reduce", bw, per_step=2.0)
    if allreduce_big is not None:
        ar = [ar[0], allreduce_big]
    return {
        "schema_version": 1,
        "name": name,
        "title": title,
        "provenance": {
            "kind": "derived",
            "source": "derived from public figures, not measured: " + notes,
            "gpu": gpu, "interconnect": "NVLink + NVSwitch, one node of 8 GPUs", "gpus_per_node": 8,
            "software": {"nccl": "2.2x tuning model"}, "date": DATE, "citations": citations, "files": [],
        },
        "collectives": [curve("all_gather", ring_regimes("all_gather", bw)),
                        curve("all_reduce", ar),
                        curve("gather", ring_regimes("gather", bw)),
                        curve("broadcast", ring_regimes("broadcast", bw))],
        "kernels": kernels(hbm_gbps),
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


def ensemble(data: dict, hbm_gbps: float, seed: int) -> list[dict]:
    """Replicates with every uncertain parameter drawn from RANGES (stored as profile["bootstrap"])."""
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(N_REPLICATES):
        draw = {k: rng.uniform(*v) for k, v in RANGES.items()}
        curves = copy.deepcopy(data["collectives"])
        for c in curves:
            c["launch_us"] = round(draw["launch_us"], 3)
            c["eager_overhead_us"] = round(draw["eager_overhead_us"], 3)
            for r in c["regimes"]:
                scale = draw["simple_busbw_scale"] if r["name"] in ("Simple", "NVLS") else draw["ll_busbw_scale"]
                r["busbw_gbps"] = round(r["busbw_gbps"] * scale, 2)
                r["alpha_per_peer_us"] = round(r["alpha_per_peer_us"] * draw["hop_scale"], 4)
        ops = {}
        for op, spec in data["kernels"]["ops"].items():
            copy_like = op in ("relayout_copy", "d2t_scatter")
            eff = draw["copy_eff"] if copy_like else draw["reduce_eff"]
            ops[op] = {**spec, "bw_gbps": round(eff * hbm_gbps, 1)}
        reps.append({"collectives": curves,
                     "kernels": {"graph_kernel_us": round(draw["graph_kernel_us"], 3),
                                 "eager_launch_us": round(draw["eager_launch_us"], 3), "ops": ops}})
    return reps


def main() -> None:
    nvls = {"name": "NVLS", "alpha_base_us": NVLS_HW_US, "alpha_per_peer_us": 0.0,
            "alpha_per_node_us": NVLS_NET_US, "busbw_gbps": 480.0}
    ll128 = round(0.92 * 370.8, 1)
    out = [
        profile("h200-sxm-nvlink", "8x H200 SXM, NVLink 4 (derived)", "NVIDIA H200 SXM", 4800.0, 361.4, 141.0,
                ll128, nvls, "NCCL tuning constants; all-gather Simple busbw 361.4 GB/s and all-reduce NVLS "
                "480 GB/s from published 8x H200 runs; kernels at 60-80% of 4.8 TB/s HBM.", CITATIONS),
        profile("h100-sxm-nvlink", "8x H100 SXM, NVLink 4 (derived)", "NVIDIA H100 80GB HBM3", 3350.0, 355.0,
                141.0, ll128, nvls, "NCCL tuning constants; all-gather Simple busbw 355 GB/s (published "
                "350-360); all-reduce NVLS 480 GB/s assumed equal to H200 (same NVLink 4 / NVSwitch); kernels at "
                "60-80% of 3.35 TB/s HBM.", CITATIONS),
        profile("a100-sxm-nvlink", "8x A100 SXM, NVLink 3 (derived)", "NVIDIA A100-SXM4-80GB", 2039.0, 230.0,
                87.7, round(0.92 * 230.0, 1), None, "NCCL tuning constants with llMaxBw(Ampere)=87.7 GB/s; "
                "Simple busbw 230 GB/s (published A100 all-reduce busbw ~200-230 GB/s); no NVLS; kernels at "
                "60-80% of the 2,039 GB/s HBM2e datasheet figure.",
                CITATIONS[:1] + ["A100 SXM (NVLink 3, 300 GB/s one-way): all-reduce busbw ~200-230 GB/s",
                                 "A100 80GB SXM datasheet: 2,039 GB/s HBM2e"] + CITATIONS[3:4] + CITATIONS[5:]),
    ]
    for seed, (data, hbm) in enumerate(zip(out, (4800.0, 3350.0, 2039.0), strict=True)):
        data["bootstrap_method"] = ("derived ensemble, not a statistical bootstrap: " + str(N_REPLICATES)
                                    + " uniform draws of the uncertain parameters over the cited ranges "
                                    "(scripts/derive_profiles.py RANGES)")
        data["bootstrap"] = ensemble(data, hbm, seed)
        path = ROOT / "data" / "profiles" / f"{data['name']}.json"
        save_profile(data, path)
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
