"""Collective implementations engines use instead of NCCL's ring/tree for small messages (derived, not measured).

Four implementations of the all-gather / all-reduce a strategy issues (`IMPLS`):

nccl      the profile's NCCL curve (`costmodel.model.collectives.collective_time_us`).
oneshot   every rank reads every peer's buffer once from symmetric memory / IPC buffers and combines locally
          (vLLM `CustomAllreduce`, SGLang custom all-reduce, torch `_symmetric_memory` one_shot_all_reduce):
              T = F(p) + read_bytes / peer_read_bw,  F(p) = peer_sync.floor_us(profile, "oneshot", p)
                (launch + 3 flag rounds of the profile's NVLink generation + per-peer work; `peer_sync`)
              read_bytes = (p - 1) * b   (p - 1 simultaneous peer reads of b bytes; all-reduce: b = the buffer)
          All-gather: the same floor, its own read bandwidth. Available on one NVLink node only; a symmetric
          buffer above `max_bytes` (p * b for the
          all-gather, b for the all-reduce) falls back to NCCL, as the engines do (vLLM `should_custom_ar`:
          inp_size < max_size = 8 MiB, vllm/distributed/device_communicators/custom_all_reduce.py).
multimem  NVLS multicast (multimem.ld_reduce / multimem.st through the NVSwitch): T = F_mm + bus_bytes /
          busbw_mm, bus_bytes = S * f(p) (NCCL's busbw convention); busbw_mm = the profile's NVLS regime
          bandwidth at p for the all-reduce, its fastest all-gather regime for the all-gather. Available only where
          the profile has an NVLS regime at (p, 1 node) - NVSwitch with SHARP (H100 / H200 / B200 HGX, NVL72);
          not A100, not PCIe, not across nodes - else NCCL.
nccl-symm NCCL's symmetric-memory kernels (NCCL >= 2.27, buffers registered with ncclCommWindowRegister; nccl-tests
          `-R 2`; torch `_symmetric_memory.set_backend("NCCL")`): T = F_symm + bus_bytes / busbw_symm, F_symm = launch
          + 1 flag round (NCCL #1940's 8-byte figure per NVLink generation), busbw_symm = the profile's NVLS busbw
          (all-reduce) or Megatron-LM #5596's symmetric all-gather slope x the fabric scale (all-gather). Available
          where multimem is (one NVSwitch domain with NVLS; NCCL's symmetric kernels here are its multimem ones).

Every implementation is floored by the profile's link bandwidth: T >= bus_bytes / max busbw of the profile's
curves (`link_floor_us`), so no implementation beats the wire. p = 1 costs 0.

Measured curves: where the profile carries a curve for (impl, op) covering (p, nodes) - `Profile.impl_curve`, fitted
by `calibration.fit DIR` from DIR/<impl>/collectives.csv of `calibration.collectives --impl` - that curve prices the
implementation (`collectives.curve_time_us`, graph mode) instead of the derived formula: T = curve(b, p),
still floored by the link and still NCCL above the one-shot size limit; a measured curve shows the implementation
runs at that p (one node), so it needs no NVLink interconnect text / NVLS regime in the profile. `provenance()`
says which prices it ("measured" / "derived").

Latencies are `peer_sync`'s floors (small-message figures only, per NVLink generation: F_mm = launch + 1 flag
round, no per-peer term). Bandwidths (`ONESHOT`) are derived by `derive_oneshot()` from the published figures in
shared/measurements/published-nccl-tests/SOURCES.md section 3 (cited per field), on H100/H200; other NVLink
profiles scale them by their fastest all-gather busbw / 370.8 GB/s (Hopper NVLink, NCCL's model).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..io.errors import InputError
from ..profiles.types import Profile
from .collectives import US_PER_BYTE_AT_1_GBPS, bus_factor, collective_time_us, curve_time_us, total_bytes
from .peer_sync import HOPPER, ROUNDS, SYNC, describe, floor_us
from .scenario import COLLECTIVE_IMPLS

IMPLS: tuple[str, ...] = COLLECTIVE_IMPLS  # ("nccl", "oneshot", "multimem", "nccl-symm")
IMPL_OPS = ("all_gather", "all_reduce")  # gather / broadcast have no one-shot or multimem variant here
HOPPER_NVLINK_BUSBW_GBPS = 370.8  # NCCL ring model: 20.6 GB/s x 18 links (profile citations)

# SGLang PR #2904 (H100, no CUDA graph): custom all-reduce latency, ms, at TP 2 / 4 / 8, bytes <= 256 KiB
# (above that the one-shot kernel hands over to two-shot, so the larger points are not used).
SGLANG_2904_CUSTOM_AR_MS: dict[int, tuple[float, float, float]] = {
    512: (0.0037, 0.0048, 0.0059), 4096: (0.0039, 0.0037, 0.0057), 32768: (0.0045, 0.0048, 0.0078),
    262144: (0.0079, 0.0139, 0.0167)}
# NVIDIA/Megatron-LM PR #5596 (8x H100): NCCL symmetric-memory all-gather kernel time, us, by total bytes
MEGATRON_5596_SYMM_AG_US: dict[int, float] = {2 * 2**20: 10.9, 8 * 2**20: 27.4}
# ... and its 32 MiB / 128 MiB points (95.3 / 363.2 us; classic kernels 118.9 / 385.3): the symmetric kernels' slope
MEGATRON_5596_SYMM_AG_LARGE_US: dict[int, float] = {32 * 2**20: 95.3, 128 * 2**20: 363.2}
VLLM_CUSTOM_AR_MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class OneShotParams:
    """One-shot bandwidths (derived); the latency is peer_sync.floor_us(profile, "oneshot", p)."""

    peer_read_gbps: float          # all-reduce: aggregate read bandwidth of the p - 1 peer reads
    all_gather_read_gbps: float    # all-gather: aggregate read bandwidth of the p - 1 peer reads
    max_bytes: float = VLLM_CUSTOM_AR_MAX_BYTES
    provenance: str = "derived"
    source: str = ("latency: peer_sync (" + SYNC.source + "); all-reduce read bandwidth: SGLang PR #2904 custom AR "
                   "32 / 256 KiB at TP 2/4/8 above that floor; all-gather read bandwidth: the slope between "
                   "Megatron-LM PR #5596 symmetric all-gather 2 MiB 10.9 us and 8 MiB 27.4 us (8x H100); limit: vLLM "
                   "CustomAllreduce max_size 8 MiB")


@dataclass(frozen=True)
class MultimemParams:
    """NVLS multicast (derived): latency peer_sync.floor_us(profile, "multimem", p); bandwidth the profile's NVLS."""

    provenance: str = "derived"
    source: str = ("latency: peer_sync (NVIDIA/nccl issue #1940: 8-byte all_reduce ~2.3 us on 8x H200, ~3 us on "
                   "8x B200, NCCL 2.27 symmetric memory); busbw: the profile's NVLS regime (NVIDIA/nccl issue #1455: "
                   "365-480 GB/s by GPU count)")


