"""`validate --serving` (issue 38 item 6): each bench run's own metrics against the baseline strategy's replay."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from costmodel.cli.main import main
from costmodel.profiles.store import load_profile
from costmodel.serving.ab import vllm_batch_defaults
from tests.conftest import ROOT

EXAMPLE = ROOT / "data" / "examples" / "vllm-bench-serve-c16.json"


def test_bundled_runs_are_replayed_and_marked_synthetic(capsys, tmp_path):
    out = tmp_path / "serving.csv"
    assert main(["validate", "--serving", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("serving: each run's own metrics vs the baseline strategy's replay")
    assert "vllm-bench-serve-c16.json: synthetic example of a `vllm bench serve --save-result` file" in text
    rows = pd.read_csv(out)
    assert set(rows["kind"]) == {"synthetic"} and set(rows["run"]) == {EXAMPLE.name}
    assert rows["error_pct"].tolist() == pytest.approx(
        (100 * (rows["replayed"] - rows["measured"]) / rows["measured"]).tolist())
    # the same replay as `simulate --json`'s baseline reproduction error
    assert main(["simulate", "--bench", str(EXAMPLE), "--preset", "llama4-maverick", "--tp", "8", "--json"]) == 0
    ab = json.loads(capsys.readouterr().out)
    got = rows.set_index("metric")["error_pct"].to_dict()
    assert got == pytest.approx({k: v for k, v in ab["baseline_reproduction_error_pct"].items() if v is not None})


def test_a_run_without_a_note_is_measured(capsys, tmp_path):
    doc = json.loads(EXAMPLE.read_text())
    doc.pop("note")
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(doc))
    assert main(["validate", "--serving", str(path)]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("mine.json")]
    assert len(lines) == 7 and all(x.split()[1] == "measured" for x in lines)


def test_a_bad_run_is_one_line(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"duration": 1}')
    assert main(["validate", "--serving", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bench bad.json: ") and err.count("\n") == 1


@pytest.mark.parametrize("profile, want", [("h200-sxm-nvlink", (1024, 8192)), ("h100-sxm-nvlink", (1024, 8192)),
                                           ("a100-sxm-nvlink", (256, 2048)), ("l40s-pcie", (256, 2048))])
def test_simulate_takes_vllms_batch_defaults_for_the_gpu(profile, want):
    """vllm/engine/arg_utils.py EngineArgs.get_batch_defaults (API server): >= 70 GiB and not an A100 -> 1024 /
    8192, else 256 / 2048."""
    assert vllm_batch_defaults(load_profile(profile)) == want


@pytest.mark.parametrize("engine, reference, shown", [
    ("vllm", "full_all_gather", ["full_all_gather", "local_argmax_pairs"]),  # the default and the switch
    ("trtllm", "local_argmax_pairs", ["local_argmax_pairs"]),  # always the pairs: nothing to A/B
    ("tokenspeed", "packed_allreduce_max", ["packed_allreduce_max", "full_all_gather"]),
    ("none", "full_all_gather", ["full_all_gather", "full_all_gather_no_relayout", "gather_to_rank0",
                                 "local_argmax_pairs", "packed_allreduce_max"]),
])
def test_simulate_replays_what_the_engine_ran_and_can_run(capsys, engine, reference, shown):
    """The baseline run ran the engine's default strategy (the reference of every change), and only the strategies
    the engine can run are replayed (issue 38: "every strategy the engine can run")."""
    assert main(["simulate", "--bench", str(EXAMPLE), "--engine", engine, "--json"]) == 0
    ab = json.loads(capsys.readouterr().out)
    assert ab["reference"] == reference and list(ab["strategies"]) == shown
    assert set(ab["changes_pct"]) == set(shown) - {reference}
