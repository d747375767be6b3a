"""Summaries of a kernel benchmark CSV: achieved bandwidth at large shapes, and fused vs torch at batch 1.

    python -m calibration.kernel_report DIR/kernels.csv [--out DIR] [--min-mib 32] [--probe PROBE.csv]

bandwidth: for every row moving >= --min-mib MiB (costmodel.model.kernels.kernel_bytes), achieved GB/s =
bytes / median_us * 1e-3, and its ratio to the device's copy bandwidth, taken as the best achieved GB/s of
`relayout_copy` (a torch copy: reads + writes every byte) in the same dtype and mode.
batch1: per (op, dtype, mode, cols, world_size) at rows = 1, the torch op's and its `_fused` variant's
median us and the speed-up torch / fused.
probe (--probe, e.g. data/calibration/h200-2026-11-30/kernels.csv): every shape measured by both - same
(op, dtype, mode, world_size, rows, cols) - with both medians and ratio = this run / probe; what each probe
column timed is in that folder's README (local_pack has no rank offset, unlike local_argmax). No torch
import: it reads CSVs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from costmodel.io.errors import InputError, OneLineParser, first_line
from costmodel.io.measurements import D2T_DRAFT_COLS, ELEM_BYTES, read_measurements
from costmodel.io.safe_io import write_csv
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


PROBE_KEYS = ["op", "dtype", "mode", "world_size", "rows", "cols"]


def probe_comparison(frame: pd.DataFrame, probe: pd.DataFrame) -> pd.DataFrame:
    """Shapes measured by both tables: median_us of each and ratio = this run / probe (module doc)."""
    mine = frame.groupby(PROBE_KEYS)["median_us"].median().rename("median_us")
    theirs = probe.groupby(PROBE_KEYS)["median_us"].median().rename("probe_us")
    out = pd.concat([mine, theirs], axis=1, join="inner").reset_index()
    out["ratio"] = out["median_us"] / out["probe_us"]
    return out.sort_values(PROBE_KEYS).reset_index(drop=True)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: 0 ok, 2 bad input or an unwritable --out (one `error:` line)."""
    ap = OneLineParser(prog="python -m calibration.kernel_report", description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="folder for bandwidth.csv and batch1.csv")
    ap.add_argument("--min-mib", type=float, default=32.0)
    ap.add_argument("--probe", type=Path, default=None, help="a second kernel table to compare shape by shape")
    try:
        args = ap.parse_args(argv)
        frame = read_measurements(args.csv)
        bw = bandwidth_table(frame, args.min_mib)
        b1 = batch1_table(frame) if frame["op"].str.endswith("_fused").any() else None
        cmp = None if args.probe is None else probe_comparison(frame, read_measurements(args.probe))
        if cmp is not None and cmp.empty:
            raise InputError(f"--probe {args.probe}: no shape in common with {args.csv}")
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 200, "display.max_rows", 60):
        if bw.empty:  # a --quick run measures nothing this large: say so instead of printing an empty Series
            print(f"median fraction of the copy bandwidth: no shape of >= {args.min_mib:g} MiB in {args.csv} "
                  f"(--min-mib sets the threshold)")
        else:
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
