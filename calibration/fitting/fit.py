"""Fit a cost-model profile (costmodel.profiles.types schema v1) from calibration measurements.

    python -m calibration.fit INPUT... --out profile.json [--name NAME] [--title T] [--base-profile P]
                              [--bootstrap N] [--max-regimes K] [--seed S]

INPUT is a measurement CSV (costmodel.profiles.schema) or a benchmark directory (every *.csv in it). numpy / scipy /
pandas only - never torch (the dashboard fits uploads with `fit_measurements`).

Collectives, per (op, world_size p, mode) group, with S = total_bytes(op, b, p) and x = S f(p) 1e-3
(f = bus_factor; x in us at 1 GB/s):

    t = c_i + x / bw_i                          in regime i (a run of sizes between breakpoints on S)

fitted by calibration.fitting.segmented: least squares on relative error (model - t) / t with c_i >= 0 and
bw_i <= BW_MAX_GBPS, the split into K <= --max-regimes regimes by dynamic programming over the distinct sizes
(at least MIN_REGIME_SIZES sizes per regime). Number of regimes: every K is scored by its leave-one-size-out
error (the p90 of |relative error| on the held-out sizes, each fold refitted with that K; vectorized over folds),
and by the small-sample-corrected BIC on log residuals (formula in calibration.fitting.segmented). BIC alone under-fits
regime switches on held-out sizes, so the K with the best cross-validated score replaces BIC's choice when it
beats BIC's by more than CV_TOLERANCE; within it (CV cannot tell them apart) BIC's K stands. The report's
`regime_choice` says which K each criterion gave and the CV score of every K. A mid-size bandwidth ramp of the
form busbw S / (S + s_half) (costmodel.model.collectives) is, inside one regime, an intercept shift (alpha + f s_half
/ busbw), so every regime's free intercept already fits it exactly (fitting s_half too cannot change a single
prediction); fitted curves carry s_half_bytes = 0.

Ramps. What a free intercept cannot fit is the transition between regimes: the plain curve jumps at a
breakpoint placed between two measured sizes. The ramp variant of a K-regime fit (K >= 2, per-p curves) adds
one ramp regime across each breakpoint, the line from the lower regime's time at its last measured size to the
upper regime's at its first (no extra fitted parameter; `_with_ramps` has the exact rule). Each fold of the
leave-one-size-out CV prices its held-out rows with its own ramps; the best ramp variant (any K) replaces the
plain choice only when its CV score beats the plain choice's by more than RAMP_TOLERANCE (10%): at 5%, 3 of 30
synthetic single-regime data sets (20 sizes, 5% noise) got ramps, at 10% 1 of 30, and a planted jump 0 of 30
(measured while writing this). The report's `regime_choice` lists every ramp variant's CV score and the
verdict. Bootstrap replicates get the same ramps (their breakpoints are fixed); when the point's ramps would
fall outside the replicates' range (refused on load) the plain choice is kept instead, and the report says so.
A breakpoint between neighbouring sizes lo < hi sits where the two fitted lines cross when that point lies
strictly between lo and hi, else at sqrt(lo hi); it is written as floor(breakpoint) so S = lo stays in the lower
regime. With >= 2 world sizes measured for (op, mode) a generic curve (world_size null) is fitted over all of them:
alpha = a_i + b_i (p - 1) per regime, one bw_i per regime,
shared breakpoints (geometric means) - it prices unmeasured p by extrapolation.

Tail ramps (issue 18). A regime is a line c + x / bw with c >= 0, so where the bandwidth drops late (gloo past the
caches: the time grows faster than its line through the origin) no number of regimes fits the largest sizes, and the
chosen curve misses them one way (-49% to -62% at 8 MiB per rank on a 16-core gloo calibration). Every per-p curve's
training medians are compared with their measured spread (`spread_misses`: the curve outside [p10 (1 -
SPREAD_FLOOR), p90 (1 + SPREAD_FLOOR)] of the size's rows); when the TAIL_RUN or more largest sizes are all missed
with the same sign, the curve keeps its regimes up to the size below them and each of those sizes gets a ramp regime
from the previous size's time to its own measured median (`_with_tail`: the `_with_ramps` rule, so a line through
the origin where the chord would need c < 0) - it passes through every one of those medians, and the last one
extends beyond the largest size. The measured spread of a size is the wider of its rows' own p10 / p90 and the 10th
/ 90th percentiles of its rows' times. Noisy medians also miss one way by chance, so the tail is kept only when it
predicts those sizes better than the plain curve when each is left out in turn (`_tail_cv`: mean |relative error|
lower by more than TAIL_TOLERANCE); else the report says why not. Each replicate gets tail ramps from its own time
below them through its own medians of those sizes (`_tail_medians`: their rows redrawn within the size, else the
median times a redrawn log residual of the other sizes); the report's `regime_choice` says so, and the printed
report lists every training median still missed (`spread_misses`: [bytes_per_rank, rel_err] pairs on every per-p
curve's report row, [] when none is missed; generic curves have no row medians of their own and no such key - the
fit_report.csv table counts them, `calibration.fitting.report_table`).

Uncertainty: B bootstrap replicates resample the fit's log residuals (t* = model x exp(eps*), eps* drawn
with replacement from eps = log(t / model) over the group's rows - or, where every measured point has at least
MIN_WITHIN_SIZE_ROWS rows, only from the rows of the same size, so that t* is one of that size's own measured
times: the within-size bootstrap of the raw samples; the report note says which) and refit every regime with
the breakpoints fixed at the fit's own (so a replicate never moves a regime switch the data placed; issue 9).
One-shot / multimem curves (DIR/<impl>/) get replicates the same way, tagged with their impl.
All replicates are solved in one vectorized batch, so B = 200 costs ~0.05 s per group; groups with more than
~40 distinct sizes get B scaled down (B * k^2 <= BOOTSTRAP_WORK, at least 50) and the report says how many
were used. ci90 = 5th / 95th percentiles; the first MAX_STORED_REPLICATES replicates are stored as
profile["bootstrap"] = [{"collectives": [curve, ...], "kernels": {"ops": ...}}, ...]: every fitted kernel op's
roofline bandwidth gets the same residual bootstrap (one regime), its launch costs stay at the point. The file
`main` writes holds them compactly (costmodel.profiles.compact columns-v1: only the numbers that differ per replicate).

Raw samples: every per-p curve stores its measurements per size as `samples` (curve_samples; n rows, median,
the rows' own p10 / p90, up to MAX_RAW_SAMPLES raw times; costmodel.profiles.types.CurveSamples validates them on
load), and the printed report ends with the stored curves' residuals against them (sample_residuals, from the
profile alone).

GPU kernel model: CUDA kernel rows of the ops costmodel.model.gpu_kernels prices, with enough shapes, are also fitted
with that model (costmodel.evidence.gpu_kernel_fit.fit_table_model): kernels.model, kernels.model_cv (leave-one-batch /
vocab-out) and min(B, MAX_STORED_REPLICATES) case-bootstrap refits as the replicates' kernels.model; too few
shapes give a "skipped" kernel_model report row (a warning on the CLI) and the roofline prices the kernels.

Held-out error: leave-one-size-out (drop every row of one bytes_per_rank, refit with the same K, predict the
dropped rows with costmodel.model.collectives.curve_time_us) pooled over sizes; kernels: leave-one-shape-out
(rows, cols, world_size) of the per-op fit.

Kernels, per op: t = I(mode) + kernel_bytes(op, rows, cols, p, e) 1e-3 / bw (same bounded relative least
squares), mapped onto the profile's roofline  L k(mode) + fixed_us + bytes / bw_gbps  with launches L from the
base profile (or 1):  delta = k_eager - k_graph = sum L (I_e - I_g) / sum L^2 over ops measured in both modes
(>= 0); J = mean over measured modes of (I_m - L delta [m = eager]); k_graph = min over ops of J / L (the
largest per-kernel cost that keeps every fixed_us >= 0); fixed_us = J - L k_graph. Every intercept is then
reproduced exactly up to the op's own eager-graph gap mismatch (I_e - I_g - L delta) / 2. Eager-only data
(CPU): delta = 0 so graph_kernel_us = eager_launch_us; graph-only data keeps the base profile's delta.
Complete measured (rows x cols) grids are stored as kernels.tables (cols 0 -> [1]).

Input limits (bounded cost): at most MAX_FIT_ROWS input rows; repeated rows of one point (every column but
the times equal) are binned to at most MAX_REPEATS_PER_POINT rows - the order statistics at ranks
floor((j + 1/2) c / R) of its c times, j < R, so the point's median and spread survive - so n <= R x points;
a curve with more than MAX_GROUP_SIZES distinct sizes and a kernel op with more than MAX_KERNEL_SHAPES shapes
are skipped (reported). Before any curve is fitted the plan is checked (`fit_plan`): at most MAX_FIT_CURVES
curves (per-p, generic and --impl curves alike) and at most MAX_FIT_POINTS distinct (curve, size) points over them
(so at most 16 x MAX_FIT_POINTS rows) - fit time is ~linear in the curves and ~k^2 n in a curve of k sizes and n
rows, so the worst plan allowed is ~10 curves at the 192-size limit; beyond either limit the fit is refused
with one line naming it. A time budget (`time_budget_s`, CLI --time-budget-s, DEFAULT_TIME_BUDGET_S) is
checked before every curve and kernel op: when it is spent the fit stops with one line saying how far it got.
Binning is one hash group-by and one sort (O(rows log rows)); then a group's fit holds
O(B n + B k^2 + k^3) floats (B <= 200 replicates, n <= 16 k rows, k <= 192 sizes; the k^3 term is the
leave-one-size-out range sums): scripts/bench_limits.py measures a 1M-row, 19.75 MiB upload, a curve at the
192-size limit and the two worst plans the curve / point limits allow (docs/limits.md has the figures).

Everything not measured comes from the base profile (default: the bundled default profile); provenance.kind is
"measured" only when nothing of the base profile remains reachable, else "mixed".
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from costmodel.io.errors import InputError, OneLineParser
from costmodel.io.measurements import (
    COLLECTIVE_OPS,
    D2T_DRAFT_COLS,
    DTYPES,
    ELEM_BYTES,
    FUSED_KERNEL_OPS,
    KERNEL_OPS,
    MODES,
    TIME_COLUMNS,
    TOPK_KERNEL_OPS,
    read_measurements,
    validate_measurements,
)
from costmodel.io.outputs import check_output
from costmodel.io.safe_io import check_rows, loads_json, read_bytes
from costmodel.model.collectives import bus_factor, curve_time_us, total_bytes
from costmodel.model.kernel_ratios import DTYPE_FREE_OPS
from costmodel.model.kernels import kernel_bytes, roofline_us
from costmodel.model.points import numeric_column
from costmodel.profiles.compact import compact_document
from costmodel.profiles.consistency import check_replicates
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.parse_curves import curve_from_dict
from costmodel.profiles.schema import MAX_RAW_SAMPLES
from costmodel.profiles.store import default_profile, load_profile, save_profile
from costmodel.profiles.types import SCHEMA_VERSION, Profile

from .base_parts import base_rows as kept_rows
from .base_parts import eager_prices_graph, keep_base_kernels, keep_base_members
from .negative_intercept import with_pieces
from .segmented import best_split, bic, polish, range_fits, solve_bounded

BW_MAX_GBPS = 1e6  # upper bound on a fitted bandwidth (a latency-only regime hits it)
BETA_MIN = 1.0 / BW_MAX_GBPS
MIN_GROUP_SIZES = 3  # distinct sizes a group needs to be fitted at all
MAX_GROUP_SIZES = 192  # distinct sizes per curve (leave-one-size-out holds ~k^3 floats: "Input limits" below)
MAX_KERNEL_SHAPES = 1024  # distinct (rows, cols, world_size) shapes per kernel op (leave-one-shape-out)
MAX_REPEATS_PER_POINT = 16  # rows kept per measured point (evenly spaced order statistics of its times)
MAX_FIT_ROWS = 2_000_000  # input rows before binning
MAX_FIT_CURVES = 64  # collective curves per fit: per-p, generic and impl curves ("Input limits" below)
MAX_FIT_POINTS = 2048  # distinct (curve, size) points summed over those curves (rows <= 16 x points)
DEFAULT_TIME_BUDGET_S = 300.0  # the worst plan the limits allow fitted in 66 s at load 5 (scripts/bench_limits.py)
MAX_TIME_BUDGET_S = 86400.0
MIN_REGIME_SIZES = 3  # distinct sizes per regime when choosing K
MIN_REFIT_SIZES = 2  # distinct sizes per regime in bootstrap / cross-validation refits
CV_SCORE_QUANTILE = 0.9  # K is chosen by this quantile of the leave-one-size-out |relative error|
CV_TOLERANCE = 0.05  # ... when it beats the BIC choice's score by more than 5% (relative)
CV_MIN_FOLD_SHARE = 0.5  # a K counts only when at least half of the folds have an admissible split
RAMPS = True  # consider ramp regimes across breakpoints (kept only when leave-one-size-out CV improves)
RAMP_TOLERANCE = 0.1  # ... by more than this (relative) over the plain choice
MAX_STORED_REPLICATES = 100
SPREAD_FLOOR = 0.05  # a training median is missed when the curve lies outside [p10 (1 - f), p90 (1 + f)] of its rows
TAIL_RUN = 2  # the largest sizes missed one way (same sign, beyond their spread) that get tail ramps ...
TAIL_TOLERANCE = 0.05  # ... when, left out one at a time, the tail ramps predict them this much better (relative)
NEG_PIECES = True  # regimes whose best line has c < 0: origin pieces when leave-one-size-out says so (issue 18)
BOOTSTRAP_WORK = 200 * 40 * 40  # replicates * distinct sizes^2 per group before B is scaled down
MIN_BOOTSTRAP = 50
BOOTSTRAP_METHOD = ("calibration.fit: per curve, the measured times redrawn within each size where every size has "
                    ">= 3 rows (within-size), else the fit's log residuals resampled over the curve's rows (residual; "
                    "each report row's note says which); breakpoints and ramps fixed; kernel op bandwidths: residual")
MIN_WITHIN_SIZE_ROWS = 3  # rows every measured point needs for the within-size bootstrap (else: residual)
REDRAW_ROUNDS = 5
REPO_ROOT = Path(__file__).resolve().parents[2]  # calibration/fitting/fit.py -> the repository root
REPORT_COLUMNS = ("kind", "op", "world_size", "mode", "nodes", "status", "n_points", "n_sizes", "n_regimes",
                  "breakpoints_bytes", "in_median_rel_err", "in_p90_rel_err", "cv_median_rel_err",
                  "cv_p90_rel_err", "cv_folds", "n_bootstrap", "regime_choice", "note")


class _Skip(Exception):
    """A group that cannot be fitted (reported, not fatal)."""


def _num(x: float) -> float:
    """A JSON-friendly float with 6 significant digits."""
    return float(f"{float(x):.6g}")


# -- collectives -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Rows:
    """Rows of one collective group; world_size None marks the generic (all world sizes) fit."""

    op: str
    mode: str
    world_size: int | None
    nodes: int
    bytes_per_rank: np.ndarray
    p: np.ndarray
    time_us: np.ndarray
    p10_us: np.ndarray | None = None  # the rows' own iteration percentiles (NaN where not given)
    p90_us: np.ndarray | None = None

    @property
    def generic(self) -> bool:
        return self.world_size is None

    @property
    def size_bytes(self) -> np.ndarray:
        return total_bytes(self.op, self.bytes_per_rank, self.p)

    def design(self) -> np.ndarray:
        """a = z / t with z = [1, (p - 1), S f(p) 1e-3] (the (p - 1) column only for the generic fit)."""
        x = self.size_bytes * bus_factor(self.op, self.p) * 1e-3
        cols = [np.ones_like(x)] + ([self.p - 1.0] if self.generic else []) + [x]
        return np.stack(cols, axis=1) / self.time_us[:, None]

    def lower(self) -> np.ndarray:
        return np.array([0.0] * (2 if self.generic else 1) + [BETA_MIN])


@dataclass(frozen=True)
class _GroupFit:
    curve: dict[str, Any]
    report: dict[str, Any]
    replicates: list[dict[str, Any]] = field(default_factory=list)


def _max_bytes(rows: _Rows, theta: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Breakpoints (..., K-1) between sizes lo < hi: floor of the regimes' crossing when it lies strictly
    inside (lo, hi), else floor(sqrt(lo hi)); lo and hi are integers, so lo <= result < hi."""
    bp = np.sqrt(lo * hi)
    if not rows.generic and theta.shape[-2] > 1:
        factor = float(bus_factor(rows.op, np.asarray(rows.world_size))) * 1e-3
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = (theta[..., 1:, 0] - theta[..., :-1, 0]) / (theta[..., :-1, -1] - theta[..., 1:, -1]) / factor
        bp = np.where((cross > lo) & (cross < hi), cross, bp)
    return np.floor(bp)


