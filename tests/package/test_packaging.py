"""The cost model and the dashboard must work without torch."""

import subprocess
import sys

from tests.conftest import ROOT

CHECK = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch blocked")
sys.meta_path.insert(0, Block())
import costmodel, costmodel.cli.main, costmodel.profiles.presets
from costmodel import Scenario, predict
predict(Scenario(batch=64))
assert "torch" not in sys.modules
print("ok")
"""


def test_costmodel_imports_and_runs_without_torch():
    proc = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_costmodel_sources_never_import_torch():
    for path in (ROOT / "costmodel").glob("*.py"):
        text = path.read_text()
        assert "import torch" not in text and "from torch" not in text, path


# -- installable package: pins, entry points, launchers ---------------------------------------------------------
def _pins(path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-r"):
            out[line.split("==")[0].strip().lower()] = line.replace(" ", "")
    return out


def test_pyproject_pins_match_the_requirements_files():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = {d.split("==")[0].lower(): d.replace(" ", "") for d in project["dependencies"]}
    assert deps == _pins(ROOT / "requirements.txt")
    dev_pins = _pins(ROOT / "requirements-dev.txt")
    extras = project["optional-dependencies"]
    for req in extras["calibrate"] + [d for d in extras["dev"] if not d.startswith("argmax-tp")]:
        name = req.split("==")[0].lower()
        assert dev_pins[name].replace('"', "'") == req.replace(" ", "").replace('"', "'"), name
    assert {"torch", "tqdm", "triton"} == {r.split("==")[0] for r in extras["calibrate"]}
    assert project["scripts"]["argmax-tp"] == "costmodel.cli.main:main"


BLOCKED_LAUNCH = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch blocked")
sys.meta_path.insert(0, Block())
from costmodel.cli.main import main
codes = [main([command, "--help"]) for command in sys.argv[1:]]
print(" ".join(map(str, codes)))
sys.exit(max(codes))
"""


def test_torch_launchers_fail_in_one_line_without_torch():
    commands = ("calibrate-collectives", "calibrate-kernels", "verify")
    proc = subprocess.run([sys.executable, "-c", BLOCKED_LAUNCH, *commands], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.split() == ["2", "2", "2"], proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 3
    for command, line in zip(commands, lines):
        assert line.startswith(f"error: {command}: needs torch") and "calibrate" in line


def test_torch_free_launchers_run_without_torch():
    proc = subprocess.run([sys.executable, "-c", BLOCKED_LAUNCH, "fit"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout and "--out" in proc.stdout and "torch" not in proc.stderr


def test_python_m_costmodel_and_launcher_agree():
    proc = subprocess.run([sys.executable, "-m", "costmodel", "import-nccl-tests", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr
