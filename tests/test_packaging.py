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
import costmodel, costmodel.cli, costmodel.presets
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
