"""Cross-validated error of the GPU kernel model (costmodel.model.gpu_kernels) on a measured kernel table.

    python scripts/kernel_cv.py [--csv data/calibration/h200-2026-11-30/kernels.csv] [--out cv.csv]

Fits the model on every row but one batch (then one vocab), prices the held-out rows and prints, per op and
mode, n and the median / p90 of |predicted / measured - 1| (costmodel.evidence.gpu_kernel_fit.cross_validate), plus
the in-sample error of the fit on every row, then the measurement's own noise floor (`noise_floor`): the
pair reduce does the same work at every vocab (it reads [p, B] values, never the vocab), so its rows at one
(batch, TP, dtype, mode) are repeats of one measurement, and no model of the shape can be closer to them
than their spread around their median. The CSV needs the extra `batch` and `vocab` columns that
scripts/convert_h200_probe.py writes. Bad input: one `error: ...` line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costmodel.evidence.gpu_kernel_fit import (  # noqa: E402
    H200_BASE,
    H200_KERNELS_CSV,
    cross_validate,
    errors_table,
    fit_model,
    load_kernel_frame,
    predict_frame,
)
from costmodel.io.errors import InputError  # noqa: E402


def noise_floor(frame: pd.DataFrame, op: str = "pair_reduce") -> pd.DataFrame:
    """Per mode: spread of `op`'s identical-work rows, |t / median(t over vocab) - 1| at fixed (batch, TP, dtype).

    Columns: op, mode, n (rows), groups (identical-work sets), median / p90 of that spread, and
    outlier_groups (sets holding a row >= 25% off their median).
    """
    rows = frame[frame["op"] == op]
    keys = ["mode", "batch", "world_size", "logits_dtype"]
    if rows.empty or not set(keys) <= set(rows.columns):
        return pd.DataFrame(columns=["op", "mode", "n", "groups", "median_abs_rel_spread", "p90_abs_rel_spread",
                                     "outlier_groups"])
    t = rows["median_us"].astype(float)
    dev = (t / t.groupby([rows[k] for k in keys]).transform("median") - 1).abs()
    out = []
    for mode, d in dev.groupby(rows["mode"]):
        sets = d.groupby([rows.loc[d.index, k] for k in keys[1:]])
        out.append({"op": op, "mode": mode, "n": len(d), "groups": sets.ngroups,
                    "median_abs_rel_spread": float(d.median()), "p90_abs_rel_spread": float(d.quantile(0.9)),
                    "outlier_groups": int((sets.max() >= 0.25).sum())})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=H200_KERNELS_CSV)
    ap.add_argument("--out", type=Path, default=None, help="also write the table as CSV")
    args = ap.parse_args(argv)
    try:
        frame = load_kernel_frame(args.csv)
        full = fit_model(frame, H200_BASE)
        in_sample = errors_table(frame, predict_frame(full, frame))
        in_sample.insert(0, "held_out", "none (in-sample)")
        table = pd.concat([in_sample] + [cross_validate(frame, H200_BASE, by, full=full) for by in ("batch", "vocab")],
                          ignore_index=True)
        if args.out is not None:
            table.to_csv(args.out, index=False)
    except (InputError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))
        floor = noise_floor(frame)
        if not floor.empty:
            print("\nnoise floor: identical-work repeats (the pair reduce's work does not depend on vocab)")
            print(floor.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
