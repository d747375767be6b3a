"""Summaries of a kernel benchmark CSV: achieved bandwidth at large shapes, and fused vs torch at batch 1.

    python -m calibration.kernel_report DIR/kernels.csv [--out DIR] [--min-mib 32] [--probe PROBE.csv]

bandwidth: for every row moving >= --min-mib MiB (costmodel.model.kernels.kernel_bytes), achieved GB/s =
bytes / median_us * 1e-3, and its ratio to the device's copy bandwidth, taken as the best achieved GB/s of
`relayout_copy` (a torch copy: reads + writes every byte) in the same dtype and mode.
batch1: per (op, dtype, mode, cols, world_size) at rows = 1, the torch op's and its `_fused` variant's
median us and the speed-up torch / fused.
shapes (always; shapes.csv): per (op, dtype, mode, world_size) the rows and cols measured, the range of their
median us, and the achieved GB/s at the op's largest shape - what any run shows, a `--quick` smoke test included.
A quick run (provenance.json next to the CSV says `--quick`: rows 1 and 16, two buffers without cache rotation,
0.02 s per point) cannot show the bandwidth at large shapes, cache-cold times or the full grid the fitter's
tables need; the report says so rather than printing nothing.
probe (--probe, e.g. data/calibration/h200-2026-11-30/kernels.csv): every shape measured by both - same
(op, dtype, mode, world_size, rows, cols) - with both medians and ratio = this run / probe; what each probe
column timed is in that folder's README (local_pack has no rank offset, unlike local_argmax). No torch
import: it reads CSVs.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from costmodel.io.errors import InputError, OneLineParser, first_line
from costmodel.io.measurements import D2T_DRAFT_COLS, ELEM_BYTES, read_measurements
from costmodel.io.safe_io import loads_json, read_bytes, write_csv
from costmodel.model.kernels import kernel_bytes


def with_bandwidth(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of kernel ops with `bytes` and achieved `gbps` columns."""
    kern = frame[frame["rows"] > 0].copy()
    elem = kern["dtype"].map(ELEM_BYTES).fillna(4)
    ks = kern["k"] if "k" in kern.columns else pd.Series(1, index=kern.index)
    kern["bytes"] = [float(kernel_bytes(op, r, c, p, e, D2T_DRAFT_COLS, k)) for op, r, c, p, e, k in
                     zip(kern["op"], kern["rows"], kern["cols"], kern["world_size"], elem, ks, strict=True)]
    kern["gbps"] = kern["bytes"] / kern["median_us"] * 1e-3
    return kern


def bandwidth_table(frame: pd.DataFrame, min_mib: float = 32.0) -> pd.DataFrame:
    kern = with_bandwidth(frame)
    copy = kern[kern["op"] == "relayout_copy"].groupby(["dtype", "mode"])["gbps"].max().rename("copy_gbps")
    big = kern[(kern["bytes"] >= min_mib * 2**20) & (kern["op"] != "relayout_copy")]
    out = big.join(copy, on=["dtype", "mode"])
    out["fraction_of_copy"] = out["gbps"] / out["copy_gbps"]
    cols = ["op", "dtype", "mode", "world_size", "rows", "cols", "bytes", "median_us", "gbps", "copy_gbps",
            "fraction_of_copy"]
    return out[cols].sort_values(["op", "dtype", "mode", "bytes"]).reset_index(drop=True)


def batch1_table(frame: pd.DataFrame) -> pd.DataFrame:
    one = frame[(frame["rows"] == 1)].copy()
    one["base_op"] = one["op"].str.removesuffix("_fused")
    one["impl"] = one["op"].str.endswith("_fused").map({True: "fused", False: "torch"})
    keys = ["base_op", "dtype", "mode", "cols", "world_size"]
    wide = one.pivot_table(index=keys, columns="impl", values="median_us", aggfunc="median")
    if "fused" not in wide.columns or "torch" not in wide.columns:
        raise InputError("kernel report: batch 1 needs both torch and *_fused rows")
    wide = wide.dropna(subset=["fused", "torch"]).rename(columns={"torch": "torch_us", "fused": "fused_us"})
    wide["speedup"] = wide["torch_us"] / wide["fused_us"]
    return wide.reset_index()[keys + ["torch_us", "fused_us", "speedup"]]


SHAPE_KEYS = ["op", "dtype", "mode", "world_size"]
MAX_PROVENANCE_BYTES = 16 * 2**20  # provenance.json next to the CSV (calibration.logs.provenance's bound)


def _values(column: pd.Series) -> str:
    """The distinct values of an integer column, ascending: "1, 16"; more than six: "1 .. 2048 (12 values)"."""
    values = sorted({int(v) for v in column})
    if len(values) > 6:
        return f"{values[0]} .. {values[-1]} ({len(values)} values)"
    return ", ".join(map(str, values))


def shapes_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (op, dtype, mode, world_size): `shapes` measured, the `rows` / `cols` values, min / max median_us, and
    at the op's largest shape (most bytes moved, `with_bandwidth`) its size in MiB and achieved GB/s."""
    kern = with_bandwidth(frame).sort_values("bytes", kind="stable")
    out = []
    for key, group in kern.groupby(SHAPE_KEYS, sort=True):
        largest = group.iloc[-1]
        out.append({**dict(zip(SHAPE_KEYS, key, strict=True)), "shapes": len(group), "rows": _values(group["rows"]),
                    "cols": _values(group["cols"]), "min_us": group["median_us"].min(),
                    "max_us": group["median_us"].max(), "largest_mib": largest["bytes"] / 2**20,
                    "gbps_at_largest": largest["gbps"]})
    columns = SHAPE_KEYS + ["shapes", "rows", "cols", "min_us", "max_us", "largest_mib", "gbps_at_largest"]
    return pd.DataFrame(out, columns=columns)


