"""Issue 18 item 2: a fit that follows its data - the fit report flags every training median the stored curve misses
beyond its measured spread, and the largest sizes missed one way get tail ramps (calibration.fitting.fit module doc,
"Tail ramps"). The synthetic late knee is computed by hand below."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibration.fitting import fit as fit_module
from calibration.fitting.fit import fit_measurements, format_fit_report, sample_residuals
from costmodel.model.collectives import curve_time_us
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.parse_curves import curve_from_dict

B = 2.0 ** np.arange(10, 25)  # 1 KiB .. 16 MiB per rank, 15 sizes
X = B * 1e-3  # all_gather p = 2: S = 2 b, bus factor 1/2, so x = S f 1e-3 = b 1e-3 us at 1 GB/s
X0 = 2.0**21 * 1e-3


def late_knee() -> np.ndarray:
    """t = 20 + x up to 2 MiB; from 4 MiB on the bandwidth is 4x lower: t = 20 + x0 + 4 (x - x0) = 20 + 4 x - 3 x0
    (negative intercept: no regime c + x / bw with c >= 0 fits it). 4 MiB: 10,505.76 us, 8 MiB: 27,282.976 us,
    16 MiB: 60,837.408 us."""
    return np.where(B >= 2**22, 20 + 4 * X - 3 * X0, 20 + X)


def rows(t: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"op": "all_gather", "mode": "eager", "world_size": 2, "bytes_per_rank": B.astype(int),
                         "median_us": t, "p10_us": 0.97 * t, "p90_us": 1.03 * t})


def fitted(doc: dict) -> tuple[dict, dict]:
    (curve,) = [c for c in doc["collectives"] if c["provenance"] == "measured" and c["world_size"] == 2]
    (row,) = [r for r in doc["fit_report"] if r["kind"] == "collective" and r["world_size"] == 2]
    return curve, row


def test_late_knee_without_tail_ramps_misses_the_largest_sizes_one_way_and_says_so(monkeypatch):
    monkeypatch.setattr(fit_module, "TAIL_RUN", 99)  # the fitter before tail ramps
    monkeypatch.setattr(fit_module, "NEG_PIECES", False)  # ... and before negative-intercept pieces
    doc = fit_measurements(rows(late_knee()), name="knee", bootstrap=0)
    curve, row = fitted(doc)
    assert row["tail_ramps"] == 0 and len(curve["regimes"]) == 2
    missed = dict(row["spread_misses"])
    # 4 MiB over, 8 and 16 MiB under by more than 3% + 5%: one way at the two largest sizes
    assert missed[2**22] > 0.08 and missed[2**23] < -0.08 and missed[2**24] < -0.08
    assert "training medians the stored curve misses" in format_fit_report(doc)


def test_late_knee_gets_tail_ramps_through_its_largest_medians(monkeypatch):
    monkeypatch.setattr(fit_module, "NEG_PIECES", False)  # the pieces price this knee first (next test)
    t = late_knee()
    doc = fit_measurements(rows(t), name="knee", bootstrap=20)
    curve, row = fitted(doc)
    assert row["tail_ramps"] == 2 and "2 tail ramps" in row["regime_choice"]
    tail = curve["regimes"][-2:]
    assert [r["name"] for r in tail] == ["tail 1", "tail 2"]
    # by hand: both chords need a negative intercept (8 MiB: 27,282.976 - 3.53 x 4,194.304 < 0; 16 MiB:
    # 27,282.976 - 4 x 8,388.608 = -6,271.456), so each tail ramp is the line through the origin and its median
    assert tail[0]["alpha_base_us"] == 0.0 and tail[0]["busbw_gbps"] == pytest.approx(8388.608 / 27282.976, rel=1e-5)
    assert tail[1]["alpha_base_us"] == 0.0 and tail[1]["busbw_gbps"] == pytest.approx(16777.216 / 60837.408, rel=1e-5)
    assert tail[0]["max_bytes"] == 2 * 2**23 and tail[1]["max_bytes"] is None  # total bytes S = 2 b
    c = curve_from_dict(curve)
    pred = curve_time_us(c, np.array([2.0**23, 2.0**24, 2.0**25]), 2.0, 1, "eager")
    np.testing.assert_allclose(pred[:2], [27282.976, 60837.408], rtol=1e-5)  # the medians themselves
    assert pred[2] == pytest.approx(2 * 60837.408, rel=1e-5)  # beyond: proportional to the last median
    assert 2**23 not in dict(row["spread_misses"]) and 2**24 not in dict(row["spread_misses"])
    assert dict(row["spread_misses"])[2**22] > 0.08  # still flagged: the first size past the knee
    text = format_fit_report(doc)
    assert "all_gather p 2 eager: 1 of 15: 4 MiB +" in text
    # the replicates carry the same regimes, and the profile loads (replicates bracket the point)
    prof = profile_from_dict(doc, source="knee")
    assert all(len(rep["collectives"][0]["regimes"]) == len(curve["regimes"]) for rep in doc["bootstrap"])
    assert abs(sample_residuals(prof)["rel_err"].to_numpy()[-2:]).max() < 1e-5


def test_late_knee_with_negative_intercept_pieces_needs_no_tail_ramps():
    """The knee's upper regime has best line 20 + 4 x - 3 x0 (c < 0): priced by pieces through the origin
    (calibration.fitting.negative_intercept), every training median is hit within its spread, so no tail ramps."""
    doc = fit_measurements(rows(late_knee()), name="knee", bootstrap=20)
    curve, row = fitted(doc)
    assert row["negative_intercept_pieces"] >= 2 and row["tail_ramps"] == 0
    assert [s for s, _ in row["spread_misses"] if s >= 2**23] == []
    profile_from_dict(doc, source="knee")


def test_a_curve_that_follows_its_data_gets_no_tail_and_no_flags():
    doc = fit_measurements(rows(20 + X), name="line", bootstrap=0)
    curve, row = fitted(doc)
    assert row["tail_ramps"] == 0 and row["spread_misses"] == []
    assert not any(r["name"].startswith("tail") for r in curve["regimes"])
    assert "training medians the stored curve misses" not in format_fit_report(doc)


def test_largest_sizes_missed_both_ways_are_flagged_not_tailed(monkeypatch):
    t = 20 + X
    t[-1] *= 1.5  # the largest size over, the one below under: not one way
    t[-2] *= 0.7
    doc = fit_measurements(rows(t), name="zigzag", bootstrap=0)
    _, row = fitted(doc)
    assert row["tail_ramps"] == 0
    assert {2**23, 2**24} <= set(dict(row["spread_misses"]))
