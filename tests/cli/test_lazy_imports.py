"""Instant CLI (issue 21 item 3): `import costmodel` and the light commands load only what they need.

Checked in fresh interpreters (sys.modules of this test process holds everything already); no timing here -
scripts/bench_cli.py measures the wall times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import costmodel
from costmodel.cli import main as cli
from costmodel.cli.cmd_presets import preset_table_text
from costmodel.profiles.presets import presets
from tests.conftest import ROOT

HEAVY = ("numpy", "pandas", "scipy", "streamlit", "pyarrow")
PROBE = """
import contextlib, io, json, sys
from costmodel.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as exc:  # --help
        code = exc.code
print(json.dumps({"code": code, "loaded": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


def loaded_after(argv: list[str], env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_costmodel_loads_no_numpy():
    proc = subprocess.run([sys.executable, "-c", "import sys, costmodel; print([m for m in sys.argv[1:] "
                           "if m in sys.modules])", *HEAVY], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_public_api_resolves_lazily():
    assert sorted(costmodel.__all__) == sorted(costmodel._API)
    for name in costmodel.__all__:
        assert getattr(costmodel, name) is not None
    assert set(costmodel.__all__) <= set(dir(costmodel))
    from costmodel import Scenario, load_profile, predict  # the documented entry points

    assert predict(Scenario(vocab=202048, tp=8, batch=64), load_profile()).saving_us("local_argmax_pairs") != 0
    with pytest.raises(AttributeError):
        costmodel.no_such_name  # noqa: B018


@pytest.mark.parametrize("argv, allowed", [
    (["--help"], ()),
    (["presets"], ()),
    (["profiles"], ("numpy",)),  # loading (validating) each profile needs numpy, never pandas / scipy
    (["profiles", "--json"], ("numpy",)),
    # the point prediction: numpy only (measured tables interpolated and crossovers refined without scipy)
    (["predict", "--no-intervals"], ("numpy",)),
    (["predict", "--no-intervals", "--tp", "4", "--batch", "16", "--explain", "--itl-ms", "20",
      "--acceptance-length", "3", "--json"], ("numpy",)),
    (["predict", "--no-intervals", "--profile", "cpu-gloo", "--preset", "llama4-maverick-eagle3"], ("numpy",)),
])
def test_light_commands_skip_pandas_and_scipy(argv, allowed):
    out = loaded_after(argv)
    assert out["code"] == 0 and set(out["loaded"]) <= set(allowed), out


@pytest.fixture(scope="module")
def pool_cache(tmp_path_factory) -> Path:
    """One cache folder for the three cases below: the first run in it prices the pool, the others read it."""
    return tmp_path_factory.mktemp("pool-cache")


@pytest.mark.parametrize("argv", [["predict"], ["predict", "--profile", "h100-sxm-nvlink", "--tp", "4", "--json"],
                                  ["predict", "--verify", "--tp", "8", "--batch", "32"]])
def test_predict_with_intervals_skips_pandas_and_scipy_once_the_pool_is_cached(argv, pool_cache):
    """The intervals need numpy only once the residual pool is on disk (discrepancy.bundled_pool): the first run
    prices it (validate: pandas), every later one reads it."""
    env = {**os.environ, "COSTMODEL_CACHE_DIR": str(pool_cache)}
    assert loaded_after(argv, env)["code"] == 0  # may price the pool (a miss)
    assert list(pool_cache.glob("discrepancy-pool-*.json"))
    out = loaded_after(argv, env)
    assert out["code"] == 0 and set(out["loaded"]) <= {"numpy"}, out


def test_presets_text_is_what_pandas_prints():
    assert preset_table_text() == presets().reset_index().to_string(index=False)


def test_every_command_has_a_module():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = [c for c in sub.choices if c not in cli.LAUNCHERS]
    assert len(commands) == 9  # + simulate (issue 38)
    for command in commands:
        module = __import__(cli.command_module(command), fromlist=["run"])
        assert callable(module.run), command
