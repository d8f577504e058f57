#!/usr/bin/env bash
# One-time set-up on a fresh machine: a virtualenv in .venv with the project, its tiers' extras and
# the test tools. `--with-browser` also installs Debian's Chromium + chromedriver, which the
# leaderboard page's browser tests drive (no browser download); `--with-postgres` Debian's PostgreSQL
# server, which scripts/postgres.sh starts for Dagster on PostgreSQL and its tests; `--with-ducklake` a
# second virtualenv, .venv-ducklake, with the [ducklake] extra (DuckDB 1.5.5 and its DuckLake extensions).
set -euo pipefail
cd "$(dirname "$0")/.."
WANT=()
DUCKLAKE=0
for arg in "$@"; do
  case "$arg" in
    --with-browser)   # Debian's Chromium + chromedriver (the page's browser tests)
      command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || WANT+=(chromium chromium-driver) ;;
    --with-postgres)  # Debian's PostgreSQL server (scripts/postgres.sh; Dagster on PostgreSQL and its tests)
      ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || WANT+=(postgresql) ;;
    --with-ducklake)  # .venv-ducklake: the project on DuckDB 1.5.5 with the DuckLake extensions ([ducklake])
      DUCKLAKE=1 ;;
    *) echo "setup.sh: unknown option $arg (--with-browser, --with-postgres, --with-ducklake)" >&2; exit 2 ;;
  esac
done
if [ ${#WANT[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${WANT[@]}" >/dev/null
fi
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# The [local] extra's torch: the CPU build 2.13.0 (a range would take a multi-GB CUDA build), and the
# transformers release the local-HF oracle was made with, so its parity test compares like with like.
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  .venv/bin/python -m pip install --quiet "torch==2.13.0"
fi
.venv/bin/python -m pip install --quiet -e ".[dev,gated,dspy,local,summarization,postgres,vendors]" "transformers==5.20.2"
# A test reference, never imported by the project: HELM 0.5.16's wheel, whose own SummaC code the
# SummaC parity test runs beside ours (tests/helm_reference.py).
if ! ls .cache/reference/crfm_helm-0.5.16-*.whl >/dev/null 2>&1; then
  .venv/bin/python -m pip download --quiet --no-deps "crfm-helm==0.5.16" -d .cache/reference
fi
# The shared store's environment: the [ducklake] extra pins DuckDB to its extensions' 1.5.5, so it
# lives beside .venv rather than in it (the tests run it as a second process, tests/test_ducklake.py).
if [ "$DUCKLAKE" = 1 ]; then
  [ -x .venv-ducklake/bin/python ] || "$PY" -m venv .venv-ducklake
  .venv-ducklake/bin/python -m pip install --quiet --upgrade pip
  .venv-ducklake/bin/python -m pip install --quiet -e ".[dev,ducklake,postgres]"   # postgres: Dagster on PostgreSQL
  echo "medhelm: DuckLake environment in $(pwd)/.venv-ducklake" >&2
fi
echo "medhelm: set up in $(pwd)/.venv" >&2
