"""Collective cost model in NCCL's shape (per-protocol latency + bus bandwidth).

For a collective over p ranks spanning n nodes, with `bytes_per_rank` b:

    S          = total bytes of the collective   (all_gather, gather: p * b;
                                                   all_reduce, broadcast: b)
    bus_bytes  = S * f(p),  f = (p-1)/p for all_gather and gather,
                            2(p-1)/p for all_reduce, 1 for broadcast
    alpha      = alpha_base + alpha_per_peer * (p-1) + alpha_per_node * (n-1)
                 (+ alpha_per_peer_across_nodes * (p-1) when n > 1: a transport's per-ring-step overhead)
    busbw      = regime busbw; when n > 1 capped at inter_node_busbw (select "breakpoints"), or
                 scaled by inter_node_busbw / the fastest regime's busbw when that is < 1 (select "min":
                 the network limits every protocol alike, so the protocols keep their order), and at the
                 regime's own `inter_node_max_gbps` where it has one (NCCL's LL ceiling across nodes)
    T_regime   = launch + alpha + f(p) * (S + s_half) / busbw      (graph mode)

`s_half` (regime `s_half_bytes`, default 0) is the mid-size bandwidth ramp: the
achieved bus bandwidth busbw * S / (S + s_half) reaches half of busbw at S = s_half,
so the ramp costs f(p) * s_half / busbw on top of the wire time.

Which regime prices S (curve `select`):

* "min" - the fastest regime at this (S, p, n), as NCCL's tuner picks the
  (algorithm, protocol) with the least predicted time (src/graph/tuning.cc
  ncclTopoGetAlgoTime + enqueue.cc topoGetAlgoInfo); the switch points then move
  with p. The minimum of non-decreasing lines is non-decreasing.
* "breakpoints" (default; fitted and measured curves, whose breakpoints came from
  data) - the regime whose `max_bytes` bracket holds S, with the monotone envelope
  max(T_regime(S), T_j(max_bytes_j) for every earlier regime j): a larger message
  is never cheaper than a smaller one.

Eager mode adds the curve's `eager_overhead_us` (graph-mode curves) unless the
curve was fitted to eager measurements itself. p = 1 costs 0.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..profiles.types import CollectiveCurve, Profile
from . import dedup

US_PER_BYTE_AT_1_GBPS = 1e-3  # 1 byte / (1 GB/s) = 1e-9 s = 1e-3 us


def total_bytes(op: str, bytes_per_rank: np.ndarray, world_size: np.ndarray) -> np.ndarray:
    """S, the collective's total bytes (the `size` nccl-tests prints)."""
    b = np.asarray(bytes_per_rank, dtype=float)
    if op in ("all_gather", "gather"):
        return b * np.asarray(world_size, dtype=float)
    return b


def bus_factor(op: str, world_size: np.ndarray) -> np.ndarray:
    """f(p) that turns S into bytes over the busiest link (nccl-tests busbw factor)."""
    p = np.asarray(world_size, dtype=float)
    if op in ("all_gather", "gather"):
        return (p - 1) / p
    if op == "all_reduce":
        return 2 * (p - 1) / p
    if op == "broadcast":
        return np.ones_like(p)
    raise ValueError(f"unknown collective {op!r}")


def _regime_time_us(curve: CollectiveCurve, index: int, size_bytes: np.ndarray, p: np.ndarray,
                    nodes: np.ndarray, factor: np.ndarray) -> np.ndarray:
    r = curve.regimes[index]
    busbw = r.busbw_gbps
    if curve.inter_node_busbw_gbps is not None and np.any(nodes > 1):
        # np.maximum / np.minimum: a stacked ensemble's parameters are (members, 1) arrays (costmodel.model.members)
        if curve.select == "min":  # the network scales every protocol alike (LL stays slower than Simple)
            fastest = np.maximum.reduce([x.busbw_gbps for x in curve.regimes])
            capped = busbw * np.minimum(1.0, curve.inter_node_busbw_gbps / fastest)
        else:
            capped = np.minimum(busbw, curve.inter_node_busbw_gbps)
        if r.inter_node_max_gbps is not None:  # the protocol's own ceiling across nodes (NCCL LL: llMaxBw N2 / N4)
            capped = np.minimum(capped, r.inter_node_max_gbps)
        busbw = np.where(nodes > 1, capped, busbw)
    alpha = r.alpha_base_us + r.alpha_per_peer_us * (p - 1) + r.alpha_per_node_us * (nodes - 1)
    if r.alpha_per_peer_across_nodes_us:  # a transport's per-ring-step overhead (costmodel.model.fabrics)
        alpha = alpha + np.where(nodes > 1, r.alpha_per_peer_across_nodes_us * (p - 1), 0.0)
    wire = (size_bytes + r.s_half_bytes) if np.any(r.s_half_bytes) else size_bytes
    return curve.launch_us + alpha + wire * factor / busbw * US_PER_BYTE_AT_1_GBPS


