"""The real vLLM runs (issue 42 item 1): `scripts/vllm_cpu_runs.py` lists and prints its commands without vLLM, its
matrix covers the issue's list, and every bundled run under data/serving-runs/ has its provenance and a readable
per-request result. CI has no vLLM: nothing here starts a server."""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import subprocess
import sys
from datetime import datetime

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "vllm_cpu_runs.py"
RUNS_DIR = ROOT / "data" / "serving-runs"
# the script run with vLLM and its stack unimportable, as on a machine (CI) that has none of them
BLOCKED = r'''
import runpy, sys
class NoVllm:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("vllm", "torch", "transformers", "tokenizers"):
            raise ImportError(f"blocked by test_vllm_cpu_runs.py: {name}")
        return None
sys.meta_path.insert(0, NoVllm())
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
'''
PROVENANCE_KEYS = {
    "name", "server_config", "server_flags", "client_flags", "speculative", "vllm_version", "vllm_package",
    "torch_version", "cpu_model", "cpu_cores", "loadavg_1m_before", "loadavg_1m_after", "date_utc", "wall_time_s",
    "server_command", "server_command_line", "client_command", "client_command_line", "env", "models",
    "result_file", "acceptance_rate_pct", "acceptance_length", "bench_summary", "timeline_checks"}
PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "generated_texts", "errors")


