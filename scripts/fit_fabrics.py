"""Fit each fabric's (net_eff, net_extra_us) to the published multi-node tables, and its leave-one-table-out error.

    .venv/bin/python scripts/fit_fabrics.py            # per-fabric fit on all its tables + leave-one-table-out

Tables: the multi-node nccl-tests / rccl-tests logs in data/reference/nccl-tests/multinode and
data/reference/published-collectives-2026/multinode (byte copies of ../shared/measurements/...; sources in their
SOURCES.md); the MI325X 2 / 4 / 8-node and GB200 20-rack tables as imported into published-collectives-2026.csv.
Each table is priced by its bundled profile (eager mode: nccl-tests launches eagerly) re-priced with
`costmodel.model.fabrics.apply_fabric`; the fit minimises the mean squared log error per table (tables weighted
equally) over net_eff in [0.02, 1] (no faster than line rate) and net_extra_us in [0, 1000] (a coarse grid, then
Nelder-Mead). Leave one table out: the fabric refitted on its other tables prices the left-out table; a fabric
with one table falls back to the ib rule's (0.9, 0 us) - the error then is the rule's, not a fit's. Errors:
median |pred / measured - 1| per table (out-of-place time column).
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel.model.collectives import collective_time_us  # noqa: E402
from costmodel.model.fabrics import apply_fabric  # noqa: E402
from costmodel.profiles.fabrics import Fabric, FabricChoice, fabric_table  # noqa: E402
from costmodel.profiles.store import load_profile  # noqa: E402

REF = Path(__file__).resolve().parents[1] / "data" / "reference"
NT, PC = REF / "nccl-tests" / "multinode", REF / "published-collectives-2026" / "multinode"
CSV = REF / "published-collectives-2026.csv"  # CSV / "<table id>": that table's rows of the imported CSV
# (fabric, log, profile, op, world size, nodes, nics per node or None (profile's), line rate Gb/s or None, why)
TABLES = [
    ("ib", NT / "h100x16_all_reduce_dstack-nebius-2node.log", "h100-sxm-nvlink", "all_reduce", 16, 2, None, None),
    ("ib", NT / "b200x16_all_reduce_dstack-lambda-2node.log", "b200-hgx-nvlink", "all_reduce", 16, 2, None, None),
    ("ib", PC / "l40sx4_all_reduce_schmaustech-openshift-2node-2gpu.log", "l40s-pcie", "all_reduce", 4, 2, None, None),
    ("gib", NT / "b200x16_all_reduce_dstack-gcp-a4-2node.log", "b200-hgx-nvlink", "all_reduce", 16, 2, 8, 400.0),
    ("gib", PC / "b200x16_all_gather_dranet-gke-a4-2node.log", "b200-hgx-nvlink", "all_gather", 16, 2, 8, 400.0),
    ("roce", PC / "mi355xx16_all_reduce_hisohara-aac14-pollara400-2node-rccl.log", "mi355x-xgmi", "all_reduce", 16, 2,
     None, 400.0),
    ("roce", PC / "a100x16_all_reduce_oci-b4-2node.log", "a100-sxm-nvlink", "all_reduce", 16, 2, None, None),
    ("tcpx", NT / "h100x16_all_gather_dstack-gcp-a3high-tcpx-2node.log", "h100-sxm-nvlink", "all_gather", 16, 2, 4,
     200.0),
    ("tcpxo", NT / "h100x16_all_gather_dstack-gcp-a3mega-tcpxo-2node.log", "h100-sxm-nvlink", "all_gather", 16, 2, 8,
     200.0),
    ("socket", PC / "l40sx2_all_reduce_schmaustech-openshift-2node-1gpu-socket.log", "l40s-pcie", "all_reduce", 2, 2,
     1, 100.0),
    ("mnnvl", PC / "gb200x144_all_reduce_coreweave-nvl72-2rack.log", "gb200-nvl72", "all_reduce", 144, 2, None, None),
    # tables whose logs mix node counts or sections: their rows as imported into published-collectives-2026.csv
    ("roce", CSV / "mi325xx16-all_reduce-2node", "mi325x-xgmi", "all_reduce", 16, 2, None, None),
    ("roce", CSV / "mi325xx32-all_reduce-4node", "mi325x-xgmi", "all_reduce", 32, 4, None, None),
    ("roce", CSV / "mi325xx64-all_reduce-8node", "mi325x-xgmi", "all_reduce", 64, 8, None, None),
    ("mnnvl", CSV / "gb200x1440-all_reduce-20rack", "gb200-nvl72", "all_reduce", 1440, 20, None, None),
]
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(float|half|bfloat16|int32|int8|double)\s+(\S+)\s+(-?\d+)\s+([\d.]+)\s")
PRIOR = (0.9, 0.0)


def read_log(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(size bytes, out-of-place time us) of every table row; a size printed twice keeps its first row.
    CSV / "<table id>": the rows of that table in published-collectives-2026.csv (all_reduce: size = bytes_per_rank)."""
    if path.parent == CSV:
        rows = [r for r in csv.DictReader(CSV.open(encoding="utf-8")) if r["table"] == path.name]
        pairs = sorted((float(r["bytes_per_rank"]), float(r["median_us"])) for r in rows)
        return np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])
    seen: dict[int, float] = {}
    for line in path.read_text(errors="replace").splitlines():
        m = ROW.match(line)
        if m:
            seen.setdefault(int(m.group(1)), float(m.group(6)))
    sizes = np.array(sorted(seen), dtype=float)
    return sizes, np.array([seen[int(s)] for s in sizes])


