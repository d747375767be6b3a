"""A profile re-priced for another scale-out fabric (`costmodel.profiles.fabrics`): the pricing rule.

The bundled profiles derive every multi-node curve from one fabric, NICs x NIC GB/s x NET_EFF 0.9 with NCCL's
hwLat[NET] per inter-node step (scripts/derive_profiles.py `inter_node_busbw`, NET_EFF; provenance
`nics_per_node`, `nic_gbps`). For a fabric choice F, with the profile's own per-node network bandwidth

    base_GBps  = profile NICs * profile NIC GB/s * 0.9
    ratio      = F.net_busbw_gbps / base_GBps          (F: nics * nic_gbit / 8 * net_eff)
    steps(op)  = 2 for all_reduce (ring 2(n-1) and, at 2 nodes, tree 2 log2 n inter-node steps), else 1

every curve that can span nodes (nodes None, or nodes > 1) and is not measured becomes

    inter_node_busbw_gbps *= ratio                         (the network cap; None: the fastest regime's busbw.
                                                            `costmodel.model.collectives` caps every regime at it
                                                            across nodes, or scales them by cap / the fastest
                                                            regime's busbw when that is below 1)
    inter_node_max_gbps   *= min(1, ratio)                 (NCCL's LL ceiling across nodes: a slower network
                                                            lowers it, a faster one leaves NCCL's constant)
    alpha_per_node_us     += steps(op) * F.net_extra_us    (the plugin's latency per inter-node step)
    s_half_bytes          *= busbw across nodes after / before, when nodes > 1 (the mid-size ramp is a fill of fixed
                                                            duration, s_half / busbw: it keeps its microseconds
                                                            when the network lowers the regime's busbw)

so T(S, p, n) = launch + alpha(p) + (n - 1) * alpha_per_node + f(p) S / busbw is unchanged at n = 1, and a
measured (fitted) multi-node curve wins over the rule: it is kept as measured. The profile's bootstrap
replicates priced the old fabric, so the re-priced profile has none (its intervals are the point profile's
with the discrepancy spread, `costmodel.evidence.ensemble`).
"""

from __future__ import annotations

import dataclasses
import math

from ..io.errors import InputError
from ..profiles.fabrics import FabricChoice, default_fabric_name, fabric_choice
from ..profiles.types import CollectiveCurve, Profile

BASE_NET_EFF = 0.9  # scripts/derive_profiles.py NET_EFF: the bundled profiles' multi-node rule


def inter_node_steps(op: str) -> int:
    """Inter-node steps per extra node: all_reduce 2 (ring 2(n-1); tree 2 log2 n = 2 at n = 2), else 1 (n-1)."""
    return 2 if op == "all_reduce" else 1


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


def _across_nodes_gbps(curve: CollectiveCurve, busbw: float, ll_max: float | None, cap: float | None) -> float:
    """A regime's busbw across nodes as `costmodel.model.collectives` applies the cap (select "min": scaled by
    cap / the fastest regime's busbw; else capped), then its own LL ceiling."""
    if cap is not None:
        fastest = max(r.busbw_gbps for r in curve.regimes)
        busbw = busbw * min(1.0, cap / fastest) if curve.select == "min" else min(busbw, cap)
    return busbw if ll_max is None else min(busbw, ll_max)


def _curve(curve: CollectiveCurve, ratio: float, extra_us: float) -> CollectiveCurve:
    if curve.provenance == "measured" or curve.nodes == 1:
        return curve
    slower = min(1.0, ratio)
    per_node = inter_node_steps(curve.op) * extra_us
    own = curve.inter_node_busbw_gbps  # None (a curve fitted to one fabric's table): its fastest regime's busbw
    cap = (max(r.busbw_gbps for r in curve.regimes) if own is None else own) * ratio
    regimes = []
    for r in curve.regimes:
        ll_max = None if r.inter_node_max_gbps is None else r.inter_node_max_gbps * slower
        kept = 1.0 if curve.nodes is None else (  # a generic curve's ramp also prices one node: kept as it is
            _across_nodes_gbps(curve, r.busbw_gbps, ll_max, cap)
            / _across_nodes_gbps(curve, r.busbw_gbps, r.inter_node_max_gbps, own))
        regimes.append(dataclasses.replace(r, alpha_per_node_us=r.alpha_per_node_us + per_node,
                                           s_half_bytes=r.s_half_bytes * min(1.0, kept), inter_node_max_gbps=ll_max))
    return dataclasses.replace(curve, regimes=tuple(regimes), inter_node_busbw_gbps=cap)


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
    raw = {**profile.raw, "fabric": {"name": choice.name, "kind": choice.fabric.kind, "text": text, "ratio": ratio}}
    raw.pop("ensemble", None)
    return dataclasses.replace(profile, collectives=tuple(_curve(c, ratio, choice.fabric.net_extra_us)
                                                          for c in profile.collectives),
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
    if math.isclose(fabric_ratio(profile, choice), 1.0) and choice.fabric.net_extra_us == 0.0:
        return dataclasses.replace(profile, provenance=priced.provenance,
                                   raw={**profile.raw, "fabric": priced.raw["fabric"]})
    return priced