def script(*args: str, tmp_path=None) -> subprocess.CompletedProcess:
    extra = [] if tmp_path is None else ["--venv", str(tmp_path / "venv"), "--work-dir", str(tmp_path / "work")]
    return subprocess.run([sys.executable, "-c", BLOCKED, str(SCRIPT), *args, *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def matrix() -> list[dict]:
    proc = script("--list", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def rate(run: dict) -> float:
    return float(run["client_flags"]["request-rate"])


def cap(run: dict) -> int:
    return run["server_flags"]["max-num-seqs"]


def test_list_and_dry_run_need_no_vllm(tmp_path):
    text = script("--list", tmp_path=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "cap8-inf-r1" in text.stdout and text.stdout.rstrip().endswith("server configurations")
    dry = script("--dry-run", tmp_path=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert not (tmp_path / "venv").exists() and not (tmp_path / "work").exists()  # nothing created
    lines = dry.stdout.splitlines()
    servers = [ln for ln in lines if " serve " in ln and " bench " not in ln]
    benches = [ln for ln in lines if " bench serve " in ln]
    matrix = json.loads(script("--list", "--json").stdout)
    assert len(benches) == len(matrix) and len(servers) == len({r["server_config"] for r in matrix})
    for line in servers:
        assert "-m vllm.entrypoints.cli.main serve" in line and "--host 127.0.0.1" in line
        assert "--no-enable-prefix-caching" in line
    for line in benches:
        for flag in ("--save-result", "--save-detailed", "--ignore-eos", "--dataset-name random", "--seed 0",
                     "--base-url http://127.0.0.1:"):
            assert flag in line, (flag, line)
    assert "VLLM_TARGET_DEVICE=cpu" in dry.stdout and "VLLM_CPU_KVCACHE_SPACE=1" in dry.stdout
    only = script("--dry-run", "--only", "spec1l-k5", tmp_path=tmp_path)
    assert only.returncode == 0 and sum(" bench serve " in ln for ln in only.stdout.splitlines()) == 1
    assert '"num_speculative_tokens": 5' in only.stdout and '"method": "draft_model"' in only.stdout
    bad = script("--dry-run", "--only", "no-such-run", tmp_path=tmp_path)
    assert bad.returncode != 0 and "unknown run(s): no-such-run" in bad.stderr


def test_matrix_covers_the_issue(matrix):
    assert len(matrix) >= 16 and len({r["name"] for r in matrix}) == len(matrix)
    by_config: dict[str, dict] = {}
    for run in matrix:  # one server per configuration: runs that share it share every server flag
        assert by_config.setdefault(run["server_config"], run["server_flags"]) == run["server_flags"]
    assert {4, 8, 16, 32} <= {cap(r) for r in matrix}
    assert any(r["client_flags"]["num-prompts"] < cap(r) for r in matrix)  # the cap never binds
    assert any(math.isinf(rate(r)) for r in matrix)
    assert any(math.isfinite(rate(r)) and r["client_flags"].get("burstiness", 1.0) == 1.0 for r in matrix)
    assert len({rate(r) for r in matrix if math.isfinite(rate(r))}) >= 2  # two Poisson rates
    assert any(r["client_flags"].get("burstiness", 1.0) != 1.0 for r in matrix)
    conc = [(r["client_flags"]["max-concurrency"], cap(r)) for r in matrix if "max-concurrency" in r["client_flags"]]
    assert any(c > s for c, s in conc) and any(c < s for c, s in conc)
    budget = lambda r: r["server_flags"]["max-num-batched-tokens"]  # noqa: E731
    assert any(r["client_flags"]["random-input-len"] > budget(r) for r in matrix)  # chunked prefill
    assert any(r["client_flags"]["random-input-len"] < budget(r) for r in matrix)  # short prompts
    assert any(r["speculative"] is None for r in matrix)
    spec = [json.loads(r["server_flags"]["speculative-config"]) for r in matrix if r["speculative"] is not None]
    assert {s["num_speculative_tokens"] for s in spec} >= {1, 3, 5}
    assert {s["method"] for s in spec} == {"draft_model"}
    # drafts are truncations of the target: fewer layers, same folder of models
    assert all(r["speculative"]["draft_layers"] < 4 for r in matrix if r["speculative"] is not None)
    # three repeats of two settings: identical server and client flags
    repeated: dict[str, list[dict]] = {}
    for run in matrix:
        if run["repeat"] is not None:
            repeated.setdefault(run["name"].rsplit("-r", 1)[0], []).append(run)
    assert len(repeated) >= 2
    for runs in repeated.values():
        assert sorted(r["repeat"] for r in runs) == [1, 2, 3]
        assert all(r["client_flags"] == runs[0]["client_flags"] for r in runs)
        assert all(r["server_config"] == runs[0]["server_config"] for r in runs)
    assert any(r["speculative"] is None for rs in repeated.values() for r in rs)
    assert any(r["speculative"] is not None for rs in repeated.values() for r in rs)


def bundled() -> list:
    return sorted(RUNS_DIR.glob("*.provenance.json"))


def test_every_matrix_run_is_bundled(matrix):
    names = {p.name.removesuffix(".provenance.json") for p in bundled()}
    assert names == {r["name"] for r in matrix}  # README.md lists a failed run if there ever is one
    results = {p.name for p in RUNS_DIR.glob("*.json")} - {p.name for p in bundled()}
    assert results == {f"{n}.json" for n in names}
    assert (RUNS_DIR / "README.md").is_file()


@pytest.mark.parametrize("prov_path", bundled(), ids=lambda p: p.name.removesuffix(".provenance.json"))
def test_bundled_run_has_provenance_and_per_request_result(prov_path, matrix):
    prov = json.loads(prov_path.read_text())
    assert PROVENANCE_KEYS <= set(prov)
    spec = {r["name"]: r for r in matrix}[prov["name"]]
    assert prov["server_flags"]["max-num-seqs"] == spec["server_flags"]["max-num-seqs"]
    assert prov["client_flags"] == spec["client_flags"]
    assert prov["vllm_version"] == "0.32.0" and prov["torch_version"].startswith("2.")
    assert isinstance(prov["cpu_cores"], int) and prov["cpu_cores"] >= 1 and prov["cpu_model"]
    assert all(isinstance(prov[k], float) for k in ("loadavg_1m_before", "loadavg_1m_after", "wall_time_s"))
    datetime.fromisoformat(prov["date_utc"])
    assert "bench serve" in prov["client_command_line"] and "--save-detailed" in prov["client_command"]
    assert " serve " in prov["server_command_line"] and "127.0.0.1" in prov["server_command"]

    path = RUNS_DIR / prov["result_file"]
    assert path.stat().st_size < 2 * 1024 * 1024
    result = json.loads(path.read_text())  # generated_texts may hold NULs: JSON escapes them, json reads them
    n = prov["client_flags"]["num-prompts"]
    assert result["completed"] == n and result["failed"] == 0 and result["num_prompts"] == n
    for key in PER_REQUEST:
        assert isinstance(result[key], list) and len(result[key]) == n, key
    assert all(v == prov["client_flags"]["random-output-len"] for v in result["output_lens"])  # --ignore-eos
    # one gap per streamed chunk after the first: a chunk can carry several tokens (speculation, coalescing)
    assert all(0 < len(itl) <= out - 1 for itl, out in zip(result["itls"], result["output_lens"]))
    assert all(t > 0 for t in result["ttfts"]) and result["duration"] > 0
    for metric in ("ttft", "tpot", "itl", "e2el"):  # --percentile-metrics ttft,tpot,itl,e2el
        assert result[f"mean_{metric}_ms"] > 0 and result[f"p99_{metric}_ms"] >= result[f"median_{metric}_ms"]
    assert str(result["request_rate"]) == str(prov["client_flags"]["request-rate"])
    assert result["max_concurrency"] == prov["client_flags"].get("max-concurrency")
    assert result["burstiness"] == prov["client_flags"].get("burstiness", 1.0)
    if prov["speculative"] is None:
        assert prov["acceptance_rate_pct"] is None
    else:
        k = prov["speculative"]["num_speculative_tokens"]
        assert 0 < result["spec_decode_acceptance_rate"] == prov["acceptance_rate_pct"] <= 100
        assert 1 < result["spec_decode_acceptance_length"] <= k + 1


@functools.cache
def load_script():
    """The script as a module (it imports only the standard library)."""
    spec = importlib.util.spec_from_file_location("vllm_cpu_runs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["vllm_cpu_runs"] = module  # dataclasses look their module up while a class is made
    spec.loader.exec_module(module)
    return module


def test_a_server_that_never_answers_is_stopped_with_one_line(tmp_path):
    runs = load_script()
    srv = runs.ServerProcess([sys.executable, "-c", "import time; time.sleep(600)"], tmp_path / "log", runs.free_port())
    try:
        with pytest.raises(RuntimeError, match=r"server did not answer /health within 2 s"):
            srv.wait_healthy(2.0)
    finally:
        srv.stop()
    assert srv.proc.poll() is not None  # never left running


def test_a_failing_server_fails_its_runs_one_line_each_and_writes_nothing(tmp_path, capsys):
    """A server that exits at once: each of its runs gets one FAIL line, the script goes on, nothing is written."""
    runs = load_script()
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'RuntimeError: no such engine' >&2\nexit 3\n")
    fake.chmod(0o755)
    args = type("Args", (), {"work_dir": tmp_path / "work", "out": tmp_path / "out", "server_timeout": 30.0})()
    group = [r for r in runs.RUNS if r.server.name == "cap16"]
    outcomes = runs.run_server_group(group[0].server, group, fake, tmp_path / "models", args, {})
    assert [name for name, *_ in outcomes] == [r.name for r in group]
    assert all(why.startswith("failed: server cap16: server exited with code 3") for _, why, _ in outcomes)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  FAIL")]
    assert len(lines) == len(group) and all("RuntimeError: no such engine" in ln for ln in lines)
    assert not (tmp_path / "out").exists()