def quick_run(csv: Path) -> bool:
    """Whether the benchmark that wrote `csv` ran with --quick (its provenance.json's argv; False when there is
    none or it cannot be read - the report then just does not say so)."""
    try:
        prov = loads_json(read_bytes(csv.parent / "provenance.json", limit_bytes=MAX_PROVENANCE_BYTES), str(csv))
    except (OSError, ValueError):
        return False
    runs = [prov, *prov.get("previous_runs", [])] if isinstance(prov, dict) else []
    return any(isinstance(run, dict) and "--quick" in (run.get("argv") or []) for run in runs)


def limits_lines(shapes: pd.DataFrame, bw: pd.DataFrame, b1: pd.DataFrame | None, quick: bool,
                 min_mib: float) -> list[str]:
    """What this table cannot show, in plain lines: no large shape, no fused rows, a --quick smoke test."""
    lines = []
    if bw.empty:  # a --quick run measures nothing this large: say so instead of printing an empty Series
        largest = (f" (the largest moves {shapes['largest_mib'].max():.3g} MiB)" if len(shapes) else "")
        lines.append(f"median fraction of the copy bandwidth: not shown - no shape of >= {min_mib:g} MiB here"
                     f"{largest}; --min-mib sets the threshold")
    if b1 is None:
        lines.append("batch-1 speed-up of the fused kernels: not shown - no *_fused rows (they are timed on CUDA "
                     "when Triton imports)")
    if quick:
        lines.append("a --quick run (smoke test: few small shapes, two buffers without cache rotation, 0.02 s per "
                     "point) shows which ops ran and their times at these shapes; it cannot show the bandwidth at "
                     "large shapes, cache-cold times or the full rows x cols grid a profile's kernel tables need - "
                     "rerun without --quick for those")
    return lines


PROBE_KEYS = ["op", "dtype", "mode", "world_size", "rows", "cols"]


def probe_comparison(frame: pd.DataFrame, probe: pd.DataFrame) -> pd.DataFrame:
    """Shapes measured by both tables: median_us of each and ratio = this run / probe (module doc)."""
    mine = frame.groupby(PROBE_KEYS)["median_us"].median().rename("median_us")
    theirs = probe.groupby(PROBE_KEYS)["median_us"].median().rename("probe_us")
    out = pd.concat([mine, theirs], axis=1, join="inner").reset_index()
    out["ratio"] = out["median_us"] / out["probe_us"]
    return out.sort_values(PROBE_KEYS).reset_index(drop=True)


MAX_MIN_MIB = 2**20  # 1 TiB: no kernel shape moves more


def min_mib(text: str) -> float:
    """argparse `type=` for --min-mib: a finite size in 0..MAX_MIN_MIB MiB (nan compared false everywhere and
    printed an empty table; -1 meant every row silently)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= MAX_MIN_MIB):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of MiB in 0..{MAX_MIN_MIB}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: 0 ok, 2 bad input or an unwritable --out (one `error:` line)."""
    ap = OneLineParser(prog="python -m calibration.kernel_report", description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="folder for shapes.csv, bandwidth.csv and batch1.csv")
    ap.add_argument("--min-mib", type=min_mib, default=32.0,
                    help="bandwidth rows: shapes moving at least this many MiB (0: every shape)")
    ap.add_argument("--probe", type=Path, default=None, help="a second kernel table to compare shape by shape")
    try:
        args = ap.parse_args(argv)
        frame = read_measurements(args.csv)
        shapes = shapes_table(frame)
        bw = bandwidth_table(frame, args.min_mib)
        b1 = batch1_table(frame) if frame["op"].str.endswith("_fused").any() else None
        cmp = None if args.probe is None else probe_comparison(frame, read_measurements(args.probe))
        if cmp is not None and cmp.empty:
            raise InputError(f"--probe {args.probe}: no shape in common with {args.csv}")
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(f"{args.csv}: {len(frame)} rows, {shapes['op'].nunique()} kernel ops; per op the shapes measured, "
              "their median us and the achieved GB/s at the largest:")
        print(shapes.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
        for line in limits_lines(shapes, bw, b1, quick_run(args.csv), args.min_mib):
            print(line)
        if not bw.empty:
            print(f"median fraction of the copy bandwidth at >= {args.min_mib:g} MiB:")
            print(bw.groupby(["op", "dtype", "mode"])["fraction_of_copy"].median().to_string())
        if b1 is not None:
            print("median batch-1 speed-up (torch us / fused us):")
            print(b1.groupby(["base_op", "dtype", "mode"])["speedup"].median().to_string())
        if cmp is not None:
            print(f"this run / {args.probe.name}, median ratio over the shared shapes:")
            print(cmp.groupby(["op", "dtype", "mode"])["ratio"].agg(["size", "median", "min", "max"]).to_string())
    if args.out:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            write_csv(shapes, args.out / "shapes.csv")
            write_csv(bw, args.out / "bandwidth.csv")  # formula-safe text cells (gpu names come from the CSV)
            if b1 is not None:
                write_csv(b1, args.out / "batch1.csv")
            if cmp is not None:
                write_csv(cmp, args.out / "probe_comparison.csv")
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"error: --out {args.out}: cannot write ({first_line(exc)})", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
