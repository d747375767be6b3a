"""calibration.fit semantics (issue 18 item 1): a fitted profile is its base with the measured parts replaced."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.fitting.fit import fit_measurements, format_fit_report
from costmodel.io.errors import InputError
from costmodel.model.collective_impls import available
from costmodel.model.engines import host_costs
from costmodel.model.kernels import kernel_time_us
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.store import load_profile

from .test_fit import ONE, collective_rows

H100 = "NVIDIA H100 80GB HBM3"


def _fit(frame, base: str | None = "h100-sxm-nvlink"):
    doc = fit_measurements(frame, name="mine", bootstrap=0, base_profile=None if base is None else load_profile(base))
    return doc, profile_from_dict(doc, source="fitted")


def test_collectives_only_fit_keeps_the_base_kernel_model_lm_head_and_host():
    """Before: argmax 25.9 -> 11.1 us, key_pack 24.1 -> 7.6 us (roofline) on an H100 base."""
    base = load_profile("h100-sxm-nvlink")
    doc, fitted = _fit(collective_rows("all_gather", 8, "graph", ONE, gpu=H100))
    assert fitted.kernel_model == base.kernel_model and fitted.lm_head == base.lm_head
    assert host_costs(fitted) == host_costs(base)
    for op in ("argmax", "key_pack", "local_argmax"):
        kw = dict(rows=16.0, cols=25256.0, world_size=8, dtype="bf16", elem_bytes=2, mode="graph")
        assert float(kernel_time_us(fitted, op, **kw).time_us) == pytest.approx(
            float(kernel_time_us(base, op, **kw).time_us), rel=1e-9), op
    assert {"model", "lm_head", "host"} <= set(doc["kernels"]["from_base"])
    assert fitted.provenance.base == "h100-sxm-nvlink" and fitted.provenance.kind == "mixed"
    text = format_fit_report(doc)
    assert "not measured, from base profile h100-sxm-nvlink: GPU kernel model" in text
    assert "lm_head GEMM model" in text and "host launch costs" in text
    assert "warning" not in text  # the same GPU as the base


def test_measured_kernels_replace_the_base_model():
    frame = collective_rows("all_gather", 8, "graph", ONE, gpu="cpu")
    k = frame.iloc[:4].copy()
    k["op"], k["rows"], k["cols"], k["bytes_per_rank"], k["world_size"] = "argmax", [1, 4, 16, 64], 32000, 0, 1
    k["dtype"], k["mode"], k["median_us"] = "bf16", "eager", [10.0, 20.0, 60.0, 220.0]
    doc, fitted = _fit(__import__("pandas").concat([frame, k], ignore_index=True))
    assert fitted.kernel_model is None and "model" not in doc["kernels"].get("from_base", [])
    assert fitted.kernel_ops["argmax"].provenance == "measured"


def test_eager_curve_prices_graph_mode_when_other_ops_have_graph_rows():
    """nccl-tests' default `graph: 0` all_gather log next to a `-G` all_reduce log: before, a graph-mode query
    of all_gather at p 8 went to the base's derived curve."""
    import pandas as pd

    frame = pd.concat([collective_rows("all_gather", 8, "eager", ONE, gpu=H100),
                       collective_rows("all_reduce", 8, "graph", ONE, gpu=H100, seed=3)], ignore_index=True)
    _, fitted = _fit(frame)
    for mode in ("graph", "eager"):
        curve = fitted.curve("all_gather", 8, mode)
        assert curve.provenance == "measured" and not curve.from_base, mode
    assert fitted.curve("all_reduce", 8, "graph").provenance == "measured"
    assert fitted.curve("all_reduce", 8, "eager").from_base == "h100-sxm-nvlink"  # graph-only: eager from base


