"""No command writes over one of its own inputs (issue 22): refused before any work, the input intact, exit 2."""

from __future__ import annotations

import os
import shutil

import pytest

from costmodel.cli.main import main
from tests.conftest import ROOT

CASES = [  # (argv with IN standing for the input copy, the input file to copy)
    (["sweep", "--profile", "IN", "--out", "IN", "--tp", "2", "--batch", "1"], "data/profiles/cpu-gloo.json", "--out"),
    (["validate", "--reference", "IN", "--out", "IN"], "data/reference/published.csv", "--out"),
    (["recommend", "--workload", "IN", "--csv", "IN", "--tp", "8"], "data/examples/chat-diurnal.csv", "--csv"),
    (["predict", "--profile", "IN", "--tp", "2", "--batch", "4", "--matrix-csv", "IN"], "data/profiles/cpu-gloo.json",
     "--matrix-csv"),
    (["compare", "IN", "h100-sxm-nvlink", "--csv", "IN"], "data/profiles/cpu-gloo.json", "--csv"),
    (["predict-points", "--profile", "h200-sxm-nvlink", "--in", "IN", "--out", "IN"],
     "data/calibration/cpu-gloo/collectives.csv", "--out"),
    (["simulate", "--bench", "IN", "--csv", "IN"], "data/examples/vllm-cpu-spec-k3.json", "--csv"),
    (["simulate", "--prompts", "IN", "--num-prompts", "5", "--itl-ms", "5", "--acceptance-length", "2", "--csv",
      "IN"], "data/examples/vllm-cpu-spec-k3.json", "--csv"),
    (["validate", "--serving", "IN", "--out", "IN"], "data/examples/vllm-cpu-spec-k3.json", "--out"),
]


@pytest.mark.parametrize("argv, source, flag", CASES, ids=[f"{c[0][0]}-{c[0][1]}" for c in CASES])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path, capsys, argv, source, flag):
    path = tmp_path / ("in" + (ROOT / source).suffix)
    shutil.copy(ROOT / source, path)
    before = path.read_bytes()
    code = main([str(path) if a == "IN" else a for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"{flag} {path}: is also an input of this command" in err[0]
    assert path.read_bytes() == before


def test_a_bundled_profile_named_by_its_name_is_an_input_too(capsys):
    target = ROOT / "data" / "profiles" / "h200-sxm-nvlink.json"
    before = target.read_bytes()
    assert main(["sweep", "--profile", "h200-sxm-nvlink", "--tp", "2", "--batch", "1", "--out", str(target)]) == 2
    assert "is also an input" in capsys.readouterr().err and target.read_bytes() == before


def test_a_fifo_output_is_refused_instead_of_blocking(tmp_path, capsys):
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    assert main(["sweep", "--tp", "2", "--batch", "1", "--out", str(fifo)]) == 2
    assert "FIFO" in capsys.readouterr().err


def test_the_profile_protected_is_the_one_loaded_even_beside_a_same_named_local_file(tmp_path, monkeypatch, capsys):
    """load_profile reads the bundled profile for a bare name even when a local file has that name; the output check
    must protect the same file (profiles.paths.profile_file serves both)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h200-sxm-nvlink").write_text("a local file that is not read")
    target = ROOT / "data" / "profiles" / "h200-sxm-nvlink.json"
    before = target.read_bytes()
    assert main(["sweep", "--profile", "h200-sxm-nvlink", "--tp", "2", "--batch", "1", "--out", str(target)]) == 2
    assert "is also an input" in capsys.readouterr().err and target.read_bytes() == before


@pytest.mark.parametrize("argv", [
    ["sweep", "--tp", "2", "--batch", "1", "--out"],
    ["recommend", "--workload", str(ROOT / "data/examples/chat-diurnal.csv"), "--tp", "8", "--csv"],
    ["predict", "--tp", "2", "--batch", "4", "--matrix-csv"],
    ["compare", "h100-sxm-nvlink", "b200-hgx-nvlink", "--csv"],
    ["predict-points", "--in", str(ROOT / "data/calibration/cpu-gloo/collectives.csv"), "--out"],
    ["simulate", "--bench", str(ROOT / "data/examples/vllm-cpu-spec-k3.json"), "--csv"],
    ["validate", "--out"],
], ids=lambda argv: f"{argv[0]}-{argv[-1]}")
def test_an_empty_output_path_is_refused_not_a_silent_exit_0(capsys, argv):
    """issue 43: `--csv ''` exited 0 writing nothing (read as "not given"): one line naming the flag, exit 2."""
    for blank in ("", "  "):
        assert main([*argv, blank]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{argv[-1]}: empty value" in err[0], err
