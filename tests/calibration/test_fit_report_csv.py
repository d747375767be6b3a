"""fit_report.csv (the Calibration view's download of a fitted profile's fit report, issue 35): no `nan` cell;
`spread_misses` is a count - 0 where a curve misses no training median, empty where the check does not apply."""

from __future__ import annotations

import io

import pandas as pd

from calibration.fitting.fit import fit_measurements
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.store import load_profile
from dashboard.tables import csv_bytes, records_table
from tests.calibration.test_fit import TWO, collective_rows


def _csv(report) -> tuple[str, pd.DataFrame]:
    """The downloaded CSV's text, and the same text read back with every cell as text ('' = empty)."""
    text = csv_bytes(records_table(report)).decode()
    return text, pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)


def test_fit_report_csv_has_counts_not_nan():
    frame = pd.concat([collective_rows("all_gather", p, "eager", TWO, seed=p) for p in (2, 4)], ignore_index=True)
    doc = fit_measurements(frame, name="two", seed=1, bootstrap=0)
    report = profile_from_dict(doc, source="two").fit_report
    text, table = _csv(report)
    assert "nan" not in text.lower()
    per_p = [r for r in report if r["kind"] == "collective" and r["world_size"] is not None]
    assert per_p and all("spread_misses" in r for r in per_p)
    for row, line in zip(report, table.to_dict("records"), strict=True):
        if "spread_misses" in row:  # checked: how many training medians the stored curve misses (0: none)
            assert line["spread_misses"] == str(len(row["spread_misses"]))
        else:  # generic (any p) curves, base and warning rows: no per-size medians of their own to check
            assert line["spread_misses"] == "" and line["spread_missed"] == ""
    generic = table[(table["kind"] == "collective") & (table["world_size"] == "")]
    assert len(generic) == 1 and generic["n_points"].iloc[0] == str(2 * 20)  # integers stay integers


def test_bundled_cpu_gloo_fit_report_csv_counts_the_misses_the_docs_quote():
    report = load_profile("cpu-gloo").fit_report
    text, table = _csv(report)
    assert "nan" not in text.lower()
    row = table[(table["op"] == "all_gather") & (table["world_size"] == "2")].iloc[0]
    assert row["spread_misses"] == "8" and row["n_points"] == "82"  # "all_gather p=2: 8 of 82" (calibration.md)
    assert row["spread_missed"].count("%") == 8  # which sizes, by how much
