#!/usr/bin/env bash
# One-time set-up on a fresh machine: a virtualenv in .venv with the project, its tiers' extras and
# the test tools. `--with-browser` also installs Debian's Chromium + chromedriver, which the
# leaderboard page's browser tests drive (no browser download); `--with-postgres` Debian's PostgreSQL
# server, which scripts/postgres.sh starts for Dagster on PostgreSQL and its tests; `--with-ducklake` a
# second virtualenv, .venv-ducklake, with the [ducklake] extra (DuckDB 1.5.5 and its DuckLake extensions).
# It prints one line per step on stderr, with what the step did and its time; rerunning it skips what
# is already there.
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

# One line per step: "setup.sh: <step> … <outcome> (<seconds> s)", its start printed before the step
# runs (a long pip install shows what it is waiting for), its outcome and time when it ends; a step
# that fails ends its line with "failed" (the failing command's own message follows).
now() { local t=${EPOCHREALTIME:-$(date +%s.%N)}; echo "${t/,/.}"; }
elapsed() { LC_ALL=C awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
START=$(now)
STEP=""
step() { STEP=$1; STEP_START=$(now); printf 'setup.sh: %s … ' "$1" >&2; }
done_() { printf '%s (%s s)\n' "${1:-done}" "$(elapsed "$STEP_START")" >&2; STEP=""; }
trap '[ -z "$STEP" ] || done_ failed' EXIT

if [ ${#WANT[@]} -gt 0 ]; then
  step "Debian packages (${WANT[*]})"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${WANT[@]}" >/dev/null
  done_ installed
fi
PY=${PYTHON:-python3}
step "virtualenv .venv"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  done_ created
else
  done_ "already there"
fi
step "pip (upgrade)"
.venv/bin/python -m pip install --quiet --upgrade pip
done_
# The [local] extra's torch: the CPU build 2.13.0 (a range would take a multi-GB CUDA build), and the
# transformers release the local-HF oracle was made with, so its parity test compares like with like.
step "torch 2.13.0 (CPU)"
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  .venv/bin/python -m pip install --quiet "torch==2.13.0"
  done_ installed
else
  done_ "already there"
fi
step "the project and its extras (pip install -e .[dev,docs,gated,dspy,local,summarization,postgres,vendors])"
.venv/bin/python -m pip install --quiet -e ".[dev,docs,gated,dspy,local,summarization,postgres,vendors]" "transformers==5.20.2"
done_
# A test reference, never imported by the project: HELM 0.5.16's wheel, whose own SummaC code the
# SummaC parity test runs beside ours (tests/helm_reference.py).
step "HELM 0.5.16's wheel (test reference, .cache/reference)"
if ! ls .cache/reference/crfm_helm-0.5.16-*.whl >/dev/null 2>&1; then
  .venv/bin/python -m pip download --quiet --no-deps "crfm-helm==0.5.16" -d .cache/reference
  done_ downloaded
else
  done_ "already there"
fi
# Dagster's instance settings for the docs' DAGSTER_HOME (.dagster_home, docs/how-to/dagster.md): INFO on the terminal,
# no telemetry (deploy/local/dagster.yaml); a dagster.yaml already there is the user's and is kept.
step "Dagster instance settings (.dagster_home/dagster.yaml)"
if [ ! -e .dagster_home/dagster.yaml ]; then
  mkdir -p .dagster_home && cp deploy/local/dagster.yaml .dagster_home/dagster.yaml
  done_ written
else
  done_ "already there, kept"
fi
# A test reference too: the Together SDK at the version crfm-helm[together] installs, so the parity tests
# run HELM's own TogetherChatClient beside ours (--no-deps: its pins would downgrade rich, typer, tabulate).
.venv/bin/python -m pip install --quiet --no-deps "together==1.6.0"
# The shared store's environment: the [ducklake] extra pins DuckDB to its extensions' 1.5.5, so it
# lives beside .venv rather than in it (the tests run it as a second process, tests/test_ducklake.py).
if [ "$DUCKLAKE" = 1 ]; then
  step "DuckLake environment (.venv-ducklake, pip install -e .[dev,ducklake,postgres])"
  [ -x .venv-ducklake/bin/python ] || "$PY" -m venv .venv-ducklake
  .venv-ducklake/bin/python -m pip install --quiet --upgrade pip
  .venv-ducklake/bin/python -m pip install --quiet -e ".[dev,ducklake,postgres]"   # postgres: Dagster on PostgreSQL
  done_
  echo "medhelm: DuckLake environment in $(pwd)/.venv-ducklake" >&2
fi
echo "medhelm: set up in $(pwd)/.venv ($(elapsed "$START") s in all)" >&2
