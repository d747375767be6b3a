"""Regimes whose best line has a negative intercept (issue 18): priced by pieces through the origin.

A regime of a fitted curve is a line t = c + x / bw with c >= 0 (x = S f(p) 1e-3, calibration.fitting.fit), because
a profile stores alpha >= 0. Where the bandwidth drops inside a regime - the times grow faster than their line
through the origin (the gloo all_gather p=4 regime above 1 MiB per rank of data/calibration/cpu-gloo) - the best
line has c < 0, the bounded fit sits at c = 0, and the sizes between the training sizes are missed one way.

The physical constraint is not c >= 0 but a positive time over the regime's sizes: t(x_lo) = c + s x_lo > 0 at its
smallest measured size x_lo (s = 1 / bw > 0; t then grows with the size). Such a line L(x) = c + s x, fitted
without the bound (least squares on relative error, as the fitter), is priced over the regime's measured range
[x_lo, x_hi] by m pieces through the origin, t = k_j x on [a_j, b_j] (a geometric split of [x_lo, x_hi]; each
piece is an extra regime with alpha 0, so the profile format is unchanged):

    k_j = 2 / (a_j / L(a_j) + b_j / L(b_j))        (the relative minimax line through the origin on [a_j, b_j])

whose largest relative error is e_j = k_j a_j / L(a_j) - 1 (at both ends, opposite signs; L(x) / x grows, so
e_j > 0), and m is the smallest count with every e_j <= PIECE_TOLERANCE, at most MAX_PIECES. The first piece
extends below x_lo down to the regime's lower breakpoint, the last one above x_hi up to its upper breakpoint (or
beyond the largest size).

Kept only where it predicts better: leave-one-size-out over the regime's sizes (each size priced by the free line
and by the bounded line, both fitted without it), mean |relative error| lower by more than NEG_TOLERANCE; else the
report says why not. Bootstrap replicates get the same pieces (same breakpoints: the shape the loader requires),
each piece's slope scaled by the replicate's own regime line over the point's at the piece's geometric middle; when
the point falls outside the replicates' range (refused on load) the pieces are dropped and the report says so.
"""

from __future__ import annotations

import math

import numpy as np

from costmodel.io.errors import InputError
from costmodel.profiles.consistency import check_replicates

from .segmented import solve_bounded

PIECE_TOLERANCE = 0.01  # largest relative error of a piece against the negative-intercept line
MAX_PIECES = 16  # pieces per regime (the schema allows 64 regimes a curve)
NEG_TOLERANCE = 0.1  # leave-one-size-out mean |rel err| of the free line must beat the bounded one by this (relative)
MIN_SIZES = 3  # distinct sizes a regime needs (the fitter's MIN_REGIME_SIZES)
MAX_CURVE_REGIMES = 48  # regimes a pieced curve may have (the schema allows 64; tail ramps may follow)
FREE = -1e12  # the "no bound" on c (us): finite, so every face of solve_bounded stays finite


def line_fit(x: np.ndarray, t: np.ndarray, c_min: float, beta_min: float) -> tuple[float, float]:
    """(c, s) minimising sum ((c + s x - t) / t)^2 with c >= c_min, s >= beta_min (segmented.solve_bounded)."""
    a = np.stack([1.0 / t, x / t], axis=1)
    theta, _ = solve_bounded((a.T @ a)[None], a.sum(axis=0)[None], float(len(t)), np.array([c_min, beta_min]))
    return float(theta[0, 0]), float(theta[0, 1])


