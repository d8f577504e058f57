#!/usr/bin/env bash
# One-time set-up on a fresh machine: a virtualenv in .venv with the project and its test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev,gated,dspy]"
echo "medhelm: set up in $(pwd)/.venv" >&2
