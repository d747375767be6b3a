"""Scale-out fabrics and their transports (data/presets/fabrics.csv, data/presets/transports.csv).

A *transport* is how NCCL moves bytes between nodes - its net plugin: IB verbs (`ib`, also over RoCE: `roce`),
libfabric on AWS EFA (`efa`, aws-ofi-nccl), GCP's gIB, GPUDirect-TCPX / TCPXO, plain sockets, NVLink racks joined
over IB (`mnnvl`). Its three parameters are shared by every cluster that uses it and fitted jointly to every
published multi-node table of that transport (scripts/fit_fabrics.py):

    net_eff            achieved fraction of the NICs' line rate   net_busbw_GBps = nics * nic_gbit / 8 * net_eff
    step_overhead_us   per ring step while a ring spans nodes     NCCL's netOverhead: tuning.cc "Inter-node rings still
                       (x3 for the Simple protocol)               have to launch nsteps * net overhead", intraLat =
                                                                  max(intraLat, netOverhead), Simple netOverhead *= 3
    inter_step_us      per inter-node step of the algorithm       NCCL's latencyInter (the net plugin's reported
                       (counted twice for Simple: the flush)      latency): interLat = hwLat[NET] + latencyInter, and
                                                                  "if (p == NCCL_PROTO_SIMPLE) interLat += latencyInter"

A *fabric* (what `--fabric NAME` names) is a transport with the NIC topology of a machine type: NICs per node and
line rate (None: the profile's own). Several fabrics share one transport (efa: p4d / p5 / p5en / p6 instance
types). `FabricChoice` is a fabric with the user's `--nics-per-node` / `--nic-gbps` overrides applied and
validated; `costmodel.model.fabrics.apply_fabric` re-prices a profile's multi-node collective curves with it.
Read with the csv module (no pandas).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache

from ..io.errors import InputError
from .paths import DATA_DIR

FABRICS_CSV = DATA_DIR / "presets" / "fabrics.csv"
TRANSPORTS_CSV = DATA_DIR / "presets" / "transports.csv"
MAX_NICS_PER_NODE = 256  # NICs per node a profile may claim (AWS p5: 32 EFA NICs; 256 leaves room, refuses 1e9)
MIN_NIC_GBIT = 1.0  # Gb/s per NIC: 1 GbE, the slowest Ethernet NIC a GPU node carries (below it a sweep prices
# nonsense: 1e-300 Gb/s gave 300-digit times, null crossovers and numpy overflow warnings)
MAX_NIC_GBIT = 3200.0  # Gb/s per NIC (today's fastest NICs are 800 Gb/s; 1.6T and 3.2T are announced)
MNNVL_MIN_GPUS_PER_NODE = 36  # a "node" this large is an NVLink rack (GB200 / GB300 NVL72: 72): default mnnvl


@dataclass(frozen=True)
class Transport:
    """One row of transports.csv: the transport's parameters (module doc). kind: "fitted" (to the tables named in
    `tables`) or "derived" (the bundled profiles' own rule, `source`)."""

    name: str
    net_eff: float
    step_overhead_us: float
    inter_step_us: float
    kind: str
    tables: str
    source: str


@dataclass(frozen=True)
class Fabric:
    """One row of fabrics.csv: a transport and a machine type's NICs. nics_per_node / nic_gbit None: the profile's
    own NIC count / line rate (Gb/s). `nic_source`: where the NIC count and line rate come from."""

    name: str
    transport: Transport
    nics_per_node: int | None
    nic_gbit: float | None
    nic_source: str

    @property
    def kind(self) -> str:
        return self.transport.kind


@dataclass(frozen=True)
class FabricChoice:
    """A fabric as the user asked for it: the row, and the NIC count / line rate after overrides (None: the
    profile's own NIC count). `explicit`: named by --fabric / an override (the answer then names it)."""

    fabric: Fabric
    nics_per_node: int | None
    nic_gbit: float | None
    explicit: bool = True

    @property
    def name(self) -> str:
        return self.fabric.name

    @property
    def transport(self) -> Transport:
        return self.fabric.transport

    def nics(self, profile_nics: int | None) -> int:
        return self.nics_per_node if self.nics_per_node is not None else (profile_nics or 1)

    def gbit(self, profile_nic_gbps: float | None) -> float:
        """Line rate per NIC, Gb/s (the profile's, given in GB/s, where the fabric names none)."""
        return self.nic_gbit if self.nic_gbit is not None else 8.0 * (profile_nic_gbps or 0.0)

    def net_busbw_gbps(self, profile_nics: int | None, profile_nic_gbps: float | None) -> float:
        """nics_per_node * nic_gbit / 8 * net_eff, GB/s per node (the profile's NICs / line rate where unset)."""
        return self.nics(profile_nics) * self.gbit(profile_nic_gbps) / 8.0 * self.transport.net_eff

    def describe(self, profile_nics: int | None = None, profile_nic_gbps: float | None = None) -> str:
        """"tcpxo (tcpxo transport fitted to h100x16-...; 8 NICs x 200 Gb/s ...)" - how the answer names it."""
        t = self.transport
        tables = t.tables.split(" + ")
        named = t.tables if len(tables) <= 2 else f"{len(tables)} published tables ({tables[0]}, ...)"
        how = f"fitted to {named}" if t.kind == "fitted" else f"derived: {t.source.split(' (')[0]}"
        via = "" if t.name == self.name else f"{t.name} transport "
        return (f"{self.name} ({via}{how}; {self.nics(profile_nics)} NICs x {self.gbit(profile_nic_gbps):g} Gb/s "
                f"per node, efficiency {t.net_eff:g}, +{t.step_overhead_us:g} us per ring step across nodes, "
                f"+{t.inter_step_us:g} us per inter-node step)")


def _float(row: dict[str, str], key: str, table) -> float:
    try:
        value = float(row[key])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{table.name}: {key} of {row.get('name')!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{table.name}: {key} of {row.get('name')!r} must be a finite number >= 0")
    return value


@lru_cache(maxsize=1)
def transport_table() -> dict[str, Transport]:
    """name -> Transport, in file order."""
    with open(TRANSPORTS_CSV, newline="", encoding="utf-8") as f:
        return {row["name"]: Transport(row["name"], _float(row, "net_eff", TRANSPORTS_CSV),
                                       _float(row, "step_overhead_us", TRANSPORTS_CSV),
                                       _float(row, "inter_step_us", TRANSPORTS_CSV), row["kind"],
                                       row.get("tables", ""), row.get("source", ""))
                for row in csv.DictReader(f)}


@lru_cache(maxsize=1)
def fabric_table() -> dict[str, Fabric]:
    """name -> Fabric, in file order (each joined with its transport)."""
    transports = transport_table()
    out: dict[str, Fabric] = {}
    with open(FABRICS_CSV, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            nics, gbit = (row.get("nics_per_node") or "").strip(), (row.get("nic_gbit") or "").strip()
            if row["transport"] not in transports:
                raise InputError(f"{FABRICS_CSV.name}: {row['name']!r} names unknown transport {row['transport']!r}")
            out[row["name"]] = Fabric(row["name"], transports[row["transport"]], int(nics) if nics else None,
                                      _float(row, "nic_gbit", FABRICS_CSV) if gbit else None,
                                      row.get("nic_source", ""))
    return out


def fabric_names() -> list[str]:
    return list(fabric_table())


def default_fabric_name(gpus_per_node: int | None) -> str:
    """A profile's own fabric: mnnvl for an NVLink rack (>= 36 GPUs per node: the NVL72 profiles), else ib."""
    return "mnnvl" if (gpus_per_node or 0) >= MNNVL_MIN_GPUS_PER_NODE else "ib"


def check_nics(value) -> int:
    """--nics-per-node: an integer in 1..MAX_NICS_PER_NODE."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InputError(f"--nics-per-node: not a number: {value!r}") from None
    if not math.isfinite(x) or x != int(x) or not 1 <= x <= MAX_NICS_PER_NODE:
        raise InputError(f"--nics-per-node: must be a whole number from 1 to {MAX_NICS_PER_NODE}, got {value!r}")
    return int(x)


def check_nic_gbit(value) -> float:
    """--nic-gbps: a finite line rate in [MIN_NIC_GBIT, MAX_NIC_GBIT] Gb/s."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InputError(f"--nic-gbps: not a number: {value!r}") from None
    if not math.isfinite(x) or not MIN_NIC_GBIT <= x <= MAX_NIC_GBIT:
        raise InputError(f"--nic-gbps: must be a finite line rate from {MIN_NIC_GBIT:g} (1 GbE) to {MAX_NIC_GBIT:g} "
                         f"Gb/s, got {value!r}")
    return x


def fabric_choice(name: str | None, nics_per_node=None, nic_gbit=None, *, default: str = "ib") -> FabricChoice | None:
    """The validated choice; None when nothing was asked (no name, no override: the profile prices as built)."""
    if name is None and nics_per_node is None and nic_gbit is None:
        return None
    key = default if name is None else str(name).strip().lower()
    table = fabric_table()
    if key not in table:
        raise InputError(f"--fabric: unknown fabric {name!r} (one of: {', '.join(table)})")
    row = table[key]
    nics = check_nics(nics_per_node) if nics_per_node is not None else row.nics_per_node
    gbit = check_nic_gbit(nic_gbit) if nic_gbit is not None else row.nic_gbit
    return FabricChoice(row, nics, gbit)