def test_an_unmeasured_world_size_uses_the_fits_own_any_p_curve():
    """cpu-gloo measured p = 2, 4: before, all_reduce at TP 8 was priced by the H200 NVLink curve (19 us)."""
    import pandas as pd

    frame = pd.concat([collective_rows("all_reduce", p, "eager", ONE, gpu="cpu", seed=p) for p in (2, 4)],
                      ignore_index=True)
    _, fitted = _fit(frame, base=None)
    curve = fitted.curve("all_reduce", 8, "graph")
    assert curve.provenance == "measured" and curve.world_size is None
    gloo = load_profile("cpu-gloo")
    assert gloo.curve("all_reduce", 8, "graph").provenance == "measured"
    assert gloo.curve("all_reduce", 8, "graph").world_size is None


def test_a_cpu_profile_never_offers_one_shot_or_multimem():
    gloo = load_profile("cpu-gloo")
    for impl in ("oneshot", "multimem"):
        for op in ("all_gather", "all_reduce"):
            assert not available(gloo, impl, op, np.array([8.0, 2.0**20]), 8, 1).any(), (impl, op)
    assert available(load_profile("h200-sxm-nvlink"), "multimem", "all_reduce", 1024.0, 8, 1).all()


def test_fitting_one_gpus_rows_onto_another_gpus_base_warns():
    doc, _ = _fit(collective_rows("all_gather", 8, "graph", ONE, gpu=H100), base="h200-sxm-nvlink")
    (row,) = [r for r in doc["fit_report"] if r["kind"] == "warning"]
    assert "measured on NVIDIA H100 80GB HBM3" in row["status"] and "h200-sxm-nvlink" in row["status"]
    assert "warning: rows measured on NVIDIA H100" in format_fit_report(doc)


def test_one_world_size_without_any_p_curve_refuses_other_p_or_uses_the_flagged_base():
    _, fitted = _fit(collective_rows("all_gather", 8, "graph", ONE, gpu=H100))
    assert fitted.curve("all_gather", 4, "graph").from_base == "h100-sxm-nvlink"
    doc = fit_measurements(collective_rows("all_gather", 8, "graph", ONE, gpu=H100), name="x", bootstrap=0)
    doc["collectives"] = [c for c in doc["collectives"] if not c.get("from_base")]
    with pytest.raises(InputError, match="no all_gather curve for world size 4"):
        profile_from_dict(doc, source="x").curve("all_gather", 4, "graph")


def test_predict_says_per_component_measured_or_from_base_and_warns_on_a_fabric_mix(tmp_path, capsys):
    import json

    from costmodel.cli.main import main
    from costmodel.profiles.store import save_profile

    doc, _ = _fit(collective_rows("all_gather", 8, "graph", ONE, gpu=H100))
    save_profile(doc, tmp_path / "mine.json")
    args = ["predict", "--profile", str(tmp_path / "mine.json"), "--batch", "16", "--no-intervals",
            "--engine", "none"]  # the per-call answer: its sources line, as it was written for
    assert main([*args, "--tp", "8"]) == 0
    out = capsys.readouterr().out.replace("\n    ", " ")  # the prose lines wrap at 100 columns (render.wrap_lines)
    assert "all_gather measured (uploaded measurements)" in out
    assert "all_reduce, gather, broadcast, kernels, lm_head, host from base (h100-sxm-nvlink)" in out
    assert "warning" not in out
    assert main([*args, "--tp", "4", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["component_sources"]["all_gather"] == "from base (h100-sxm-nvlink)"
    (warning,) = result["warnings"]
    assert warning.startswith("all_gather at TP 4 (graph): not measured in this profile (measured: p 8")


def test_the_fit_report_names_base_curves_across_nodes_and_modes():
    """A base all_reduce curve at p 2 over 2 nodes is not the measured one-node p 2 curve: the report says which."""
    rows = [{"kind": "base", "op": "all_reduce", "world_size": 2, "nodes": 2, "mode": None,
             "status": "from base profile b"},
            {"kind": "base", "op": "all_reduce", "world_size": 8, "nodes": 1, "mode": "graph",
             "status": "from base profile b"},
            {"kind": "base", "op": "all_gather", "world_size": None, "nodes": None, "mode": None,
             "status": "from base profile b"}]
    text = format_fit_report({"fit_report": rows})
    assert "all_reduce (p 2 x 2 nodes, p 8 graph); all_gather (any p)" in text
