"""Time `argmax-tp sweep` end to end: 196,608 scenarios x every strategy to CSV (target <= 5 s) and Parquet.

    python scripts/bench_sweep.py [--repeats 3] [--out-dir /tmp]

Each repeat runs the real CLI in a fresh process (`python -m costmodel sweep ...`, imports included) and
reports wall time and the process's CPU time (user + sys; on a shared 2-core VM wall time also
counts waiting for the CPU). The grid: batch 1..4096 x vocab {32000, 128256, 202048} x K 1..4 x
{graph, eager} x {serial, parallel} at TP 8 = 196,608 scenarios, 983,040 rows. Also times the
in-process stages once (grid + predict, table build, CSV write) to show where the time goes.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRID = ["--batch", "1:4096", "--vocab", "32000,128256,202048", "--num-spec-tokens", "1:4", "--mode", "graph,eager",
        "--drafting", "serial,parallel", "--tp", "8"]
SCENARIOS = 4096 * 3 * 4 * 2 * 2


def run_once(out: Path, fmt: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "costmodel", "sweep", *GRID, "--format", fmt, "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def stages() -> None:
    sys.path.insert(0, str(ROOT))
    from costmodel.answers.sweep import sweep_table, write_sweep
    from costmodel.cli import main as cli
    from costmodel.cli import scenario_args
    from costmodel.profiles.store import load_profile

    args = cli.build_parser().parse_args(["sweep", *GRID])
    profile = load_profile(args.profile)
    t0 = time.perf_counter()
    table = sweep_table(scenario_args._model_fields(args), scenario_args._grid(args), profile)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_sweep(table, Path(tmp) / "s.csv", "csv")
        t2 = time.perf_counter()
        write_sweep(table, Path(tmp) / "s.parquet", "parquet")
        t3 = time.perf_counter()
    print(f"in-process: grid + predict + table {t1 - t0:.2f} s, CSV write {t2 - t1:.2f} s, "
          f"Parquet write {t3 - t2:.2f} s ({table.num_rows:,} rows x {table.num_columns} columns)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out-dir", default=None, help="where the files go (default: a temporary directory)")
    args = ap.parse_args()
    print(f"sweep of {SCENARIOS:,} scenarios x 5 strategies; {os.cpu_count()} CPUs; best of {args.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(args.out_dir or tmp)
        for fmt in ("csv", "parquet"):
            out = out_dir / f"bench_sweep.{fmt}"
            runs = [run_once(out, fmt) for _ in range(args.repeats)]
            wall = min(r[0] for r in runs)
            cpu = min(r[1] for r in runs)
            size = out.stat().st_size / 2**20
            print(f"{fmt:8s} best wall {wall:6.2f} s  best CPU {cpu:6.2f} s  ({size:,.0f} MiB)  "
                  f"all walls: {', '.join(f'{r[0]:.2f}' for r in runs)}")
    stages()
    return 0


if __name__ == "__main__":
    sys.exit(main())
