"""`calibration.verify`: all strategies pass on 4 gloo ranks; injected bugs are caught; bad input is rejected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from calibration.reference import strategies as ref
from calibration.reference import verify

ROOT = Path(__file__).resolve().parents[2]


def _torchrun(nproc: int, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "calibration.verify", "--backend", "gloo", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _table_rows(stdout: str) -> dict[str, list[str]]:
    names = {c.name for c in verify.default_cases()}
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if parts and parts[0] in names:
            rows[parts[0]] = parts[1:]
    return rows


@pytest.mark.torchrun
def test_verify_passes_on_four_gloo_ranks():
    proc = _torchrun(4)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = _table_rows(proc.stdout)
    assert set(rows) == {c.name for c in verify.default_cases()}
    assert all(cells == ["PASS"] * len(ref.STRATEGY_FUNCS) for cells in rows.values()), proc.stdout
    assert "world size 4" in proc.stdout and "result: PASS" in proc.stdout


@pytest.mark.torchrun
def test_injected_tie_bug_makes_verify_fail_and_names_the_case():
    proc = _torchrun(2, "--inject-bug", "ties-highest", "--cases", "ties-across-shards-fp32,random-fp32")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FAIL ties-across-shards-fp32-V1000-B8 / local_argmax_pairs: first mismatching row" in proc.stdout
    rows = _table_rows(proc.stdout)
    pairs = list(ref.STRATEGY_FUNCS).index("local_argmax_pairs")
    assert rows["ties-across-shards-fp32-V1000-B8"][pairs].startswith("FAIL@row")
    assert rows["random-fp32-V1000-B1"] == ["PASS"] * len(ref.STRATEGY_FUNCS)  # no tie there: the bug is silent
    assert "result: FAIL" in proc.stdout


@pytest.mark.parametrize("bug,word", [("ties-highest", "ties-across"), ("no-pad-mask", "max-in-padding"),
                                      ("raw-negzero", "signed-zero"), ("nan-dropped", "nan-")])
def test_every_injected_bug_is_caught_by_its_cases(bug, word):
    cases = [c for c in verify.default_cases() if word in c.name]
    strategies = verify.strategies_with_bug(bug)
    target = verify.BUGS[bug][0]
    outcomes = ref.run_threads(2, lambda comm: verify.run_cases(cases, strategies, comm, torch.device("cpu"), 0))
    for rank_outcomes in outcomes:
        failed = {(o.case, o.strategy) for o in rank_outcomes if o.failed}
        assert failed and {s for _, s in failed} == {target}
    # without the bug the same cases pass
    clean = ref.run_threads(2, lambda comm: verify.run_cases(cases, verify.strategies_with_bug(None), comm,
                                                            torch.device("cpu"), 0))
    assert all(o.status == "PASS" for o in clean[0])


def test_table_marks_fail_with_the_first_bad_row():
    outcomes = [verify.Outcome("case-a", "full_all_gather", "PASS"),
                verify.Outcome("case-a", "local_argmax_pairs", "FAIL", 3, 17, 4),
                verify.Outcome("case-b", "full_all_gather", "SKIP"),
                verify.Outcome("case-b", "local_argmax_pairs", "ERROR", message="IndexError: boom")]
    text = verify.format_table(outcomes, ["full_all_gather", "local_argmax_pairs"])
    assert "FAIL@row3" in text and "got id 17, expected 4" in text and "ERROR case-b" in text


@pytest.mark.parametrize("flags", [["--scale", "0"], ["--scale", "-1.5"], ["--softcap", "-2"]])
def test_non_positive_scale_or_softcap_is_rejected(flags, capsys):
    assert verify.main(["--backend", "gloo", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err


def test_unknown_case_filter_is_rejected(capsys):
    assert verify.main(["--backend", "gloo", "--cases", "no-such-case"]) == 2
    assert "matches no case" in capsys.readouterr().err


def test_fused_without_triton_exits_2_with_one_line():
    code = ("import sys; sys.modules['triton'] = None; from calibration.reference import verify; "
            "sys.exit(verify.main(['--backend', 'gloo', '--fused', '--cases', 'random-fp32']))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert err.startswith("error: ") and "Triton" in err and "\n" not in err and "Traceback" not in err
    assert proc.stdout == ""


def test_timing_prices_fused_names_with_the_fused_kernels():
    from costmodel import Scenario, load_profile, predict

    prof = load_profile("h200-sxm-nvlink")
    scn = Scenario(vocab=128256, tp=4, batch=64, dtype="bf16", mode="eager")
    names = ["local_argmax_pairs", ref.fused_name("local_argmax_pairs"), ref.fused_name("packed_allreduce_max"),
             "not_a_model_strategy"]
    got = verify.predicted_us(scn, prof, names)
    fused = predict(scn.with_(impl="fused"), prof)
    assert got["local_argmax_pairs"] == float(predict(scn, prof).total_us("local_argmax_pairs")[()])
    assert got[names[1]] == float(fused.total_us("local_argmax_pairs")[()]) != got["local_argmax_pairs"]
    assert got[names[2]] == float(fused.total_us("packed_allreduce_max")[()])
    assert got["not_a_model_strategy"] != got["not_a_model_strategy"]  # NaN: the model cannot price it
    text = verify.format_timing([{"batch": 64, "vocab": 128256, "strategy": names[3], "measured_us": 12.5,
                                  "predicted_us": float("nan")}], "bf16", 4, "nccl", None)
    assert text.splitlines()[-1].split()[-3:] == ["12.5", "n/a", "n/a"]


def test_bad_flag_is_one_error_line_exit_2():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "calibration.verify", "--backend", "gloo", "--bogus"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert err.startswith("error: ") and "--bogus" in err and "\n" not in err
    assert proc.stdout == ""


@pytest.mark.parametrize("where", ["_init", "run_cases"])
def test_a_broken_process_group_is_one_error_line_exit_3(where, monkeypatch, capsys):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)

    def broken(*_args, **_kwargs):
        raise RuntimeError("[pair.cc:534] Connection closed by peer [10.0.0.2]:1234\nstack trace")

    monkeypatch.setattr(verify, where, broken)
    assert verify.main(["--backend", "gloo", "--cases", "random-fp32"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: RuntimeError: Connection closed by peer") and "\n" not in err
    assert not torch.distributed.is_initialized()
