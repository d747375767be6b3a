"""Held-out check of the fitter's regime choice: fit every other measured size, price the others.

    python -m calibration.fitting.heldout [--variants bic,cv,notail,nopieces,ramps]

For each bundled single-node measurement set - the gloo collectives of data/calibration/cpu-gloo (per op and
world size) and every single-node table of data/reference/nccl-tests.csv - fits the even-indexed sizes with
`fit_measurements` (bootstrap off) and prints the p90 of |predicted / measured - 1| on the odd-indexed sizes
for each variant of the fitter:

    bic    the number of regimes by BIC alone, no ramps (CV_TOLERANCE = inf, RAMPS = False)
    cv     leave-one-size-out CV may override BIC (the fitter before ramps; RAMPS = False)
    notail the fitter before tail ramps (TAIL_RUN = inf; issue 18)
    nopieces the fitter before negative-intercept pieces (NEG_PIECES = False; issue 18)
    ramps  the fitter as it is (CV, ramp variants kept when CV_TOLERANCE / RAMP_TOLERANCE allow, tail ramps,
           negative-intercept pieces: calibration.fitting.negative_intercept)

with, per variant, "top p90": the same over the largest quarter of the held-out sizes (where a late knee shows),
and the regimes the last variant chose ("+tail": tail ramps, calibration.fitting.fit module doc), then the median
per world size over the gloo sets and the nccl-tests tables. No torch. Bad input: one `error: ...` line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from costmodel.io.errors import InputError
from costmodel.model.collectives import collective_time_us
from costmodel.profiles.parse import profile_from_dict

from . import fit as fit_module

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = {"bic": {"CV_TOLERANCE": float("inf"), "RAMPS": False, "TAIL_RUN": 10**9, "NEG_PIECES": False},
            "cv": {"RAMPS": False, "TAIL_RUN": 10**9, "NEG_PIECES": False},
            "notail": {"TAIL_RUN": 10**9, "NEG_PIECES": False}, "nopieces": {"NEG_PIECES": False}, "ramps": {}}
COLUMNS = ["op", "mode", "world_size", "nodes", "bytes_per_rank", "dtype", "gpu", "median_us"]


def measurement_sets(root: Path = ROOT) -> Iterator[tuple[str, pd.DataFrame, str, int]]:
    """(name, rows, op, world size) of every bundled single-node set (module doc)."""
    gloo = pd.read_csv(root / "data/calibration/cpu-gloo/collectives.csv")
    for (op, p), sub in gloo.groupby(["op", "world_size"], sort=True):
        yield f"gloo {op} p={p}", sub, str(op), int(p)
    ref = pd.read_csv(root / "data/reference/nccl-tests.csv")
    for table, sub in ref.groupby("table", sort=True):
        if int(sub["nodes"].max()) == 1 and sub["world_size"].nunique() == 1:
            yield str(table), sub[COLUMNS], str(sub["op"].iloc[0]), int(sub["world_size"].iloc[0])


def held_out_p90(rows: pd.DataFrame, op: str, p: int, settings: dict) -> tuple[float, float, str]:
    """(held-out p90 |rel err| on the odd-indexed sizes, the same on the largest quarter of them, the fitted
    regimes) under fitter `settings`."""
    sizes = np.sort(rows["bytes_per_rank"].unique())
    train = rows["bytes_per_rank"].isin(sizes[::2])
    saved = {k: getattr(fit_module, k) for k in settings}
    try:
        for k, v in settings.items():
            setattr(fit_module, k, v)
        profile = fit_module.fit_measurements(rows[train], name="heldout", bootstrap=0)
    finally:
        for k, v in saved.items():
            setattr(fit_module, k, v)
    test = rows[~train]
    pred = collective_time_us(profile_from_dict(profile), op, test["bytes_per_rank"].to_numpy(float), p, 1,
                              test["mode"].to_numpy().astype(str))
    t = test["median_us"].to_numpy(float)
    (row,) = [r for r in profile["fit_report"] if r["kind"] == "collective" and r["op"] == op
              and r["world_size"] == p]
    (curve,) = [c for c in profile["collectives"] if c["provenance"] == "measured" and c["op"] == op
                and c["world_size"] == p]
    ramps = sum("ramp" in r["name"] for r in curve["regimes"])
    tail = sum(r["name"].startswith("tail") for r in curve["regimes"])
    pieces = sum("piece" in r["name"] for r in curve["regimes"])
    ramps -= sum("ramp" in r["name"] for r in curve["regimes"] if r["name"].startswith("tail"))
    label = (f"{row['n_regimes']}{'+ramps' if ramps else ''}{f'+{tail} tail' if tail else ''}"
             f"{f'+{pieces} pieces' if pieces else ''}")
    err = np.abs(pred - t) / t
    b = test["bytes_per_rank"].to_numpy(float)
    top = b >= np.quantile(np.unique(b), 0.75)
    return float(np.percentile(err, 90)), float(np.percentile(err[top], 90)), label


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="bic,cv,notail,nopieces,ramps",
                    help="comma-separated: " + ", ".join(VARIANTS))
    args = ap.parse_args(argv)
    try:
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown or not variants:
            raise InputError(f"--variants: unknown {', '.join(unknown) or '(none)'}; known: {', '.join(VARIANTS)}")
        out = []
        for name, rows, op, p in measurement_sets():
            scores = [held_out_p90(rows, op, p, VARIANTS[v]) for v in variants]
            out.append({"set": name, "p": p, **{f"{v} p90": s for v, (s, _, _) in zip(variants, scores)},
                        **{f"{v} top p90": s for v, (_, s, _) in zip(variants, scores)}, "regimes": scores[-1][2]})
    except (InputError, OSError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = pd.DataFrame(out)
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))
        print("\nmedian over sets: " + ", ".join(f"{v} {table[f'{v} p90'].median():.3f}" for v in variants))
        kind = np.where(table["set"].str.startswith("gloo "), "gloo", "nccl-tests")
        for (k, p), sub in table.groupby([kind, "p"], sort=True):
            print(f"median, {k} p={p} ({len(sub)} sets): "
                  + ", ".join(f"{v} {sub[f'{v} p90'].median():.3f} (top {sub[f'{v} top p90'].median():.3f})"
                              for v in variants))
    return 0


if __name__ == "__main__":
    sys.exit(main())