def eager_mask(mode) -> np.ndarray:
    """Boolean "is eager" array from mode strings ("graph"/"eager") or an already boolean array."""
    arr = np.asarray(mode)
    return arr if arr.dtype == bool else arr.astype(str) == "eager"


def _regime_times(curve: CollectiveCurve, size, p, n, factor) -> np.ndarray:
    """(K, ...) time of every regime at every point (graph mode, no eager overhead)."""
    return np.stack([_regime_time_us(curve, i, size, p, n, factor) for i in range(len(curve.regimes))])


def _fastest_time_us(curve: CollectiveCurve, size, p, n, factor) -> np.ndarray:
    """min over regimes of _regime_time_us, without the (K, n) stack (the hot path of select "min")."""
    if curve.inter_node_busbw_gbps is not None and np.any(n > 1):
        return _regime_times(curve, size, p, n, factor).min(axis=0)
    wire = size * factor * US_PER_BYTE_AT_1_GBPS  # us at 1 GB/s
    per_gbps = factor * US_PER_BYTE_AT_1_GBPS
    peers = p - 1
    out = None
    for r in curve.regimes:
        t = wire / r.busbw_gbps
        t += (curve.launch_us + r.alpha_base_us)
        if np.any(r.alpha_per_peer_us):  # (a stacked ensemble's members with 0 add exactly 0)
            t += r.alpha_per_peer_us * peers
        if np.any(r.s_half_bytes):
            t += (r.s_half_bytes / r.busbw_gbps) * per_gbps
        out = t if out is None else np.minimum(out, t, out=out)
    return out


def chosen_regime(curve: CollectiveCurve, bytes_per_rank, world_size, nodes=1) -> np.ndarray:
    """Index of the regime that prices each point (the fastest for select "min", else the bracket)."""
    b, p, n = np.broadcast_arrays(np.asarray(bytes_per_rank, dtype=float), np.asarray(world_size, dtype=float),
                                  np.asarray(nodes, dtype=float))
    size = total_bytes(curve.op, b, p)
    if curve.select == "min":
        return np.argmin(_regime_times(curve, size, p, n, bus_factor(curve.op, p)), axis=0)
    edges = np.array([r.max_bytes for r in curve.regimes])
    return np.minimum(np.searchsorted(edges, size, side="left"), len(edges) - 1)


def _stacked(curve: CollectiveCurve) -> bool:
    """True when the curve's parameters are a stacked ensemble's (members, 1) arrays (costmodel.model.members)."""
    return bool(np.ndim(curve.launch_us) or np.ndim(curve.eager_overhead_us) or any(
        np.ndim(v) for r in curve.regimes for v in (r.alpha_base_us, r.alpha_per_peer_us, r.alpha_per_node_us,
                                                    r.busbw_gbps, r.s_half_bytes)))


def _breakpoint_times(curve: CollectiveCurve, which, size, p, n, factor) -> np.ndarray:
    """Select "breakpoints": the bracket's regime at each point, never below an earlier regime's end time.

    With a stacked ensemble's (members, 1) parameters (shared breakpoints; costmodel.model.members) every regime is
    priced at every point and each point keeps its bracket's value: the same numbers, (members, points).
    """
    stacked = _stacked(curve)
    out = 0.0 if stacked else np.zeros(size.shape, dtype=float)
    floor = 0.0 if stacked else np.zeros(size.shape, dtype=float)  # monotone envelope over earlier regimes' ends
    for i in range(len(curve.regimes)):
        mask = which == i
        if stacked:
            out = np.where(mask, np.maximum(_regime_time_us(curve, i, size, p, n, factor), floor), out)
        elif mask.any():
            out[mask] = np.maximum(_regime_time_us(curve, i, size[mask], p[mask], n[mask], factor[mask]),
                                   floor[mask])
        if i + 1 < len(curve.regimes):
            end = np.full(size.shape, curve.regimes[i].max_bytes)
            floor = np.maximum(floor, _regime_time_us(curve, i, end, p, n, factor))
    return out


