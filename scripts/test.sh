#!/usr/bin/env bash
# Install everything (CPU torch, test tools) into .venv, lint, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