def derive_oneshot() -> OneShotParams:
    """Read bandwidths above the Hopper floor F(p) = peer_sync.floor_us("oneshot", p) (no intercept is fitted):

    all-reduce: least squares of T - F(p) = (p - 1) S / bw over SGLang #2904's 32 KiB and 256 KiB points;
    all-gather: each rank reads (p - 1)/p of the total S, bw = (p-1)/p (S2 - S1) / (T2 - T1) at p = 8 between
    Megatron #5596's 2 and 8 MiB points (a slope: their intercept is not used).
    """
    x, y = [], []
    for size in (32768, 262144):
        for p, t_ms in zip((2, 4, 8), SGLANG_2904_CUSTOM_AR_MS[size]):
            floor = SYNC.launch_us + ROUNDS["oneshot"] * SYNC.sync_us[HOPPER] + SYNC.per_peer_us * (p - 1)
            x.append((p - 1.0) * size * US_PER_BYTE_AT_1_GBPS)
            y.append(t_ms * 1e3 - floor)
    x, y = np.asarray(x), np.asarray(y)
    inv_bw = float(x @ y / (x @ x))
    (s1, t1), (s2, t2) = sorted(MEGATRON_5596_SYMM_AG_US.items())
    ag_bw = 7.0 / 8.0 * (s2 - s1) * US_PER_BYTE_AT_1_GBPS / (t2 - t1)
    return OneShotParams(round(1.0 / inv_bw, 2), round(float(ag_bw), 2))