def piece_slopes(c: float, s: float, x_lo: float, x_hi: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(edges (m + 1,), slopes k (m,), largest relative error) of the origin pieces of L = c + s x on [x_lo, x_hi]
    (module doc)."""
    for m in range(1, MAX_PIECES + 1):
        edges = x_lo * (x_hi / x_lo) ** (np.arange(m + 1) / m)
        a, b = edges[:-1], edges[1:]
        la, lb = c + s * a, c + s * b
        k = 2.0 / (a / la + b / lb)
        err = float(np.max(k * a / la - 1.0))
        if err <= PIECE_TOLERANCE or m == MAX_PIECES:
            return edges, k, err
    raise AssertionError("unreachable")


def _loo(x: np.ndarray, t: np.ndarray, size: np.ndarray, beta_min: float) -> tuple[float, float]:
    """(free, bounded) mean |relative error| at each distinct size of the line fitted without that size."""
    free, bounded = [], []
    for u in np.unique(size):
        keep = size != u
        if len(np.unique(size[keep])) < 2:
            continue
        for out, c_min in ((free, FREE), (bounded, 0.0)):
            c, s = line_fit(x[keep], t[keep], c_min, beta_min)
            out.append(float(np.mean(np.abs((c + s * x[~keep]) / t[~keep] - 1.0))))
    return (float(np.mean(free)), float(np.mean(bounded))) if free else (math.inf, 0.0)


def _bounds(regimes: list[dict], i: int) -> tuple[float, float]:
    lower = regimes[i - 1]["max_bytes"] if i > 0 else 0.0
    upper = regimes[i]["max_bytes"] if regimes[i]["max_bytes"] is not None else math.inf
    return float(lower), float(upper)


def _whole_byte_breakpoints(edges_s: np.ndarray, lower: float, upper: int | None) -> bool:
    """Whether the pieces' breakpoints as `_pieced` writes them - floor of each inner edge (bytes), then the
    regime's own upper breakpoint - increase strictly from the regime's lower one (the loader refuses anything
    else: a narrow byte range split into many pieces floors two edges to the same byte)."""
    ends = [math.floor(e) for e in edges_s[1:-1]] + ([] if upper is None else [upper])
    return all(b > a for a, b in zip([lower, *ends], ends, strict=False))


def _pieced(regime: dict, edges_s: np.ndarray, slopes: np.ndarray, factor: float, bw_max: float) -> list[dict]:
    out = []
    for j, k in enumerate(slopes):
        last = j == len(slopes) - 1
        out.append({"name": f"{regime['name']} piece {j + 1}",
                    "max_bytes": regime["max_bytes"] if last else int(np.floor(edges_s[j + 1])),
                    "alpha_base_us": 0.0, "alpha_per_peer_us": 0.0, "alpha_per_node_us": 0.0,
                    "busbw_gbps": float(f"{min(bw_max, 1.0 / k):.6g}")})
    return out


def with_pieces(curve: dict, reps: list[dict], size_bytes: np.ndarray, t_us: np.ndarray, factor: float, *,
                beta_min: float, bw_max: float) -> tuple[dict, list[dict], list[str]]:
    """(curve, replicates, notes): every plain regime of a per-p `curve` whose best line has c < 0 and a positive
    time at its smallest size, priced by origin pieces where leave-one-size-out says so (module doc); `reps` are
    the curve's bootstrap replicate dicts (same regimes). Unchanged curve and replicates when none qualifies."""
    regimes = curve["regimes"]
    x = size_bytes * factor
    plan: dict[int, tuple[np.ndarray, np.ndarray, float, float, float]] = {}
    notes: list[str] = []
    for i, r in enumerate(regimes):
        if "ramp" in r["name"] or r["name"].startswith("tail") or "piece" in r["name"]:
            continue
        lower, upper = _bounds(regimes, i)
        m = (size_bytes > lower) & (size_bytes <= upper)
        if len(np.unique(size_bytes[m])) < MIN_SIZES:
            continue
        c, s = line_fit(x[m], t_us[m], FREE, beta_min)
        x_lo, x_hi = float(x[m].min()), float(x[m].max())
        if c >= 0 or c + s * x_lo <= 0:
            continue
        free, bounded = _loo(x[m], t_us[m], size_bytes[m], beta_min)
        kept = free < bounded / (1.0 + NEG_TOLERANCE)
        notes.append(f"{r['name']}: best line c = {c:.3g} us < 0 (t > 0 from its smallest size); leave-one-size-out "
                     f"{free:.3g} free vs {bounded:.3g} at c >= 0: "
                     + ("priced by pieces through the origin" if kept
                        else f"not {100 * NEG_TOLERANCE:.0f}% better, kept at c >= 0"))
        if kept:
            edges, slopes, err = piece_slopes(c, s, x_lo, x_hi)
            if not _whole_byte_breakpoints(edges / factor, lower, r["max_bytes"]):
                notes[-1] = notes[-1].replace("priced by pieces through the origin",
                                              f"kept at c >= 0: its {len(slopes)} pieces would end less than a byte "
                                              "apart (a profile's breakpoints are increasing whole bytes)")
                continue
            notes[-1] += f" ({len(slopes)} pieces, largest error {100 * err:.2g}% against the line)"
            plan[i] = (edges, slopes, x_lo, x_hi, factor)
    if not plan:
        return curve, reps, notes
    if len(regimes) - len(plan) + sum(len(p[1]) for p in plan.values()) > MAX_CURVE_REGIMES:
        notes.append(f"negative-intercept pieces dropped: the curve would have more than {MAX_CURVE_REGIMES} regimes")
        return curve, reps, notes

    def build(src: dict, scale: dict[int, np.ndarray]) -> dict:
        out: list[dict] = []
        for i, r in enumerate(src["regimes"]):
            if i not in plan:
                out.append(dict(r))
                continue
            edges, slopes = plan[i][0], plan[i][1] * scale.get(i, 1.0)
            out += _pieced(r, edges / factor, slopes, factor, bw_max)
        return {**src, "regimes": out}

    def line(r: dict, xs: np.ndarray) -> np.ndarray:
        return r["alpha_base_us"] + xs / r["busbw_gbps"]

    pieced = build(curve, {})
    mids = {i: np.sqrt(p[0][:-1] * p[0][1:]) for i, p in plan.items()}
    pieced_reps = [build(rep, {i: line(rep["regimes"][i], mids[i]) / line(regimes[i], mids[i]) for i in plan})
                   for rep in reps]
    if pieced_reps:
        try:
            check_replicates({"collectives": [pieced], "bootstrap": [{"collectives": [r]} for r in pieced_reps]})
        except InputError:
            notes.append("negative-intercept pieces dropped: their bootstrap replicates do not bracket the point's")
            return curve, reps, notes
    return pieced, pieced_reps, notes