def _curve_dict(rows: _Rows, theta: np.ndarray, max_bytes: Sequence[float]) -> dict:
    regimes = []
    for i, th in enumerate(theta):
        regimes.append({
            "name": f"R{i + 1}", "max_bytes": int(max_bytes[i]) if i < len(max_bytes) else None,
            "alpha_base_us": _num(th[0]), "alpha_per_peer_us": _num(th[1]) if rows.generic else 0.0,
            "alpha_per_node_us": 0.0, "busbw_gbps": _num(1.0 / th[-1]),
        })
    return {"op": rows.op, "world_size": rows.world_size, "mode": rows.mode,
            "nodes": None if rows.generic else rows.nodes, "launch_us": 0.0,
            "eager_overhead_us": 0.0, "provenance": "measured", "regimes": regimes}


def _predict(curve: dict, rows: _Rows, mask: np.ndarray | None = None) -> np.ndarray:
    b = rows.bytes_per_rank if mask is None else rows.bytes_per_rank[mask]
    p = rows.p if mask is None else rows.p[mask]
    return curve_time_us(curve_from_dict(curve), b, p, 1, rows.mode)


def _replicates(rows: _Rows, sizes: np.ndarray, split) -> tuple[np.ndarray, np.ndarray]:
    """(theta (R, K, d), max_bytes (R, K-1)) of the valid replicates of a batched split."""
    ok = split.valid
    theta = split.theta[ok]
    return theta, _max_bytes(rows, theta, sizes[split.lo[ok]], sizes[split.hi[ok]])


def _ci90(curve: dict, theta: np.ndarray, max_bytes: np.ndarray, generic: bool) -> None:
    """Add 5-95% percentile intervals of every regime parameter over the replicates to `curve` (in place)."""
    values = {"alpha_base_us": theta[..., 0], "busbw_gbps": 1.0 / theta[..., -1]}
    if generic:
        values["alpha_per_peer_us"] = theta[..., 1]
    for i, regime in enumerate(curve["regimes"]):
        columns = {**{k: v[:, i] for k, v in values.items()},
                   **({"max_bytes": max_bytes[:, i]} if i < max_bytes.shape[1] else {})}
        regime["ci90"] = {k: [float(int(x)) if k == "max_bytes" else _num(x) for x in np.percentile(v, [5, 95])]
                          for k, v in columns.items()}  # breakpoints are whole bytes (fixed in the bootstrap)


def _errors(pred: np.ndarray, t: np.ndarray) -> np.ndarray:
    return np.abs(pred - t) / t


def _err_stats(err: np.ndarray) -> tuple[float | None, float | None]:
    if err.size == 0:
        return None, None
    return _num(np.median(err)), _num(np.percentile(err, 90))