@dataclass(frozen=True)
class NcclSymmParams:
    """NCCL symmetric kernels (derived): latency peer_sync.floor_us(profile, "nccl-symm", p) (= NCCL #1940's 8-byte
    figure of the generation); all-gather busbw the Megatron #5596 slope (x the profile's fabric scale); all-reduce
    busbw the profile's NVLS regime (the symmetric all-reduce kernels use multimem on NVSwitch)."""

    all_gather_busbw_gbps: float
    provenance: str = "derived"
    source: str = ("latency: NVIDIA/nccl issue #1940 (8-byte all_reduce with NCCL 2.27 symmetric memory: ~2.3 us on "
                   "8x H200, ~3 us on 8x B200; peer_sync); all-gather busbw: the slope between NVIDIA/Megatron-LM PR "
                   "#5596's symmetric all-gather at 32 MiB (95.3 us) and 128 MiB (363.2 us), 8x H100; all-reduce "
                   "busbw: the profile's NVLS regime")


def derive_nccl_symm() -> NcclSymmParams:
    """busbw = (p-1)/p (S2 - S1) / (T2 - T1) at p = 8 between Megatron #5596's 32 and 128 MiB points (a slope; the
    intercept is the small-message floor, not this line's)."""
    (s1, t1), (s2, t2) = sorted(MEGATRON_5596_SYMM_AG_LARGE_US.items())
    return NcclSymmParams(round(7.0 / 8.0 * (s2 - s1) * US_PER_BYTE_AT_1_GBPS / (t2 - t1), 2))


ONESHOT = derive_oneshot()
MULTIMEM = MultimemParams()
NCCL_SYMM = derive_nccl_symm()


def check_impl(name: str) -> str:
    if name not in IMPLS:
        raise InputError(f"collective: unknown {name!r} (known: {', '.join(IMPLS)})")
    return name


def _largest(values: list) -> Any:
    """max(values) as a float; for a stacked ensemble (costmodel.model.members), whose differing bandwidths are
    (M, 1) arrays, the element-wise maximum (row m: member m's max - a maximum rounds nothing)."""
    if all(np.ndim(v) == 0 for v in values):
        return float(max(float(v) for v in values))
    return functools.reduce(np.maximum, (np.asarray(v, dtype=float) for v in values))


def _max_busbw(profile: Profile, op: str | None = None) -> Any:
    bws = [r.busbw_gbps for c in profile.collectives if op is None or c.op == op for r in c.regimes]
    return _largest(bws) if bws else float("inf")


def cpu_profile(profile: Profile) -> bool:
    """A profile measured on CPUs (gloo): no NVLink peer loads, no NVSwitch multicast - only NCCL's curve (the
    profile's own) prices its collectives, whatever a base profile it was fitted onto offers."""
    return (profile.provenance.gpu or "").strip().lower().startswith("cpu")


def nvlink_node(profile: Profile) -> bool:
    """One-shot needs peer-to-peer loads between every GPU pair: an NVLink fabric (profile interconnect)."""
    fabric = (profile.provenance.interconnect or "").lower()
    return "nvlink" in fabric and "no nvlink" not in fabric  # "PCIe ... no NVLink" profiles: no P2P fabric


def nvls_busbw_gbps(profile: Profile, world_size: int) -> Any:
    """The NVLS regime's busbw at (p, 1 node), or None where the profile has no NVLS (no NVSwitch + SHARP);
    an (M, 1) array for a stacked ensemble whose members' NVLS bandwidths differ (`_largest`)."""
    for c in profile.collectives:
        if c.op == "all_reduce" and c.world_size == world_size and c.nodes in (None, 1):
            bws = [r.busbw_gbps for r in c.regimes if r.name.upper().startswith("NVLS")]
            if bws:  # the fastest: a small-message NVLS regime (large p) carries the ring LL's bandwidth
                return _largest(bws)
    return None


def link_floor_us(profile: Profile, op: str, bytes_per_rank, world_size) -> np.ndarray:
    """bus_bytes / the profile's fastest busbw: no implementation moves the bytes faster than the wire."""
    p = np.asarray(world_size, dtype=float)
    bus = total_bytes(op, bytes_per_rank, p) * bus_factor(op, p)
    return np.where(p > 1, bus / _max_busbw(profile) * US_PER_BYTE_AT_1_GBPS, 0.0)


