"""One reader, one batch (issue 42 item 4): on one real bench file, recommend's expected saving per decode step and
simulate's change of mean ITL - both priced from the same reader and the same inferred server - agree within
their 90% intervals."""

from __future__ import annotations

import json

from costmodel.cli.main import main
from tests.conftest import ROOT

RUN = ROOT / "data" / "serving-runs" / "cap8-inf-r1.json"
SCENARIO = ["--preset", "llama4-maverick", "--tp", "8"]
STRATEGY = "local_argmax_pairs"


def test_recommend_and_simulate_agree_on_one_file(capsys):
    assert main(["recommend", *SCENARIO, "--workload", str(RUN), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert "inferred max_num_seqs 8" in rec["workload"]["method"]
    row = rec["strategies"][STRATEGY]
    # recommend: saving per decode step (us, + = faster) -> the change of the step, us
    rec_point = -row["expected_saving_per_decode_step_us"]
    rec_low, rec_high = -row["interval_us"]["high"], -row["interval_us"]["low"]
    assert main(["simulate", *SCENARIO, "--bench", str(RUN), "--json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["server"].startswith("inferred max_num_seqs 8")
    base_ms = sim["strategies"][sim["reference"]]["mean_itl_ms"]["value"]
    change = sim["changes_pct"][STRATEGY]["mean_itl_ms"]
    sim_point = 1e3 * (sim["strategies"][STRATEGY]["mean_itl_ms"]["value"] - base_ms)
    sim_low, sim_high = (10 * base_ms * change["low"], 10 * base_ms * change["high"])  # % of ms -> us
    assert max(rec_low, sim_low) <= min(rec_high, sim_high)  # the intervals overlap
    assert abs(rec_point - sim_point) <= (rec_high - rec_low + sim_high - sim_low) / 2