def bin_repeats(frame: pd.DataFrame, max_repeats: int = MAX_REPEATS_PER_POINT) -> pd.DataFrame:
    """`frame` with every point measured more than `max_repeats` times (rows equal in every column but the
    times) cut to `max_repeats` rows: the order statistics at ranks floor((j + 1/2) c / R), j < R, of its
    c median_us values (module doc, "Input limits"). Other rows are kept as they are, in their order."""
    keys = [c for c in frame.columns if c not in TIME_COLUMNS and not c.startswith("_")]
    codes = frame.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    counts = np.bincount(codes)
    if counts.max(initial=0) <= max_repeats:
        return frame
    order = np.lexsort((frame["median_us"].to_numpy(float), codes))
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    c = counts[codes[order]]
    rank = np.arange(len(order)) - start[codes[order]]
    keep = (c <= max_repeats) | (rank == ((rank * max_repeats // c) * 2 + 1) * c // (2 * max_repeats))
    return frame.iloc[np.sort(order[keep])].reset_index(drop=True)


def _line_through(x_lo: float, t_lo: float, x_hi: float, t_hi: float) -> tuple[float, float]:
    """The regime (alpha_base_us, busbw_gbps) of the line T = alpha + x / busbw through (x_lo, t_lo) and (x_hi, t_hi),
    x in bus bytes: flat at t_lo (busbw = BW_MAX_GBPS) when the time does not grow; through the origin to (x_hi,
    t_hi) when the line would need a negative intercept (a regime's alpha is >= 0); busbw clipped to the fitter's
    bounds."""
    if t_hi <= t_lo:
        return t_lo, BW_MAX_GBPS
    inv = (t_hi - t_lo) / (x_hi - x_lo)
    alpha = t_lo - inv * x_lo
    if alpha < 0:
        alpha, inv = 0.0, t_hi / x_hi
    return alpha, min(BW_MAX_GBPS, max(1.0 / BW_MAX_GBPS, 1.0 / inv))


def _with_ramps(rows: _Rows, curve: dict, lo: np.ndarray, hi: np.ndarray) -> dict:
    """`curve` with a ramp regime across every breakpoint (module doc, "Ramps"): between the last measured size
    lo of regime i and the first measured size hi of regime i + 1 (total bytes S), the line from T_i(lo) to
    T_{i+1}(hi); regime i ends at lo, the ramp at hi - 1. Where that line would need alpha < 0 (a cliff: the
    time grows faster than the size across the gap; profiles hold alpha >= 0) it is the line through the
    origin and T_{i+1}(hi): the jump at lo shrinks to T_{i+1}(hi) lo / hi (the monotone envelope of
    costmodel.model.collectives keeps it >= T_i(lo)) and the rest rises linearly. Where T_{i+1}(hi) <= T_i(lo) the
    ramp is flat at T_i(lo) (latency-only), as the envelope priced that gap before. A breakpoint whose
    sizes are less than 2 bytes apart keeps its jump."""
    factor = float(bus_factor(rows.op, np.asarray(float(rows.world_size)))) * 1e-3
    regimes = curve["regimes"]
    out = []
    for i, r in enumerate(regimes):
        if i == len(regimes) - 1 or hi[i] - lo[i] < 2:
            out.append(dict(r))
            continue
        nxt = regimes[i + 1]
        x_lo, x_hi = factor * lo[i], factor * hi[i]
        t_lo = r["alpha_base_us"] + x_lo / r["busbw_gbps"]
        t_hi = nxt["alpha_base_us"] + x_hi / nxt["busbw_gbps"]
        alpha, bw = _line_through(x_lo, t_lo, x_hi, t_hi)
        out.append({**r, "max_bytes": int(lo[i])})
        out.append({"name": f"{r['name']}-{nxt['name']} ramp", "max_bytes": int(hi[i]) - 1,
                    "alpha_base_us": _num(alpha), "alpha_per_peer_us": 0.0, "alpha_per_node_us": 0.0,
                    "busbw_gbps": _num(bw)})
    return {**curve, "regimes": out}


def _cv_errors(rows: _Rows, sizes: np.ndarray, held: np.ndarray, cv_split, *, ramps: bool = False
               ) -> tuple[np.ndarray, int]:
    """Leave-one-size-out |relative errors| (pooled over the folds with an admissible split) and the fold count;
    ramps=True prices each fold's curve with `_with_ramps` across its own breakpoints."""
    ok = np.flatnonzero(cv_split.valid)
    lo, hi = sizes[cv_split.lo[ok]], sizes[cv_split.hi[ok]]
    err = []
    for j, (f, th, mb) in enumerate(zip(ok, *_replicates(rows, sizes, cv_split))):
        curve = _curve_dict(rows, th, mb)
        if ramps:
            curve = _with_ramps(rows, curve, lo[j], hi[j])
        err.append(_errors(_predict(curve, rows, held[f]), rows.time_us[held[f]]))
    return (np.concatenate(err) if err else np.array([])), int(cv_split.valid.sum())


def _ci90_of_dicts(curve: dict, replicates: list[dict], generic: bool) -> None:
    """5-95% percentile intervals of every regime parameter over replicate curve dicts (same regimes), in place."""
    keys = ["alpha_base_us", "busbw_gbps"] + (["alpha_per_peer_us"] if generic else [])
    for i, regime in enumerate(curve["regimes"]):
        cols = {k: [rep["regimes"][i][k] for rep in replicates] for k in keys}
        if regime.get("max_bytes") is not None:
            cols["max_bytes"] = [rep["regimes"][i]["max_bytes"] for rep in replicates]
        regime["ci90"] = {k: [float(int(x)) if k == "max_bytes" else _num(x) for x in np.percentile(v, [5, 95])]
                          for k, v in cols.items()}


def _cv_score(err: np.ndarray) -> float:
    """CV_SCORE_QUANTILE of the held-out |relative errors| (inf when there are none)."""
    return float(np.quantile(err, CV_SCORE_QUANTILE)) if err.size else math.inf


def _choose_regimes(candidates: list, n_folds: int, by_bic) -> tuple[Any, dict]:
    """The number of regimes with the least cross-validated score (module doc, "Number of regimes").

    Candidates need held-out errors on at least CV_MIN_FOLD_SHARE of the folds. The K with the least score
    replaces the BIC choice when it beats the BIC choice's score by more than CV_TOLERANCE (relative); within
    that tolerance (cross-validation cannot tell them apart) the BIC choice stands, as it does when no K has
    enough folds.
    """
    scored = [(c, _cv_score(c[4])) for c in candidates if c[5] >= CV_MIN_FOLD_SHARE * n_folds and c[4].size]
    per_k = {_label(c): (None if not math.isfinite(sc) else _num(sc)) for c, sc in scored}
    info = {"bic_regimes": by_bic[0], "cv_score": f"p{round(100 * CV_SCORE_QUANTILE)} |rel err|, leave-one-size-out",
            "cv_score_by_regimes": per_k}
    if not scored:
        return by_bic, _choice_text({"by": "bic (no K with enough cross-validation folds)", "cv_regimes": None,
                                     **info})
    best, best_score = min(scored, key=lambda t: (t[1], t[0][0], _ramped(t[0])))
    bic_score = next((sc for c, sc in scored if c is by_bic), math.inf)
    if best is not by_bic and best_score < bic_score / (1.0 + CV_TOLERANCE):
        return best, _choice_text({"by": "cv", "cv_regimes": _label(best), **info})
    by = "bic = cv" if best is by_bic else "bic (cross-validation within tolerance)"
    return by_bic, _choice_text({"by": by, "cv_regimes": _label(best), **info})


def _choose_ramps(chosen: tuple, choice: str, ramped: list, n_folds: int) -> tuple[tuple, str]:
    """The ramp variant (of any K) with the least leave-one-size-out score replaces the plain choice only when
    it beats the plain choice's score by more than RAMP_TOLERANCE (relative; module doc, "Ramps")."""
    scored = [(c, _cv_score(c[4])) for c in ramped if c[5] >= CV_MIN_FOLD_SHARE * n_folds and c[4].size]
    if not scored:
        return chosen, choice
    best, best_score = min(scored, key=lambda t: (t[1], t[0][0]))
    plain_score = _cv_score(chosen[4])
    take = best_score < plain_score / (1.0 + RAMP_TOLERANCE)
    text = ", ".join(f"{_label(c)} {sc:.3g}" for c, sc in scored)
    verdict = f"{_label(best)} by cv" if take else f"none (best {_label(best)} not {100 * RAMP_TOLERANCE:.0f}% better)"
    return (best if take else chosen), f"{choice}; ramps: {verdict} ({text})"


def _ramped(candidate: tuple) -> bool:
    """Whether a regime candidate is the ramp variant (module doc, "Ramps")."""
    return len(candidate) > 7 and bool(candidate[7])


def _label(candidate: tuple) -> str:
    """'2' for 2 regimes, '2+ramps' for its ramp variant."""
    return f"{candidate[0]}+ramps" if _ramped(candidate) else str(candidate[0])


def _choice_text(info: dict) -> str:
    """'K by cv (BIC: 2, CV: 1; p90 |rel err|, leave-one-size-out by K: 1 0.092, 2 0.107)' for the report."""
    chosen = info["cv_regimes"] if info["by"] == "cv" else info["bic_regimes"]
    scores = ", ".join(f"{k} {v:.3g}" if v is not None else f"{k} -" for k, v in info["cv_score_by_regimes"].items())
    return (f"{chosen} by {info['by']} (BIC: {info['bic_regimes']}, CV: {info['cv_regimes']}; "
            f"{info['cv_score']} by K: {scores or 'none'})")


def _draw_within(strata: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) row indices: each row replaced by a uniformly drawn row of its own stratum."""
    strata = np.asarray(strata, dtype=np.int64)
    order = np.argsort(strata, kind="stable")
    counts = np.bincount(strata)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = start[strata][None, :] + np.floor(rng.random((n_boot, strata.size)) * counts[strata][None, :])
    return order[np.minimum(pos.astype(np.int64), strata.size - 1)]


def _residual_bootstrap(a: np.ndarray, lower: np.ndarray, theta: np.ndarray, segment: np.ndarray,
                        breakpoints: np.ndarray, n_boot: int, rng: np.random.Generator,
                        strata: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Replicates of a segmented fit by resampling its log residuals, breakpoints fixed (module doc).

    With q = a.theta = model / t per row, t* = model * exp(eps*) for eps* resampled from
    eps = log(t / model) gives a* = a * q[idx] / q. `strata` (per row, e.g. the measured size): eps* is
    drawn only from rows of the same stratum - there the model is the same, so t* is one of that size's own
    measured times (the within-size bootstrap of the raw samples). Each regime is refitted on its own rows by
    the normal equations of min |a* theta - 1|^2, batched over replicates; a replicate whose solution
    breaks a bound is re-solved by `polish` (bounded least squares).
    """
    n = a.shape[0]
    q = np.einsum("nd,nd->n", a, theta[segment])
    idx = rng.integers(0, n, size=(n_boot, n)) if strata is None else _draw_within(strata, n_boot, rng)
    c = q[idx] / q[None, :]  # (B, n)
    out = np.empty((n_boot, theta.shape[0], theta.shape[1]))
    for i in range(theta.shape[0]):
        m = segment == i
        ai, ci = a[m], c[:, m]
        gram = np.einsum("bj,jd,je->bde", ci * ci, ai, ai)
        rhs = np.einsum("bj,jd->bd", ci, ai)
        try:
            sol = np.linalg.solve(gram, rhs[..., None])[..., 0]
        except np.linalg.LinAlgError:
            sol = np.tile(theta[i], (n_boot, 1))
        bad = ~np.all(np.isfinite(sol) & (sol >= lower[None, :]), axis=1)
        for b in np.flatnonzero(bad):
            sol[b] = polish(ai * ci[b][:, None], lower, theta[i])
        out[:, i] = sol
    return out, np.tile(breakpoints, (n_boot, 1))


def _medians(rows: _Rows) -> dict[str, np.ndarray]:
    """Per distinct size (ascending): bytes_per_rank, total bytes S, the median of the rows (curve_samples) and
    their measured spread: p10 / p90 = the wider of the rows' own p10_us / p90_us and the 10th / 90th
    percentiles of their times (several rows of one size)."""
    smp = curve_samples(rows)
    b = np.asarray(smp["bytes_per_rank"], dtype=float)
    raw_lo = np.array([np.quantile(r, 0.1) for r in smp["raw_us"]])
    raw_hi = np.array([np.quantile(r, 0.9) for r in smp["raw_us"]])
    return {"b": b, "S": total_bytes(rows.op, b, np.full(b.shape, float(rows.world_size))),
            "median_us": np.asarray(smp["median_us"], dtype=float),
            "p10_us": np.minimum(np.asarray(smp["p10_us"], dtype=float), raw_lo),
            "p90_us": np.maximum(np.asarray(smp["p90_us"], dtype=float), raw_hi)}


def _tail_medians(rows: _Rows, curve: dict, med: dict[str, np.ndarray], run: int, n_boot: int,
                  rng: np.random.Generator) -> np.ndarray:
    """(n_boot, run) replicate medians of the `run` largest sizes: the median of that size's rows drawn with
    replacement where it has >= MIN_WITHIN_SIZE_ROWS rows, else its median x exp(eps) with eps drawn from the
    curve's log residuals over the other sizes' rows (the two bootstraps of the module doc)."""
    sizes = med["b"][-run:]
    below = rows.bytes_per_rank < sizes[0]
    pool = np.log(rows.time_us[below] / _predict(curve, rows, below))
    out = np.empty((n_boot, run))
    for j, b in enumerate(sizes):
        t = rows.time_us[rows.bytes_per_rank == b]
        if t.size >= MIN_WITHIN_SIZE_ROWS:
            out[:, j] = np.median(t[rng.integers(0, t.size, size=(n_boot, t.size))], axis=1)
        else:
            out[:, j] = med["median_us"][-run + j] * np.exp(pool[rng.integers(0, pool.size, size=n_boot)])
    return out


def spread_misses(rows: _Rows, curve: dict, med: dict[str, np.ndarray] | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(missed, rel_err) per distinct size of a per-p curve's rows: rel_err = curve / median - 1, missed where the
    curve lies outside [p10 (1 - SPREAD_FLOOR), p90 (1 + SPREAD_FLOOR)] of that size's rows (module doc)."""
    med = _medians(rows) if med is None else med
    pred = curve_time_us(curve_from_dict(curve), med["b"], float(rows.world_size), 1, rows.mode)
    missed = (pred < med["p10_us"] * (1 - SPREAD_FLOOR)) | (pred > med["p90_us"] * (1 + SPREAD_FLOOR))
    return missed, pred / med["median_us"] - 1


def _tail_run(rows: _Rows, curve: dict, med: dict[str, np.ndarray]) -> int:
    """How many of the largest sizes the curve misses beyond their spread, all on the same side (0 when fewer
    than TAIL_RUN, or when they would leave fewer than MIN_GROUP_SIZES sizes below them)."""
    missed, err = spread_misses(rows, curve, med)
    run = 0
    while run < len(err) and missed[-1 - run] and np.sign(err[-1 - run]) == np.sign(err[-1]):
        run += 1
    return run if TAIL_RUN <= run <= len(err) - MIN_GROUP_SIZES else 0


def _with_tail(rows: _Rows, curve: dict, med: dict[str, np.ndarray], run: int) -> dict:
    """`curve` with its `run` largest sizes priced by tail ramps (module doc, "Tail ramps"): the regimes up to the
    size below them (the one holding it ends there), then per size j a ramp regime from the previous size's time
    (the curve's own at the first) to j's measured median, ending at S_j - the last one open-ended."""
    factor = float(bus_factor(rows.op, np.asarray(float(rows.world_size)))) * 1e-3
    anchor = len(med["S"]) - run - 1
    s_anchor = int(np.floor(med["S"][anchor]))
    regimes = []
    for r in curve["regimes"]:
        if r["max_bytes"] is not None and r["max_bytes"] < s_anchor:
            regimes.append(dict(r))
            continue
        regimes.append({**r, "max_bytes": s_anchor})
        break
    t_prev = float(curve_time_us(curve_from_dict(curve), med["b"][anchor], float(rows.world_size), 1, rows.mode))
    x_prev = factor * med["S"][anchor]
    for j in range(anchor + 1, len(med["S"])):
        x_j, t_j = factor * med["S"][j], float(med["median_us"][j])
        alpha, bw = _line_through(x_prev, t_prev, x_j, t_j)
        last = j == len(med["S"]) - 1
        regimes.append({"name": f"tail {j - anchor}", "max_bytes": None if last else int(np.floor(med["S"][j])),
                        "alpha_base_us": _num(alpha), "alpha_per_peer_us": 0.0, "alpha_per_node_us": 0.0,
                        "busbw_gbps": _num(bw)})
        t_prev, x_prev = t_j, x_j
    return {**curve, "regimes": regimes}


def _tail_cv(rows: _Rows, curve: dict, med: dict[str, np.ndarray], run: int) -> tuple[float, float]:
    """(tail, plain): the mean |relative error| at each of the `run` largest sizes of the tail ramps built without
    that size (leave-one-size-out over the tail), and of `curve` itself at those sizes (module doc, "Tail ramps")."""
    n = len(med["S"])
    tail, plain = [], []
    for j in range(n - run, n):
        held = {k: np.delete(v, j) for k, v in med.items()}
        without = curve_from_dict(_with_tail(rows, curve, held, run - 1))
        t = med["median_us"][j]
        tail.append(abs(float(curve_time_us(without, med["b"][j], float(rows.world_size), 1, rows.mode)) / t - 1))
        plain.append(abs(float(curve_time_us(curve_from_dict(curve), med["b"][j], float(rows.world_size), 1,
                                             rows.mode)) / t - 1))
    return float(np.mean(tail)), float(np.mean(plain))


def _fit_group(rows: _Rows, *, max_regimes: int, bootstrap: int, rng: np.random.Generator) -> _GroupFit:
    """Segmented fit, K by cross-validated error, leave-one-size-out CV and bootstrap of one group (module doc)."""
    sizes, size_index = np.unique(rows.size_bytes, return_inverse=True)
    k, n = len(sizes), len(rows.time_us)
    if k < MIN_GROUP_SIZES:
        raise _Skip(f"{k} distinct size(s); needs >= {MIN_GROUP_SIZES}")
    if k > MAX_GROUP_SIZES:
        raise _Skip(f"{k} distinct sizes, more than the limit of {MAX_GROUP_SIZES} per curve")
    if rows.generic and len(np.unique(rows.p)) < 2:
        raise _Skip("generic curve needs >= 2 world sizes")
    a, lower = rows.design(), rows.lower()
    groups = dict(group_index=rows.p, min_groups=2) if rows.generic else {}
    main = range_fits(a, size_index, k, np.ones((1, n)), lower, min_sizes=MIN_REGIME_SIZES, **groups)
    refit = dict(min_sizes=MIN_REFIT_SIZES, **groups)
    folds = np.unique(rows.bytes_per_rank)
    held = rows.bytes_per_rank[None, :] == folds[:, None]
    cv_fits = range_fits(a, size_index, k, (~held).astype(float), lower, **refit)  # every fold, every run
    candidates = []  # (n_regimes, split, theta, bic, cv errors, cv folds)
    for n_regimes in range(1, max_regimes + 1):
        split = best_split(main, n_regimes)
        if not split.valid[0]:
            break
        segment = np.searchsorted(split.ends[0], size_index)
        theta = np.array([polish(a[segment == i], lower, split.theta[0, i]) for i in range(n_regimes)])
        score = bic(np.log(np.einsum("nd,nd->n", a, theta[segment])), n_regimes * a.shape[1] + n_regimes - 1)
        cv_split = best_split(cv_fits, n_regimes)
        cv_err, n_folds = _cv_errors(rows, sizes, held, cv_split)
        candidates.append((n_regimes, split, theta, score, cv_err, n_folds, cv_split, False))
        if RAMPS and n_regimes > 1 and not rows.generic:  # the ramp variant of K (module doc, "Ramps")
            ramp_err, _ = _cv_errors(rows, sizes, held, cv_split, ramps=True)
            candidates.append((n_regimes, split, theta, score, ramp_err, n_folds, cv_split, True))
    if not candidates or not any(math.isfinite(c[3]) or c[4].size for c in candidates):
        raise _Skip(f"too few points for even one regime ({n} rows, {k} sizes)")
    plain = [c for c in candidates if not _ramped(c)]  # BIC cannot see a ramp (no fitted parameter)
    by_bic = min((c for c in plain if math.isfinite(c[3])), key=lambda c: c[3], default=plain[0])
    plain_choice = _choose_regimes(plain, len(folds), by_bic)
    chosen, choice = _choose_ramps(*plain_choice, [c for c in candidates if _ramped(c)], len(folds))
    point_index = np.unique(np.stack([rows.bytes_per_rank, rows.p]), axis=1, return_inverse=True)[1].reshape(-1)
    within = bool(np.bincount(point_index).min() >= MIN_WITHIN_SIZE_ROWS)
    method = "within-size" if within else "residual"
    while True:
        n_regimes, split, theta, _, cv_err, n_cv_folds, _, ramps = chosen
        breakpoints = _max_bytes(rows, theta, sizes[split.lo[0]], sizes[split.hi[0]])
        lo_s, hi_s = sizes[split.lo[0]], sizes[split.hi[0]]
        curve = _curve_dict(rows, theta, breakpoints)
        if ramps:
            curve = _with_ramps(rows, curve, lo_s, hi_s)
        boot_theta = np.zeros((0, n_regimes, a.shape[1]))
        boot_bytes = np.zeros((0, n_regimes - 1))
        if bootstrap > 0:
            n_boot = min(bootstrap, max(MIN_BOOTSTRAP, BOOTSTRAP_WORK // (k * k)))
            boot_theta, boot_bytes = _residual_bootstrap(a, lower, theta, np.searchsorted(split.ends[0], size_index),
                                                         np.asarray(breakpoints, dtype=float).reshape(-1), n_boot,
                                                         rng, strata=point_index if within else None)
        ramped_reps = []
        if ramps and len(boot_theta):  # the same sizes lo / hi (breakpoints fixed): the same regimes in every one
            ramped_reps = [_with_ramps(rows, _curve_dict(rows, th, mb), lo_s, hi_s)
                           for th, mb in zip(boot_theta, boot_bytes)]
            try:  # a ramp is a function of its neighbours' fits; loading refuses replicates that do not bracket it
                check_replicates({"collectives": [curve], "bootstrap": [{"collectives": [r]}
                                                                        for r in ramped_reps[:MAX_STORED_REPLICATES]]})
            except InputError:  # back to the plain choice (and its own bootstrap)
                chosen, choice = plain_choice[0], plain_choice[1] + (
                    "; ramps dropped: their bootstrap replicates do not bracket the point fit's")
                continue
        break
    pieces, pieced_reps = 0, None
    if NEG_PIECES and not rows.generic:  # negative best intercepts: calibration.fitting.negative_intercept
        factor = float(bus_factor(rows.op, np.asarray(float(rows.world_size)))) * 1e-3
        plain_reps = ramped_reps if ramps else [_curve_dict(rows, th, mb) for th, mb in zip(boot_theta, boot_bytes)]
        pieced, new_reps, notes = with_pieces(curve, plain_reps, rows.size_bytes, rows.time_us, factor,
                                              beta_min=BETA_MIN, bw_max=BW_MAX_GBPS)
        choice += "".join(f"; {n}" for n in notes)
        if pieced is not curve:
            pieces = sum("piece" in r["name"] for r in pieced["regimes"])
            curve, pieced_reps = pieced, new_reps
    med = None if rows.generic else _medians(rows)
    run = 0 if med is None else _tail_run(rows, curve, med)
    tail_reps: list[dict] = []
    if run:
        cv_tail, cv_plain = _tail_cv(rows, curve, med, run)
        if not cv_tail < cv_plain / (1.0 + TAIL_TOLERANCE):
            choice += (f"; tail: the {run} largest sizes missed one way, no tail ramps (leave-one-out over them "
                       f"{cv_tail:.3g} vs {cv_plain:.3g} without: not {100 * TAIL_TOLERANCE:.0f}% better)")
            run = 0
    if run:  # the largest sizes missed one way: tail ramps through their medians (module doc, "Tail ramps")
        tailed = _with_tail(rows, curve, med, run)
        reps_plain = (pieced_reps if pieced_reps is not None else ramped_reps if ramps else
                      [_curve_dict(rows, th, mb) for th, mb in zip(boot_theta, boot_bytes)])
        drawn = _tail_medians(rows, curve, med, run, len(reps_plain), rng)  # each replicate's own tail medians
        tail_reps = [_with_tail(rows, r, {**med, "median_us": np.concatenate([med["median_us"][:-run], d])}, run)
                     for r, d in zip(reps_plain, drawn)]
        try:
            if tail_reps:
                check_replicates({"collectives": [tailed], "bootstrap": [{"collectives": [r]}
                                                                         for r in tail_reps[:MAX_STORED_REPLICATES]]})
            curve = tailed
            choice += (f"; tail: the {run} largest sizes missed one way beyond their spread, priced by {run} tail "
                       f"ramps through their medians (leave-one-out over them {cv_tail:.3g} vs {cv_plain:.3g})")
        except InputError:
            tail_reps, run = [], 0
            choice += "; tail ramps dropped: their bootstrap replicates do not bracket the point fit's"
    in_err = _errors(_predict(curve, rows), rows.time_us)
    if tail_reps:
        _ci90_of_dicts(curve, tail_reps, rows.generic)
    elif pieced_reps:
        _ci90_of_dicts(curve, pieced_reps, rows.generic)
    elif len(boot_theta) and not ramps:
        _ci90(curve, boot_theta, boot_bytes, rows.generic)
    elif ramped_reps:
        _ci90_of_dicts(curve, ramped_reps, rows.generic)
    if tail_reps:
        replicates = tail_reps[:MAX_STORED_REPLICATES]
    elif pieced_reps is not None:
        replicates = pieced_reps[:MAX_STORED_REPLICATES]
    else:
        replicates = (ramped_reps[:MAX_STORED_REPLICATES] if ramps else
                      [_curve_dict(rows, th, mb) for th, mb in zip(boot_theta[:MAX_STORED_REPLICATES],
                                                                  boot_bytes[:MAX_STORED_REPLICATES])])
    in_med, in_p90 = _err_stats(in_err)
    cv_med, cv_p90 = _err_stats(cv_err)
    measured_p = sorted(int(v) for v in np.unique(rows.p))
    note = (f"generic alpha = a + b (p - 1) over p = {', '.join(map(str, measured_p))}; "
            "extrapolated for other p") if rows.generic else ""
    if rows.nodes > 1:
        note = f"all rows span {rows.nodes} nodes (curves are keyed by world_size and mode only)"
    if len(boot_theta):
        note = "; ".join(x for x in (note, f"bootstrap: {method}") if x)
    if not rows.generic:
        curve["samples"] = curve_samples(rows)
    report = {
        "kind": "collective", "op": rows.op, "world_size": rows.world_size, "mode": rows.mode,
        "nodes": rows.nodes, "status": "fitted", "n_points": n, "n_sizes": k, "n_regimes": n_regimes,
        "breakpoints_bytes": [r["max_bytes"] for r in curve["regimes"][:-1]], "ramps": ramps,
        "in_median_rel_err": in_med, "in_p90_rel_err": in_p90, "cv_median_rel_err": cv_med,
        "cv_p90_rel_err": cv_p90, "cv_folds": n_cv_folds, "n_bootstrap": len(boot_theta),
        "note": note, "regime_choice": choice, "tail_ramps": run, "negative_intercept_pieces": pieces,
    }
    if med is not None:  # every training median the stored curve misses beyond its measured spread
        missed, err = spread_misses(rows, curve, med)
        report["spread_misses"] = [[int(b), _num(e)] for b, e in zip(med["b"][missed], err[missed])]
    return _GroupFit(curve=curve, report=report, replicates=replicates)


def _skip_row(kind: str, op: str, world_size, mode, reason: str, n_points: int, nodes=None) -> dict:
    row = {c: None for c in REPORT_COLUMNS}
    row.update(kind=kind, op=op, world_size=world_size, mode=mode, nodes=nodes, status=f"skipped: {reason}",
               n_points=n_points, breakpoints_bytes=[], note="")
    return row


def _spread(values: np.ndarray | None, median: float, mask: np.ndarray) -> float:
    """Median of the rows' own percentile column at one size; `median` where no row has a positive one."""
    v = np.full(int(mask.sum()), np.nan) if values is None else values[mask]
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.median(v)) if v.size else median


def curve_samples(rows: _Rows) -> dict[str, list]:
    """The curve's stored measurements per distinct bytes_per_rank (costmodel.profiles.types.CurveSamples): n rows,
    the median of their median_us, the medians of their own p10_us / p90_us (clipped to bracket the median)
    and raw_us = their median_us, sorted; more than MAX_RAW_SAMPLES rows keep the order statistics at ranks
    floor((j + 1/2) n / MAX_RAW_SAMPLES) (as bin_repeats), so the profile stays bounded."""
    sizes, inverse = np.unique(rows.bytes_per_rank, return_inverse=True)
    out: dict[str, list] = {"bytes_per_rank": [], "n": [], "median_us": [], "p10_us": [], "p90_us": [], "raw_us": []}
    for i, b in enumerate(sizes):
        mask = inverse == i
        t = np.sort(rows.time_us[mask])
        med = float(np.median(t))
        raw = t if t.size <= MAX_RAW_SAMPLES else t[(2 * np.arange(MAX_RAW_SAMPLES) + 1) * t.size
                                                     // (2 * MAX_RAW_SAMPLES)]
        out["bytes_per_rank"].append(int(b))
        out["n"].append(int(t.size))
        out["median_us"].append(_num(med))
        out["p10_us"].append(_num(min(med, _spread(rows.p10_us, med, mask))))
        out["p90_us"].append(_num(max(med, _spread(rows.p90_us, med, mask))))
        out["raw_us"].append([_num(v) for v in raw])
    return out


class _Budget:
    """The fit's time budget (module doc, "Input limits"): `check` before every curve / kernel op raises one
    InputError line once `seconds` have passed since the fit started."""

    def __init__(self, seconds: float | None, curves: int) -> None:
        self.seconds, self.curves, self.done = seconds, curves, 0
        self.start = time.monotonic()

    def check(self) -> None:
        elapsed = time.monotonic() - self.start
        if self.seconds is not None and elapsed > self.seconds:
            raise InputError(f"fit: time budget of {self.seconds:g} s spent after {self.done} of {self.curves} "
                             f"curves ({elapsed:.0f} s); pass --time-budget-s to allow more, or fit fewer curves")


def fit_plan(frame: pd.DataFrame) -> list[tuple[str, int]]:
    """(label, distinct sizes) of every collective curve `_fit_collectives` would fit from `frame` (validated,
    binned rows): per (op, world_size, mode) at its fewest nodes, and a generic curve per (op, mode) over >= 2
    single-node world sizes; groups the fit skips anyway (too few or too many sizes) are left out."""
    coll = frame[frame["op"].isin(COLLECTIVE_OPS)]
    plan: list[tuple[str, int]] = []
    generic: dict[tuple[str, str], list[np.ndarray]] = {}
    for (op, ws, mode), sub in coll.groupby(["op", "world_size", "mode"], sort=True):
        if int(ws) < 2:
            continue
        nodes = int(sub["nodes"].min())
        k = int(sub.loc[sub["nodes"] == nodes, "bytes_per_rank"].nunique())
        if MIN_GROUP_SIZES <= k <= MAX_GROUP_SIZES:
            plan.append((f"{op} p={int(ws)} {mode}", k))
            if nodes == 1:
                b = sub.loc[sub["nodes"] == nodes, "bytes_per_rank"].to_numpy(float)
                generic.setdefault((op, mode), []).append(total_bytes(op, b, np.full(b.shape, float(ws))))
    for (op, mode), parts in sorted(generic.items()):
        k = int(np.unique(np.concatenate(parts)).size) if len(parts) >= 2 else 0
        if MIN_GROUP_SIZES <= k <= MAX_GROUP_SIZES:
            plan.append((f"{op} any p {mode}", k))
    return plan


def check_fit_plan(plan: Sequence[tuple[str, int]], source: str = "measurements") -> None:
    """Refuse (one line) a fit of more than MAX_FIT_CURVES curves or MAX_FIT_POINTS points, before any work."""
    if len(plan) > MAX_FIT_CURVES:
        raise InputError(f"{source}: {len(plan)} collective curves to fit, more than the limit of {MAX_FIT_CURVES} "
                         "per fit (fit fewer (op, world size, mode) groups at a time)")
    points = sum(k for _, k in plan)
    if points > MAX_FIT_POINTS:
        raise InputError(f"{source}: {points} measured sizes over {len(plan)} collective curves, more than the "
                         f"limit of {MAX_FIT_POINTS} points per fit (fewer sizes or curves per fit)")


def _fit_collectives(frame: pd.DataFrame, *, max_regimes: int, bootstrap: int, seed: int, stream: tuple[int, ...] = (),
                     budget: _Budget | None = None) -> tuple[list[dict], list[dict], list[list[dict]]]:
    """(curves, report rows, per-curve bootstrap replicates) for every collective group; group g draws its
    bootstrap from numpy's default_rng([seed, *stream, g]). `budget` is checked before every curve."""
    coll = frame[frame["op"].isin(COLLECTIVE_OPS)]
    curves, reports, reps = [], [], []
    generic_rows: dict[tuple[str, str], list[pd.DataFrame]] = {}
    counter = 0

    def run(rows: _Rows) -> None:
        nonlocal counter
        if budget is not None:
            budget.check()
        counter += 1
        rng = np.random.default_rng([seed, *stream, counter])
        try:
            fit = _fit_group(rows, max_regimes=max_regimes, bootstrap=bootstrap, rng=rng)
        except _Skip as exc:
            reports.append(_skip_row("collective", rows.op, rows.world_size, rows.mode, str(exc),
                                     len(rows.time_us), rows.nodes))
            return
        curves.append(fit.curve)
        reports.append(fit.report)
        reps.append(fit.replicates)
        if budget is not None:
            budget.done += 1

    for (op, ws, mode), sub in coll.groupby(["op", "world_size", "mode"], sort=True):
        ws = int(ws)
        if ws < 2:
            reports.append(_skip_row("collective", op, ws, mode, "world_size 1 costs 0 in the model", len(sub)))
            continue
        nodes = int(sub["nodes"].min())
        other = sub[sub["nodes"] != nodes]
        if len(other):
            reports.append(_skip_row("collective", op, ws, mode,
                                     f"rows with nodes = {sorted(set(other['nodes'].astype(int)))} besides "
                                     f"nodes = {nodes} (curves are keyed by world_size and mode only)",
                                     len(other), nodes=int(other["nodes"].max())))
            sub = sub[sub["nodes"] == nodes]
        before = len(curves)
        run(_Rows(op, mode, ws, nodes, sub["bytes_per_rank"].to_numpy(float), sub["world_size"].to_numpy(float),
                  sub["median_us"].to_numpy(float), numeric_column(sub, "p10_us"), numeric_column(sub, "p90_us")))
        if len(curves) > before and nodes == 1:
            generic_rows.setdefault((op, mode), []).append(sub)
    for (op, mode), parts in sorted(generic_rows.items()):
        if len(parts) < 2:
            continue
        sub = pd.concat(parts)
        run(_Rows(op, mode, None, 1, sub["bytes_per_rank"].to_numpy(float), sub["world_size"].to_numpy(float),
                  sub["median_us"].to_numpy(float)))
    return curves, reports, reps


# -- kernels ---------------------------------------------------------------------------------------------
def _elem_bytes(dtype: pd.Series) -> np.ndarray:
    return dtype.map(ELEM_BYTES).to_numpy(float)


def _kernel_nbytes(op: str, sub: pd.DataFrame) -> np.ndarray:
    return kernel_bytes(op, sub["rows"].to_numpy(float), sub["cols"].to_numpy(float),
                        sub["world_size"].to_numpy(float), _elem_bytes(sub["dtype"]), D2T_DRAFT_COLS)


@dataclass(frozen=True)
class _KernelFit:
    op: str
    intercept_us: dict[str, float]  # per measured mode
    bw_gbps: float
    in_err: dict[str, np.ndarray]  # per mode, in-sample relative errors of the per-op fit
    cv_err: dict[str, np.ndarray]  # per mode, leave-one-shape-out relative errors
    cv_folds: int
    n_shapes: int
    bw_boot_gbps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # residual-bootstrap replicates of bw


def _fit_kernel_op(op: str, sub: pd.DataFrame, *, bootstrap: int = 0, rng: np.random.Generator | None = None
                   ) -> _KernelFit:
    """t = I(mode) + bytes 1e-3 / bw on relative error, plus leave-one-shape-out CV."""
    modes = sorted(set(sub["mode"]))
    nbytes = _kernel_nbytes(op, sub)
    if len(np.unique(nbytes)) < 2:
        raise _Skip("roofline needs >= 2 distinct byte counts")
    n_shapes = len(sub[["rows", "cols", "world_size"]].drop_duplicates())
    if n_shapes > MAX_KERNEL_SHAPES:
        raise _Skip(f"{n_shapes} distinct shapes, more than the limit of {MAX_KERNEL_SHAPES} per op")
    t = sub["median_us"].to_numpy(float)
    mode = sub["mode"].to_numpy(str)
    z = np.stack([(mode == m).astype(float) for m in modes] + [nbytes * 1e-3], axis=1)
    a = z / t[:, None]
    lower = np.array([0.0] * len(modes) + [BETA_MIN])
    theta0, _ = solve_bounded(a.T @ a, a.sum(axis=0), float(len(t)), lower)
    theta = polish(a, lower, theta0)
    shape = sub[["rows", "cols", "world_size"]].astype(np.int64).to_numpy()
    shapes, shape_index = np.unique(shape, axis=0, return_inverse=True)
    shape_index = shape_index.reshape(-1)
    cv_err: dict[str, list] = {m: [] for m in modes}
    folds = 0
    for s in range(len(shapes)):
        keep = shape_index != s
        if len(np.unique(nbytes[keep])) < 2 or any(not (keep & (mode == m)).any() for m in modes):
            continue
        ak = a[keep]
        th, _ = solve_bounded(ak.T @ ak, ak.sum(axis=0), float(keep.sum()), lower)
        pred = z[~keep] @ th
        for m in modes:
            sel = mode[~keep] == m
            cv_err[m].append(_errors(pred[sel], t[~keep][sel]))
        folds += 1
    in_err = _errors(z @ theta, t)
    bw_boot = np.zeros(0)
    if bootstrap > 0 and rng is not None:  # the collectives' residual bootstrap, one regime (issue 9)
        boot, _ = _residual_bootstrap(a, lower, theta[None, :], np.zeros(len(t), dtype=np.int64), np.zeros(0),
                                      bootstrap, rng)
        bw_boot = 1.0 / boot[:, 0, -1]
    return _KernelFit(op=op, intercept_us={m: float(theta[i]) for i, m in enumerate(modes)},
                      bw_gbps=1.0 / float(theta[-1]), in_err={m: in_err[mode == m] for m in modes},
                      cv_err={m: np.concatenate(v) if v else np.array([]) for m, v in cv_err.items()},
                      cv_folds=folds, n_shapes=len(shapes), bw_boot_gbps=bw_boot)


def _launch_costs(fits: dict[str, _KernelFit], launches: dict[str, float], base: Profile
                  ) -> tuple[float, float, dict[str, float]]:
    """(graph_kernel_us, eager_launch_us, fixed_us per op) reproducing the fitted intercepts (module doc)."""
    modes = {m for f in fits.values() for m in f.intercept_us}
    base_delta = max(0.0, base.eager_launch_us - base.graph_kernel_us)
    both = [f for f in fits.values() if len(f.intercept_us) == 2 and launches[f.op] > 0]
    if modes == {"eager"}:
        delta = 0.0
    elif modes == {"graph"} or not both:
        delta = base_delta
    else:
        num = sum(launches[f.op] * (f.intercept_us["eager"] - f.intercept_us["graph"]) for f in both)
        delta = max(0.0, num / sum(launches[f.op] ** 2 for f in both))
    j = {op: float(np.mean([i - launches[op] * delta * (m == "eager") for m, i in f.intercept_us.items()]))
         for op, f in fits.items()}
    per_launch = [j[op] / launches[op] for op in fits if launches[op] > 0]
    k_graph = max(0.0, min(per_launch)) if per_launch else base.graph_kernel_us
    fixed = {op: max(0.0, j[op] - launches[op] * k_graph) for op in fits}
    return k_graph, k_graph + delta, fixed


def _kernel_tables(kern: pd.DataFrame, files: Sequence[str]) -> tuple[list[dict], list[str]]:
    """Complete (rows x cols) grids per (op, dtype, mode, world_size); returns (tables, notes on incomplete)."""
    tables, notes = [], []
    kern = kern.assign(k=kern["k"] if "k" in kern.columns else 1)
    for (op, dtype, mode, ws, k), sub in kern.groupby(["op", "dtype", "mode", "world_size", "k"], sort=True):
        label = f"{op} {dtype} {mode} p={int(ws)}" + (f" k={int(k)}" if op in TOPK_KERNEL_OPS else "")
        if dtype not in DTYPES and op.removesuffix("_fused") in DTYPE_FREE_OPS:
            dtype = "fp32"  # never reads logits: costmodel.model.kernels matches its table for every logits dtype
        if dtype not in DTYPES:
            notes.append(f"{label}: dtype {dtype} has no table slot")
            continue
        cols = sub["cols"].where(sub["cols"] > 0, 1)
        grid = sub.assign(cols=cols).groupby(["rows", "cols"])["median_us"].median()
        rows_ax = sorted(set(grid.index.get_level_values(0)))
        cols_ax = sorted(set(grid.index.get_level_values(1)))
        if len(grid) != len(rows_ax) * len(cols_ax):
            notes.append(f"{label}: grid incomplete ({len(grid)} of {len(rows_ax) * len(cols_ax)} cells)")
            continue
        source = sorted(set(sub["_file"])) if "_file" in sub else list(files)
        tables.append({"op": op, "dtype": dtype, "mode": mode, "world_size": int(ws),
                       "rows": [int(r) for r in rows_ax], "cols": [int(c) for c in cols_ax],
                       "median_us": [[_num(grid[(r, c)]) for c in cols_ax] for r in rows_ax],
                       "source": ", ".join(source), **({"k": int(k)} if op in TOPK_KERNEL_OPS else {})})
    return tables, notes


def _add_kernel_replicates(profile: dict[str, Any], fits: dict[str, _KernelFit]) -> None:
    """Put each fitted op's bootstrap bandwidths into the profile's replicates (kernels.ops), in place.

    Replicate j carries every op (the point spec for ops without replicates) with bw_gbps = the op's
    j-th bootstrap value; the launch costs stay at the point. Replicates are created when the
    collectives had none.
    """
    boots = {op: f.bw_boot_gbps for op, f in fits.items() if len(f.bw_boot_gbps)}
    if not boots:
        return
    n = min(len(v) for v in boots.values())
    reps = profile.setdefault("bootstrap", [])
    if reps:
        n = min(n, len(reps))
        del reps[n:]
    else:
        reps.extend({} for _ in range(n))
    point_ops = profile["kernels"]["ops"]
    for j, rep in enumerate(reps):
        rep["kernels"] = {"ops": {op: ({**spec, "bw_gbps": _num(boots[op][j])} if op in boots else spec)
                                  for op, spec in point_ops.items()}}


def _fit_kernels(frame: pd.DataFrame, base: Profile, files: Sequence[str], *, bootstrap: int = 0, seed: int = 0,
                 budget: _Budget | None = None) -> tuple[dict[str, Any], list[dict], dict[str, _KernelFit], int]:
    """(kernels section, report rows, per-op fits, number of tables kept from the base profile)."""
    kern = frame[frame["op"].isin(list(KERNEL_OPS) + list(FUSED_KERNEL_OPS))]
    fits: dict[str, _KernelFit] = {}
    reports: list[dict] = []
    for op, sub in kern.groupby("op", sort=True):
        if budget is not None:
            budget.check()
        try:
            fits[op] = _fit_kernel_op(op, sub, bootstrap=min(bootstrap, MAX_STORED_REPLICATES),
                                      rng=np.random.default_rng([seed, 7, len(fits)]))
        except _Skip as exc:
            reports.append(_skip_row("kernel", op, None, None, str(exc), len(sub)))
    launches = {op: (base.kernel_ops[op].launches if op in base.kernel_ops else 1.0) for op in fits}
    ops = {op: _kernel_op_dict(spec) for op, spec in base.kernel_ops.items() if op not in fits}
    k_graph, k_eager = base.graph_kernel_us, base.eager_launch_us
    if fits:
        k_graph, k_eager, fixed = _launch_costs(fits, launches, base)
        for op, f in fits.items():
            ops[op] = {"launches": _num(launches[op]), "fixed_us": _num(fixed[op]), "bw_gbps": _num(f.bw_gbps),
                       "provenance": "measured"}
    topk = frame[frame["op"].isin(list(TOPK_KERNEL_OPS))]  # tables only (per k): no bandwidth fit
    tables, notes = _kernel_tables(pd.concat([kern, topk]) if len(topk) else kern, files)
    measured_tables = {t["op"] for t in tables}
    # a base profile's tables are kept for ops this run did not measure - except the measured tables of a GPU
    # kernel model (costmodel.model.gpu_kernels: another machine's anchors, meaningless without that model)
    kept = [_table_dict(t) for t in base.kernel_tables if t.op not in measured_tables and t.op not in fits
            and base.kernel_model is None]
    for note in notes:
        reports.append(_skip_row("kernel_table", note.split()[0], None, None, note, 0))
    section = {"graph_kernel_us": _num(k_graph), "eager_launch_us": _num(k_eager), "ops": ops,
               "tables": tables + kept}
    return section, reports, fits, len(kept)


def _kernel_reports(profile: Profile, frame: pd.DataFrame, fits: dict[str, _KernelFit]) -> list[dict]:
    """In-sample and leave-one-shape-out errors of the per-op fit, per (op, mode); the note gives the error of
    the emitted roofline (shared per-kernel launch costs) on the same rows."""
    rows = []
    kern = frame[frame["op"].isin(list(fits))]
    for (op, mode), sub in kern.groupby(["op", "mode"], sort=True):
        pred = roofline_us(profile, op, sub["rows"].to_numpy(float), sub["cols"].to_numpy(float),
                           sub["world_size"].to_numpy(float), _elem_bytes(sub["dtype"]), mode, D2T_DRAFT_COLS)
        roof_med, roof_p90 = _err_stats(_errors(pred, sub["median_us"].to_numpy(float)))
        in_med, in_p90 = _err_stats(fits[op].in_err[mode])
        cv_med, cv_p90 = _err_stats(fits[op].cv_err[mode])
        row = {c: None for c in REPORT_COLUMNS}
        row.update(kind="kernel", op=op, world_size=None, mode=mode, nodes=None, status="fitted",
                   n_points=len(sub), n_sizes=fits[op].n_shapes, breakpoints_bytes=[],
                   in_median_rel_err=in_med, in_p90_rel_err=in_p90, cv_median_rel_err=cv_med,
                   cv_p90_rel_err=cv_p90, cv_folds=fits[op].cv_folds, n_bootstrap=0,
                   note=f"t = I(mode) + bytes / bw; profile roofline median {roof_med:.3g}, p90 {roof_p90:.3g}")
        rows.append(row)
    return rows


def _add_model_replicates(profile: dict[str, Any], models: list[dict]) -> None:
    """Put the kernel model's bootstrap refits into the profile's replicates (kernels.model), in place; the
    replicate list is cut to the shorter of the two, or created when there was none."""
    if not models:
        return
    reps = profile.setdefault("bootstrap", [])
    if reps:
        del reps[len(models):]
    else:
        reps.extend({} for _ in models)
    for rep, model in zip(reps, models):
        rep["kernels"] = {**rep.get("kernels", {}), "model": model}


def _fit_kernel_model(frame: pd.DataFrame, kernels: dict[str, Any], gpu: str, base: Profile, files: Sequence[str],
                      *, n_replicates: int = 0, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Fit the GPU kernel model (costmodel.evidence.gpu_kernel_fit.fit_table_model) on the CUDA kernel rows and store
    kernels.model + kernels.model_cv in `kernels` (in place). Returns (report rows, replicate models): one
    row per (op, mode) of the model (in-sample error, leave-one-batch-out CV in the CV columns,
    leave-one-vocab-out in the note), or one "skipped" row saying why no model was fitted (too few shapes:
    the roofline fit prices the kernels)."""
    from costmodel.evidence.gpu_kernel_fit import fit_table_model

    model, model_cv, in_sample, note, reps = fit_table_model(
        frame, gpu=gpu, base=base.kernel_model, source=", ".join(files) or "uploaded measurements",
        n_replicates=n_replicates, seed=seed)
    if model is None:
        return ([_skip_row("kernel_model", "gpu_kernels", None, None, note, 0)] if note else []), []
    kernels["model"], kernels["model_cv"] = model, model_cv
    cv = {(r["held_out"], r["op"], r["mode"]): r for r in model_cv}
    rows = []
    for r in in_sample.to_dict("records"):
        batch, vocab = cv.get(("one batch", r["op"], r["mode"]), {}), cv.get(("one vocab", r["op"], r["mode"]), {})
        row = {c: None for c in REPORT_COLUMNS}
        row.update(kind="kernel_model", op=r["op"], mode=r["mode"], status="fitted", n_points=int(r["n"]),
                   breakpoints_bytes=[], in_median_rel_err=_num(r["median_abs_rel_error"]),
                   in_p90_rel_err=_num(r["p90_abs_rel_error"]), cv_median_rel_err=batch.get("median_abs_rel_error"),
                   cv_p90_rel_err=batch.get("p90_abs_rel_error"),
                   n_bootstrap=len(reps),
                   note=f"CV leave-one-batch-out; leave-one-vocab-out median {vocab.get('median_abs_rel_error')}, "
                        f"p90 {vocab.get('p90_abs_rel_error')}; {note}"
                        + (f"; {len(reps)} case-bootstrap refits as replicates" if reps else ""))
        rows.append(row)
    return rows, reps


def _kernel_op_dict(spec) -> dict:
    return {"launches": spec.launches, "fixed_us": spec.fixed_us, "bw_gbps": spec.bw_gbps,
            "provenance": spec.provenance}


def _table_dict(t) -> dict:
    return {"op": t.op, "dtype": t.dtype, "mode": t.mode, "world_size": t.world_size, "rows": list(t.rows),
            "cols": list(t.cols), "median_us": [list(r) for r in t.median_us], "source": t.source,
            **({"k": t.k} if t.op in TOPK_KERNEL_OPS else {})}


# -- base profile ----------------------------------------------------------------------------------------
def _reachable_base_curves(base: Profile, measured: list[dict]) -> list[dict]:
    """Base curves that Profile.curve still selects for some (op, world size, nodes, mode) beside the measured ones.

    Asks the real lookup (Profile.curve) on the merged curve list, so the ranking rules live in one place.
    """
    base_curves = base.raw["collectives"]
    merged = profile_from_dict({**{k: v for k, v in base.raw.items() if k not in ("bootstrap", "ensemble")},
                                "collectives": measured + [{**c, "from_base": c.get("from_base") or base.name}
                                                           for c in base_curves]}, source="merged profile")
    sizes = {c.world_size for c in merged.collectives if c.world_size is not None}
    node_counts = {1} | {c.nodes for c in merged.collectives if c.nodes is not None}
    reached = set()
    for op, ws, nodes, mode in itertools.product(COLLECTIVE_OPS, sorted(sizes) + [max(sizes | {1}) + 1],
                                                 sorted(node_counts), MODES):
        try:
            chosen = merged.curve(op, ws, mode, nodes)
        except InputError:
            continue
        index = next(i for i, c in enumerate(merged.collectives) if c is chosen)
        if index >= len(measured):
            reached.add(index - len(measured))
    return [{**base_curves[i], "provenance": merged.collectives[len(measured) + i].provenance,
             "from_base": base_curves[i].get("from_base") or base.name} for i in sorted(reached)]


# -- inputs and provenance -------------------------------------------------------------------------------
def _relative(path: Path) -> str:
    """The path relative to the repository when it lies inside it, else absolute."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(REPO_ROOT))
    except ValueError:
        return str(resolved)


def load_inputs(paths: Sequence[str | Path]) -> tuple[pd.DataFrame, list[str]]:
    """Read every CSV (a directory contributes its *.csv files); returns (rows, file paths as given)."""
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(path.glob("*.csv"))
            if not found:
                raise InputError(f"{p}: no *.csv files in this directory")
            files += found
        elif path.exists():
            files.append(path)
        else:
            raise InputError(f"{p}: no such file or directory")
    if not files:
        raise InputError("no input files")
    frames = [read_measurements(f).assign(_file=_relative(f)) for f in files]
    return pd.concat(frames, ignore_index=True), [_relative(f) for f in files]


def _provenance_files(files: Sequence[str]) -> dict[str, Any]:
    """Decoded provenance.json files next to the inputs, keyed by their path."""
    found: dict[str, Any] = {}
    for f in files:
        path = Path(f) if Path(f).is_absolute() else REPO_ROOT / f
        if not path.is_file():  # an upload's name, not a file here
            continue
        candidate = path.parent / "provenance.json"
        if candidate.is_file() and _relative(candidate) not in found:
            data = read_bytes(candidate, limit_bytes=16 * 2**20)  # stat first, bounded
            found[_relative(candidate)] = loads_json(data, _relative(candidate))  # strict: one error line
    return found


def _software(found: dict[str, Any]) -> dict[str, Any]:
    """provenance.software: each file's "software" object (else the whole file); several files keyed by path."""
    picked = {k: (v["software"] if isinstance(v, dict) and isinstance(v.get("software"), dict) else v)
              for k, v in found.items()}
    if len(picked) == 1:
        (data,) = picked.values()
        return data if isinstance(data, dict) else {"provenance": data}
    return picked


def _gpus_per_node(found: dict[str, Any]) -> int | None:
    values = [v.get("gpus_per_node") for v in found.values() if isinstance(v, dict)]
    values = {v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0}
    return values.pop() if len(values) == 1 else None


def _gpu(frame: pd.DataFrame) -> str:
    values = sorted(set(frame["gpu"].dropna().astype(str).str.strip().unique().tolist()) - {"unknown", "", "nan"})
    if len(values) > 1:
        raise InputError(f"column gpu: mixed GPU types in one fit ({', '.join(values)}); fit each GPU separately")
    return values[0] if values else "unknown"


# -- the fit ---------------------------------------------------------------------------------------------
def fit_measurements(frame: pd.DataFrame, *, name: str, base_profile: Profile | None = None,
                     bootstrap: int = 200, max_regimes: int = 3, seed: int = 0, files: Sequence[str] = (),
                     title: str | None = None, software: dict[str, Any] | None = None,
                     impl_frames: dict[str, tuple[pd.DataFrame, Sequence[str]]] | None = None,
                     time_budget_s: float | None = DEFAULT_TIME_BUDGET_S) -> dict[str, Any]:
    """Fit a profile dict (validated by costmodel.profiles.parse.profile_from_dict) from measurement rows.

    `impl_frames` {impl: (rows, files)}: the one-shot / multimem rows of `calibration.collectives --impl`
    (DIR/<impl>/collectives.csv), fitted like NCCL's and stored as curves tagged "impl" (provenance measured,
    with bootstrap replicates like NCCL's), which costmodel.model.collective_impls prices those implementations with.

    Raises InputError for unusable input (missing columns, NaN / non-positive times, mixed GPUs, nothing
    fittable), for a plan over the curve / point limits (before any fitting) and when `time_budget_s` (None: no
    budget) is spent (module doc, "Input limits"). Groups that cannot be fitted are listed in
    profile["fit_report"] with status "skipped: ...".
    """
    if not (bootstrap == 0 or 2 <= bootstrap <= 10_000):  # one replicate is no interval (loading refuses it)
        raise InputError(f"--bootstrap must be 0 (none) or in 2..10000, got {bootstrap}")
    if not 1 <= max_regimes <= 16:
        raise InputError(f"--max-regimes must be in 1..16, got {max_regimes}")
    if not 0 <= seed <= 2**63 - 1:
        raise InputError(f"--seed must be in 0..{2**63 - 1}, got {seed}")
    if not isinstance(name, str) or not name.strip():
        raise InputError("--name must be a non-empty string")
    if time_budget_s is not None and not 0 < time_budget_s <= MAX_TIME_BUDGET_S:  # also refuses nan
        raise InputError(f"--time-budget-s must be in (0, {MAX_TIME_BUDGET_S:g}], got {time_budget_s}")
    if len(frame) == 0:
        raise InputError("measurements: no rows")
    source = ", ".join(files) or "measurements"
    check_rows(len(frame), limit_rows=MAX_FIT_ROWS, source=source)
    frame = bin_repeats(validate_measurements(frame, source=source))
    impl_subs = _impl_rows(impl_frames or {})
    plan = fit_plan(frame) + [(f"{impl} {label}", k) for impl, (sub, _) in impl_subs.items()
                              for label, k in fit_plan(sub)]
    check_fit_plan(plan, source)  # before any fitting work
    budget = _Budget(time_budget_s, len(plan))
    gpu = _gpu(frame)
    base = base_profile if base_profile is not None else default_profile()
    files = list(files)

    curves, coll_reports, reps = _fit_collectives(frame, max_regimes=max_regimes, bootstrap=bootstrap, seed=seed,
                                                  budget=budget)
    eager_prices_graph(curves, reps, coll_reports)  # per (op, p) measured only eagerly (base_parts module doc)
    kernels, kern_reports, kern_fits, n_base_tables = _fit_kernels(frame, base, files, bootstrap=bootstrap, seed=seed,
                                                                   budget=budget)
    model_reports, model_reps = _fit_kernel_model(frame, kernels, gpu, base, files,
                                                  n_replicates=min(bootstrap, MAX_STORED_REPLICATES), seed=seed)
    measured_kernels = bool(frame["op"].isin(list(KERNEL_OPS) + list(FUSED_KERNEL_OPS) + list(TOPK_KERNEL_OPS)).any())
    kept = keep_base_kernels(kernels, base, measured_kernels=measured_kernels, measured_ops=set(kern_fits))
    impl_curves, impl_reports, impl_reps = _fit_impl_curves(impl_subs, max_regimes=max_regimes, bootstrap=bootstrap,
                                                            seed=seed, budget=budget)
    reps = reps + impl_reps
    files += [f for _, (_, ifiles) in sorted((impl_frames or {}).items()) for f in ifiles]
    if not curves and not kern_fits:
        reasons = [r["status"] for r in coll_reports + kern_reports]
        raise InputError("nothing fittable: " + (reasons[0] if reasons else "no collective or kernel rows"))
    base_curves = _reachable_base_curves(base, curves)
    base_ops = [op for op, spec in kernels["ops"].items() if spec.get("provenance") != "measured"]
    measured = (not base_curves and not base_ops and not n_base_tables and bool(kern_fits)
                and not any(part in kept for part in ("model", "lm_head", "host")))
    found = _provenance_files(files) if software is None else {}
    source = f"fitted by calibration.fit from {', '.join(files) if files else 'uploaded measurements'}"
    if not measured:
        source += f"; unmeasured parameters from base profile {base.name}"
    profile: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "title": title or f"{name} (fitted, {gpu})",
        "provenance": {
            "kind": "measured" if measured else "mixed", "source": source, "gpu": gpu,
            "software": software if software is not None else _software(found),
            "date": datetime.date.today().isoformat(), "citations": [], "files": files,
            **({} if measured else {"base": base.name, "base_gpu": base.provenance.gpu}),
        },
        "collectives": curves + base_curves + impl_curves,
        "kernels": kernels,
        "fit_report": [],
    }
    if _gpus_per_node(found) is not None:
        profile["provenance"]["gpus_per_node"] = _gpus_per_node(found)
    n_stored = min([MAX_STORED_REPLICATES] + [len(r) for r in reps]) if reps and bootstrap > 0 else 0
    if n_stored:
        profile["bootstrap"] = [{"collectives": [r[j] for r in reps]} for j in range(n_stored)]
    if bootstrap > 0:
        profile["bootstrap_method"] = BOOTSTRAP_METHOD
    _add_kernel_replicates(profile, kern_fits)
    _add_model_replicates(profile, model_reps)
    keep_base_members(profile, base, kept, kernels_measured=bool(kern_fits))  # kept parts keep the base's spread
    # the point parameters the kernel reports price (the whole document, replicates included, is checked below)
    parsed = profile_from_dict({k: v for k, v in profile.items() if k != "bootstrap"}, source=f"fitted profile {name}")
    base_rows = [{**{c: None for c in REPORT_COLUMNS}, "kind": "base", "op": c["op"], "world_size": c["world_size"],
                  "nodes": c.get("nodes"), "mode": c["mode"], "status": f"from base profile {base.name}",
                  "breakpoints_bytes": [], "note": ""} for c in base_curves]
    profile["fit_report"] = (coll_reports + impl_reports + _kernel_reports(parsed, frame, kern_fits) + kern_reports
                             + model_reports + base_rows + kept_rows(base, kept, gpu, REPORT_COLUMNS))
    profile_from_dict(profile, source=f"fitted profile {name}")
    return profile


def _impl_rows(impl_frames: dict[str, tuple[pd.DataFrame, Sequence[str]]]
               ) -> dict[str, tuple[pd.DataFrame, Sequence[str]]]:
    """{impl: (validated, binned all_gather / all_reduce rows, files)} of `fit_measurements`' impl_frames."""
    out = {}
    for impl, (rows, files) in sorted(impl_frames.items()):
        source = ", ".join(files) or f"{impl} measurements"
        check_rows(len(rows), limit_rows=MAX_FIT_ROWS, source=source)
        sub = bin_repeats(validate_measurements(rows, source=source))
        sub = sub[sub["op"].isin(("all_gather", "all_reduce"))]
        if not len(sub):
            raise InputError(f"{source}: no all_gather / all_reduce rows for --impl {impl}")
        out[impl] = (sub, files)
    return out


def _fit_impl_curves(impl_subs: dict[str, tuple[pd.DataFrame, Sequence[str]]], *, max_regimes: int,
                     bootstrap: int, seed: int, budget: _Budget | None = None
                     ) -> tuple[list[dict], list[dict], list[list[dict]]]:
    """(curves tagged "impl", report rows, per-curve bootstrap replicates tagged alike) of each implementation's
    all_gather / all_reduce rows (`_impl_rows`): the same fit and residual bootstrap as NCCL's curves (own random
    streams)."""
    curves, reports, reps = [], [], []
    for n_impl, (impl, (sub, _files)) in enumerate(sorted(impl_subs.items())):
        got, rep, boot = _fit_collectives(sub, max_regimes=max_regimes, bootstrap=bootstrap, seed=seed,
                                          stream=(11, n_impl), budget=budget)
        curves += [{**c, "impl": impl, "provenance": "measured"} for c in got]
        reps += [[{**c, "impl": impl, "provenance": "measured"} for c in group] for group in boot]
        reports += [{**r, "note": f"impl {impl}" + (f"; {r['note']}" if r.get("note") else "")} for r in rep]
    return curves, reports, reps


def impl_dirs(paths: Sequence[str | Path]) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """{impl: (rows, files)} of DIR/oneshot/, DIR/multimem/ and DIR/nccl-symm/ under each input directory that has
    them."""
    found: dict[str, list[Path]] = {}
    for p in paths:
        for impl in ("oneshot", "multimem", "nccl-symm"):
            sub = Path(p) / impl
            if Path(p).is_dir() and sub.is_dir() and any(sub.glob("*.csv")):
                found.setdefault(impl, []).append(sub)
    return {impl: load_inputs(dirs) for impl, dirs in found.items()}


def fit_report_table(profile: dict[str, Any]) -> pd.DataFrame:
    """The profile's fit_report as a DataFrame (one row per fitted or skipped group, fixed column order)."""
    rows = profile.get("fit_report") or []
    table = pd.DataFrame(rows, columns=list(REPORT_COLUMNS))
    table["breakpoints_bytes"] = [", ".join(f"{b:.4g}" for b in (bps or [])) for bps in table["breakpoints_bytes"]]
    for column in ("world_size", "nodes", "n_points", "n_sizes", "n_regimes", "cv_folds", "n_bootstrap"):
        table[column] = pd.array(table[column].tolist(), dtype="Int64")
    return table


SAMPLE_RESIDUAL_COLUMNS = ("op", "world_size", "mode", "impl", "bytes_per_rank", "n", "median_us", "p10_us",
                           "p90_us", "predicted_us", "rel_err", "raw_min_rel_err", "raw_max_rel_err")


def sample_residuals(profile: dict[str, Any] | Profile) -> pd.DataFrame:
    """Residuals of every curve that stores its measurements (`samples`, fitted curves) against them, from the
    profile alone: per curve and size, predicted_us = the curve as stored (costmodel.model.collectives.curve_time_us,
    the curve's own mode, eager where it has none), rel_err = predicted / median_us - 1 and the range of
    predicted / raw - 1 over the raw samples (SAMPLE_RESIDUAL_COLUMNS)."""
    parsed = profile if isinstance(profile, Profile) else profile_from_dict(profile, source="profile")
    out = []
    for c in parsed.collectives + parsed.impl_curves:
        smp = c.samples
        if smp is None or c.world_size is None:
            continue
        b = np.asarray(smp.bytes_per_rank, dtype=float)
        pred = curve_time_us(c, b, float(c.world_size), c.nodes or 1, c.mode or "eager")
        for i in range(len(b)):
            raw = np.asarray(smp.raw_us[i])
            out.append((c.op, c.world_size, c.mode, c.impl, int(b[i]), smp.n[i], smp.median_us[i], smp.p10_us[i],
                        smp.p90_us[i], float(pred[i]), float(pred[i] / smp.median_us[i] - 1),
                        float(np.min(pred[i] / raw - 1)), float(np.max(pred[i] / raw - 1))))
    return pd.DataFrame(out, columns=list(SAMPLE_RESIDUAL_COLUMNS))


def _sample_lines(profile: dict[str, Any]) -> list[str]:
    """One line per curve with stored samples: |residual| of the per-size medians and the worst size."""
    try:
        table = sample_residuals(profile)
    except InputError:
        return []
    lines = []
    for (op, ws, mode, impl), sub in table.groupby(["op", "world_size", "mode", "impl"], dropna=False, sort=False):
        err = sub["rel_err"].abs().to_numpy()
        worst = sub.iloc[int(np.argmax(err))]
        label = f"{op} p {ws} {mode if isinstance(mode, str) else '-'}" + ("" if impl == "nccl" else f" {impl}")
        lines.append(f"  {label}: {len(sub)} sizes, {int(sub['n'].sum())} rows; |err| median "
                     f"{100 * np.median(err):.1f}%, p90 {100 * np.quantile(err, 0.9):.1f}%; worst "
                     f"{_bytes_text(float(worst['bytes_per_rank']))}/rank {100 * worst['rel_err']:+.1f}%")
    return lines


def _bytes_text(value: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.0f} B"


def format_fit_report(profile: dict[str, Any]) -> str:
    """The fit report for people: one aligned row per fitted / skipped group (errors in %, breakpoints in
    KiB/MiB, '-' for not applicable) and one line per op for the curves taken from the base profile."""
    rows = profile.get("fit_report") or []
    fitted = [r for r in rows if r.get("kind") not in ("base", "warning")]
    base = [r for r in rows if r.get("kind") == "base" and str(r.get("op")) in COLLECTIVE_OPS]
    kept = [r for r in rows if r.get("kind") == "base" and str(r.get("op")) not in COLLECTIVE_OPS]

    def cell(value: Any, fmt: str = "{}") -> str:
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "-"
        return fmt.format(value)

    def pct(value: Any) -> str:
        return cell(None if value is None else 100 * float(value), "{:.1f}%")

    header = ("kind", "op", "p", "nodes", "mode", "points", "regimes", "breakpoints", "fit |err| med",
              "CV |err| med", "CV |err| p90", "boot", "status")
    table = [header]
    for r in fitted:
        bps = ", ".join(_bytes_text(float(b)) for b in (r.get("breakpoints_bytes") or [])) or "-"
        table.append((str(r.get("kind")), str(r.get("op")), cell(r.get("world_size")), cell(r.get("nodes")),
                      cell(r.get("mode")), cell(r.get("n_points")), cell(r.get("n_regimes")), bps,
                      pct(r.get("in_median_rel_err")), pct(r.get("cv_median_rel_err")), pct(r.get("cv_p90_rel_err")),
                      cell(r.get("n_bootstrap")), str(r.get("status"))))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) if i in (0, 1, 4, 7, 12) else v.rjust(w) for i, (v, w) in
                       enumerate(zip(row, widths))).rstrip() for row in table]
    choices = [r for r in fitted if r.get("regime_choice")]
    if choices:
        lines.append("")
        lines.append("number of regimes (leave-one-size-out CV vs BIC; calibration.fit module doc):")
        lines += [f"  {r.get('op')} p {cell(r.get('world_size'))} {cell(r.get('mode'))}: {r['regime_choice']}"
                  for r in choices]
    misses = [r for r in fitted if r.get("spread_misses")]
    if misses:
        lines.append("")
        lines.append(f"training medians the stored curve misses by more than their measured p10-p90 spread "
                     f"(+{100 * SPREAD_FLOOR:.0f}%):")
        lines += [f"  {r.get('op')} p {cell(r.get('world_size'))} {cell(r.get('mode'))}: {len(r['spread_misses'])} of "
                  f"{r.get('n_sizes')}: " + ", ".join(f"{_bytes_text(float(b))} {100 * e:+.0f}%"
                                                      for b, e in r["spread_misses"]) for r in misses]
    samples = _sample_lines(profile)
    if samples:
        lines.append("")
        lines.append("the stored curves against their stored samples (per-size medians; calibration.fit "
                     "sample_residuals):")
        lines += samples
    if base:
        by_op: dict[str, list[str]] = {}
        for r in base:
            where = cell(r.get("world_size"), "p {}").replace("-", "any p")
            nodes, mode = r.get("nodes"), r.get("mode")  # a base curve across nodes, or of one mode, at a measured p
            where += f" x {nodes} nodes" if nodes not in (None, 1) else ""
            by_op.setdefault(str(r.get("op")), []).append(f"{where} {mode}" if mode else where)
        source = str(base[0].get("status", "from the base profile"))
        lines.append("")
        lines.append(f"not measured, {source}: " + "; ".join(f"{op} ({', '.join(dict.fromkeys(ps))})"
                                                             for op, ps in by_op.items()))
    if kept:
        lines.append(f"not measured, {kept[0]['status']}: " + "; ".join(str(r["op"]) for r in kept))
    lines += [f"warning: {r['status']}" for r in rows if r.get("kind") == "warning"]
    return "\n".join(lines)


# -- CLI -------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m calibration.fit", description="Fit a cost-model profile from measurement CSVs.")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="measurement CSV files or benchmark directories")
    p.add_argument("--out", required=True, help="profile JSON to write")
    p.add_argument("--name", help="profile name (default: the --out file's stem)")
    p.add_argument("--title", help="profile title")
    p.add_argument("--base-profile", help="bundled profile name or JSON path for unmeasured parameters")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap replicates per group (0: none)")
    p.add_argument("--max-regimes", type=int, default=3, help="most regimes per collective curve")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--time-budget-s", type=float, default=DEFAULT_TIME_BUDGET_S,
                   help=f"stop with an error once the fit has run this long (default {DEFAULT_TIME_BUDGET_S:g})")
    return p


def bootstrap_summary(profile: dict[str, Any], asked: int) -> str:
    """What `--bootstrap asked` did, for the CLI's last line: the replicates each curve was refitted with
    (scaled down to at least MIN_BOOTSTRAP where a group has many sizes) and the ensemble members stored (the
    first MAX_STORED_REPLICATES; a fit with fewer members than its base repeats its own over the base's,
    base_parts module doc) - not the stored count alone, which reads 100 whatever `asked` is."""
    stored = len(profile.get("bootstrap") or [])
    if asked <= 0:
        return "no bootstrap (--bootstrap 0)" + (f"; {stored} ensemble members from the base profile's spread"
                                                 if stored else "")
    used = sorted({int(r["n_bootstrap"]) for r in profile.get("fit_report", [])
                   if r.get("kind") == "collective" and r.get("n_bootstrap")})
    if not used:  # kernel rows only: every op and the kernel model get min(asked, MAX_STORED_REPLICATES)
        used = [min(asked, MAX_STORED_REPLICATES)]
    per_curve = (f"{used[0]} replicates per curve" if len(used) == 1 else
                 f"{used[0]}-{used[-1]} replicates per curve (scaled down where a curve has many sizes)")
    text = f"--bootstrap {asked}: {per_curve}"
    own = min(used[0], MAX_STORED_REPLICATES)
    if stored > own:
        return f"{text}; {stored} ensemble members stored (the fit's {own} repeated over the base profile's members)"
    if stored < used[-1]:
        return f"{text}; the first {stored} stored (at most {MAX_STORED_REPLICATES})"
    return f"{text}; {stored} stored"


def main(argv: Sequence[str] | None = None) -> int:
    out_arg = "--out"
    try:
        args = _parser().parse_args(argv)
        out_arg = args.out
        frame, files = load_inputs(args.inputs)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        inputs = [*files, *args.inputs, args.base_profile if args.base_profile and Path(args.base_profile).exists()
                  else None]
        check_output(args.out, inputs, what="--out")  # before the fit: never over an input, never a FIFO
        impl_frames = impl_dirs(args.inputs)  # DIR/oneshot/, DIR/multimem/: the same profile, tagged curves
        base = load_profile(args.base_profile) if args.base_profile else None
        name = args.name or Path(args.out).stem
        profile = fit_measurements(frame, name=name, base_profile=base, bootstrap=args.bootstrap,
                                   max_regimes=args.max_regimes, seed=args.seed, files=files, title=args.title,
                                   impl_frames=impl_frames, time_budget_s=args.time_budget_s)
        # the replicates as columns (costmodel.profiles.compact); written atomically
        save_profile(compact_document(profile), args.out, inputs)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc.filename or out_arg}: {exc.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # nothing is written before the fit completes
        print("error: interrupted; no profile written", file=sys.stderr)
        return 130
    for row in profile["fit_report"]:
        if str(row["status"]).startswith("skipped"):
            where = " ".join(str(row[c]) for c in ("op", "world_size", "mode") if row[c] is not None)
            print(f"warning: {row['kind']} {where}: {row['status']}", file=sys.stderr)
    print(format_fit_report(profile))
    print(f"wrote {args.out} ({profile['provenance']['kind']}, {len(profile['collectives'])} curves; "
          f"{bootstrap_summary(profile, args.bootstrap)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