def available(profile: Profile, impl: str, op: str, bytes_per_rank, world_size, nodes) -> np.ndarray:
    """Where `impl` itself runs (True) rather than falling back to NCCL: fabric, node count, size limit."""
    b, p, n = np.broadcast_arrays(np.asarray(bytes_per_rank, dtype=float), np.asarray(world_size),
                                  np.asarray(nodes))
    if impl == "nccl":
        return np.ones(b.shape, dtype=bool)
    if op not in IMPL_OPS or cpu_profile(profile):
        return np.zeros(b.shape, dtype=bool)
    ok = (n == 1) & (p > 1)
    measured = measured_mask(profile, impl, op, p, n)  # a measured curve shows the implementation runs there
    if impl == "oneshot":
        buffer = b * p if op == "all_gather" else b
        return ok & (nvlink_node(profile) | measured) & (buffer <= ONESHOT.max_bytes)
    has = measured.copy()  # multimem, nccl-symm: where the profile has NVLS at (p, 1 node)
    for ws in np.unique(p[ok]) if ok.any() else ():
        has |= (p == ws) & (nvls_busbw_gbps(profile, int(ws)) is not None)
    return ok & has


def measured_mask(profile: Profile, impl: str, op: str, world_size, nodes) -> np.ndarray:
    """True where the profile has a measured `impl` curve for `op` at (p, nodes) (`Profile.impl_curve`)."""
    p, n = np.broadcast_arrays(np.asarray(world_size, dtype=np.int64), np.asarray(nodes, dtype=np.int64))
    out = np.zeros(p.shape, dtype=bool)
    if impl == "nccl" or not profile.impl_curves:
        return out
    for ws, nn in {(int(a), int(c)) for a, c in zip(p.ravel(), n.ravel())}:
        if profile.impl_curve(impl, op, ws, nn) is not None:
            out |= (p == ws) & (n == nn)
    return out


def provenance(profile: Profile, impl: str, op: str, world_size: int, nodes: int = 1) -> str:
    """"measured" where a measured `impl` curve prices (op, p, nodes), "derived" for the published-figure
    parameters, "nccl" for NCCL itself (the profile's curves carry their own provenance)."""
    if impl == "nccl":
        return "nccl"
    return "measured" if bool(np.all(measured_mask(profile, impl, op, world_size, nodes))) else "derived"


def provenance_text(profile: Profile, impls, world_size: int, nodes: int = 1) -> str:
    """"derived from published figures" or, where the profile has measured curves for some of `impls`' ops at
    (world_size, nodes), which of them are measured (for captions)."""
    measured = [f"{impl} {op}" for impl in impls if impl != "nccl" for op in IMPL_OPS
                if provenance(profile, impl, op, world_size, nodes) == "measured"]
    if not measured:
        return "derived from published figures (SOURCES.md section 3), not measured"
    return f"measured curves for {', '.join(measured)}; the rest derived from published figures (SOURCES.md section 3)"


def impl_time_us(profile: Profile, impl: str, op: str, bytes_per_rank, world_size, nodes=1) -> np.ndarray:
    """Time of `op` under `impl` where it is available (`available`), else NaN; floored by `link_floor_us`."""
    check_impl(impl)
    b, p, n = np.broadcast_arrays(np.asarray(bytes_per_rank, dtype=float), np.asarray(world_size, dtype=np.int64),
                                  np.asarray(nodes, dtype=np.int64))
    if impl == "nccl":
        return collective_time_us(profile, op, b, p, n, "graph")
    ok = available(profile, impl, op, b, p, n)
    scale = _max_busbw(profile, "all_gather") / HOPPER_NVLINK_BUSBW_GBPS
    pf = p.astype(float)
    if impl == "oneshot":
        bw = ONESHOT.peer_read_gbps if op == "all_reduce" else ONESHOT.all_gather_read_gbps
        t = floor_us(profile, "oneshot", pf) + (pf - 1) * b / (bw * scale) * US_PER_BYTE_AT_1_GBPS
    else:
        bw = np.full(b.shape, np.nan)
        for ws in np.unique(p[ok]) if ok.any() else ():
            nvls = nvls_busbw_gbps(profile, int(ws))
            ag = _max_busbw(profile, "all_gather") if impl == "multimem" else NCCL_SYMM.all_gather_busbw_gbps * scale
            value = nvls if op == "all_reduce" else ag
            if np.ndim(value):  # a stacked ensemble's (M, 1) bandwidths: (M, n) times
                bw = np.where(p == ws, value, bw)
            else:
                bw[p == ws] = value
        t = floor_us(profile, impl, pf) + total_bytes(op, b, pf) * bus_factor(op, pf) / bw * US_PER_BYTE_AT_1_GBPS
    meas = measured_mask(profile, impl, op, p, n)
    if meas.any():  # a measured curve replaces the derived formula at its (p, nodes)
        t = np.array(t, dtype=float)
        for ws, nn in {(int(a), int(c)) for a, c in zip(p[meas], n[meas])}:
            at = meas & (p == ws) & (n == nn)
            t[at] = curve_time_us(profile.impl_curve(impl, op, ws, nn), b[at], ws, nn, "graph")
    t = np.maximum(t, link_floor_us(profile, op, b, p))
    return np.where(ok, np.where(p > 1, t, 0.0), np.nan)


