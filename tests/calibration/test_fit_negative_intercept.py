"""Issue 18: regimes whose best line has a negative intercept (calibration.fitting.negative_intercept) - priced
between the training sizes by pieces through the origin where leave-one-size-out says the free line predicts
better, flagged in the fit report either way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibration.fitting import fit as fit_module
from calibration.fitting import negative_intercept as neg
from calibration.fitting.fit import fit_measurements
from calibration.fitting.heldout import measurement_sets
from costmodel.model.collectives import curve_time_us
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.parse_curves import curve_from_dict

B = 2.0 ** np.arange(10, 25, 0.5)  # 1 KiB .. 23 MiB per rank, half-octave steps (30 sizes)
X = B * 1e-3  # all_gather p = 2: x = S f 1e-3 = b 1e-3 (S = 2 b, bus factor 1/2)
X0 = 2.0**21 * 1e-3
TRAIN = np.arange(len(B)) % 2 == 0  # every other size: the odd half-octaves are held out


def knee_us() -> np.ndarray:
    """t = 20 + x up to 2 MiB per rank, then 4x lower bandwidth: t = 20 + 4 x - 3 x0 (intercept 20 - 3 x0 =
    -6,271.7 us < 0, time > 0 from 2 MiB on), with 1% noise."""
    t = np.where(B > 2**21, 20 + 4 * X - 3 * X0, 20 + X)
    return t * (1 + 0.01 * np.random.default_rng(0).standard_normal(t.shape))


def frame(t: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"op": "all_gather", "mode": "eager", "world_size": 2, "nodes": 1,
                         "bytes_per_rank": B.astype(int), "rows": 0, "cols": 0, "dtype": "fp32", "median_us": t,
                         "p10_us": 0.97 * t, "p90_us": 1.03 * t, "gpu": "cpu"})


def _fit(pieces: bool, monkeypatch, t=None) -> tuple[dict, dict, dict]:
    monkeypatch.setattr(fit_module, "NEG_PIECES", pieces)
    t = knee_us() if t is None else t
    doc = fit_measurements(frame(t)[TRAIN], name="knee", bootstrap=50)
    (curve,) = [c for c in doc["collectives"] if c["provenance"] == "measured" and c["world_size"] == 2]
    (row,) = [r for r in doc["fit_report"] if r["kind"] == "collective" and r["world_size"] == 2]
    return doc, curve, row


def _held_out_err(curve: dict, t: np.ndarray) -> np.ndarray:
    """Relative error at the held-out sizes between 2 MiB and the largest training size (16 MiB)."""
    pick = ~TRAIN & (B > 2**21 * 1.5) & (B < 2**24)
    return curve_time_us(curve_from_dict(curve), B[pick], 2.0, 1, "eager") / t[pick] - 1


def test_piece_slope_is_the_relative_minimax_line_through_the_origin(monkeypatch):
    """L = -10 + x on [20, 40]: k = 2 / (20 / 10 + 40 / 30) = 0.6, error 0.6 * 20 / 10 - 1 = +0.2 at 20 and
    1 - 0.6 * 40 / 30 = +0.2 below L at 40."""
    monkeypatch.setattr(neg, "PIECE_TOLERANCE", 0.25)
    edges, k, err = neg.piece_slopes(-10.0, 1.0, 20.0, 40.0)
    assert list(edges) == [20.0, 40.0] and k == pytest.approx([0.6]) and err == pytest.approx(0.2)
    monkeypatch.undo()  # the default tolerance: the fewest pieces within it, else MAX_PIECES
    for lo, within in ((400.0, True), (20.0, False)):  # L(20) = 10: the line starts near 0, so 16 pieces miss 1%
        edges, k, err = neg.piece_slopes(-10.0, 1.0, lo, 4000.0)
        assert (err <= neg.PIECE_TOLERANCE) == within and len(k) <= neg.MAX_PIECES
        assert within or len(k) == neg.MAX_PIECES
        assert edges[0] == lo and edges[-1] == pytest.approx(4000.0) and np.all(np.diff(edges) > 0)
        xs = np.geomspace(lo, 4000.0, 400)
        piece = np.clip(np.searchsorted(edges, xs, side="right") - 1, 0, len(k) - 1)
        assert np.max(np.abs(k[piece] * xs / (xs - 10.0) - 1)) <= err + 1e-12  # every x within the stated error


def test_a_negative_intercept_regime_is_priced_by_pieces_between_the_training_sizes(monkeypatch):
    t = knee_us()
    _, before, row0 = _fit(False, monkeypatch, t)
    doc, after, row = _fit(True, monkeypatch, t)
    assert [r["name"] for r in before["regimes"]] == ["R1", "R2"] and row0["negative_intercept_pieces"] == 0
    pieces = [r for r in after["regimes"] if "piece" in r["name"]]
    assert row["negative_intercept_pieces"] == len(pieces) >= 2 and all(r["alpha_base_us"] == 0 for r in pieces)
    assert "R2: best line c = " in row["regime_choice"]
    assert "priced by pieces through the origin" in row["regime_choice"]
    err0, err = _held_out_err(before, t), _held_out_err(after, t)
    assert np.max(np.abs(err0)) > 0.10  # before: 5.7 / 11.3 MiB per rank missed by +1.3% / -13.2%
    assert np.max(np.abs(err)) < 0.03  # now 1.4% / 0.9%
    loaded = profile_from_dict(doc)  # the replicates bracket the pieces (the loader checks)
    assert len(loaded.bootstrap) >= 50
    assert all(len(rep["collectives"][0]["regimes"]) == len(after["regimes"]) for rep in doc["bootstrap"][:5])


def test_a_line_with_a_positive_intercept_gets_no_pieces(monkeypatch):
    t = (30.0 + X / 20.0) * (1 + 0.02 * np.random.default_rng(1).standard_normal(X.shape))
    _, curve, row = _fit(True, monkeypatch, t)
    assert row["negative_intercept_pieces"] == 0 and not any("piece" in r["name"] for r in curve["regimes"])
    assert "best line c" not in row["regime_choice"]


def test_the_bundled_gloo_sets_flag_their_negative_intercepts_and_keep_c_at_zero():
    """On data/calibration/cpu-gloo fitted on every other size (calibration.fitting.heldout), the regimes whose best
    line has c < 0 do not predict their own sizes better left out one at a time (noise-bound), so they stay at
    c >= 0 and the report says why."""
    flagged = 0
    for name, rows, op, p in measurement_sets():
        if not name.startswith("gloo all_"):
            continue
        sizes = np.sort(rows["bytes_per_rank"].unique())
        doc = fit_measurements(rows[rows["bytes_per_rank"].isin(sizes[::2])], name="h", bootstrap=0)
        (row,) = [r for r in doc["fit_report"] if r["kind"] == "collective" and r["world_size"] == p and r["op"] == op]
        if "best line c =" in row["regime_choice"]:
            flagged += 1
            assert "kept at c >= 0" in row["regime_choice"] and row["negative_intercept_pieces"] == 0, name
    assert flagged == 2  # all_gather p=4 and all_reduce p=4


def test_pieces_that_would_end_less_than_a_byte_apart_are_not_made():
    """A negative-intercept regime over 8..27 bytes (a gloo all_reduce at p = 4 on a loaded CI machine) needs 16
    pieces whose edges floor to the same byte (9, 9, 12, 12, ...): the loader refuses such breakpoints, so the fit
    failed with "breakpoints must increase". The regime now keeps its bounded line and the note says why."""
    size = np.arange(8, 28, dtype=float)
    t = 0.2 * size - 1.0  # c = -1 us < 0, t > 0 from the smallest size: the free line predicts exactly
    curve = {"op": "all_reduce", "world_size": 4, "mode": "eager", "launch_us": 0.0, "eager_overhead_us": 0.0,
             "regimes": [{"name": "R1", "max_bytes": None, "alpha_base_us": 0.0, "busbw_gbps": 5.0}]}
    edges, slopes, _ = neg.piece_slopes(-1.0, 0.2, 8.0, 27.0)
    assert not neg._whole_byte_breakpoints(edges, 0.0, None)  # the case itself: the floored edges collide
    out, reps, notes = neg.with_pieces(curve, [], size, t, 1.0, beta_min=0.0, bw_max=float("inf"))
    assert out is curve and reps == []
    assert any("less than a byte apart" in n for n in notes), notes
    curve_from_dict(out)  # loads
    # a wide range keeps its pieces, with increasing whole-byte breakpoints that load
    wide = 2.0 ** np.arange(10, 25)
    out, _, notes = neg.with_pieces(curve, [], wide, 0.002 * wide - 1.0, 1.0, beta_min=0.0, bw_max=float("inf"))
    ends = [r["max_bytes"] for r in out["regimes"][:-1]]
    assert len(out["regimes"]) > 1 and ends == sorted(set(ends)), (ends, notes)
    curve_from_dict(out)
