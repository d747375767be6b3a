"""`pip install .` into a fresh venv, then the `argmax-tp` console script from a directory outside the checkout.

Offline and fast: the fresh venv gets no pip of its own and no downloaded dependencies - a .pth file
points it at this project's .venv site-packages (numpy, pandas, streamlit, ...), and this .venv's pip
installs the project into it with --no-deps --no-build-isolation (setuptools from the .venv). The
source is copied first, so the build writes nothing into the checkout, and the copy holds only the
files a wheel needs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT

SOURCES = ("pyproject.toml", "README.md", "app.py", "costmodel", "calibration", "dashboard", "data")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("install")
    src = base / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_argmax_tp_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                           "--no-deps", "--no-build-isolation", "--no-index", "--disable-pip-version-check", str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    work = base / "elsewhere"
    work.mkdir()
    return {"venv": venv, "site": site, "work": work, "exe": venv / "bin" / "argmax-tp"}


def run(installed: dict[str, Path], *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(installed["exe"]), *args], cwd=installed["work"], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_installed_predict_from_any_directory(installed):
    proc = run(installed, "predict", "--preset", "llama4-maverick", "--tp", "8", "--batch", "64",
               "--num-spec-tokens", "5", "--json", "--no-intervals")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["scenario"]["vocab"] == 202048 and out["profile"]["name"] == "h200-sxm-nvlink"
    # the same numbers as the checkout's CLI: the installed package reads the same bundled profile
    here = subprocess.run([sys.executable, "-m", "costmodel", "predict", "--preset", "llama4-maverick", "--tp", "8",
                           "--batch", "64", "--num-spec-tokens", "5", "--json", "--no-intervals"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    ref = json.loads(here.stdout)
    for name, s in ref["strategies"].items():
        assert out["strategies"][name]["total_us"] == pytest.approx(s["total_us"])


def test_installed_package_is_the_copy_not_the_checkout(installed):
    proc = subprocess.run([str(installed["venv"] / "bin" / "python"), "-c",
                           "import costmodel, costmodel.profiles.store as p, dashboard, calibration.fit, "
                           "calibration.fitting.segmented, calibration.logs.import_nccl_tests, "
                           "calibration.logs.provenance, calibration.bench.payloads; "
                           "from costmodel.cli.main import app_path; print(costmodel.__file__); print(p.DATA_DIR); "
                           "print(app_path())"],
                          cwd=installed["work"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    module, data, app = proc.stdout.split()
    site = str(installed["site"].resolve())
    assert module.startswith(site) and data.startswith(site) and app.startswith(site)
    assert (Path(data) / "profiles" / "h200-sxm-nvlink.json").is_file()
    assert (Path(data) / "examples" / "chat-diurnal.csv").is_file()


def test_installed_recommend_on_an_example_workload(installed):
    """The issue's "done when" command, verbatim, from a directory without data/: the bundled example is used."""
    assert not (installed["work"] / "data").exists()
    proc = run(installed, "recommend", "--workload", "data/examples/chat-diurnal.csv", "--preset", "llama4-maverick",
               "--tp", "8", "--num-spec-tokens", "5")
    assert proc.returncode == 0, proc.stderr
    assert "RECOMMENDATION:" in proc.stdout and "90% interval" in proc.stdout
    assert '"use_local_argmax_reduction": true' in proc.stdout


def test_installed_launchers(installed):
    proc = run(installed, "fit", "--help")
    assert proc.returncode == 0 and "--out" in proc.stdout
    proc = run(installed, "presets")
    assert proc.returncode == 0 and "llama4-maverick" in proc.stdout, proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_installed_dashboard_starts(installed):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.Popen([str(installed["exe"]), "dashboard", "--server.headless", "true", "--server.port",
                             str(port), "--server.address", "127.0.0.1"], cwd=installed["work"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    assert r.read().strip() == b"ok"
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    out = proc.stdout.read().decode(errors="replace") if proc.poll() is not None else ""
                    pytest.fail(f"dashboard did not answer /_stcore/health: {out[-1500:]}")
                time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
