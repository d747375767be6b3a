"""Collective benchmark: planning (pure) and real gloo runs under torchrun on this CPU machine."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calibration.bench import collectives
from calibration.bench.collectives import CSV_NAME, EXTRA_COLUMNS, PROVENANCE_NAME, prepare_csv
from calibration.bench.payloads import plan_points, strategy_payloads, sweep_sizes, tp_sizes
from calibration.logs.results import point_key
from costmodel.io.errors import InputError
from costmodel.io.measurements import COLLECTIVE_OPS, MEASUREMENT_COLUMNS, read_measurements

ROOT = Path(__file__).resolve().parents[2]
PRESET = "qwen2.5-7b-eagle3"  # 16000-id draft vocab: full-logits payloads fit the tiny grid
GRID = ["--min-bytes", "128", "--max-bytes", "16384", "--points-per-octave", "1", "--max-iters", "12",
        "--point-time-s", "0.1",
        "--warmup", "2", "--presets", PRESET, "--batches", "1,2", "--no-progress"]


# --------------------------------------------------------------------------- planning (no torch)
def test_sweep_grid_is_geometric_and_element_aligned():
    # 8 * 2^(k/2): 8, 11.3, 16, 22.6, 32, 45.3, 64 -> rounded to multiples of 4
    assert sweep_sizes(8, 64, 2, 4) == [8, 12, 16, 24, 32, 44, 64]
    assert sweep_sizes(8, 100, 1, 4) == [8, 16, 32, 64, 100]  # --max-bytes itself is measured
    with pytest.raises(InputError):
        sweep_sizes(64, 8, 2)


def test_tp_sizes_and_world_size_errors():
    assert tp_sizes(8) == [2, 4, 8] and tp_sizes(6) == [2, 4] and tp_sizes(16, [16, 8]) == [8, 16]
    for requested, message in (([3], "does not divide"), ([16], "exceeds"), ([1], "at least 2")):
        with pytest.raises(InputError, match=message):
            tp_sizes(8, requested)


def test_strategy_payload_bytes_by_hand():
    # Llama 4 Maverick: V = 202048 = 3157 * 64 (no padding); p = 8 -> shard 25256; bf16, B = 64
    payloads = strategy_payloads("llama4-maverick", 64, 8)
    got = {(op, strategy): (dtype, nbytes) for op, dtype, nbytes, strategy in payloads}
    assert got[("all_gather", "full_all_gather")] == ("bf16", 64 * 25256 * 2)
    assert got[("gather", "gather_to_rank0")] == ("bf16", 64 * 25256 * 2)
    assert got[("broadcast", "gather_to_rank0")] == ("int64", 64 * 8)
    assert got[("all_gather", "local_argmax_pairs")] == ("fp32", 64 * 8)
    assert got[("all_reduce", "packed_allreduce_max")] == ("int64", 64 * 8)
    # EAGLE-3 qwen2.5: draft vocab 16000 -> V_pad 16000; p = 4 -> 4000 per rank
    assert ("all_gather", "bf16", 3 * 4000 * 2, "full_all_gather") in strategy_payloads(PRESET, 3, 4)


def test_plan_deduplicates_identical_points_and_merges_labels():
    # llama3-8b and llama3-70b share the 128256 vocab: one point, both presets in the label
    points, dropped = plan_points([2], min_bytes=8, max_bytes=1 << 20, points_per_octave=1,
                                  preset_names=["llama3-8b", "llama3-70b"], batches=[1, 4])
    ids = [p.identity() for p in points]
    assert len(ids) == len(set(ids))
    full = [p for p in points if p.dtype == "bf16" and p.op == "all_gather"]
    assert [p.bytes_per_rank for p in full] == [128256, 4 * 128256]
    assert full[0].label == "payload:llama3-8b+llama3-70b:B1:full_all_gather"
    pairs = next(p for p in points if p.op == "all_gather" and p.dtype == "fp32" and p.bytes_per_rank == 32)
    assert pairs.label == "sweep;payload:llama3-8b+llama3-70b:B4:local_argmax_pairs"
    keys = next(p for p in points if p.op == "all_reduce" and p.dtype == "int64" and p.bytes_per_rank == 8)
    assert keys.reduce_op == "max" and "packed_allreduce_max" in keys.label
    assert dropped == 0
    _, dropped = plan_points([2], min_bytes=8, max_bytes=200000, points_per_octave=1,
                             preset_names=["llama3-8b"], batches=[1, 4])
    assert dropped == 2  # B=4 all_gather and gather (513024 B per rank) exceed --max-bytes


def test_prepare_csv_refuses_without_resume_and_drops_a_torn_line(tmp_path):
    path = tmp_path / CSV_NAME
    assert prepare_csv(path, resume=False) == set()
    header = ",".join(list(MEASUREMENT_COLUMNS) + list(EXTRA_COLUMNS))
    row = "all_gather,gloo,cpu,cpu,fp32,eager,2,1,8,0,0,10,5.0,4.0,6.0,3.0,7.0,sweep"
    path.write_text(f"{header}\n{row}\nall_reduce,gloo,cpu,cp")
    with pytest.raises(InputError, match="--resume"):
        prepare_csv(path, resume=False)
    keys = prepare_csv(path, resume=True)
    assert keys == {point_key(dict(zip(header.split(","), row.split(","), strict=True)))}
    assert path.read_text() == f"{header}\n{row}\n"
    path.write_text("op,median_us\nall_gather,1\n")
    with pytest.raises(InputError, match="header"):
        prepare_csv(path, resume=True)


def test_provenance_keeps_an_earlier_record_without_resume(tmp_path):
    earlier = {"kind": "calibration-provenance", "tool": "calibration.kernels", "status": "ok"}
    path = tmp_path / PROVENANCE_NAME
    path.write_text(json.dumps(earlier))
    cfg = collectives.parse_config(["--backend", "gloo", "--out", str(tmp_path)])
    assert not cfg.resume
    collectives._provenance(cfg, {"kind": "calibration-provenance", "status": "running"}, [2], 3, 0, path)
    prov = json.loads(path.read_text())
    assert prov["previous_runs"] == [earlier] and prov["points_planned"] == 3 and prov["status"] == "running"


@pytest.mark.parametrize("argv", [["--backend", "gloo", "--bogus"], ["--out", "x"]])
def test_bad_flags_raise_one_line_input_errors(argv):
    with pytest.raises(InputError) as info:
        collectives.parse_config(argv)
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- real runs (gloo)
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "GROUP_RANK")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), **extra)
    return env


def torchrun(nproc: int, out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "--master-port", str(free_port()), "-m", "calibration.collectives", "--backend", "gloo",
           "--out", str(out), *args]
    return subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)


def _foreground_signals() -> None:
    """SIGINT at its default, as in a foreground job, whose Ctrl-C the tests send: a suite started as a background job
    (`cmd &`, nohup, a CI runner) inherits SIGINT ignored, Python then installs no KeyboardInterrupt handler, and
    the ranks ran on through the test's SIGINT (issue 43 item 5: "'ok' == 'interrupted'" and "'running'" under load
    were this, not timing)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn_ranks(nproc: int, out: Path, *args: str, **extra_env: str) -> list[subprocess.Popen]:
    """The ranks as torchrun would start them from a terminal (same environment, SIGINT at its default), so each
    rank's exit code is visible."""
    port = str(free_port())
    procs = []
    for rank in range(nproc):
        env = _env(RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nproc),
                   GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **extra_env)
        procs.append(subprocess.Popen([sys.executable, "-m", "calibration.collectives", "--backend", "gloo",
                                       "--out", str(out), *args], cwd=ROOT, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      preexec_fn=_foreground_signals))
    return procs


