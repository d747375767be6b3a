"""The package layout's torch boundary: calibration/fitting, calibration/logs, the pure entry points, costmodel/ and
dashboard/ import with torch (and Triton) unimportable; calibration/reference and the kernel benchmark do not.

Each check runs in a fresh interpreter whose first sys.meta_path finder raises ImportError for "torch"/"triton",
so a top-level `import torch` slipped into a pure module fails here even on a machine that has torch installed.
Modules are discovered from the tree, so a new file in a pure package is covered without editing this test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE_PACKAGES = ("calibration/fitting", "calibration/logs", "costmodel", "dashboard")
PURE_ENTRY_POINTS = ("calibration.fit", "calibration.import_nccl_tests", "calibration.kernel_report")
TORCH_MODULES = ("calibration.reference.strategies", "calibration.reference.verify",
                 "calibration.reference.triton_kernels", "calibration.bench.kernels", "calibration.kernels",
                 "calibration.verify")

BLOCKED_IMPORT = r'''
import importlib, json, sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton"):
            raise ImportError(f"blocked by tests/package/test_layout.py: {name}")
        return None
sys.meta_path.insert(0, NoTorch())
result = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
        result[name] = None
    except ImportError as exc:
        result[name] = str(exc)
print(json.dumps({"errors": result, "torch_loaded": sorted(m for m in sys.modules if m.split(".")[0] == "torch")}))
'''


def modules_in(package_dir: str) -> list[str]:
    base = ROOT / package_dir
    names = []
    for path in sorted(base.rglob("*.py")):
        if path.name == "__main__.py":  # runs the CLI on import; costmodel.cli.main covers its imports
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def import_without_torch(names: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", BLOCKED_IMPORT, json.dumps(names)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_pure_packages_import_without_torch():
    names = [m for pkg in PURE_PACKAGES for m in modules_in(pkg)] + list(PURE_ENTRY_POINTS)
    assert "calibration.fitting.fit" in names and "calibration.logs.import_nccl_tests" in names
    assert "dashboard.uploads" in names and "costmodel.cli.main" in names
    out = import_without_torch(names)
    failed = {name: err for name, err in out["errors"].items() if err is not None}
    assert failed == {}
    assert out["torch_loaded"] == []


def test_torch_packages_really_need_torch():
    """The block works and the tree is honest: the engine code and the kernel benchmark fail without torch."""
    out = import_without_torch(list(TORCH_MODULES))
    for name in TORCH_MODULES:
        error = out["errors"][name]
        assert error is not None and "blocked by tests/package/test_layout.py" in error, name


def test_old_flat_modules_are_only_entry_points():
    """calibration/<command>.py are thin shims (docstring + import + __main__), not a second copy of the code."""
    for name in ("collectives", "kernels", "fit", "import_nccl_tests", "kernel_report", "verify"):
        lines = [ln for ln in (ROOT / "calibration" / f"{name}.py").read_text().splitlines() if ln.strip()]
        assert len(lines) <= 9, name
        assert any(ln.startswith("from calibration.") and "import" in ln for ln in lines), name
    assert not (ROOT / "calibration" / "reference.py").exists()