def curve_time_us(curve: CollectiveCurve, bytes_per_rank, world_size, nodes=1, mode="graph") -> np.ndarray:
    """Time of one collective on one curve, vectorized over all arguments (see module doc)."""
    b, p, n, eager = (np.asarray(bytes_per_rank, dtype=float), np.asarray(world_size, dtype=float),
                      np.asarray(nodes, dtype=float), eager_mask(mode))
    shape = np.broadcast_shapes(b.shape, p.shape, n.shape, eager.shape)
    if curve.select == "min":  # scalars (one world size, one node count) stay scalars: the hot path
        out = _fastest_time_us(curve, total_bytes(curve.op, b, p), p, n, bus_factor(curve.op, p))
        shape = np.broadcast_shapes(shape, np.shape(out))  # a stacked ensemble's (members, 1) parameters widen it
        out = np.broadcast_to(out, shape)
    else:
        b, p, n, eager = np.broadcast_arrays(b, p, n, eager)
        size = total_bytes(curve.op, b, p)
        factor = bus_factor(curve.op, p)
        edges = np.array([r.max_bytes for r in curve.regimes])
        which = np.minimum(np.searchsorted(edges, size, side="left"), len(edges) - 1)  # S <= max_bytes
        out = _breakpoint_times(curve, which, size, p, n, factor)
        shape = np.broadcast_shapes(shape, np.shape(out))  # a stacked ensemble's (members, 1) parameters widen it
    if curve.mode is None:
        out = out + np.where(eager, curve.eager_overhead_us, 0.0)
    return np.where(p <= 1, 0.0, out) if np.any(p <= 1) else np.broadcast_to(out, shape).copy()


