#!/usr/bin/env bash
# Install everything (CPU torch, test tools) into .venv, lint, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
.venv/bin/ruff check .
# byte-compile the project once: the suite starts ~100 Python subprocesses (CLI, torchrun ranks, the dashboard
# server), and where PYTHONDONTWRITEBYTECODE is set each would otherwise compile every module it imports again
.venv/bin/python -m compileall -q -j 0 costmodel calibration dashboard app.py
# -n auto: one pytest-xdist worker per core (every test writes only under its own tmp_path)
exec .venv/bin/python -m pytest -n auto "$@"
