"""Where the numbers come from, on every surface (costmodel/answers/provenance.py; issue 18): the sources line and
warnings, the `provenance` CSV column of sweep / compare / recommend (formula-safe), the GPU-mismatch text."""

from __future__ import annotations

import copy
import csv
import io

from costmodel import Scenario, load_profile
from costmodel.answers.provenance import gpu_mismatch, provenance_cell, source_lines
from costmodel.cli.main import main
from costmodel.io.safe_io import csv_text
from costmodel.model.sources import component_sources
from costmodel.profiles.parse import profile_from_dict


def test_source_lines_group_components_by_label_then_warnings():
    src = {"component_sources": {"all_gather": "measured (a.csv)", "all_reduce": "derived",
                                 "gather": "measured (a.csv)", "kernels": "derived"},
           "warnings": ["w1", "w2"]}
    assert source_lines(src) == ["sources: all_gather, gather measured (a.csv); all_reduce, kernels derived",
                                 "warning: w1", "warning: w2"]
    assert source_lines({"component_sources": {}, "warnings": []}) == []


def test_provenance_cell_is_one_line_naming_every_component_and_formula_safe():
    prof = load_profile("cpu-gloo")
    sc = Scenario(vocab=202048, tp=4, batch=8.0, engine="vllm")
    cell = provenance_cell(prof, sc)
    assert "\n" not in cell and cell.startswith("cpu-gloo (mixed, cpu); sources: ")
    for component, label in component_sources(prof, sc).items():
        assert component in cell and label in cell
    raw = copy.deepcopy(prof.raw)
    raw["name"] = "=HYPERLINK(1)"
    evil = profile_from_dict(raw, source="evil.json")
    text = csv_text(__import__("pandas").DataFrame({"provenance": [provenance_cell(evil, sc)]}))
    assert next(csv.DictReader(io.StringIO(text)))["provenance"].startswith("'=HYPERLINK(1) (mixed, cpu)")


def test_gpu_mismatch_names_both_gpus_only_for_a_fit_onto_another_gpus_base():
    prof = load_profile("cpu-gloo")  # fitted on CPU ranks over the H200 base
    text = gpu_mismatch(prof)
    assert text is not None and "measured on cpu" in text and "h200-sxm-nvlink (NVIDIA H200 SXM)" in text
    raw = copy.deepcopy(prof.raw)
    raw["provenance"]["gpu"] = "H200 SXM"  # the same GPU, spelled without the vendor
    assert gpu_mismatch(profile_from_dict(raw, source="same.json")) is None
    assert gpu_mismatch(load_profile("h100-sxm-nvlink")) is None  # derived, no base


def _rows(path) -> list[dict]:
    return list(csv.DictReader(path.open()))


def test_sweep_compare_and_recommend_csv_carry_the_provenance(tmp_path):
    out = tmp_path / "sweep.csv"
    assert main(["sweep", "--profile", "cpu-gloo", "--tp", "1,4", "--nodes", "1,3", "--batch", "1,8",
                 "--out", str(out)]) == 0
    rows = _rows(out)
    assert {r["provenance"] for r in rows if r["nodes"] == "3"} == {""}  # 3 nodes cannot hold TP 4: invalid
    by_tp = {}
    for r in rows:
        if r["nodes"] == "1":
            by_tp.setdefault(r["tp"], set()).add(r["provenance"])
    assert len(by_tp["1"]) == 1 and "all_gather" not in next(iter(by_tp["1"]))  # TP 1: nothing gathered
    assert "all_gather" in next(iter(by_tp["4"])) and by_tp["1"] != by_tp["4"]
    cmp = tmp_path / "cmp.csv"
    assert main(["compare", "cpu-gloo", "h100-sxm-nvlink", "--tp", "4", "--csv", str(cmp)]) == 0
    cells = {r["profile"]: r["provenance"] for r in _rows(cmp)}
    assert cells["cpu-gloo"].startswith("cpu-gloo (mixed, cpu); sources:")
    assert cells["h100-sxm-nvlink"].startswith("h100-sxm-nvlink (derived, NVIDIA H100 80GB HBM3); sources:")
    wl = tmp_path / "w.csv"
    wl.write_text("batch,weight\n8,1\n64,2\n")
    rec = tmp_path / "rec.csv"
    assert main(["recommend", "--workload", str(wl), "--profile", "cpu-gloo", "--tp", "4", "--csv", str(rec)]) == 0
    assert {r["provenance"] for r in _rows(rec)} == {cells["cpu-gloo"]}


def test_with_provenance_prices_each_rows_own_tp():
    import pandas as pd

    from costmodel.answers.provenance import with_provenance

    prof = load_profile("cpu-gloo")
    sc = Scenario(vocab=202048, tp=4, batch=8.0)
    frame = pd.DataFrame({"tp": [1, 4, 4], "batch": [1, 2, 3]})
    out = with_provenance(frame, prof, sc)
    assert list(out.columns) == ["tp", "batch", "provenance"] and "provenance" not in frame.columns
    assert out["provenance"][1] == out["provenance"][2] == provenance_cell(prof, sc)
    assert out["provenance"][0] == provenance_cell(prof, Scenario(vocab=202048, tp=1, batch=8.0))
    assert out["provenance"][0] != out["provenance"][1]
    flat = with_provenance(frame.drop(columns="tp"), prof, sc)
    assert set(flat["provenance"]) == {provenance_cell(prof, sc)}
