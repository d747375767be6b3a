"""Scale-out fabrics (data/presets/fabrics.csv): what joins a profile's nodes (NVLink / PCIe domains).

One row per fabric, each citing where its numbers come from (a published multi-node table the row was fitted to,
or the rule it was derived by). `FabricChoice` is a fabric with the user's `--nics-per-node` / `--nic-gbps`
overrides applied and validated; `costmodel.model.fabrics.apply_fabric` re-prices a profile's multi-node
collective curves with it. Read with the csv module (no pandas).

Per node the fabric carries   net_busbw_GBps = nics_per_node * nic_gbit / 8 * net_eff
and every inter-node step of a collective costs `net_extra_us` on top of NCCL's hwLat[NET] (the latency a network
plugin adds: tuning.cc's latencyInter, fitted per fabric from the tables' small-message floors).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache

from ..io.errors import InputError
from .paths import DATA_DIR

FABRICS_CSV = DATA_DIR / "presets" / "fabrics.csv"
MAX_NICS_PER_NODE = 256  # NICs per node a profile may claim (AWS p5: 32 EFA NICs; 256 leaves room, refuses 1e9)
MIN_NIC_GBIT = 1.0  # Gb/s per NIC: 1 GbE, the slowest Ethernet NIC a GPU node carries (below it a sweep prices
# nonsense: 1e-300 Gb/s gave 300-digit times, null crossovers and numpy overflow warnings)
MAX_NIC_GBIT = 3200.0  # Gb/s per NIC (today's fastest NICs are 800 Gb/s; 1.6T and 3.2T are announced)
MNNVL_MIN_GPUS_PER_NODE = 36  # a "node" this large is an NVLink rack (GB200 / GB300 NVL72: 72): default mnnvl


@dataclass(frozen=True)
class Fabric:
    """One row of fabrics.csv. nics_per_node / nic_gbit None: the profile's own NIC count / line rate (Gb/s).
    kind: "fitted" (to the tables named in `tables`) or "derived" (from the rule in `source`)."""

    name: str
    nics_per_node: int | None
    nic_gbit: float | None
    net_eff: float
    net_extra_us: float
    kind: str
    tables: str
    source: str


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

    def nics(self, profile_nics: int | None) -> int:
        return self.nics_per_node if self.nics_per_node is not None else (profile_nics or 1)

    def gbit(self, profile_nic_gbps: float | None) -> float:
        """Line rate per NIC, Gb/s (the profile's, given in GB/s, where the fabric names none)."""
        return self.nic_gbit if self.nic_gbit is not None else 8.0 * (profile_nic_gbps or 0.0)

    def net_busbw_gbps(self, profile_nics: int | None, profile_nic_gbps: float | None) -> float:
        """nics_per_node * nic_gbit / 8 * net_eff, GB/s per node (the profile's NICs / line rate where unset)."""
        return self.nics(profile_nics) * self.gbit(profile_nic_gbps) / 8.0 * self.fabric.net_eff

    def describe(self, profile_nics: int | None = None, profile_nic_gbps: float | None = None) -> str:
        """"tcpxo (fitted to h100x16-...; 8 NICs x 200 Gb/s ...)" - how the answer names the fabric."""
        tables = self.fabric.tables.split(" + ")
        named = self.fabric.tables if len(tables) <= 2 else f"{len(tables)} published tables ({tables[0]}, ...)"
        how = f"fitted to {named}" if self.fabric.kind == "fitted" else f"derived: {self.fabric.source.split(' (')[0]}"
        return (f"{self.name} ({how}; {self.nics(profile_nics)} NICs x {self.gbit(profile_nic_gbps):g} Gb/s per "
                f"node, efficiency {self.fabric.net_eff:g}, +{self.fabric.net_extra_us:g} us per inter-node step)")


def _float(row: dict[str, str], key: str) -> float:
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{FABRICS_CSV.name}: {key} of {row.get('name')!r} is not a number") from None


@lru_cache(maxsize=1)
def fabric_table() -> dict[str, Fabric]:
    """name -> Fabric, in file order."""
    out: dict[str, Fabric] = {}
    with open(FABRICS_CSV, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            nics, gbit = (row.get("nics_per_node") or "").strip(), (row.get("nic_gbit") or "").strip()
            out[row["name"]] = Fabric(row["name"], int(nics) if nics else None,
                                      _float(row, "nic_gbit") if gbit else None,
                                      _float(row, "net_eff"), _float(row, "net_extra_us"), row["kind"],
                                      row.get("tables", ""), row.get("source", ""))
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
