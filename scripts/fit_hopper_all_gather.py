"""Fit and cross-check the Hopper NVLink ring LL128 regime on published nccl-tests tables.

    python scripts/fit_hopper_all_gather.py                   # all_gather: HOPPER_ALL_GATHER_LL128's fit
    python scripts/fit_hopper_all_gather.py --op all_reduce   # the same fit on the all_reduce tables (not adopted)

Rows: the device-bound rows of the published single-process nccl-tests tables on H100 SXM in
data/reference/nccl-tests.csv (SETS). all_gather: 4x H100 (waynehacking8 quiet) and 8x H100 ring, 4 MiB .. 8 GiB
in total, fitted on 8-128 MiB (the rows the manifest marks in-sample). all_reduce: 2x, 4x and 8x H100 (ring and the
"nvls" run that ran ring), 2-64 MiB, fitted on all of them. The model is the bundled h100-sxm-nvlink profile's own
generic select-"min" ring curve of the op, priced by costmodel.model.collectives.curve_time_us (graph mode):

    t = launch_us + alpha_base + alpha_per_peer (p - 1) + f(p) (S + s_half) / busbw   per regime, the least wins

with its LL and Simple regimes as bundled and LL128 = (alpha_base, alpha_per_peer, eff x 370.8 GB/s) fitted by least
squares on log(model / measured), alpha_per_peer >= 0 (a ring step's latency: all_reduce's curve stores 2 x the
per-step latency per peer). Prints NCCL's constants' errors, then per-step latency free
and fixed at 0: the fit on every table and on each table alone, with the other tables' errors (leave-one-table-out).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import derive_profiles as dp  # noqa: E402

from costmodel.model.collectives import curve_time_us  # noqa: E402
from costmodel.profiles.store import load_profile  # noqa: E402

MIB = 2**20
NCCL_BUSBW = 370.8  # NCCL's Hopper ring model bandwidth (derive_profiles CITATIONS[1])
# op: (tables, (min, max) total bytes scored, (min, max) total bytes fitted)
SETS = {
    "all_gather": (("h100x4-all_gather-quiet", "h100x8-all_gather-ring"), (4 * MIB, 8192 * MIB), (8 * MIB, 128 * MIB)),
    "all_reduce": (("h100x2-all_reduce", "h100x4-all_reduce-quiet", "h100x8-all_reduce-ring",
                    "h100x8-all_reduce-nvls"), (2 * MIB, 64 * MIB), (2 * MIB, 64 * MIB)),
}


def rows(op: str) -> pd.DataFrame:
    tables, (lo, hi), _ = SETS[op]
    ref = pd.read_csv(ROOT / "data" / "reference" / "nccl-tests.csv")
    out = ref[ref["table"].isin(tables)].copy()
    out["S"] = out["bytes_per_rank"] * (out["world_size"] if op == "all_gather" else 1)
    return out[(out["S"] >= lo) & (out["S"] <= hi)].reset_index(drop=True)


H100 = load_profile("h100-sxm-nvlink")


def model_us(op: str, frame: pd.DataFrame, ll128: tuple[float, float, float]) -> np.ndarray:
    """The profile's generic ring curve of `op` at the rows, its LL128 regime set to ll128 (alpha_base, latency per
    ring step, efficiency x NCCL_BUSBW): one ring step per peer for all_gather, two for all_reduce."""
    base, per_step, eff = ll128
    steps_per_peer = 1 if op == "all_gather" else 2
    curve = next(c for c in H100.collectives if c.op == op and c.world_size is None)
    regimes = tuple(dataclasses.replace(r, alpha_base_us=base, alpha_per_peer_us=steps_per_peer * per_step,
                                        busbw_gbps=eff * NCCL_BUSBW) if r.name == "LL128" else r
                    for r in curve.regimes)
    return curve_time_us(dataclasses.replace(curve, regimes=regimes), frame["bytes_per_rank"].to_numpy(float),
                         frame["world_size"].to_numpy(float))


def fit(op: str, frame: pd.DataFrame, per_step: float | None) -> tuple[float, float, float]:
    def unpack(x):
        return (x[0], x[1], x[2]) if per_step is None else (x[0], per_step, x[1])

    def resid(x):
        return np.log(model_us(op, frame, unpack(x)) / frame["median_us"].to_numpy(float))

    x0, lo, hi = (([14.0, 1.9, 0.92], [0, 0, 0.5], [80, 5, 1.0]) if per_step is None
                  else ([14.0, 0.92], [0, 0.5], [80, 1.0]))
    return unpack(least_squares(resid, x0, bounds=(lo, hi)).x)


def errors(op: str, frame: pd.DataFrame, ll128) -> str:
    err = np.abs(model_us(op, frame, ll128) / frame["median_us"].to_numpy(float) - 1)
    return f"median {np.median(err):.1%} max {err.max():.1%}"


def report(op: str, data: pd.DataFrame, ll128, skip: str = "") -> str:
    return "; ".join(f"{t} {errors(op, data[data['table'] == t], ll128)}" for t in SETS[op][0] if t != skip)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", choices=sorted(SETS), default="all_gather")
    op = parser.parse_args().op
    data = rows(op)
    lo, hi = SETS[op][2]
    fit_rows = data[(data["S"] >= lo) & (data["S"] <= hi)]
    nccl = (dp.RING_BASE_US["LL128"], dp.RING_NVLINK_HOP_US["LL128"], 0.92)
    print(f"NCCL's constants {nccl}: {report(op, data, nccl)}")
    for per_step in (None, 0.0):
        label = "per-step latency free" if per_step is None else f"per-step latency fixed at {per_step}"
        both = fit(op, fit_rows, per_step)
        print(f"{label}: every table -> base {both[0]:.2f} us, per step {both[1]:.2f} us, eff {both[2]:.3f}; "
              f"{report(op, data, both)}")
        for table in SETS[op][0]:
            one = fit(op, fit_rows[fit_rows["table"] == table], per_step)
            print(f"    fitted on {table} only -> base {one[0]:.2f}, per step {one[1]:.2f}, eff {one[2]:.3f}; "
                  f"held out: {report(op, data, one, skip=table)}")
    if op == "all_gather":
        used = dp.HOPPER_ALL_GATHER_LL128
        bundled = (used["alpha_base_us"], used["alpha_per_peer_us"], used["busbw_scale"])
        print(f"bundled {bundled}: {report(op, data, bundled)}")


if __name__ == "__main__":
    main()
