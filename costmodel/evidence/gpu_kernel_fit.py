"""Fit the GPU kernel model (`costmodel.model.gpu_kernels`) on measured tables; cross-validate it; derive other GPUs.

`fit_model(frame)` fits every parameter at once by least squares on log(predicted / measured) over the
CUDA-graph rows of the ops the model prices (local_max, local_pack, argmax, relayout_argmax,
pair_reduce, ...), then the three eager parameters (torch_op_us, view_op_us, eager_gap_us) on the eager
rows with the graph parameters fixed. `cross_validate(frame, by)` refits with every batch (or vocab) held
out in turn and returns, per op and mode, the median and p90 of |predicted / measured - 1| on the held-out
rows. A fold can leave a parameter without data (the H200 table's global_reduce_us is set by its largest vocab
alone), and then least squares leaves it wherever the optimizer's path happens to end - up to its bound, and
differently on two CPUs' BLAS builds (p90 3.19 instead of 0.16 on one fold). So a fold's fit adds the weak
prior residuals CV_PRIOR_WEIGHT * (log x - log prior) per parameter (GRAPH_PARAMS / EAGER_PARAMS): a parameter
the fold's rows determine moves by ~1e-4 of itself, one they do not stays at its prior, and the fold's answer is
unique (from the prior or from the full fit as start: p90s within 4e-4). The full fit has no such term. Print it
with:

    python scripts/kernel_cv.py [--csv data/calibration/h200-2026-11-30/kernels.csv]

`derive_model(model, ...)` carries a fitted model to another GPU: element rates scale with SM count x SM
clock, byte rates (reduction read bandwidth, copy rates) with HBM bandwidth; latencies and launch floors stay.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from ..io.errors import InputError
from ..io.measurements import ELEM_BYTES, read_measurements
from ..model.gpu_kernels import lm_head_gemm_us, model_time_us
from ..profiles.kernel_params import GpuKernelModel, LmHeadModel, ReduceOp
from ..profiles.store import DATA_DIR

H200_KERNELS_CSV = DATA_DIR / "calibration" / "h200-2026-11-30" / "kernels.csv"
FIT_OPS = ("local_max", "local_pack", "argmax", "relayout_argmax", "pair_reduce", "local_argmax", "key_pack",
           "chunked_argmax", "relayout_copy", "key_unpack", "d2t_lookup", "d2t_scatter")
# (name, initial value) of the graph parameters, fitted in log space (all positive)
GRAPH_PARAMS = (("value_us", 0.1), ("wave_us", 2.0), ("global_reduce_us", 4.0), ("reduce_gbps", 3600.0),
                ("max_floor_us", 3.3), ("max_elems_per_us", 1.1e6), ("argmax_floor_us", 3.2),
                ("argmax_elems_per_us", 0.9e6), ("small_us", 1.2), ("small_row_us", 0.002),
                ("copy_floor_us", 2.0), ("copy_gbps_2", 1650.0), ("copy_gbps_4", 2700.0),
                ("pair_base_us", 5.0), ("pair_row_us", 0.1), ("pair_peer_us", 0.3))
EAGER_PARAMS = (("torch_op_us", 11.0), ("view_op_us", 4.0), ("eager_gap_us", 5.0))
PRIOR_SPAN = 20.0  # fitted parameters stay within 1/20 .. 20 x their prior (GRAPH_PARAMS, EAGER_PARAMS)
CV_PRIOR_WEIGHT = 0.003  # cross_validate's folds: weight of log(x / prior) beside the log residuals (module doc)


def load_kernel_frame(path: str | Path = H200_KERNELS_CSV) -> pd.DataFrame:
    """A kernel measurement CSV (schema rows), restricted to the ops the model prices."""
    frame = read_measurements(path)
    frame = frame[frame["op"].isin(FIT_OPS)].copy()
    if frame.empty:
        raise InputError(f"{path}: no rows for the GPU kernel model's ops ({', '.join(FIT_OPS)})")
    return frame


def _with_params(base: GpuKernelModel, names: tuple[str, ...], values: np.ndarray) -> GpuKernelModel:
    kv = dict(zip(names, (float(v) for v in values), strict=True))
    ops = dict(base.reduce_ops)
    for kind in ("max", "argmax"):
        if f"{kind}_floor_us" in kv:
            ops[kind] = ReduceOp(kv.pop(f"{kind}_floor_us"), kv.pop(f"{kind}_elems_per_us"))
    copy = dict(base.copy_gbps)
    if "copy_gbps_2" in kv:
        c2, c4 = kv.pop("copy_gbps_2"), kv.pop("copy_gbps_4")
        copy.update({"bf16": c2, "fp16": c2, "fp32": c4})
    return replace(base, reduce_ops=ops, copy_gbps=copy, **kv)


def _design(frame: pd.DataFrame) -> list[tuple[str, np.ndarray, dict]]:
    """Per op: (op, row positions, model_time_us keyword arrays) - built once per fit."""
    dtype = frame["logits_dtype"] if "logits_dtype" in frame else frame["dtype"]
    e = dtype.map(ELEM_BYTES).fillna(4).to_numpy(float)
    out = []
    for op, idx in frame.groupby("op").indices.items():
        sub = frame.iloc[idx]
        out.append((op, idx, {"rows": sub["rows"].to_numpy(float), "cols": sub["cols"].to_numpy(float),
                              "world_size": sub["world_size"].to_numpy(float), "elem_bytes": e[idx],
                              "dtype": dtype.iloc[idx].to_numpy(str), "eager": (sub["mode"] == "eager").to_numpy()}))
    return out


def _predict(model: GpuKernelModel, design: list, n: int) -> np.ndarray:
    out = np.zeros(n)
    for op, idx, kw in design:
        out[idx] = model_time_us(model, op, **kw)
    return out


def predict_frame(model: GpuKernelModel, frame: pd.DataFrame) -> np.ndarray:
    """Model time of every row of a kernel measurement frame (its op, mode, rows, cols, world_size, dtype)."""
    return _predict(model, _design(frame), len(frame))


def fit_model(frame: pd.DataFrame, base: GpuKernelModel, *, start: GpuKernelModel | None = None,
              prior_weight: float = 0.0) -> GpuKernelModel:
    """Least-squares fit of the graph parameters, then of the eager ones (module doc); `prior_weight` > 0 adds
    prior_weight * (log x - log prior) per parameter to the residuals (cross_validate's folds)."""
    graph = frame[frame["mode"] == "graph"]
    eager = frame[frame["mode"] == "eager"]
    start = start or base
    names = tuple(n for n, _ in GRAPH_PARAMS)
    design, t = _design(graph), graph["median_us"].to_numpy(float)

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(_predict(_with_params(base, names, np.exp(x)), design, len(t)) / t)

    model = _with_params(base, names, _solve(resid, start, names, GRAPH_PARAMS, prior_weight))
    if not eager.empty:
        enames = tuple(n for n, _ in EAGER_PARAMS)
        edesign, te = _design(eager), eager["median_us"].to_numpy(float)

        def eresid(x: np.ndarray) -> np.ndarray:
            return np.log(_predict(_with_params(model, enames, np.exp(x)), edesign, len(te)) / te)

        model = _with_params(model, enames, _solve(eresid, start, enames, EAGER_PARAMS, prior_weight))
    return model


def _solve(resid, start: GpuKernelModel, names: tuple[str, ...], priors: tuple[tuple[str, float], ...],
           prior_weight: float = 0.0) -> np.ndarray:
    """Robust least squares in log space, each parameter bounded to PRIOR_SPAN x its prior either way; with
    `prior_weight` > 0 the residuals gain prior_weight * (log x - log prior) (module doc)."""
    prior = np.log([v for _, v in priors])
    lo, hi = prior - np.log(PRIOR_SPAN), prior + np.log(PRIOR_SPAN)
    x0 = np.clip(np.log([_param(start, n) for n in names]), lo + 1e-9, hi - 1e-9)
    fun = resid if prior_weight <= 0 else (lambda x: np.concatenate([resid(x), prior_weight * (x - prior)]))
    return np.exp(least_squares(fun, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1).x)


def _param(model: GpuKernelModel, name: str) -> float:
    for kind in ("max", "argmax"):
        if name == f"{kind}_floor_us":
            return model.reduce_ops[kind].floor_us
        if name == f"{kind}_elems_per_us":
            return model.reduce_ops[kind].elems_per_us
    if name == "copy_gbps_2":
        return model.copy_gbps.get("bf16", 1650.0)
    if name == "copy_gbps_4":
        return model.copy_gbps.get("fp32", 2700.0)
    return float(getattr(model, name))


def errors_table(frame: pd.DataFrame, predicted: np.ndarray) -> pd.DataFrame:
    """Per (op, mode): n, median and p90 of |predicted / measured - 1|."""
    err = np.abs(predicted / frame["median_us"].to_numpy(float) - 1.0)
    tab = frame.assign(abs_rel_error=err).groupby(["op", "mode"])["abs_rel_error"]
    return pd.DataFrame({"n": tab.size(), "median_abs_rel_error": tab.median(),
                         "p90_abs_rel_error": tab.quantile(0.9)}).reset_index()


def cross_validate(frame: pd.DataFrame, base: GpuKernelModel, by: str, *, full: GpuKernelModel | None = None
                   ) -> pd.DataFrame:
    """Leave-one-`by`-out (by = "batch" or "vocab" column) error per op and mode (module doc)."""
    if by not in frame:
        raise InputError(f"cross-validation by {by!r}: the table has no {by} column")
    full = full or fit_model(frame, base)
    predicted = np.full(len(frame), np.nan)
    for value in sorted(frame[by].unique()):
        held = (frame[by] == value).to_numpy()
        model = fit_model(frame[~held], base, start=full, prior_weight=CV_PRIOR_WEIGHT)
        predicted[held] = predict_frame(model, frame[held])
    out = errors_table(frame, predicted)
    out.insert(0, "held_out", f"one {by}")
    return out


def derive_model(model: GpuKernelModel, *, gpu: str, sm_count: int, hbm_gbps: float, sm_clock_ratio: float,
                 source: str) -> GpuKernelModel:
    """`model` carried to another GPU: element rates x (SMs / SMs0) x clock ratio; byte rates x HBM ratio."""
    sm = sm_count / model.sm_count * sm_clock_ratio
    hbm = hbm_gbps / model.hbm_gbps
    return replace(model, gpu=gpu, sm_count=sm_count, hbm_gbps=hbm_gbps,
                   reduce_gbps=model.reduce_gbps * hbm,
                   reduce_ops={k: ReduceOp(v.floor_us, v.elems_per_us * sm) for k, v in model.reduce_ops.items()},
                   copy_gbps={k: v * hbm for k, v in model.copy_gbps.items()},
                   provenance="derived", source=source)


# -- bundled profiles: the H200 fit and the GPUs derived from it (scripts/derive_profiles.py) ------------------
H200_DIR = H200_KERNELS_CSV.parent
H200_PROVENANCE = "measured on one H200 by a standalone torch probe, 2026-11-30"
H200_SOFTWARE = "torch 2.11.0+cu130, CUDA 13.0, NCCL 2.28.9"
TABLE_OPS = ("local_max", "local_pack", "argmax", "relayout_argmax", "pair_reduce")
# (SMs, HBM GB/s, SM boost clock MHz, dense bf16 tensor TFLOPs), from the vendors' datasheets / whitepapers
GPU_SPECS: dict[str, tuple[int, float, float, float, str]] = {
    "h200": (132, 4800.0, 1980.0, 989.0, "NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e, 989 TFLOPs dense BF16; "
             "132 SMs (GH100, as H100 SXM5)"),
    "h100": (132, 3350.0, 1980.0, 989.0, "NVIDIA H100 SXM5: 132 SMs, 1,980 MHz max boost (H100 whitepaper), "
             "3.35 TB/s HBM3, 989 TFLOPs dense BF16 (datasheet)"),
    "a100": (108, 2039.0, 1410.0, 312.0, "NVIDIA A100 SXM4 80GB: 108 SMs, 1,410 MHz boost (A100 whitepaper), "
             "2,039 GB/s HBM2e, 312 TFLOPs dense BF16 (datasheet)"),
}
GPU_NAMES = {"h200": "NVIDIA H200 SXM", "h100": "NVIDIA H100 SXM", "a100": "NVIDIA A100 SXM4 80GB"}
H200_BASE = GpuKernelModel(gpu="NVIDIA H200", sm_count=132, hbm_gbps=4800.0)


def tables_from_frame(frame: pd.DataFrame, source: str) -> list[dict]:
    """Profile kernel tables (complete rows x cols grids) per (op, dtype, mode, world_size) of TABLE_OPS.

    argmax keeps the probe's p = 1 rows only (rows = B, cols = V): its other rows ([p*B, s]) do not form a grid.
    pair_reduce (dtype fp32, read for every logits dtype) takes the median of its repeated shapes.
    """
    out = []
    sub_all = frame[frame["op"].isin(TABLE_OPS)]
    if "batch" in sub_all:
        sub_all = sub_all[(sub_all["op"] != "argmax") | (sub_all["rows"] == sub_all["batch"])]
    for (op, dtype, mode, ws), sub in sub_all.groupby(["op", "dtype", "mode", "world_size"], sort=True):
        cols = sub["cols"].where(sub["cols"] > 0, 1)
        grid = sub.assign(cols=cols).groupby(["rows", "cols"])["median_us"].median()
        rows_ax = sorted({int(r) for r in grid.index.get_level_values(0)})
        cols_ax = sorted({int(c) for c in grid.index.get_level_values(1)})
        if len(grid) != len(rows_ax) * len(cols_ax):
            continue
        out.append({"op": op, "dtype": dtype, "mode": mode, "world_size": int(ws), "rows": rows_ax, "cols": cols_ax,
                    "median_us": [[round(float(grid[(r, c)]), 4) for c in cols_ax] for r in rows_ax],
                    "source": source})
    return out


def fit_lm_head(path: str | Path = H200_DIR / "lm_head.csv") -> tuple[dict, pd.DataFrame]:
    """Least-squares LmHeadModel (costmodel.model.gpu_kernels) on the probe's lm_head table; (params, errors)."""
    d = pd.read_csv(path)
    h, s, r, t = (d[c].to_numpy(float) for c in ("hidden", "cols", "rows", "median_us"))

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(lm_head_gemm_us(LmHeadModel(*np.exp(x)), r, h, s) / t)

    x = np.exp(least_squares(resid, np.log([4.0, 4000.0, 700.0]), loss="soft_l1", f_scale=0.1).x)
    err = np.abs(lm_head_gemm_us(LmHeadModel(*x), r, h, s) / t - 1)
    params = {"floor_us": round(float(x[0]), 3), "weight_gbps": round(float(x[1]), 1), "tflops": round(float(x[2]), 1),
              "provenance": "measured", "source": f"fit on the H200 probe's lm_head.csv, median |error| "
              f"{np.median(err):.1%}, p90 {np.quantile(err, 0.9):.1%}"}
    return params, pd.DataFrame({"abs_rel_error": err})


ENGINE_FIGURES = DATA_DIR / "reference" / "engine-figures" / "torch_all_reduce_eager_vs_graph_4xh100.json"


def c10d_loop_us(path: str | Path = ENGINE_FIGURES, lo_bytes: int = 1024, hi_bytes: int = 256 * 1024) -> float:
    """Host time per eager c10d call: the median `eager_us` of a back-to-back all_reduce loop over
    lo..hi bytes, where the loop is host-bound (eager > graph; see costmodel.model.engines)."""
    sweep = json.loads(Path(path).read_text())["size_sweep"]
    return round(float(np.median([r["eager_us"] for r in sweep if lo_bytes <= r["bytes"] <= hi_bytes])), 1)


def c10d_call_us(path: str | Path = H200_DIR / "c10d_world1.csv") -> dict:
    """c10d_call_us = `c10d_loop_us()`; c10d_table = the H200 single eager all_gather at world size 1 per size
    (no communication: a call's one-off cost, an upper bound)."""
    d = read_measurements(path)
    return {"c10d_call_us": c10d_loop_us(),
            "c10d_table": {"bytes": [int(b) for b in d["bytes_per_rank"]],
                           "median_us": [round(float(v), 3) for v in d["median_us"]]}}


def _rounded(model: GpuKernelModel) -> dict:
    out = model.to_dict()

    def rnd(v):
        return float(f"{v:.5g}") if isinstance(v, float) else v

    return {k: ({kk: ({a: rnd(b) for a, b in vv.items()} if isinstance(vv, dict) else rnd(vv))
                 for kk, vv in v.items()} if isinstance(v, dict) else rnd(v)) for k, v in out.items()}


def kernel_sections(n_replicates: int = 100, seed: int = 0) -> dict[str, dict]:
    """{"h200" | "h100" | "a100": {"model", "host", "lm_head", "tables", "replicates", "cv"}} for the profiles.

    H200: fitted on the bundled probe tables; replicates = refits on case-bootstrap resamples of them.
    H100 / A100: `derive_model` of the H200 fit (and of each replicate) with GPU_SPECS.
    """
    frame = load_kernel_frame()
    fitted = fit_model(frame, H200_BASE)
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(n_replicates):
        idx = rng.integers(0, len(frame), len(frame))
        reps.append(fit_model(frame.iloc[idx], H200_BASE, start=fitted))
    lm, _ = fit_lm_head()
    host = {"torch_op_us": round(fitted.torch_op_us, 2), "view_op_us": round(fitted.view_op_us, 2),
            **c10d_call_us(), "source": f"{H200_PROVENANCE}: torch_op_us / view_op_us fitted on the eager columns "
            "of kernels.csv (costmodel.evidence.gpu_kernel_fit); c10d_call_us = median eager all_reduce time per call "
            "of a back-to-back loop, 1 KiB-256 KiB, 4x H100 (engine-figures; c10d_table: the H200 world-size-1 call)"}
    cv = pd.concat([cross_validate(frame, H200_BASE, by, full=fitted) for by in ("batch", "vocab")])
    src = f"data/calibration/h200-2026-11-30 ({H200_PROVENANCE}; {H200_SOFTWARE})"
    out = {"h200": {"model": _rounded(replace(fitted, provenance="measured",
                                              source=f"{H200_PROVENANCE} ({H200_SOFTWARE}): GPU kernel model "
                                              "fitted on data/calibration/h200-2026-11-30")),
                    "host": host, "lm_head": lm, "tables": tables_from_frame(frame, src),
                    "replicates": [_rounded(m) for m in reps], "cv": cv}}
    sm0, hbm0, clk0, tf0, _ = GPU_SPECS["h200"]
    for key in ("h100", "a100"):
        sm, hbm, clk, tf, cite = GPU_SPECS[key]
        why = (f"derived from the H200 kernel fit ({H200_PROVENANCE}): element rates x SMs x clock, byte rates "
               f"x HBM bandwidth; {cite}")

        def derive(m: GpuKernelModel, key=key, sm=sm, hbm=hbm, clk=clk, why=why) -> GpuKernelModel:
            return derive_model(m, gpu=GPU_NAMES[key], sm_count=sm, hbm_gbps=hbm, sm_clock_ratio=clk / clk0, source=why)

        lm_d = {"floor_us": lm["floor_us"], "weight_gbps": round(lm["weight_gbps"] * hbm / hbm0, 1),
                "tflops": round(lm["tflops"] * tf / tf0, 1), "provenance": "derived",
                "source": f"the H200 lm_head fit scaled by HBM bandwidth and dense BF16 TFLOPs; {cite}"}
        host_d = {**host, "source": "assumed equal to the H200 probe's (host-side costs: CPU, driver and Python, "
                  "not the GPU); " + host["source"]}
        out[key] = {"model": _rounded(derive(fitted)), "host": host_d, "lm_head": lm_d, "tables": [],
                    "replicates": [_rounded(derive(m)) for m in reps], "cv": None}
    return out


# -- a user's CUDA kernel table (calibration.fit) -----------------------------------------------------------------
MIN_MODEL_SHAPES = 2 * len(GRAPH_PARAMS)  # distinct CUDA-graph (op, rows, cols, world_size, dtype) shapes
MIN_CV_GROUPS = 2  # distinct batches and vocabs, so that leaving one out leaves the others


def _gpu_base(gpu: str, base: GpuKernelModel | None) -> tuple[GpuKernelModel | None, str]:
    """(starting model, where its SM count / HBM bandwidth came from) for the GPU named `gpu`."""
    name = gpu.lower()
    for key, (sm, hbm, _, _, cite) in GPU_SPECS.items():
        if key in name.replace(" ", ""):
            return GpuKernelModel(gpu=gpu, sm_count=sm, hbm_gbps=hbm), cite
    if base is not None:
        return (GpuKernelModel(gpu=gpu, sm_count=base.sm_count, hbm_gbps=base.hbm_gbps),
                f"SM count {base.sm_count} and HBM {base.hbm_gbps:g} GB/s of the base profile's kernel model "
                f"({base.gpu}): {gpu!r} is not in costmodel.evidence.gpu_kernel_fit.GPU_SPECS")
    return None, ""


def with_cv_groups(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the `batch` and `vocab` columns cross-validation holds out: kept where the table has them
    (scripts/convert_h200_probe.py writes them), else batch = rows and vocab = cols x world_size (the sharded
    ops' cols is the shard s = V / p)."""
    out = frame
    if "batch" not in out or out["batch"].isna().any():
        out = out.assign(batch=out["rows"].astype(np.int64))
    if "vocab" not in out or out["vocab"].isna().any():
        out = out.assign(vocab=(out["cols"] * out["world_size"]).astype(np.int64))
    return out


def fit_table_model(frame: pd.DataFrame, *, gpu: str, base: GpuKernelModel | None = None, source: str = "",
                    n_replicates: int = 0, seed: int = 0) -> tuple[dict | None, list[dict], pd.DataFrame, str, list]:
    """Fit the kernel model on a user's CUDA kernel rows: (kernels.model dict or None, kernels.model_cv rows,
    in-sample error table, note, replicate model dicts).

    Uses the rows measured on CUDA (`device` cuda) of the ops the model prices (FIT_OPS). Needs at least
    MIN_MODEL_SHAPES distinct CUDA-graph shapes (2 per fitted graph parameter) and MIN_CV_GROUPS batches and
    vocabs; else returns no model and a note saying why (the caller keeps the roofline fit). SM count and HBM
    bandwidth come from GPU_SPECS when the GPU's name names one of them, else from `base` (the base
    profile's kernel model). model_cv = leave-one-batch-out and leave-one-vocab-out `cross_validate`, as
    scripts/kernel_cv.py prints it. Replicates: `n_replicates` refits on case-bootstrap resamples of the rows
    (numpy default_rng(seed)), as `kernel_sections` makes the bundled H200 profile's (~0.05 s each).
    """
    empty = pd.DataFrame(columns=["op", "mode", "n", "median_abs_rel_error", "p90_abs_rel_error"])
    device = frame["device"].astype(str) if "device" in frame else pd.Series("unknown", index=frame.index)
    rows = frame[(device == "cuda").to_numpy() & frame["op"].isin(FIT_OPS).to_numpy()]
    if rows.empty:
        return None, [], empty, "", []
    rows = with_cv_groups(rows.reset_index(drop=True))
    graph = rows[rows["mode"] == "graph"]
    n_shapes = len(graph[["op", "rows", "cols", "world_size", "dtype"]].drop_duplicates())
    n_batch, n_vocab = rows["batch"].nunique(), rows["vocab"].nunique()
    if n_shapes < MIN_MODEL_SHAPES or n_batch < MIN_CV_GROUPS or n_vocab < MIN_CV_GROUPS:
        return None, [], empty, (f"GPU kernel model not fitted: {n_shapes} CUDA-graph shapes, {n_batch} batches, "
                                 f"{n_vocab} vocabs (needs >= {MIN_MODEL_SHAPES} shapes and >= {MIN_CV_GROUPS} "
                                 "batches and vocabs); kernels priced by the per-op roofline fit"), []
    start, spec = _gpu_base(gpu, base)
    if start is None:
        return None, [], empty, (f"GPU kernel model not fitted: no SM count / HBM bandwidth for {gpu!r} (not in "
                                 "gpu_kernel_fit.GPU_SPECS; pass --base-profile with a kernels.model)"), []
    fitted = fit_model(rows, start)
    cv = pd.concat([cross_validate(rows, start, by, full=fitted) for by in ("batch", "vocab")], ignore_index=True)
    model = _rounded(replace(fitted, provenance="measured",
                             source=f"GPU kernel model (costmodel.model.gpu_kernels) fitted by calibration.fit on "
                             f"{len(rows)} CUDA rows of {source or 'the measurements'}; {spec}"))
    model_cv = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
                for row in cv.to_dict("records")]
    ops = sorted(set(rows["op"]))
    note = (f"GPU kernel model fitted on {len(rows)} rows ({n_shapes} CUDA-graph shapes; ops {', '.join(ops)}); "
            "parameters only unmeasured ops use keep costmodel.profiles.kernel_params.GpuKernelModel's defaults")
    rng = np.random.default_rng(seed)
    reps = [_rounded(replace(fit_model(rows.iloc[rng.integers(0, len(rows), len(rows))], start, start=fitted),
                             provenance="measured", source=model["source"])) for _ in range(n_replicates)]
    return model, model_cv, errors_table(rows, predict_frame(fitted, rows)), note, reps