def formula(impl: str, op: str, profile: Profile, world_size: int | None = None, nodes: int = 1) -> str:
    """One line naming the implementation's formula and parameters (for explanations): the measured curve where
    the profile has one at (world_size, nodes), else the derived formula."""
    curve = profile.impl_curve(impl, op, world_size, nodes) if world_size is not None else None
    if curve is not None:
        regimes = "; ".join(f"{r.name or 'regime'}: alpha {r.alpha_base_us:g} us, busbw {r.busbw_gbps:g} GB/s"
                            for r in curve.regimes)
        return (f"{impl} {op} (measured): the profile's fitted {impl} curve at p {world_size} ({regimes}; "
                f"calibration.collectives --impl {impl}), floored at the link")
    if impl == "oneshot":
        o = ONESHOT
        bw = o.peer_read_gbps if op == "all_reduce" else o.all_gather_read_gbps
        head = f"{describe(profile, 'oneshot')} + (p-1) b / {bw:g} GB/s"
        return (f"oneshot {op} (derived): {head} (bandwidth x profile all-gather busbw / "
                f"{HOPPER_NVLINK_BUSBW_GBPS:g}), floored at the link; {o.source}")
    if impl == "nccl-symm":
        bw = ("the profile's NVLS busbw at p" if op == "all_reduce" else
              f"{NCCL_SYMM.all_gather_busbw_gbps:g} GB/s x profile all-gather busbw / {HOPPER_NVLINK_BUSBW_GBPS:g}")
        return (f"nccl-symm {op} (derived): {describe(profile, 'nccl-symm')} + S f(p) / {bw}, floored at the link; "
                f"{NCCL_SYMM.source}")
    bw = "the profile's NVLS busbw at p" if op == "all_reduce" else "the profile's fastest all-gather busbw"
    return (f"multimem {op} (derived): {describe(profile, 'multimem')} + S f(p) / {bw}, floored at the link; "
            f"{MULTIMEM.source}")


def collective_us(profile: Profile, impl, op: str, bytes_per_rank, world_size, nodes=1,
                  nccl_us: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(time, native): `impl` (a name or an array of names) where available, NCCL elsewhere (the fallback).

    native is True where the chosen implementation itself ran. `nccl_us` reuses an already priced NCCL time.
    """
    impl = np.asarray(impl).astype(str)
    base = collective_time_us(profile, op, bytes_per_rank, world_size, nodes, "graph") if nccl_us is None \
        else np.asarray(nccl_us, dtype=float)
    times = {name: impl_time_us(profile, name, op, bytes_per_rank, world_size, nodes)
             for name in IMPLS[1:] if np.any(impl == name)}
    # a stacked ensemble (costmodel.model.members): (M, n) times of (1, n) points
    shape = np.broadcast_shapes(np.shape(base), impl.shape, *(np.shape(t) for t in times.values()))
    out = np.broadcast_to(base, shape).astype(float)
    native = np.broadcast_to(impl == "nccl", shape).copy()
    for name, t in times.items():
        t = np.broadcast_to(t, shape)
        use = np.broadcast_to(impl == name, shape) & ~np.isnan(t)
        out = np.where(use, t, out)
        native |= use
    return out, native
