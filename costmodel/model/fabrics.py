"""A profile re-priced for another scale-out fabric (`costmodel.profiles.fabrics`): the pricing rule.

The bundled profiles derive every multi-node curve from one network, NCCL's own model over InfiniBand: NICs x NIC
GB/s x NET_EFF 0.9, hwLat[NET] per inter-node step, the plugin's latencyInter 0 (net_ib.cc) and netOverhead 1 us
per ring step (scripts/derive_profiles.py `inter_node_busbw`, NET_EFF, NET_OVERHEAD_US; provenance
`nics_per_node`, `nic_gbps`). A fabric F is a transport T (net_eff, step_overhead_us o, inter_step_us l; fitted
per transport across clusters) with a machine type's NICs. Every curve that can span nodes (nodes None, or
nodes > 1) and is not measured is re-priced regime by regime, with the regime's algorithm A and protocol P read
from its name ("LL" / "LL128" / "Simple": ring; "Tree-LL" / "Tree-Simple": tree; "NVLSTree": NVLS in the node,
a tree across nodes) as NCCL's tuner prices them (src/graph/tuning.cc `ncclTopoTuneModel`):

    ratio            = F.net_busbw_gbps / base_GBps          (F: nics * nic_gbit / 8 * T.net_eff;
                                                              base: profile NICs * NIC GB/s * 0.9)
    inter_node_busbw_gbps *= ratio                           (the network cap; None: the fastest regime's busbw;
                                                              the generic all_reduce curve - ring regimes only -
                                                              F.net_busbw_gbps: a ring's busbw across nodes)
    inter_node_max_gbps   *= min(1, ratio)                   (NCCL's LL ceiling across nodes)
    busbw_gbps            = min(busbw_gbps, net_busbw_gbps * ratio_k) (a per-(p, n) regime that records its NICs'
                                                              bound: the network side of NCCL's busBw / algBw for
                                                              its algorithm at n nodes - ring: the NICs; Tree: the
                                                              NICs x f(p) at <= 2 nodes, 0.92 x NICs x f(p) / 2
                                                              beyond; NVLS-Tree: NICs x f(p), / 2 beyond 2 nodes -
                                                              scaled by ratio_k, the ratio of the NICs k = p / n
                                                              ranks drive, `fabric_ratio_at`; a faster fabric
                                                              keeps the GPUs' side)
    s_half_bytes          *= busbw across nodes after / before (the mid-size ramp keeps its microseconds)
    per ring step        += max(0, o - 1 us) * m_P            (ring only: NCCL's intraLat = max(intraLat,
                                                              netOverhead) for every step of a ring that spans
                                                              nodes; m_P = 3 for Simple, else 1)
    per inter-node step  += l * (2 for Simple, else 1)       (interLat = hwLat[NET] + latencyInter, Simple adds
                                                              latencyInter again for the flush)

with NCCL's step counts: a ring takes nsteps = 2 (p - 1) (all_reduce) or p - 1 steps, nInterSteps = 2 (n - 1) or
n - 1 of them across nodes; a tree (and NVLS-Tree) 2 log2(n) inter-node steps and no ring steps. So at p ranks
over n nodes (k = p / n per node) the floor grows with the ring's p - 1 steps - one GPU per node (k = 1) pays o
on 2 (p - 1) = 2 steps at p = 2, a 16-GPU ring 30 - and with the algorithm's inter-node steps. A per-(p, n)
curve takes both terms in `alpha_per_node_us` (p and n are fixed); a generic curve (any p, n) takes the ring term
in `alpha_per_peer_across_nodes_us` (x (p - 1), only when n > 1) and the inter-node term per extra node.
T(S, p, n) is unchanged at n = 1, and a measured (fitted) multi-node curve wins over the rule: it is kept as
measured. The profile's bootstrap replicates priced the old fabric, so the re-priced profile has none (its
intervals are the point profile's with the discrepancy spread, `costmodel.evidence.ensemble`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..io.errors import InputError
from ..profiles.fabrics import FabricChoice, Transport, default_fabric_name, fabric_choice
from ..profiles.types import CollectiveCurve, Profile, Regime
from .collectives import curve_time_us, total_bytes

BASE_NET_EFF = 0.9  # scripts/derive_profiles.py NET_EFF: the bundled profiles' multi-node rule
BASE_STEP_OVERHEAD_US = 1.0  # scripts/derive_profiles.py NET_OVERHEAD_US: NCCL getNetOverhead (x86 Intel)
SIMPLE_OVERHEAD_STEPS = 3  # tuning.cc: "if (proto == NCCL_PROTO_SIMPLE) netOverhead *= 3"
SIMPLE_LATENCY_INTER = 2  # tuning.cc: Simple adds latencyInter twice ("Also add the flush extra latency")


def regime_algorithm(name: str) -> tuple[str, str]:
    """(algorithm, protocol) of a regime from its name: "Tree-LL" -> ("tree", "LL"), "NVLSTree" -> ("nvls_tree",
    "Simple"), "NVLS" -> ("nvls", "Simple"), "LL" / "LL128" / "Simple" -> ("ring", name); any other name (a fitted
    curve's "regime") -> ("ring", "Simple")."""
    if name.startswith("NVLSTree"):
        return "nvls_tree", "Simple"
    if name.startswith("NVLS"):
        return "nvls", "Simple"
    algo, _, proto = name.rpartition("-")
    algo = "tree" if algo.lower() == "tree" else "ring"
    return algo, proto if proto in ("LL", "LL128", "Simple") else "Simple"


def ring_steps_per_peer(op: str) -> int:
    """Ring steps per peer: all_reduce 2 (nsteps 2 (p - 1)), else 1 (p - 1)."""
    return 2 if op == "all_reduce" else 1


def inter_node_steps(op: str, algorithm: str = "ring", nodes: int | None = None) -> float:
    """Inter-node steps per extra node (x (n - 1) gives NCCL's count): a ring's nInterSteps 2 (n - 1) for
    all_reduce, else n - 1; a tree's or NVLS-Tree's 2 log2(n) (at n = 2: 2; unknown n: 2)."""
    if algorithm in ("tree", "nvls_tree"):
        return 2.0 if not nodes or nodes <= 2 else 2.0 * math.log2(nodes) / (nodes - 1)
    return float(ring_steps_per_peer(op))


def base_net_busbw_gbps(profile: Profile) -> float:
    """The profile's own per-node network bandwidth, NICs x NIC GB/s x 0.9; InputError when it has no NICs."""
    prov = profile.provenance
    if not prov.nics_per_node or not prov.nic_gbps:
        raise InputError(f"--fabric: profile {profile.name} has no scale-out NICs (provenance nics_per_node / "
                         f"nic_gbps): it prices one node only")
    return prov.nics_per_node * prov.nic_gbps * BASE_NET_EFF


def fabric_ratio(profile: Profile, choice: FabricChoice) -> float:
    """F.net_busbw_gbps / the profile's own: how much faster (> 1) or slower the chosen fabric moves bytes."""
    prov = profile.provenance
    return choice.net_busbw_gbps(prov.nics_per_node, prov.nic_gbps) / base_net_busbw_gbps(profile)


def usable_nics(nics: int, ranks_per_node: int, gpus_per_node: int | None) -> float:
    """NICs that k ranks of a node drive - the rule the bundled multi-node curves were derived with too
    (scripts/derive_profiles.py multi_node_curves): one per rank up to the node's (min(nics, k)), or the node's
    NICs per GPU x k where it has more NICs than GPUs (p5: 32 NICs for 8 GPUs, NCCL spreads each GPU's channels
    over its 4): min(nics, k max(1, nics / G))."""
    per_gpu = max(1.0, nics / gpus_per_node) if gpus_per_node else 1.0
    return min(float(nics), ranks_per_node * per_gpu)


def fabric_ratio_at(profile: Profile, choice: FabricChoice, ranks_per_node: int) -> float:
    """`fabric_ratio` for k ranks per node: the NICs they drive (`usable_nics`) x line rate x efficiency, over the
    profile's own at k (what a per-(p, n) regime's net_busbw_gbps was derived with)."""
    prov = profile.provenance
    mine = choice.nics(prov.nics_per_node), choice.gbit(prov.nic_gbps) / 8.0 * choice.transport.net_eff
    base = prov.nics_per_node, prov.nic_gbps * BASE_NET_EFF
    k, g = ranks_per_node, prov.gpus_per_node
    return usable_nics(mine[0], k, g) * mine[1] / (usable_nics(base[0], k, g) * base[1])


def _across_nodes_gbps(curve: CollectiveCurve, busbw: float, ll_max: float | None, cap: float | None) -> float:
    """A regime's busbw across nodes as `costmodel.model.collectives` applies the cap (select "min": scaled by
    cap / the fastest regime's busbw; else capped), then its own LL ceiling."""
    if cap is not None:
        fastest = max(r.busbw_gbps for r in curve.regimes)
        busbw = busbw * min(1.0, cap / fastest) if curve.select == "min" else min(busbw, cap)
    return busbw if ll_max is None else min(busbw, ll_max)


def _latency(curve: CollectiveCurve, r: Regime, t: Transport) -> dict[str, float]:
    """The regime's added latency terms over transport t (module doc): alpha_per_node_us and
    alpha_per_peer_across_nodes_us increments."""
    algo, proto = regime_algorithm(r.name)
    ring_us = max(0.0, t.step_overhead_us - BASE_STEP_OVERHEAD_US) * (SIMPLE_OVERHEAD_STEPS if proto == "Simple"
                                                                       else 1)
    per_peer = ring_steps_per_peer(curve.op) * ring_us if algo == "ring" else 0.0
    per_node = inter_node_steps(curve.op, algo, curve.nodes) * t.inter_step_us * (
        SIMPLE_LATENCY_INTER if proto == "Simple" else 1)
    if curve.world_size is not None and curve.nodes is not None:  # p and n fixed: all of it per extra node
        return {"alpha_per_node_us": per_node + per_peer * (curve.world_size - 1) / (curve.nodes - 1),
                "alpha_per_peer_across_nodes_us": 0.0}
    return {"alpha_per_node_us": per_node, "alpha_per_peer_across_nodes_us": per_peer}


CHOICE_SIZES = np.geomspace(1.0, 2.0**37, 37 * 16 + 1)  # 16 sizes per octave: the re-chosen brackets to ~4% in S


def _family_index(pool: tuple[Regime, ...], size: np.ndarray) -> dict[str, np.ndarray]:
    """Per regime name (an algorithm-protocol family), the index in `pool` of the family's regime that prices each
    size: the first of the family whose bracket holds the size, else the family's last (the regimes of one family
    differ only by NCCL's per-size corrections: treeCorrectionFactor, the NVLS-Tree chunk). A curve's candidates
    bracket every family over all sizes, so there the bracket always holds the size."""
    out: dict[str, np.ndarray] = {}
    for name in dict.fromkeys(r.name for r in pool):
        mine = [i for i, r in enumerate(pool) if r.name == name]
        edges = np.array([pool[i].max_bytes for i in mine])
        out[name] = np.array(mine)[np.minimum(np.searchsorted(edges, size, side="left"), len(mine) - 1)]
    return out


def rechoose(curve: CollectiveCurve) -> CollectiveCurve:
    """A per-(p, n) "breakpoints" curve whose regimes were re-priced for another transport, with NCCL's choice made
    again: at each size the fastest algorithm-protocol family (`_family_index`'s regime of each family, from the
    curve's candidates - every family NCCL has at this placement - or, without them, its chosen regimes) as NCCL's
    tuner picks the least predicted time (tuning.cc ncclTopoGetAlgoTime + enqueue.cc topoGetAlgoInfo), written back
    as size brackets on CHOICE_SIZES (the monotone envelope of "breakpoints" applies as before)."""
    p, n = curve.world_size, curve.nodes
    pool = curve.candidates or curve.regimes
    total = total_bytes(curve.op, CHOICE_SIZES, p)  # S, the brackets' unit (CHOICE_SIZES are bytes per rank)
    times = np.stack([curve_time_us(dataclasses.replace(curve, regimes=(dataclasses.replace(r, max_bytes=np.inf),)),
                                    CHOICE_SIZES, p, n) for r in pool])
    family = _family_index(pool, total)
    candidates = np.stack(list(family.values()))  # (families, sizes): regime index per family
    chosen = candidates[np.argmin(np.take_along_axis(times, candidates, axis=0), axis=0), np.arange(total.size)]
    regimes, start = [], 0
    for j in range(1, total.size + 1):
        if j == total.size or chosen[j] != chosen[start]:
            edge = np.inf if j == total.size else float(np.floor(np.sqrt(total[j - 1] * total[j])))
            regimes.append(dataclasses.replace(pool[int(chosen[start])], max_bytes=edge))
            start = j
    return dataclasses.replace(curve, regimes=tuple(regimes))


def _curve(curve: CollectiveCurve, profile: Profile, choice: FabricChoice) -> CollectiveCurve:
    if curve.provenance == "measured" or curve.nodes == 1:
        return curve
    ratio, transport = fabric_ratio(profile, choice), choice.transport
    net_gbps = choice.net_busbw_gbps(profile.provenance.nics_per_node, profile.provenance.nic_gbps)
    placed = curve.world_size is not None and (curve.nodes or 1) > 1
    ratio_k = fabric_ratio_at(profile, choice, curve.world_size // curve.nodes) if placed else ratio
    slower = min(1.0, ratio)
    own = curve.inter_node_busbw_gbps  # None (a curve fitted to one fabric's table): its fastest regime's busbw
    cap = (max(r.busbw_gbps for r in curve.regimes) if own is None else own) * ratio
    if own is not None and curve.world_size is None and curve.op == "all_reduce":
        # the generic all_reduce curve holds ring regimes only, and a ring's busbw across nodes is at most the
        # node's network (every ring's inter-node edge carries the whole busbw); the bundled cap, f(16) x network,
        # is a 2-node tree's (scripts/derive_profiles.py inter_node_busbw)
        cap = net_gbps
    def reprice(r: Regime) -> Regime:
        ll_max = None if r.inter_node_max_gbps is None else r.inter_node_max_gbps * slower
        net_bw = None if r.net_busbw_gbps is None or not placed else r.net_busbw_gbps * ratio_k
        busbw = r.busbw_gbps if net_bw is None else min(r.busbw_gbps, net_bw)  # a faster fabric: the GPUs' side
        kept = 1.0 if curve.nodes is None else (  # a generic curve's ramp also prices one node: kept as it is
            _across_nodes_gbps(curve, busbw, ll_max, cap)
            / _across_nodes_gbps(curve, r.busbw_gbps, r.inter_node_max_gbps, own))
        add = _latency(curve, r, transport)
        return dataclasses.replace(
            r, alpha_per_node_us=r.alpha_per_node_us + add["alpha_per_node_us"],
            alpha_per_peer_across_nodes_us=r.alpha_per_peer_across_nodes_us + add["alpha_per_peer_across_nodes_us"],
            s_half_bytes=r.s_half_bytes * min(1.0, kept), inter_node_max_gbps=ll_max, busbw_gbps=busbw,
            net_busbw_gbps=r.net_busbw_gbps if net_bw is None else net_bw)

    priced = dataclasses.replace(curve, regimes=tuple(map(reprice, curve.regimes)), inter_node_busbw_gbps=cap,
                                 candidates=tuple(map(reprice, curve.candidates)))
    return rechoose(priced) if placed and curve.select == "breakpoints" else priced


def apply_fabric(profile: Profile, choice: FabricChoice | None) -> Profile:
    """The profile priced over `choice` (module doc); the profile itself when choice is None."""
    if choice is None:
        return profile
    ratio = fabric_ratio(profile, choice)
    prov = profile.provenance
    text = choice.describe(prov.nics_per_node, prov.nic_gbps)
    new_prov = dataclasses.replace(prov, nics_per_node=choice.nics(prov.nics_per_node),
                                   nic_gbps=choice.gbit(prov.nic_gbps) / 8.0,
                                   interconnect=f"{prov.interconnect}; across nodes: {text}")
    raw = {**profile.raw, "fabric": {"name": choice.name, "transport": choice.transport.name,
                                     "kind": choice.fabric.kind, "text": text, "ratio": ratio}}
    raw.pop("ensemble", None)
    return dataclasses.replace(profile, collectives=tuple(_curve(c, profile, choice) for c in profile.collectives),
                               provenance=new_prov, bootstrap=(), raw=raw)


def fabric_line(profile: Profile, nodes: int) -> str | None:
    """"2 nodes over tcpxo (fitted to ...; 8 NICs x 200 Gb/s)" plus how to calibrate it, for a multi-node scenario
    on a profile re-priced by `apply_fabric`; None at one node or without a chosen fabric."""
    fab = profile.raw.get("fabric")
    if not fab or int(nodes) <= 1:
        return None
    return (f"{int(nodes)} nodes over {fab['text']}; not measured on your cluster: calibrate it with a 2-node "
            f"nccl-tests log (python -m calibration.import_nccl_tests LOG --nodes 2 --out ag.csv, then "
            f"python -m calibration.fit ag.csv --base-profile {profile.name} --out mine.json)")


def profile_on_fabric(profile: Profile, fabric: str | None = None, nics_per_node=None, nic_gbit=None) -> Profile:
    """The profile priced over the fabric the user named (--fabric / --nics-per-node / --nic-gbps, validated by
    `costmodel.profiles.fabrics.fabric_choice`; the profile's own fabric - mnnvl for an NVL72 rack, else ib -
    where only overrides are given). Nothing asked: the profile itself. A choice that changes nothing (the
    profile's own fabric, no override) keeps every number - the bootstrap replicates included - and only names it."""
    choice = fabric_choice(fabric, nics_per_node, nic_gbit,
                           default=default_fabric_name(profile.provenance.gpus_per_node))
    if choice is None:
        return profile
    priced = apply_fabric(profile, choice)
    t = choice.transport
    if (math.isclose(fabric_ratio(profile, choice), 1.0) and t.inter_step_us == 0.0
            and t.step_overhead_us <= BASE_STEP_OVERHEAD_US):
        return dataclasses.replace(profile, provenance=priced.provenance,
                                   raw={**profile.raw, "fabric": priced.raw["fabric"]})
    return priced