def finish(procs: list[subprocess.Popen], timeout: float) -> list[tuple[int, str]]:
    deadline = time.monotonic() + timeout
    results = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            err = "TIMEOUT\n" + err
        results.append((proc.returncode, err))
    return results


def expected_keys(world_size: int) -> set[tuple[str, ...]]:
    """The grid GRID asks for, as result keys (what a complete run must contain)."""
    points, _ = plan_points(tp_sizes(world_size), min_bytes=128, max_bytes=16384, points_per_octave=1,
                            preset_names=[PRESET], batches=[1, 2])
    return {point_key({"op": p.op, "backend": "gloo", "device": "cpu", "dtype": p.dtype, "mode": "eager",
                       "world_size": p.world_size, "nodes": 1, "bytes_per_rank": p.bytes_per_rank,
                       "rows": 0, "cols": 0}) for p in points}


def result_keys(frame) -> list[tuple[str, ...]]:
    return [point_key({k: str(v) for k, v in row.items()}) for row in frame.to_dict("records")]


def check_complete_run(out: Path, world_size: int) -> None:
    frame = read_measurements(out / CSV_NAME)
    keys = result_keys(frame)
    assert len(keys) == len(set(keys)), "duplicate points"
    assert set(keys) == expected_keys(world_size)
    assert set(frame["op"]) == set(COLLECTIVE_OPS)
    assert set(frame["world_size"]) == set(tp_sizes(world_size))
    assert (frame["p10_us"] <= frame["median_us"]).all() and (frame["median_us"] <= frame["p90_us"]).all()
    assert (frame["min_us"] <= frame["p10_us"]).all() and (frame["p90_us"] <= frame["max_us"]).all()
    assert (frame["iters"] >= 1).all() and (frame["iters"] <= 12).all()
    assert set(frame["backend"]) == {"gloo"} and set(frame["device"]) == {"cpu"} and set(frame["mode"]) == {"eager"}
    assert set(frame["dtype"]) == {"fp32", "bf16", "int64"}
    labels = set(frame["label"])
    assert "sweep" in labels and f"payload:{PRESET}:B1:full_all_gather" in labels
    prov = json.loads((out / PROVENANCE_NAME).read_text())
    for key in ("hostnames", "gpus_per_node", "gpu", "software", "nccl_env", "nvidia_smi_topo", "command", "argv",
                "start_time", "end_time", "status"):
        assert key in prov, key
    assert len(prov["hostnames"]) == world_size and prov["status"] == "ok" and prov["gpu"] == "cpu"
    assert {"torch", "cuda", "nccl", "driver"} <= set(prov["software"])
    assert prov["end_time"] >= prov["start_time"] and "--backend" in prov["argv"]
    assert prov["all_gather_impl"] in ("all_gather_into_tensor", "all_gather(list)+cat")


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.torchrun
def test_dead_rank_keeps_partial_rows_and_torchrun_resume_completes(tmp_path):
    procs = spawn_ranks(2, tmp_path, *GRID, "--watchdog-s", "30", CALIB_TEST_DIE_AFTER_POINTS="4")
    start = time.monotonic()
    (rc0, err0), (rc1, _) = finish(procs, timeout=90)
    assert rc1 == 137  # the simulated crash
    assert rc0 == 3 and time.monotonic() - start < 90
    line = _one_error_line(err0)
    assert "partial results kept in" in line and str(tmp_path) in line
    assert "rank(s) 1 died or hung" in line  # the dead rank is named (issue 22)
    partial = read_measurements(tmp_path / CSV_NAME)
    assert 1 <= len(partial) < len(expected_keys(2))
    assert json.loads((tmp_path / PROVENANCE_NAME).read_text())["status"].startswith("failed")

    # the world-2 torchrun run: it completes the grid without re-measuring what is there
    proc = torchrun(2, tmp_path, *GRID, "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = read_measurements(tmp_path / CSV_NAME)
    assert final.iloc[: len(partial)].equals(partial)
    check_complete_run(tmp_path, 2)
    prov = json.loads((tmp_path / PROVENANCE_NAME).read_text())
    assert prov["previous_runs"][0]["status"].startswith("failed")
    assert prov["points_measured"] == len(expected_keys(2)) - len(partial)


def test_watchdog_prints_one_line_and_exits_3(tmp_path):
    # a hung rank never completes its point: the watchdog thread ends the process (os._exit(3))
    code = ("import time; from pathlib import Path; from calibration.bench.collectives import Watchdog; "
            f"w = Watchdog(0.5, Path({str(tmp_path)!r}), lambda m: print('on_fire', m, flush=True)); "
            "w.beat('all_gather p=2 64 B'); w.start(); time.sleep(60)")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 3 and time.monotonic() - start < 50
    line = _one_error_line(proc.stderr)
    assert line == proc.stderr.strip()
    assert line.startswith("error: collective all_gather p=2 64 B stuck for ") and str(tmp_path) in line
    assert proc.stdout.startswith("on_fire error: collective all_gather p=2 64 B stuck")


@pytest.mark.parametrize("args, env, fragment", [
    (["--backend", "nccl"], {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
                             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, "nccl"),
    (["--backend", "gloo"], {}, "torchrun"),
    (["--backend", "gloo", "--world-sizes", "3"], {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0",
                                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, "divide"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, args, env, fragment):
    if "nccl" in args and (Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi")):
        pytest.skip("this machine has a GPU; the nccl refusal is for CPU-only hosts")
    proc = subprocess.run([sys.executable, "-m", "calibration.collectives", *args, "--out", str(tmp_path / "o")],
                          cwd=ROOT, env=_env(**env), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert _one_error_line(proc.stderr) == proc.stderr.strip()
    assert fragment in proc.stderr
    assert not (tmp_path / "o" / CSV_NAME).exists()


def test_sigterm_handler_exists_for_torchrun_teardown():
    # torchrun SIGTERMs the surviving ranks when one fails; the handler turns that into one error line
    from calibration.bench import collectives

    with pytest.raises(collectives.Terminated):
        collectives._on_signal(signal.SIGTERM, None)


@pytest.mark.torchrun
def test_an_out_that_cannot_be_created_is_refused_on_every_rank_before_the_rendezvous(tmp_path):
    """issue 22: rank 0 exited 3 while the other ranks waited for the watchdog; now every rank refuses, exit 2."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    start = time.monotonic()
    proc = torchrun(2, blocker / "sub", *GRID, "--watchdog-s", "60", timeout=90)
    assert proc.returncode != 0 and time.monotonic() - start < 45, proc.stderr[-2000:]
    ours = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]  # torchrun adds its own trace
    assert len(ours) == 1 and "a-file is not a directory" in ours[0], proc.stderr[-2000:]
    assert "exitcode: 2" in proc.stderr  # bad input on every rank, not a failed run (3) after a watchdog wait
    assert not (blocker.parent / "sub").exists() and blocker.read_text() == "not a directory"


def _stop_mid_run(tmp_path: Path, stop) -> dict:
    """Two ranks measuring a grid that cannot finish before `stop(procs)`: once two rows are on disk, stop them;
    returns provenance.json. Every point runs its whole --point-time-s (a --rel-tol no sample meets, no --max-iters
    cap), so the ~70 points left take over a minute whatever the load: the signal always lands mid-run (issue 43:
    under load the short grid finished before the signal, "ok" for "interrupted")."""
    never_converges = ["--rel-tol", "1e-9", "--max-iters", "10000000", "--point-time-s", "1"]
    assert GRID[6] == "--max-iters" and GRID[8] == "--point-time-s"  # replaced by never_converges
    grid = [*GRID[:3], "16777216", *GRID[4:6], *never_converges, *GRID[10:]]
    procs = spawn_ranks(2, tmp_path, *grid, "--watchdog-s", "30")
    while collectives_rows(tmp_path) < 2:  # waits for the state, not for a time
        assert all(proc.poll() is None for proc in procs), f"a rank ended before two rows: {finish(procs, 30)}"
        time.sleep(0.1)
    stop(procs)
    # past gloo's own timeout (60 s, calibration.bench.collectives: max(60, 2 x --watchdog-s)), so a rank left in a
    # collective its peer never joins ends with its own error, not the test's kill; the ranks' exits and stderr
    # tails travel with the provenance into the assertion message
    ends = finish(procs, timeout=150)
    prov = json.loads((tmp_path / PROVENANCE_NAME).read_text())
    prov["_ranks"] = [(code, err[-600:]) for code, err in ends]
    return prov


def collectives_rows(out: Path) -> int:
    from calibration.logs.provenance import count_rows

    return count_rows(out / CSV_NAME)


@pytest.mark.torchrun
def test_a_killed_rank_is_a_failed_run_not_an_interrupted_one(tmp_path):
    """issue 35: torchrun SIGTERMs the surviving ranks when one dies (on NCCL the survivors hang in the collective,
    so the SIGTERM reaches them first): rank 0's provenance said "interrupted". A rank dying is a failure."""
    def kill_rank_1(procs):
        procs[0].send_signal(signal.SIGTERM)  # what torchrun's agent sends the survivors
        procs[1].kill()

    prov = _stop_mid_run(tmp_path, kill_rank_1)
    assert prov["status"].startswith("failed: ") and "SIGTERM" in prov["status"], (prov["status"], prov["_ranks"])
    assert collectives_rows(tmp_path) >= 2  # the measured rows stay


@pytest.mark.torchrun
def test_ctrl_c_is_an_interrupted_run(tmp_path):
    """A user's Ctrl-C (SIGINT to every rank of the foreground job) stays "interrupted"."""
    def ctrl_c(procs):
        for proc in procs:
            proc.send_signal(signal.SIGINT)

    prov = _stop_mid_run(tmp_path, ctrl_c)
    assert prov["status"] == "interrupted", prov["_ranks"]


@pytest.mark.parametrize("exc, status", [
    (KeyboardInterrupt(), "interrupted"),
    (collectives.Terminated("SIGTERM"), "failed: stopped by SIGTERM"),
    (collectives.PointFailed("all_gather p=2 64 B", RuntimeError("Connection reset by peer")), "failed: "),
])
def test_end_status_says_failed_unless_the_user_interrupted(exc, status):
    assert collectives.end_status(exc).startswith(status)


@pytest.mark.torchrun
@pytest.mark.parametrize("case", ["foreign-header --resume", "occupied --out"])
def test_an_unusable_csv_is_one_line_exit_2_on_every_rank_under_torchrun(tmp_path, case):
    """issue 43: rank 1, lingering after rank 0 reported the input error, was SIGTERMed by torchrun and printed the
    project's own traceback (`Terminated: SIGTERM`), exit 1. Now every rank exits 2, rank 0 prints the one error
    line and one note explaining torchrun's ChildFailedError report."""
    csv = tmp_path / CSV_NAME
    if case == "occupied --out":
        header = ",".join(list(MEASUREMENT_COLUMNS) + list(EXTRA_COLUMNS))
        csv.write_text(f"{header}\nall_gather,gloo,cpu,cpu,fp32,eager,2,1,8,0,0,10,5.0,4.0,6.0,3.0,7.0,sweep\n")
        extra = []
    else:
        csv.write_text("op,median_us\nall_gather,1\n")
        extra = ["--resume"]
    before = csv.read_text()
    proc = torchrun(2, tmp_path, *GRID, *extra, timeout=90)
    err = proc.stderr
    assert proc.returncode != 0 and "Terminated" not in err and "[rank1]" not in err, err[-3000:]
    ours = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(ours) == 1 and ("header" in ours[0] if extra else "--resume" in ours[0]), err[-3000:]
    assert sum(line.startswith("note: torchrun's ChildFailedError") for line in err.splitlines()) == 1, err[-3000:]
    codes = re.findall(r"exitcode\s*:\s*(-?\d+)", err)
    assert codes and set(codes) == {"2"}, err[-3000:]  # rank 1 too: not 1 (traceback), not -15
    assert csv.read_text() == before  # the measured rows stay


def test_the_limits_doc_states_the_sigterm_status_the_benchmark_records():
    """issue 43: docs/limits.md said SIGTERM marks a calibration "interrupted"; the collective benchmark records a
    failure (end_status), the kernel benchmark an interruption: the doc states both as the code does."""
    text = " ".join((ROOT / "docs" / "limits.md").read_text().split())
    recorded = collectives.end_status(collectives.Terminated("SIGTERM")).split(" (")[0]
    assert f"the collective benchmark records `{recorded} (...)`" in text
    assert 'SIGTERM during a calibration keeps every measured row and marks `provenance.json` "interrupted"' \
        not in text
