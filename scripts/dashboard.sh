#!/usr/bin/env bash
# Install the dashboard's dependencies into .venv (no torch) and start it on the default profile.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
exec .venv/bin/streamlit run app.py "$@"
