"""Fit and cross-check the Hopper NVLink all_gather LL128 regime (scripts/derive_profiles.py HOPPER_ALL_GATHER_LL128).

    python scripts/fit_hopper_all_gather.py

Rows: the device-bound rows of the two published single-process nccl-tests all_gather tables on H100 SXM
(data/reference/nccl-tests.csv, tables h100x4-all_gather-quiet and h100x8-all_gather-ring), 4 MiB .. 8 GiB in
total. The model is the profile's select-"min" ring curve (costmodel.model.collectives):

    t = launch_us + alpha_base + alpha_per_peer (p - 1) + f(p) (S + s_half) / busbw,   f(p) = (p - 1) / p

with LL and Simple as scripts/derive_profiles.py derives them and LL128 = (alpha_base, alpha_per_peer, eff x 370.8
GB/s) fitted by least squares on log(model / measured) over the rows of 8-128 MiB in total (the in-sample rows the
manifest marks), alpha_per_peer >= 0. Prints the fit on both tables and on each alone, with per-peer latency free,
fixed at NCCL's 1.9 us and fixed at 0, and for each the other table's error on its rows of >= 4 MiB in total
(leave-one-table-out), next to NCCL's own constants.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import derive_profiles as dp  # noqa: E402

MIB = 2**20
TABLES = {4: "h100x4-all_gather-quiet", 8: "h100x8-all_gather-ring"}
NCCL_BUSBW = 370.8  # NCCL's Hopper ring model bandwidth (derive_profiles CITATIONS[1])


def rows() -> pd.DataFrame:
    ref = pd.read_csv(ROOT / "data" / "reference" / "nccl-tests.csv")
    out = ref[ref["table"].isin(TABLES.values())].copy()
    out["S"] = out["bytes_per_rank"] * out["world_size"]
    return out[out["S"] >= 4 * MIB].reset_index(drop=True)


def regimes(ll128: tuple[float, float, float]) -> list[tuple[float, float, float, float]]:
    """(alpha_base, alpha_per_peer, busbw, s_half) of LL, LL128, Simple (all_gather, NCCL 2.23+ rules)."""
    rules = dp.NCCL_RULES["2.23+"]
    ll_bw = min(rules["ll_max_gbps"]["hopper"], rules["ll_factor"]["all_gather"] * NCCL_BUSBW)
    simple_half = dp.s_half_from_point(385.3, 128 * MIB, 8, "all_gather",
                                       dp.RING_BASE_US["Simple"] + 7 * dp.RING_NVLINK_HOP_US["Simple"], 355.0)
    base, hop, eff = ll128
    return [(dp.RING_BASE_US["LL"], dp.RING_NVLINK_HOP_US["LL"], ll_bw, 0.0), (base, hop, eff * NCCL_BUSBW, 0.0),
            (dp.RING_BASE_US["Simple"], dp.RING_NVLINK_HOP_US["Simple"], 355.0, simple_half)]


def model_us(frame: pd.DataFrame, ll128: tuple[float, float, float]) -> np.ndarray:
    p, size = frame["world_size"].to_numpy(float), frame["S"].to_numpy(float)
    f = (p - 1) / p
    return np.min([dp.LAUNCH_US + a + h * (p - 1) + f * (size + s) / bw * 1e-3 for a, h, bw, s in regimes(ll128)],
                  axis=0)


def fit(frame: pd.DataFrame, hop: float | None) -> tuple[float, float, float]:
    def unpack(x):
        return (x[0], x[1], x[2]) if hop is None else (x[0], hop, x[1])

    def resid(x):
        return np.log(model_us(frame, unpack(x)) / frame["median_us"].to_numpy(float))

    x0, lo, hi = ([14.0, 1.9, 0.92], [0, 0, 0.5], [60, 5, 1.0]) if hop is None else ([14.0, 0.92], [0, 0.5], [60, 1.0])
    return unpack(least_squares(resid, x0, bounds=(lo, hi)).x)


def errors(frame: pd.DataFrame, ll128) -> str:
    err = np.abs(model_us(frame, ll128) / frame["median_us"].to_numpy(float) - 1)
    return f"median {np.median(err):.1%} max {err.max():.1%}"


def main() -> None:
    data = rows()
    fit_rows = data[(data["S"] >= 8 * MIB) & (data["S"] <= 128 * MIB)]
    nccl = (dp.RING_BASE_US["LL128"], dp.RING_NVLINK_HOP_US["LL128"], 0.92)
    print(f"NCCL's constants {nccl}: " + "; ".join(
        f"{p} GPUs {errors(data[data['world_size'] == p], nccl)}" for p in TABLES))
    for hop in (None, dp.RING_NVLINK_HOP_US["LL128"], 0.0):
        label = "per-peer free" if hop is None else f"per-peer fixed {hop}"
        both = fit(fit_rows, hop)
        print(f"{label}: both tables -> base {both[0]:.2f} us, per-peer {both[1]:.2f} us, eff {both[2]:.3f}; "
              + "; ".join(f"{p} GPUs {errors(data[data['world_size'] == p], both)}" for p in TABLES))
        for p, other in ((4, 8), (8, 4)):
            one = fit(fit_rows[fit_rows["world_size"] == p], hop)
            print(f"    fitted on {p} GPUs only -> base {one[0]:.2f}, per-peer {one[1]:.2f}, eff {one[2]:.3f}; "
                  f"held-out {other} GPUs: {errors(data[data['world_size'] == other], one)}")
    fit_ = dp.HOPPER_ALL_GATHER_LL128
    used = (fit_["alpha_base_us"], fit_["alpha_per_peer_us"], fit_["busbw_scale"])
    print(f"bundled {used}: " + "; ".join(f"{p} GPUs {errors(data[data['world_size'] == p], used)}" for p in TABLES))


if __name__ == "__main__":
    main()
