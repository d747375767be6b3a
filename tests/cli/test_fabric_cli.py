"""--fabric / --nics-per-node / --nic-gbps on predict, recommend, sweep, compare and predict-points: the answer
names the fabric and how to calibrate it; bad input is one line, exit 2; the default is unchanged."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from costmodel.cli.main import main
from costmodel.profiles.fabrics import transport_table
from tests.conftest import ROOT

TWO_NODES = ("--profile", "h100-sxm-nvlink", "--tp", "16", "--nodes", "2", "--batch", "1")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "costmodel", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def predict_json(capsys, *extra: str) -> dict:
    assert main(["predict", *TWO_NODES, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_predict_names_fabric_and_calibration(capsys):
    assert main(["predict", *TWO_NODES, "--fabric", "tcpxo"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "2 nodes over tcpxo (fitted to h100x16_all_gather_dstack-gcp-a3mega-tcpxo-2node.log" in text
    assert "python -m calibration.import_nccl_tests LOG --nodes 2" in text and "calibration.fit" in text


def test_default_fabric_changes_no_number(capsys):
    plain = predict_json(capsys)
    ib = predict_json(capsys, "--fabric", "ib")
    assert plain["warnings"] == [] and ib["warnings"][0].startswith("2 nodes over ib (derived: ")
    assert {k: v["total_us"] for k, v in plain["strategies"].items()} == {
        k: v["total_us"] for k, v in ib["strategies"].items()}


def test_slower_fabric_raises_the_all_gather_and_a_floor_heavy_one_more(capsys):
    ib = predict_json(capsys)["strategies"]["full_all_gather"]["components"]["all_gather"]
    tcpxo = predict_json(capsys, "--fabric", "tcpxo")["strategies"]["full_all_gather"]["components"]["all_gather"]
    gib = predict_json(capsys, "--fabric", "gib")["strategies"]["full_all_gather"]["components"]["all_gather"]
    assert ib < tcpxo < gib  # tcpxo +52.4 us per inter-node step, gib +17.1 us per ring step (transports.csv)
    more = predict_json(capsys, "--fabric", "tcpxo", "--nics-per-node", "16")
    assert more["strategies"]["full_all_gather"]["components"]["all_gather"] <= tcpxo


@pytest.mark.parametrize("flags, word", [
    (("--fabric", "infiniband-ish"), "--fabric: unknown fabric"),
    (("--fabric", "tcpxo", "--nics-per-node", "0"), "--nics-per-node"),
    (("--nics-per-node", "1e9"), "--nics-per-node"),
    (("--nic-gbps", "nan"), "--nic-gbps"),
    (("--nic-gbps", "1e-300"), "--nic-gbps"),  # issue 43: 300-digit times, null crossovers, numpy warnings
    (("--nic-gbps", "0.5"), "1 (1 GbE)"),
])
def test_bad_fabric_input_one_line_exit_2(flags, word):
    proc = run_cli("predict", *TWO_NODES, *flags)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and word in lines[0]


def test_recommend_sweep_compare_predict_points_take_the_fabric(tmp_path, capsys):
    assert main(["recommend", *TWO_NODES[:6], "--workload", str(ROOT / "data/examples/chat-diurnal.csv"),
                 "--fabric", "socket"]) == 0
    assert "nodes over socket" in " ".join(capsys.readouterr().out.split())
    out = {}
    for fab in ("ib", "tcpx"):
        path = tmp_path / f"{fab}.csv"
        assert main(["sweep", *TWO_NODES, "--fabric", fab, "--out", str(path)]) == 0
        out[fab] = pd.read_csv(path)
    col = "total_us" if "total_us" in out["ib"] else [c for c in out["ib"] if c.endswith("_us")][0]
    assert (out["tcpx"][col] >= out["ib"][col]).all() and (out["tcpx"][col] > out["ib"][col]).any()
    assert main(["compare", "h100-sxm-nvlink", "b200-hgx-nvlink", "--tp", "16", "--nodes", "2", "--batch", "1",
                 "--fabric", "tcpxo"]) == 0
    assert "tcpxo" in " ".join(capsys.readouterr().out.split())
    rows = pd.DataFrame({"op": ["all_gather"], "mode": ["graph"], "world_size": [16], "nodes": [2],
                         "bytes_per_rank": [4096], "dtype": ["bf16"], "backend": ["nccl"]})
    src = tmp_path / "rows.csv"
    rows.to_csv(src, index=False)
    got = {}
    for fab in ("ib", "gib"):
        dst = tmp_path / f"pred-{fab}.csv"
        assert main(["predict-points", "--in", str(src), "--out", str(dst), "--profile", "h100-sxm-nvlink",
                     "--fabric", fab]) == 0
        got[fab] = float(pd.read_csv(dst)["predicted_us"].iloc[0])
    # 16 ranks over 2 nodes, ring LL all_gather: 15 ring steps x gIB's step overhead above NCCL's 1 us, plus 1
    # inter-node step (gIB's inter_step_us; 0 as fitted) - the bandwidth term moves < 1 us at 4 KiB per rank
    gib = transport_table()["gib"]
    assert got["gib"] == pytest.approx(got["ib"] + 15 * (gib.step_overhead_us - 1) + gib.inter_step_us, abs=1.0)


MULTI_NODE = {"a100-sxm-nvlink": 16, "b200-hgx-nvlink": 16, "b300-hgx-nvlink": 16, "gb200-nvl72": 144,
              "gb300-nvl72": 144, "h100-sxm-nvlink": 16, "h20-hgx-nvlink": 16, "h200-sxm-nvlink": 16,
              "l40s-pcie": 16, "mi300x-xgmi": 16, "mi325x-xgmi": 16, "mi355x-xgmi": 16, "rtx-4090-pcie": 16,
              "rtx-pro-6000-pcie": 16}


@pytest.mark.parametrize("profile", sorted(MULTI_NODE))
def test_every_fabric_on_every_multi_node_profile(profile, capsys):
    """predict --fabric X at 2 nodes, every fabric on every bundled profile with NICs: exit 0, the fabric named."""
    for fabric in ("ib", "roce", "efa", "tcpx", "tcpxo", "gib", "socket", "mnnvl"):
        assert main(["predict", "--profile", profile, "--tp", str(MULTI_NODE[profile]), "--nodes", "2", "--batch", "1",
                     "--vocab", "147456", "--engine", "none", "--no-intervals", "--json", "--fabric", fabric]) == 0
        out = json.loads(capsys.readouterr().out)
        assert any(w.startswith(f"2 nodes over {fabric} (") for w in out["warnings"])


def test_simulate_names_the_fabric_above_its_table(capsys):
    flags = ["simulate", "--preset", "deepseek-v3", "--profile", "h100-sxm-nvlink", "--tp", "16", "--nodes", "2",
             "--num-prompts", "20", "--itl-ms", "20", "--acceptance-length", "2", "--seeds", "2"]
    assert main([*flags, "--fabric", "tcpxo"]) == 0
    text = capsys.readouterr().out
    assert "fabric: 2 nodes over tcpxo" in text and "import_nccl_tests" in text
    assert main([*flags, "--fabric", "tcpxo", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fabric"].startswith("2 nodes over tcpxo")
    assert main([*flags[:6], "8", *flags[9:], "--json"]) == 0  # TP 8 on one node: no fabric to name
    assert json.loads(capsys.readouterr().out)["fabric"] is None


@pytest.mark.parametrize("argv", [
    ["predict", *TWO_NODES], ["sweep", *TWO_NODES, "--out", "-"],
    ["recommend", *TWO_NODES[:6], "--workload", str(ROOT / "data/examples/chat-diurnal.csv")],
    ["compare", "h100-sxm-nvlink", "b200-hgx-nvlink", "--tp", "16", "--nodes", "2", "--batch", "1"],
    ["predict-points", "--in", str(ROOT / "data/examples/chat-diurnal.csv"), "--out", "-",
     "--profile", "h100-sxm-nvlink"],
])
def test_a_sub_gigabit_nic_is_refused_by_every_command(argv, capsys):
    """--nic-gbps 1e-300 priced 300-digit times (issue 43): every command taking the flag refuses it, one line."""
    assert main([*argv, "--nic-gbps", "1e-300"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--nic-gbps" in err[0] and "1 (1 GbE) to 3200" in err[0]
