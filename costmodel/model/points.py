"""Predict measurement-schema rows: the bridge between calibration data and the model."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..io.errors import InputError
from ..io.measurements import COLLECTIVE_OPS, D2T_DRAFT_COLS, DTYPES, ELEM_BYTES
from ..profiles.types import Profile
from .collectives import collective_time_us
from .engines import PLANS, Stage, host_costs, step_time_us
from .kernels import kernel_time_us
from .parts import TORCH_OPS, TORCH_VIEWS

# ops of the measurement schema without a strategy component of their own: torch ops they issue
_POINT_OPS = {"local_max": 1, "local_pack": 4, "local_argmax_masked": 6, "relayout_argmax": 2}


def engine_points(frame, profile: Profile, engine: str):
    """Measurement rows priced as `engine` runs each op alone (predict-points --engine).

    Captured engines (sglang, trtllm): the graph-mode price. vllm: the op is launched by the host,
    so one op of n torch ops / c10d calls alone takes step_time_us([Stage(h, g, n)]) =
    max(h/n + g, h + g/n) with g its graph-mode GPU time and h its host time
    (engines.HostCosts). Returns a copy of `frame` with `predicted_us` and `mode` as priced.
    """
    plan = PLANS.get(engine)
    if plan is None:
        raise InputError(f"engine: unknown {engine!r} (known: {', '.join(PLANS)})")
    graph = predict_points(frame.assign(mode="graph"), profile)
    if plan.is_captured("*"):
        return graph
    hc = host_costs(profile)
    ops = graph["op"].astype(str)
    n = ops.map(lambda op: TORCH_OPS["fused"] if op.endswith("_fused")
                else TORCH_OPS.get(op, _POINT_OPS.get(op, 1))).to_numpy(float)
    views = ops.map(lambda op: TORCH_VIEWS.get(op, 0)).to_numpy(float)
    collective = ops.isin(["all_gather", "all_reduce", "gather", "broadcast"]).to_numpy()
    h = np.where(collective, hc.c10d_call_us, n * hc.torch_op_us + views * hc.view_op_us)
    n = np.where(collective, 1.0, n)
    g = graph["predicted_us"].to_numpy(float)
    out = graph.assign(mode="eager")
    out["predicted_us"] = step_time_us([Stage(h, g, n)])
    return out


def numeric_column(frame: pd.DataFrame, name: str, default: float = np.nan) -> np.ndarray:
    """frame[name] as floats, `default` where a value does not parse or the column is absent."""
    if name not in frame.columns:
        return np.full(len(frame), default, dtype=float)
    values = pd.to_numeric(frame[name], errors="coerce").to_numpy(float)
    return values if np.isnan(default) else np.where(np.isnan(values), default, values)


def floor_priced(frame: pd.DataFrame) -> np.ndarray:
    """Rows priced at their nccl-tests table's own host floor (`host_floor_us`, see costmodel.evidence.validate), not by
    the model: predicted_us <= host_floor_us (to 1e-9 relative)."""
    floor = numeric_column(frame, "host_floor_us")
    return np.isfinite(floor) & (frame["predicted_us"].to_numpy(float) <= floor * (1 + 1e-9))


def point_groups(frame: pd.DataFrame) -> list[tuple[np.ndarray, str, dict]]:
    """The rows of `frame` (measurement schema) grouped by op, as the arrays the model prices them from:
    [(row mask, op, keyword arguments of `collective_time_us` / `kernel_time_us`)]. Extracted once, a table can be
    priced by many profiles (`price_points`; a profile's bootstrap replicates) without pandas per profile."""
    elem = frame["dtype"].map(ELEM_BYTES).fillna(4).to_numpy(float)
    groups = []
    for op in frame["op"].unique():
        m = (frame["op"] == op).to_numpy()
        rows = frame[m]
        if op in COLLECTIVE_OPS:
            args = {"bytes_per_rank": rows["bytes_per_rank"].to_numpy(float),
                    "world_size": rows["world_size"].to_numpy(), "nodes": rows["nodes"].to_numpy(),
                    "mode": rows["mode"].to_numpy().astype(str)}
        else:
            dtype = rows["dtype"].where(rows["dtype"].isin(list(DTYPES)), "fp32").to_numpy().astype(str)
            args = {"rows": rows["rows"].to_numpy(float), "cols": rows["cols"].to_numpy(float),
                    "world_size": rows["world_size"].to_numpy(), "dtype": dtype, "elem_bytes": elem[m],
                    "mode": rows["mode"].to_numpy().astype(str), "draft_cols": D2T_DRAFT_COLS}
        groups.append((m, op, args))
    return groups


def price_points(groups: list[tuple[np.ndarray, str, dict]], n: int, profile: Profile) -> tuple[np.ndarray, np.ndarray]:
    """(predicted_us, predicted_extrapolated) of the n rows of `point_groups` under `profile`: per op group,
    `collective_time_us` (never extrapolated) or `kernel_time_us`."""
    pred = np.full(n, np.nan)
    extrap = np.zeros(n, dtype=bool)
    for m, op, args in groups:
        if op in COLLECTIVE_OPS:
            pred[m] = collective_time_us(profile, op, **args)
        else:
            est = kernel_time_us(profile, op, **args)
            pred[m], extrap[m] = est.time_us, est.extrapolated
    return pred, extrap


def predict_points(frame: pd.DataFrame, profile: Profile) -> pd.DataFrame:
    """Copy of `frame` (measurement schema) with `predicted_us` (and `predicted_extrapolated`) added."""
    out = frame.copy()
    out["predicted_us"], out["predicted_extrapolated"] = price_points(point_groups(out), len(out), profile)
    return out
