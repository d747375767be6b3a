"""Fit each transport's (net_eff, step_overhead_us, inter_step_us) jointly to every published multi-node table of
that transport, and report leave-one-table-out and leave-one-cluster-out error.

    .venv/bin/python scripts/fit_fabrics.py            # fit + held-out tables (markdown, docs/accuracy.md)
    .venv/bin/python scripts/fit_fabrics.py --write    # also write the fitted rows of data/presets/transports.csv

Tables: the multi-node nccl-tests / rccl-tests logs in data/reference/*/multinode (byte copies of
../shared/measurements/*/multinode and published tables found since; sources in each folder's SOURCES.md), read
by the project's one nccl-tests reader (`calibration.logs.import_nccl_tests.parse_nccl_tests_text`, with the
op / ranks / nodes the table's source states where the log leaves them out); the MI325X 2 / 4 / 8-node and GB200
20-rack tables as imported into published-collectives-2026.csv (their logs mix node counts). Each table is priced
by its bundled profile (eager: nccl-tests launches eagerly) re-priced over the transport with the table's own NIC
count and line rate (`costmodel.model.fabrics.apply_fabric`, the rule users get from `--fabric`).

The fit minimises the mean over tables of each table's mean squared log error (tables weighted equally), over
net_eff in [0.02, 1] (no faster than line rate), step_overhead_us in [1, 200] (NCCL's own 1 us netOverhead is the
floor) and inter_step_us in [0, 1000]: a coarse grid, then Nelder-Mead. Held out: a table (leave-one-table-out)
or every table of its cluster (same site and machines: leave-one-cluster-out) is priced by the transport refitted
on the rest; where nothing of the transport is left, by the ib rule (the default network) - the error then is
that rule's, not a fit's. Errors: median |pred / measured - 1| per table, on rows >= 64 KiB per rank and
apart below it (the small-message floor).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.logs.import_nccl_tests import Hints, parse_nccl_tests_text  # noqa: E402
from costmodel.evidence.validate import FORCED_DROPS  # noqa: E402
from costmodel.io.outputs import write_text  # noqa: E402
from costmodel.model.collectives import collective_time_us, without_regimes  # noqa: E402
from costmodel.model.fabrics import apply_fabric  # noqa: E402
from costmodel.profiles.fabrics import TRANSPORTS_CSV, Fabric, FabricChoice, Transport, transport_table  # noqa: E402
from costmodel.profiles.store import load_profile  # noqa: E402

REF = Path(__file__).resolve().parents[1] / "data" / "reference"
NT, PC = REF / "nccl-tests" / "multinode", REF / "published-collectives-2026" / "multinode"
PM = REF / "published-multinode-2026b"
CSV = REF / "published-collectives-2026.csv"  # CSV / "<table id>": that table's rows of the imported CSV
SMALL_BYTES_PER_RANK = 64 * 1024  # errors are reported apart below this (the small-message floor)
BOUNDS = ((0.02, 1.0), (1.0, 200.0), (0.0, 1000.0))  # net_eff, step_overhead_us, inter_step_us
PRIOR = "ib"  # a transport with nothing left to fit on is priced by this transport's row (the bundled rule)
# not fitted, the bundled profiles' own rule: ib (every HGX profile's multi-node curves are derived with it, so
# `--fabric ib` and no --fabric price alike) and mnnvl (the NVL72 racks' derivation; its two tables start at 512 MiB
# on 144 / 1440 GPUs, where a fit of three parameters to bandwidth-bound rows alone is degenerate: net_eff 0.09
# with 28 us per step). Their tables are held out from every fit: the rule's errors on them are held-out errors.
RULE_ONLY = ("ib", "mnnvl")


@dataclass(frozen=True)
class Table:
    """One published multi-node table: its transport, where its rows are, the bundled profile that prices it,
    what it ran (op, ranks, nodes), the NICs per node and line rate (Gb/s; None: the profile's), its cluster and
    the algorithm the run forced ("default": NCCL chose; "ring": NCCL_ALGO=RING; "no-nvls": NCCL_NVLS_ENABLE=0 -
    as `validate` prices reference rows, costmodel.evidence.validate FORCED_DROPS)."""

    transport: str
    path: Path
    profile: str
    op: str
    world_size: int
    nodes: int
    nics: int | None
    gbit: float | None
    cluster: str
    nccl_algo: str = "default"

    @property
    def name(self) -> str:
        return self.path.name


TABLES = [
    Table("ib", NT / "h100x16_all_reduce_dstack-nebius-2node.log", "h100-sxm-nvlink", "all_reduce", 16, 2, None, None,
          "nebius-h100"),
    Table("ib", NT / "b200x16_all_reduce_dstack-lambda-2node.log", "b200-hgx-nvlink", "all_reduce", 16, 2, None, None,
          "lambda-b200"),
    Table("ib", PC / "l40sx4_all_reduce_schmaustech-openshift-2node-2gpu.log", "l40s-pcie", "all_reduce", 4, 2, None,
          None, "openshift-l40s"),
    Table("gib", NT / "b200x16_all_reduce_dstack-gcp-a4-2node.log", "b200-hgx-nvlink", "all_reduce", 16, 2, 8, 400.0,
          "gcp-a4-dstack"),
    Table("gib", PC / "b200x16_all_gather_dranet-gke-a4-2node.log", "b200-hgx-nvlink", "all_gather", 16, 2, 8, 400.0,
          "gke-a4-dranet"),
    Table("roce", PC / "mi355xx16_all_reduce_hisohara-aac14-pollara400-2node-rccl.log", "mi355x-xgmi", "all_reduce",
          16, 2, None, 400.0, "amd-aac14"),
    Table("roce", PC / "a100x16_all_reduce_oci-b4-2node.log", "a100-sxm-nvlink", "all_reduce", 16, 2, None, None,
          "oci-b4"),
    Table("tcpx", NT / "h100x16_all_gather_dstack-gcp-a3high-tcpx-2node.log", "h100-sxm-nvlink", "all_gather", 16, 2,
          4, 200.0, "gcp-a3high"),
    Table("tcpxo", NT / "h100x16_all_gather_dstack-gcp-a3mega-tcpxo-2node.log", "h100-sxm-nvlink", "all_gather", 16,
          2, 8, 200.0, "gcp-a3mega"),
    Table("socket", PC / "l40sx2_all_reduce_schmaustech-openshift-2node-1gpu-socket.log", "l40s-pcie", "all_reduce", 2,
          2, 1, 100.0, "openshift-l40s", "ring"),  # the log's mpirun line: -x NCCL_ALGO=ring
    Table("mnnvl", PC / "gb200x144_all_reduce_coreweave-nvl72-2rack.log", "gb200-nvl72", "all_reduce", 144, 2, None,
          None, "coreweave-gb200", "no-nvls"),  # NCCL_NVLS_ENABLE=0 (SOURCES.md: the same-commit slurm script)
    Table("tcpxo", PM / "h100x16_all_reduce_a3mega-tcpxo-ztan-2node.log", "h100-sxm-nvlink", "all_reduce", 16, 2, 8,
          200.0, "gcp-a3mega-ztan"),
    Table("efa-sendrecv", PM / "a100x16_all_reduce_awsefaeks-p4d-2node-nccl299.log", "a100-sxm-nvlink", "all_reduce",
          16, 2, 4, 100.0, "aws-efa-eks-p4d"),
    Table("efa-sendrecv", PM / "a100x16_all_reduce_awsefaeks-p4d-2node-nccl283.log", "a100-sxm-nvlink", "all_reduce",
          16, 2, 4, 100.0, "aws-efa-eks-p4d"),
    Table("efa-sendrecv", PM / "a100x16_all_reduce_adt-p4de-2node.log", "a100-sxm-nvlink", "all_reduce", 16, 2, 4,
          100.0, "adt-p4de"),
    Table("efa", PM / "h100x16_all_reduce_adt-p5-2node.log", "h100-sxm-nvlink", "all_reduce", 16, 2, 32, 100.0,
          "adt-p5"),
    Table("efa", PM / "h100x16_all_reduce_adt-eks-p5-2node-excerpt.log", "h100-sxm-nvlink", "all_reduce", 16, 2, 32,
          100.0, "adt-eks-p5"),
    Table("efa", PM / "h200x128_all_reduce_adt-topoaware-p5en-16node-excerpt.log", "h200-sxm-nvlink", "all_reduce",
          128, 16, 16, 200.0, "adt-p5en"),
    # tables whose logs mix node counts or sections: their rows as imported into published-collectives-2026.csv (the
    # MI325X runs forced NCCL_ALGO=Ring: the log's mpirun lines)
    Table("roce", CSV / "mi325xx16-all_reduce-2node", "mi325x-xgmi", "all_reduce", 16, 2, None, None, "amd-aac11",
          "ring"),
    Table("roce", CSV / "mi325xx32-all_reduce-4node", "mi325x-xgmi", "all_reduce", 32, 4, None, None, "amd-aac11",
          "ring"),
    Table("roce", CSV / "mi325xx64-all_reduce-8node", "mi325x-xgmi", "all_reduce", 64, 8, None, None, "amd-aac11",
          "ring"),
    Table("mnnvl", CSV / "gb200x1440-all_reduce-20rack", "gb200-nvl72", "all_reduce", 1440, 20, None, None,
          "coreweave-gb200", "no-nvls"),
]


@cache
def read_table(table: Table) -> tuple[np.ndarray, np.ndarray]:
    """(bytes per rank, out-of-place time us) of every row, by size; a size printed twice keeps its first row."""
    if table.path.parent == CSV:
        rows = [r for r in csv.DictReader(CSV.open(encoding="utf-8")) if r["table"] == table.path.name]
        pairs = [(float(r["bytes_per_rank"]), float(r["median_us"])) for r in rows]
    else:
        text = table.path.read_text(encoding="utf-8", errors="replace")
        frame = parse_nccl_tests_text(text, str(table.path), Hints(op=table.op, world_size=table.world_size,
                                                                   nodes=table.nodes), validation_ops=True)
        pairs = list(zip(frame["bytes_per_rank"].astype(float), frame["median_us"].astype(float)))
    seen: dict[float, float] = {}
    for size, t in pairs:
        if size > 0:  # a 0-byte row (nccl-tests -b 0) times no transfer
            seen.setdefault(size, t)
    sizes = np.array(sorted(seen))
    return sizes, np.array([seen[s] for s in sizes])


def choice(params, table: Table) -> FabricChoice:
    eff, overhead, inter = (float(x) for x in params)
    transport = Transport(table.transport, eff, overhead, inter, "fitted", "", "")
    return FabricChoice(Fabric(table.transport, transport, table.nics, table.gbit, ""), table.nics, table.gbit)


@cache
def _placement(profile: str, op: str, world_size: int):
    """The bundled profile with only the curves that can price `op` at `world_size` (its own per-p curves and the
    op's generic one): the same times, and `apply_fabric` re-prices (re-chooses) one placement, not all of them."""
    prof = load_profile(profile)
    return dataclasses.replace(prof, collectives=tuple(c for c in prof.collectives if c.op == op
                                                       and c.world_size in (None, world_size)))


def predict(table: Table, params) -> np.ndarray:
    sizes, _t = read_table(table)
    prof = _placement(table.profile, table.op, table.world_size)
    if table.nccl_algo != "default":
        prof = without_regimes(prof, FORCED_DROPS[table.nccl_algo])
    priced = apply_fabric(prof, choice(params, table))
    return np.asarray(collective_time_us(priced, table.op, sizes, table.world_size, table.nodes, mode="eager"),
                      dtype=float)


def _inside(params) -> bool:
    return all(lo <= x <= hi for x, (lo, hi) in zip(params, BOUNDS))


def log_loss(tables: list[Table], params) -> float:
    if not _inside(params):
        return 1e9
    return float(np.mean([np.mean(np.log(predict(t, params) / read_table(t)[1]) ** 2) for t in tables]))


def rule(name: str) -> tuple[float, float, float]:
    t = transport_table()[name]
    return t.net_eff, t.step_overhead_us, t.inter_step_us


def fit(tables: list[Table], name: str | None = None) -> tuple[float, float, float]:
    """(net_eff, step_overhead_us, inter_step_us) minimising log_loss; the PRIOR transport's fit for no tables;
    a RULE_ONLY transport's own row (nothing fitted). `name`: the transport (else the tables')."""
    name = name or (tables[0].transport if tables else PRIOR)
    if name in RULE_ONLY or not tables:
        return rule(name if name in RULE_ONLY else PRIOR)
    grid = [(e, o, x) for e in np.geomspace(0.05, 1.0, 10) for o in (1.0, 3.0, 8.0, 16.0, 32.0)
            for x in (0.0, 5.0, 20.0, 60.0, 150.0)]
    x0 = min(grid, key=lambda g: log_loss(tables, g))
    res = minimize(lambda x: log_loss(tables, x), np.array(x0), method="Nelder-Mead",
                   options={"xatol": 1e-3, "fatol": 1e-7, "maxiter": 400})
    best = res.x if res.fun <= log_loss(tables, x0) else np.array(x0)
    return tuple(float(np.clip(v, lo, hi)) for v, (lo, hi) in zip(best, BOUNDS))


def row_errors(table: Table, params) -> tuple[np.ndarray, np.ndarray]:
    """|pred / measured - 1| of the rows >= SMALL_BYTES_PER_RANK per rank, and of the rows below it."""
    sizes, measured = read_table(table)
    rel = np.abs(predict(table, params) / measured - 1)
    big = sizes >= SMALL_BYTES_PER_RANK
    return rel[big], rel[~big]


def errors(table: Table, params) -> tuple[float | None, float | None]:
    """Median |pred / measured - 1| on rows >= SMALL_BYTES_PER_RANK per rank, and below it (None: no such rows)."""
    return tuple(float(np.median(r)) if r.size else None for r in row_errors(table, params))


def _pct(pair) -> str:
    large, small = pair
    return " / ".join("-" if v is None else f"{v:.1%}" for v in (large, small))


def report(out=sys.stdout) -> dict[str, tuple[float, float, float]]:
    """Print the per-table markdown (fit on all, left out, cluster left out) and the per-transport medians;
    return transport -> fitted parameters."""
    fits = {name: fit([t for t in TABLES if t.transport == name], name)
            for name in dict.fromkeys(t.transport for t in TABLES)}
    print("| transport | table | rows (>= 64 KiB / below) | fit on all its tables | left out (refit on the "
          "others) | cluster left out |", file=out)
    print("|---|---|---|---|---|---|", file=out)
    held: dict[str, list[float]] = {}
    rows: dict[str, list[np.ndarray]] = {}
    for t in TABLES:
        mine = [o for o in TABLES if o.transport == t.transport]
        loo = fit([o for o in mine if o is not t], t.transport)
        loco = fit([o for o in mine if o.cluster != t.cluster], t.transport)
        sizes, _m = read_table(t)
        big = int((sizes >= SMALL_BYTES_PER_RANK).sum())
        prior = (" (not fitted: the rule)" if t.transport in RULE_ONLY else
                 "" if len(mine) > 1 else " (no other table: the ib rule)")
        left = errors(t, loo)
        held.setdefault(t.transport, []).append(left[0] if left[0] is not None else left[1])
        rows.setdefault(t.transport, []).append(row_errors(t, loo))
        print(f"| {t.transport} | {t.name} | {big} / {len(sizes) - big} | {_pct(errors(t, fits[t.transport]))} | "
              f"{_pct(left)}{prior} | {_pct(errors(t, loco))} |", file=out)
    print(file=out)
    print("| transport | tables | net_eff | step_overhead_us | inter_step_us | median held-out table error | "
          "median held-out row error (>= 64 KiB / below) |", file=out)
    print("|---|---|---|---|---|---|---|", file=out)
    for name, (eff, over, inter) in fits.items():
        n = sum(t.transport == name for t in TABLES)
        pooled = [np.concatenate([r[i] for r in rows[name]]) for i in (0, 1)]
        print(f"| {name} | {n} | {eff:.3f} | {over:.1f} | {inter:.1f} | {np.median(held[name]):.1%} | "
              f"{_pct(tuple(float(np.median(x)) if x.size else None for x in pooled))} |", file=out)
    return fits


def write(fits: dict[str, tuple[float, float, float]]) -> None:
    """Rewrite transports.csv's parameters for every fitted transport (kind "fitted", its tables named)."""
    rows = list(csv.DictReader(TRANSPORTS_CSV.open(encoding="utf-8", newline="")))
    for row in rows:
        if row["name"] in fits and row["name"] not in RULE_ONLY:
            eff, over, inter = fits[row["name"]]
            row.update(net_eff=f"{eff:.3f}", step_overhead_us=f"{over:.1f}", inter_step_us=f"{inter:.1f}",
                       kind="fitted", tables=" + ".join(t.name for t in TABLES if t.transport == row["name"]))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_text(TRANSPORTS_CSV, buf.getvalue(), what="transports table")  # atomic: temp file + os.replace


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the fitted rows of data/presets/transports.csv")
    args = parser.parse_args(argv)
    fits = report()
    if args.write:
        write(fits)
        transport_table.cache_clear()
        print(f"wrote {TRANSPORTS_CSV}")


if __name__ == "__main__":
    main()
