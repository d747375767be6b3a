"""Measured one-shot / multimem curves (calibration.collectives --impl) priced by the cost model (issue 11)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from calibration.fitting.fit import main as fit_main
from costmodel.cli.main import main as cli_main
from costmodel.io.errors import InputError
from costmodel.model import collective_impls as ci
from costmodel.model.predict import predict
from costmodel.model.scenario import Scenario
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.store import bundled_profiles, load_profile

SIZES = np.array([2 ** k for k in range(8, 20)], dtype=np.int64)  # 256 B .. 512 KiB per rank (p * b <= 8 MiB)


def _rows(op: str, p: int, alpha_us: float, busbw_gbps: float, label: str) -> pd.DataFrame:
    """Rows as calibration.collectives writes them (calibration/bench/collectives.py `_row`), exact times."""
    total = SIZES * (p if op == "all_gather" else 1)
    factor = (p - 1) / p * (2 if op == "all_reduce" else 1)
    t = alpha_us + total * factor / busbw_gbps * 1e-3
    return pd.DataFrame({"op": op, "backend": "nccl", "device": "cuda", "gpu": "NVIDIA H200", "dtype": "bf16",
                         "mode": "graph", "world_size": p, "nodes": 1, "bytes_per_rank": SIZES, "rows": 0,
                         "cols": 0, "label": [f"{label}{op}-{b}" for b in SIZES], "median_us": t,
                         "p10_us": t, "p90_us": t, "min_us": t, "max_us": t, "iters": 50})


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    bench = tmp_path_factory.mktemp("bench")
    nccl = pd.concat([_rows("all_gather", 8, 20.0, 300.0, ""), _rows("all_reduce", 8, 25.0, 300.0, "")])
    nccl.to_csv(bench / "collectives.csv", index=False)
    (bench / "oneshot").mkdir()
    _rows("all_gather", 8, 6.0, 150.0, "oneshot:").to_csv(bench / "oneshot" / "collectives.csv", index=False)
    out = bench / "fitted.json"
    assert fit_main([str(bench), "--out", str(out), "--bootstrap", "0", "--base-profile", "h200-sxm-nvlink"]) == 0
    return out


def test_fit_dir_stores_the_oneshot_curve_tagged_in_the_same_profile(fitted):
    doc = json.loads(fitted.read_text())
    tagged = [c for c in doc["collectives"] if c.get("impl") == "oneshot"]
    assert [(c["op"], c["world_size"], c["provenance"]) for c in tagged] == [("all_gather", 8, "measured")]
    assert any(f.endswith("oneshot/collectives.csv") for f in doc["provenance"]["files"])
    prof = load_profile(str(fitted))
    assert [c.impl for c in prof.impl_curves] == ["oneshot"]
    assert all(c.impl == "nccl" for c in prof.collectives)
    # NCCL pricing never sees the one-shot curve: the NCCL all_gather stays the 20 us + 300 GB/s one
    assert prof.curve("all_gather", 8, "graph").regimes[0].busbw_gbps == pytest.approx(300.0, rel=1e-3)


def test_measured_oneshot_prices_from_the_fitted_curve_and_says_measured(fitted):
    prof = load_profile(str(fitted))
    (curve,) = prof.impl_curves
    b, p = 65536.0, 8
    (r,) = curve.regimes  # exact linear data: one regime, alpha 6 us, busbw 150 GB/s
    assert (r.alpha_base_us + 7 * r.alpha_per_peer_us, r.busbw_gbps) == pytest.approx((6.0, 150.0), rel=1e-3)
    hand = curve.launch_us + r.alpha_base_us + r.alpha_per_peer_us * (p - 1) + p * b * (7 / 8) / r.busbw_gbps * 1e-3
    assert float(ci.impl_time_us(prof, "oneshot", "all_gather", b, p)) == pytest.approx(hand, rel=1e-9)
    assert hand == pytest.approx(6.0 + 8 * 65536 * 7 / 8 / 150.0 * 1e-3, rel=1e-3)  # 9.06 us
    assert ci.provenance(prof, "oneshot", "all_gather", p) == "measured"
    assert ci.provenance(prof, "oneshot", "all_reduce", p) == "derived"  # no measured all-reduce curve
    assert "(measured)" in ci.formula("oneshot", "all_gather", prof, p)
    # still above the one-shot size limit: NCCL
    big = ci.ONESHOT.max_bytes  # p * b > 8 MiB
    t, native = ci.collective_us(prof, "oneshot", "all_gather", big, p)
    assert not bool(native) and float(t) == pytest.approx(float(ci.impl_time_us(prof, "nccl", "all_gather", big, p)))
    # the baseline's total moves by exactly measured one-shot - what prices it without the curve (this fitted
    # profile states no NVLink interconnect, so without its measured curve one-shot falls back to NCCL)
    derived = dataclasses.replace(prof, impl_curves=())
    sc = Scenario(vocab=8192, draft_vocab=8192, tp=p, batch=1, num_spec_tokens=1, collective="oneshot")
    bytes_pr = float(predict(sc, prof).strategies["full_all_gather"].wire_bytes_per_rank)
    assert p * bytes_pr <= ci.ONESHOT.max_bytes
    diff = float(ci.collective_us(prof, "oneshot", "all_gather", bytes_pr, p)[0]
                 - ci.collective_us(derived, "oneshot", "all_gather", bytes_pr, p)[0])
    got = float(predict(sc, prof).strategies["full_all_gather"].total_us
                - predict(sc, derived).strategies["full_all_gather"].total_us)
    assert diff < 0 and got == pytest.approx(diff, rel=1e-6)


def test_json_says_measured_or_derived(fitted, capsys):
    args = ["predict", "--vocab", "8192", "--tp", "8", "--batch", "1", "--collective", "oneshot", "--json",
            "--no-intervals"]
    assert cli_main([*args, "--profile", str(fitted)]) == 0
    got = json.loads(capsys.readouterr().out)["collective_provenance"]
    assert got == {"all_gather": "measured", "all_reduce": "derived"}
    assert cli_main([*args, "--profile", "h200-sxm-nvlink"]) == 0
    assert json.loads(capsys.readouterr().out)["collective_provenance"] == {"all_gather": "derived",
                                                                             "all_reduce": "derived"}


def test_fit_of_the_impl_directory_alone_still_works(fitted, tmp_path):
    out = tmp_path / "own.json"
    assert fit_main([str(fitted.parent / "oneshot"), "--out", str(out), "--bootstrap", "0"]) == 0
    assert profile_from_dict(json.loads(out.read_text())).impl_curves == ()


@pytest.mark.parametrize("name", sorted(bundled_profiles()))
def test_bundled_profiles_price_nccl_identically_with_an_impl_curve_added(name):
    """Bundled profiles carry no impl curves (derived as before); a tagged curve never touches NCCL pricing."""
    prof = load_profile(name)
    assert prof.impl_curves == ()
    assert all(ci.provenance(prof, impl, op, 8) == "derived" for impl in ci.IMPLS[1:] for op in ci.IMPL_OPS)
    doc = json.loads(json.dumps(prof.raw))
    slow = {**doc["collectives"][0], "impl": "oneshot", "world_size": None, "nodes": None, "mode": None,
            "regimes": [{"name": "x", "max_bytes": None, "alpha_base_us": 999.0, "busbw_gbps": 0.5}]}
    tagged = profile_from_dict({**doc, "collectives": [*doc["collectives"], slow]}, source=name)
    assert len(tagged.impl_curves) == 1 and tagged.collectives == prof.collectives
    sc = Scenario(vocab=32000, draft_vocab=32000, tp=2, batch=np.array([1.0, 64.0]), num_spec_tokens=3)
    before, after = predict(sc, prof), predict(sc, tagged)
    for strategy, r in before.strategies.items():
        np.testing.assert_array_equal(np.asarray(after.strategies[strategy].total_us), np.asarray(r.total_us))


def test_bad_impl_is_one_line_error():
    doc = json.loads(json.dumps(load_profile("h200-sxm-nvlink").raw))
    doc["collectives"][0]["impl"] = "twoshot"
    with pytest.raises(InputError, match="impl"):
        profile_from_dict(doc)


def test_best_pair_note_names_measured_and_derived_parts():
    from costmodel.cli.render import _impl_provenance_note

    both = _impl_provenance_note({"collective": "oneshot",
                                  "collective_provenance": {"all_gather": "measured", "all_reduce": "derived"}})
    assert both == "  (oneshot all_gather: measured curve; all_reduce: derived from published figures)"
    assert "not measured" in _impl_provenance_note({"collective": "multimem"})


def test_dashboard_caption_text_says_which_impl_curves_are_measured(fitted):
    prof = load_profile(str(fitted))
    assert ci.provenance_text(prof, ci.IMPLS, 8) == ("measured curves for oneshot all_gather; the rest derived from "
                                                     "published figures (SOURCES.md section 3)")
    assert ci.provenance_text(prof, ("oneshot",), 4).startswith("derived")  # no curve at p = 4
    assert ci.provenance_text(load_profile("h200-sxm-nvlink"), ci.IMPLS, 8).endswith("not measured")
