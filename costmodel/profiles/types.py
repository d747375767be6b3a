"""Cluster profiles: the parameters of the collective and kernel models.

A profile is a JSON document (schema_version 1) validated on load; nothing in
it is ever executed. Layout::

    {
      "schema_version": 1,
      "name": "h200-sxm-nvlink",            # short id, used by --profile
      "title": "8x H200 SXM, NVLink 4",
      "provenance": {"kind": "derived|measured|mixed", "source": str, "gpu": str,
                     "interconnect": str, "gpus_per_node": int, "nics_per_node": int?,
                     "nic_gbps": float?, "nvlink_generation": int?, "software": {..},
                     "date": "YYYY-MM-DD", "citations": [str], "files": [str]},
      "collectives": [                        # one curve per (op, world_size?, mode?)
        {"op": "all_gather", "world_size": null|int, "mode": null|"graph"|"eager", "nodes": null|int,
         "launch_us": float, "eager_overhead_us": float,
         "inter_node_busbw_gbps": float|null, "provenance": "derived|measured",
         "select": "breakpoints"|"min"?,      # default breakpoints; "min": max_bytes only document
         "regimes": [{"name": "LL", "max_bytes": int|null, "alpha_base_us": float,
                      "alpha_per_peer_us": float, "alpha_per_node_us": float,
                      "busbw_gbps": float, "s_half_bytes": float?, "inter_node_max_gbps": float?,
                      "net_busbw_gbps": float?,
                      "ci90": {param: [lo, hi]}?}],
         "candidates": [{"name": "Tree-LL", "alpha_base_us": float, "alpha_per_node_us": float, ...,
                         "max_bytes": [int|null], "busbw_gbps": [..], "net_busbw_gbps": [..],
                         "s_half_bytes": [..]}]?,   # per-(p, n) curves: every family, bracketed (CollectiveCurve)
         "samples": {"bytes_per_rank": [..], "n": [..], "median_us": [..], "p10_us": [..], "p90_us": [..],
                     "raw_us": [[..], ..]}?}],      # fitted curves: the measurements per size (CurveSamples)
      "kernels": {
        "graph_kernel_us": float, "eager_launch_us": float,
        "ops": {op: {"launches": float, "fixed_us": float, "bw_gbps": float,
                     "provenance": "derived|measured"}},
        "tables": [{"op", "dtype", "mode", "world_size", "rows": [..], "cols": [..],
                    "median_us": [[..]], "source": str}]},
      "fit_report": [...]?, "bootstrap": [...]?,   # the ensemble's members, one document each, or compactly:
      "ensemble": {"method": "uniform-ranges-v1"|"columns-v1", "n": int, ...}?   # (costmodel.profiles.compact)
    }

A curve with `world_size` null applies to every TP size; one with `mode`
null is the graph-mode curve and eager adds `eager_overhead_us`.
`curve_from_dict` validates a single curve object (calibration.fit uses it).

Fitted profiles (calibration.fit): the base profile with the measured parts replaced. `provenance.base` /
`base_gpu` name the base; a curve kept from it carries `from_base` (its name) and `kernels.from_base` lists the
kernel parts kept ("model", "tables", "lm_head", "host", "ops.<op>"), so nothing kept from the base is shown as
measured (costmodel.model.sources).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..io.errors import InputError

SCHEMA_VERSION = 1


PROVENANCE_KINDS = ("derived", "measured", "mixed")
# the implementation a curve measures (costmodel.model.collective_impls)
CURVE_IMPLS = ("nccl", "oneshot", "multimem", "nccl-symm")
CURVE_SELECT = ("breakpoints", "min")  # how a curve picks its regime (costmodel.model.collectives)


@dataclass(frozen=True)
class Regime:
    """One protocol regime: time = alpha(p, nodes) + bus_bytes / busbw."""

    name: str
    max_bytes: float  # upper breakpoint on the collective's total bytes S (inf for the last)
    alpha_base_us: float
    alpha_per_peer_us: float
    alpha_per_node_us: float
    busbw_gbps: float
    ci90: dict[str, tuple[float, float]] = field(default_factory=dict)
    s_half_bytes: float = 0.0  # bandwidth ramp: achieved busbw = busbw * S / (S + s_half_bytes)
    inter_node_max_gbps: float | None = None  # this protocol's own busbw ceiling across nodes (NCCL LL: llMaxBw)
    # per peer, only when the collective spans nodes: a ring's per-step network overhead (NCCL tuning.cc: "Inter-node
    # rings still have to launch nsteps * net overhead"); set by costmodel.model.fabrics for a chosen transport
    alpha_per_peer_across_nodes_us: float = 0.0
    # the NICs' bound on busbw_gbps across nodes (busbw_gbps = min(this, the GPUs' side)): NICs x NIC x 0.9 put
    # through the regime's algorithm (scripts/derive_profiles.py multi_node_all_reduce_regimes); None: not recorded
    net_busbw_gbps: float | None = None


@dataclass(frozen=True)
class CurveSamples:
    """The measurements a fitted curve came from (calibration.fit), per distinct bytes_per_rank (increasing):
    n rows, median_us = median of the rows' median_us, p10_us / p90_us = medians of the rows' own p10 / p90
    (their iteration spread; median_us where a row has none), raw_us = the rows' median_us (at most
    schema.MAX_RAW_SAMPLES). On load: equal lengths, sizes strictly increasing, p10 <= median <= p90 and
    1 <= len(raw_us[i]) <= n[i]; the schema bounds every number (finite, positive)."""

    bytes_per_rank: tuple[float, ...]
    n: tuple[int, ...]
    median_us: tuple[float, ...]
    p10_us: tuple[float, ...]
    p90_us: tuple[float, ...]
    raw_us: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class CollectiveCurve:
    op: str
    world_size: int | None
    mode: str | None
    regimes: tuple[Regime, ...]
    launch_us: float = 0.0
    eager_overhead_us: float = 0.0
    inter_node_busbw_gbps: float | None = None
    provenance: str = "derived"
    nodes: int | None = None  # None: any node count (alpha_per_node and the inter-node cap apply)
    select: str = "breakpoints"  # "min": the fastest regime at (S, p) as NCCL picks; "breakpoints": max_bytes
    impl: str = "nccl"  # CURVE_IMPLS: "oneshot" / "multimem" curves are measured by calibration.collectives --impl
    samples: CurveSamples | None = field(default=None, compare=False, repr=False)  # fitted curves' measurements
    from_base: str = ""  # calibration.fit kept this curve from that base profile (module doc, "Fitted profiles")
    # a per-(p, n) curve's every algorithm-protocol family over all sizes, each bracketed by its own steps (Tree's
    # treeCorrectionFactor, NVLS-Tree's chunkSize), families in order: what `--fabric` chooses from again
    # (costmodel.model.fabrics.rechoose); (): the chosen regimes are all there is
    candidates: tuple[Regime, ...] = ()


@dataclass(frozen=True)
class KernelOp:
    """Roofline of one non-communication op: launches * per-kernel cost + fixed + bytes / bw."""

    launches: float
    fixed_us: float
    bw_gbps: float
    provenance: str = "derived"


@dataclass(frozen=True)
class KernelTable:
    op: str
    dtype: str
    mode: str
    world_size: int
    rows: tuple[float, ...]
    cols: tuple[float, ...]
    median_us: tuple[tuple[float, ...], ...]  # [len(rows)][len(cols)]
    source: str = ""
    k: int = 1  # candidates per row (schema.TOPK_KERNEL_OPS tables; 1 for every other op)


@dataclass(frozen=True)
class Provenance:
    kind: str
    source: str
    gpu: str
    interconnect: str = ""
    gpus_per_node: int | None = None  # GPUs in one NVLink / PCIe domain ("node"; 72 for a GB200 NVL72 rack)
    nics_per_node: int | None = None  # scale-out NICs per node (multi-node bus bandwidth = NICs x NIC bw x eff)
    nic_gbps: float | None = None  # one NIC's line rate, GB/s (400 Gb/s = 50 GB/s)
    nvlink_generation: int | None = None  # NVLink 3 / 4 / 5: the flag round of custom collectives (model.peer_sync)
    software: dict[str, Any] = field(default_factory=dict)
    date: str = ""
    citations: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    base: str = ""  # calibration.fit: the base profile whose unmeasured parts this profile keeps
    base_gpu: str = ""

    @property
    def measured(self) -> bool:
        return self.kind == "measured"


@dataclass(frozen=True)
class Profile:
    name: str
    title: str
    provenance: Provenance
    collectives: tuple[CollectiveCurve, ...]
    graph_kernel_us: float
    eager_launch_us: float
    kernel_ops: dict[str, KernelOp]
    kernel_tables: tuple[KernelTable, ...] = ()
    fit_report: tuple[dict[str, Any], ...] = ()
    bootstrap: Sequence[dict[str, Any]] = ()  # a tuple, or compact.LazyMembers (built on first use)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # kernels.model / .host / .lm_head (costmodel.model.gpu_kernels): the mechanistic GPU kernel model, host-side
    # costs of eager torch ops and c10d calls, and the draft lm_head GEMM model (None / {} when absent)
    kernel_model: Any = None
    kernel_host: dict[str, Any] = field(default_factory=dict, compare=False)
    lm_head: Any = None
    # measured one-shot / multimem curves (CollectiveCurve.impl != "nccl"): kept apart from `collectives`, so
    # nothing that prices NCCL sees them; costmodel.model.collective_impls prices its implementations with them
    impl_curves: tuple[CollectiveCurve, ...] = ()

    def curve(self, op: str, world_size: int, mode: str, nodes: int = 1) -> CollectiveCurve:
        """Most specific curve for (op, world_size, mode, nodes); InputError when none.

        The profile's own curves rank above the curves a fit kept from its base profile (`from_base`: a fitted
        generic any-p curve prices an unmeasured p before another fabric's per-p curve does); then specificity
        ranks a matching world size above a matching node count above a matching mode.
        """
        best, best_rank = None, -1
        for c in self.collectives:
            if (c.impl != "nccl" or c.op != op or c.world_size not in (None, world_size) or c.mode not in (None, mode)
                    or c.nodes not in (None, nodes)):
                continue
            rank = 8 * (not c.from_base) + 4 * (c.world_size is not None) + 2 * (c.nodes is not None) + (
                c.mode is not None)
            if rank > best_rank:
                best, best_rank = c, rank
        if best is None:
            raise InputError(f"profile {self.name}: no {op} curve for world size {world_size}, {nodes} node(s), "
                             f"mode {mode}")
        return best

    def impl_curve(self, impl: str, op: str, world_size: int, nodes: int = 1) -> CollectiveCurve | None:
        """The measured graph-mode `impl` curve for `op` covering (world_size, nodes) (most specific first), or None."""
        best, best_rank = None, -1
        for c in self.impl_curves:
            if (c.impl != impl or c.op != op or c.world_size not in (None, world_size) or c.nodes not in (None, nodes)
                    or c.mode not in (None, "graph")):
                continue
            rank = 2 * (c.world_size is not None) + (c.nodes is not None)
            if rank > best_rank:
                best, best_rank = c, rank
        return best

    def kernel_table(self, op: str, dtype: str | None, mode: str, world_size: int) -> KernelTable | None:
        """The measured table for (op, dtype, mode, world_size); dtype None matches any dtype."""
        for t in self.kernel_tables:
            if (t.op, t.mode, t.world_size) == (op, mode, world_size) and dtype in (None, t.dtype):
                return t
        return None
