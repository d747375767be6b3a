"""`validate --profile FITTED.json` (issue 35): a profile file written by the fitter is accepted, and the rows of
the files it was fitted on are labelled in-sample, the others held-out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibration.fitting.fit import main as fit_main
from costmodel.cli.main import main
from tests.conftest import ROOT

SIZES = 2 ** np.arange(8, 24, 2)  # 256 B .. 2 MiB per rank: 8 sizes


def _rows(sizes: np.ndarray, seed: int) -> pd.DataFrame:
    """gloo-like all_gather p=2 rows (t = 40 us + S / 2 GB/s, 3% noise) with the reference columns."""
    rng = np.random.default_rng(seed)
    t = (40.0 + 2 * sizes * 1e-3 / 2.0) * (1 + 0.03 * rng.standard_normal(len(sizes)))
    return pd.DataFrame({"op": "all_gather", "backend": "gloo", "device": "cpu", "gpu": "cpu", "dtype": "fp32",
                         "mode": "eager", "world_size": 2, "nodes": 1, "bytes_per_rank": sizes, "rows": 0,
                         "cols": 0, "iters": 20, "median_us": t, "p10_us": 0.95 * t, "p90_us": 1.05 * t,
                         "source": "test measurement"})


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """(profile path, the measurement CSV it was fitted on, a CSV of other sizes it never saw)."""
    root = tmp_path_factory.mktemp("fitted")
    measured, other = root / "calib" / "collectives.csv", root / "later" / "collectives.csv"
    measured.parent.mkdir()
    other.parent.mkdir()
    _rows(SIZES, 0).to_csv(measured, index=False)
    _rows(SIZES * 3, 1).to_csv(other, index=False)
    profile = root / "my-fitted.json"
    assert fit_main([str(measured), "--out", str(profile), "--bootstrap", "10"]) == 0
    return profile, measured, other


def test_validate_accepts_a_fitted_profile_file(fitted, capsys, tmp_path):
    profile, measured, other = fitted
    out = tmp_path / "v.csv"
    assert main(["validate", "--profile", str(profile), "--reference", str(measured), str(other),
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "not a bundled profile" not in captured.err and "error" not in captured.err
    table = pd.read_csv(out)
    assert len(table) == 2 * len(SIZES) and table["predicted_us"].notna().all()
    assert table["covered"].notna().all()  # the coverage step priced the fitted file too


def test_rows_of_the_files_it_was_fitted_on_are_in_sample(fitted, capsys, tmp_path):
    profile, measured, other = fitted
    out = tmp_path / "v.csv"
    assert main(["validate", "--profile", str(profile), "--reference", str(measured), str(other),
                 "--out", str(out)]) == 0
    table = pd.read_csv(out)
    by_file = table.groupby("file")["used_in_profile"].agg(["all", "any"])
    fitted_on = table["bytes_per_rank"].isin(SIZES)
    assert table.loc[fitted_on, "used_in_profile"].all()  # the fit's own rows: in-sample
    assert not table.loc[~fitted_on, "used_in_profile"].any()  # a later run's rows: held-out
    assert len(by_file) == 1  # both files are called collectives.csv: told apart by their paths
    text = capsys.readouterr().out
    assert "in-sample" in text and "held-out" in text


def test_a_reference_row_citing_the_fitted_file_in_its_source_is_in_sample(fitted, tmp_path):
    """A reference table elsewhere whose `source` names the measurement the profile was fitted on (as
    data/reference/measured-cpu-gloo.csv does) holds in-sample rows."""
    profile, measured, _ = fitted
    cited = tmp_path / "cited.csv"
    _rows(SIZES, 0).assign(source=f"this project's measurement: {measured}").to_csv(cited, index=False)
    out = tmp_path / "v.csv"
    assert main(["validate", "--profile", str(profile), "--reference", str(cited), "--no-coverage",
                 "--out", str(out)]) == 0
    assert pd.read_csv(out)["used_in_profile"].all()


def test_a_repository_relative_record_matches_the_same_file_under_another_root(tmp_path, capsys):
    """calibration.fit records inputs inside the repository relative to it (cpu-gloo: data/calibration/cpu-gloo/
    collectives.csv): a copy of that file elsewhere, without a used_in_profile column, is in-sample for it."""
    copy = tmp_path / "data" / "calibration" / "cpu-gloo" / "collectives.csv"
    copy.parent.mkdir(parents=True)
    rows = pd.read_csv(ROOT / "data" / "calibration" / "cpu-gloo" / "collectives.csv").head(6)
    rows.assign(source="a copy").to_csv(copy, index=False)
    out = tmp_path / "v.csv"
    assert main(["validate", "--profile", "cpu-gloo", "--reference", str(copy), "--no-coverage",
                 "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert table["used_in_profile"].all() and set(table["profile_used"]) == {"cpu-gloo"}
    assert "in-sample" in capsys.readouterr().out