def choice(name: str, eff: float, extra_us: float, nics, gbit) -> FabricChoice:
    fab = Fabric(name, nics, gbit, float(eff), float(extra_us), "fitted", "", "")
    return FabricChoice(fab, nics, gbit)


def predict(table, eff: float, extra_us: float) -> np.ndarray:
    _fab, path, prof, op, p, n, nics, gbit = table
    sizes, _t = read_log(path)
    per_rank = sizes / p if op == "all_gather" else sizes
    priced = apply_fabric(load_profile(prof), choice("fit", eff, extra_us, nics, gbit))
    return np.asarray(collective_time_us(priced, op, per_rank, p, n, mode="eager"), dtype=float)


def log_loss(tables, x) -> float:
    eff, extra = float(np.exp(x[0])), float(max(0.0, x[1]))
    if not 0.02 <= eff <= 1.0 or x[1] > 1000:
        return 1e9
    return float(np.mean([np.mean(np.log(predict(t, eff, extra) / read_log(t[1])[1]) ** 2) for t in tables]))


def fit(tables) -> tuple[float, float]:
    if not tables:
        return PRIOR
    grid = [(np.log(e), x) for e in np.geomspace(0.05, 1.2, 12) for x in (0.0, 2.0, 5.0, 10.0, 20.0, 50.0, 120.0)]
    x0 = min(grid, key=lambda g: log_loss(tables, g))
    res = minimize(lambda x: log_loss(tables, x), np.array(x0), method="Nelder-Mead",
                   options={"xatol": 1e-3, "fatol": 1e-6, "maxiter": 300})
    return float(np.exp(res.x[0])), float(max(0.0, res.x[1]))


def median_err(table, eff: float, extra: float) -> float:
    return float(np.median(np.abs(predict(table, eff, extra) / read_log(table[1])[1] - 1)))


def main() -> None:
    print("| fabric | table | rows | ib rule (0.9, 0 us) | fit on all its tables | left out (refit on the others) |")
    print("|---|---|---|---|---|---|")
    fits = {}
    for name in dict.fromkeys(t[0] for t in TABLES):
        mine = [t for t in TABLES if t[0] == name]
        fits[name] = fit(mine) if name not in ("ib", "mnnvl") else PRIOR  # ib / mnnvl: the profiles' own rule
        for t in mine:
            others = [o for o in mine if o is not t]
            loo = fit(others) if name not in ("ib", "mnnvl") else PRIOR
            tag = "" if others or name in ("ib", "mnnvl") else " (no other table: the ib rule)"
            print(f"| {name} | {t[1].name} | {len(read_log(t[1])[0])} | {median_err(t, *PRIOR):.1%} | "
                  f"{median_err(t, *fits[name]):.1%} | {median_err(t, *loo):.1%}{tag} |")
    print()
    for name, (eff, extra) in fits.items():
        print(f"{name}: net_eff {eff:.3f}, net_extra_us {extra:.1f}")
    unused = set(fabric_table()) - set(fits)
    if unused:
        print(f"no table: {', '.join(sorted(unused))}")


if __name__ == "__main__":
    main()