def _group_plan(world_size, nodes, mode, p: np.ndarray, n: np.ndarray, eager: np.ndarray, shape) -> list:
    """The points' groups by (world size, nodes, eager), ascending, world size 1 (cost 0) left out:
    [(ws, nn, eager, index)], index = the flat positions of the group's points, or None when one group holds
    every point (priced in place). No sort: one comparison per group present (a handful), each group's positions
    found with `np.flatnonzero`. Cached for the same argument objects inside a `dedup.memo()` block."""
    store = dedup.memo_store()
    if store is not None:
        key = ("collectives.plan", id(world_size), id(nodes), id(mode), shape)
        hit = store.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], (world_size, nodes, mode))):
            return hit[1]
    flat = [np.broadcast_to(x, shape).reshape(-1) if x.ndim else x for x in (p, n, eager)]
    code = np.where(flat[0] > 1, flat[0] * 1024 + flat[1], 0) * 2 + flat[2]  # (world size, nodes, eager) groups
    if code.ndim == 0:
        present = [int(code)]
    else:
        present = (np.unique(code) if code.max() >= 1 << 21 else np.flatnonzero(np.bincount(code))).tolist()
    if len(present) == 1:
        groups = [(g // 2048, g // 2 % 1024, bool(g % 2), None) for g in present if g >= 2]
    else:
        groups = [(g // 2048, g // 2 % 1024, bool(g % 2), np.flatnonzero(code == g)) for g in present if g >= 2]
    if store is not None:
        store[key] = ((world_size, nodes, mode), groups)  # keeps the arguments alive: their ids stay unique
    return groups


def collective_time_us(profile: Profile, op: str, bytes_per_rank, world_size, nodes=1, mode="graph") -> np.ndarray:
    """Predicted time (us) of `op` moving `bytes_per_rank` per rank over `world_size` ranks.

    Vectorized over bytes, world size, nodes (< 1024) and mode ("graph"/"eager" strings,
    or a boolean array True for eager); each (world size, nodes, mode) group uses the
    profile's most specific curve. World size 1 costs 0. Each group's points are priced together
    (`_group_plan`: their flat positions) and written back to those positions.
    """
    b = np.asarray(bytes_per_rank, dtype=float)
    p, n, eager = (np.asarray(world_size, dtype=np.int64), np.asarray(nodes, dtype=np.int64), eager_mask(mode))
    shape = np.broadcast_shapes(b.shape, p.shape, n.shape, eager.shape)
    if 0 in shape:
        return np.zeros(shape)
    groups = _group_plan(world_size, nodes, mode, p, n, eager, shape)
    if len(groups) == 1 and groups[0][3] is None:
        # one (world size, nodes, mode) group holds every point: priced in the scenario's own shape, so a stacked
        # ensemble's (members, 1) parameters meet their (members, points) rows (costmodel.model.members); same numbers
        ws, nn, is_eager, _ = groups[0]
        curve = profile.curve(op, ws, "eager" if is_eager else "graph", nn)
        t = curve_time_us(curve, b if b.ndim else b.reshape(1), ws, nn, is_eager)
        t = t.reshape(()) if t.shape == (1,) and not b.ndim else t
        return np.broadcast_to(t, np.broadcast_shapes(shape, t.shape)).copy()
    flat_b = np.broadcast_to(b, shape).reshape(-1)
    out = np.zeros(flat_b.shape, dtype=float)
    for ws, nn, is_eager, index in groups:
        curve = profile.curve(op, ws, "eager" if is_eager else "graph", nn)
        out[index] = curve_time_us(curve, flat_b[index], ws, nn, is_eager)
    return out.reshape(shape)


def regime_name(profile: Profile, op: str, bytes_per_rank: float, world_size: int, mode: str = "graph",
                nodes: int = 1) -> str:
    """Name of the regime (protocol) chosen for one message (for explanations)."""
    if world_size <= 1:
        return "none"
    curve = profile.curve(op, world_size, mode, nodes)
    return curve.regimes[int(chosen_regime(curve, bytes_per_rank, world_size, nodes))].name


def link_floor_us(profile: Profile, op: str, bytes_per_rank, world_size, nodes=1, mode="graph") -> np.ndarray:
    """Lower bound: bus bytes over the fastest regime's bus bandwidth (no latency)."""
    b, p, n = np.broadcast_arrays(np.asarray(bytes_per_rank, dtype=float), np.asarray(world_size, dtype=float),
                                  np.asarray(nodes, dtype=np.int64))
    out = np.zeros(b.shape)
    for ws, nn in {(float(a), int(c)) for a, c in zip(p[p > 1], n[p > 1])}:
        mask = (p == ws) & (n == nn)
        curve = profile.curve(op, int(ws), mode, nn)
        best = max(r.busbw_gbps for r in curve.regimes)
        out[mask] = total_bytes(op, b[mask], p[mask]) * bus_factor(op, p[mask]) / best * US_PER_BYTE_AT_1_GBPS
    return out


def without_regimes(profile: Profile, names: set[str] | frozenset[str]) -> Profile:
    """`profile` with the named regimes (e.g. {"NVLS"}) removed from every curve that has another regime.

    Prices runs that forced an algorithm (NCCL_ALGO=RING, NCCL_NVLS_ENABLE=0). A removed regime's range
    goes to the next kept one (select "breakpoints"); the last kept regime stays open. A per-p curve left with
    no regime (e.g. a 2-node all_reduce that NCCL runs as Tree at every size) is removed, so its points fall to
    the op's any-p curve, when the profile has one. A per-(p, n) curve's candidates lose the named families too.
    """
    generic = {c.op for c in profile.collectives if c.world_size is None}
    curves = []
    for c in profile.collectives:
        kept = [r for r in c.regimes if r.name not in names]
        if not kept and c.world_size is not None and c.op in generic:
            continue
        # a per-(p, n) curve's candidate families lose the forced-off ones too (what --fabric re-chooses from)
        if c.candidates:
            c = dataclasses.replace(c, candidates=tuple(r for r in c.candidates if r.name not in names))
        if not kept or len(kept) == len(c.regimes):
            curves.append(c)
            continue
        regimes = tuple(kept[:-1]) + (dataclasses.replace(kept[-1], max_bytes=math.inf),)
        curves.append(dataclasses.replace(c, regimes=regimes))
    return dataclasses.replace(profile, collectives=tuple(curves))
