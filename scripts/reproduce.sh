#!/usr/bin/env bash
# Reproduce a published MedHELM leaderboard: import the release's runs and stats (incrementally),
# rebuild every table with our SQL models from the published stats and the release's own
# schema.json, and print how many cells (and mean win rates) equal the published ones.
#
#   bash scripts/reproduce.sh                                  # gs://crfm-helm-public/medhelm/benchmark_output, newest release
#   bash scripts/reproduce.sh --release v2.0.0                 # pin one release
#   bash scripts/reproduce.sh --source ../shared/oracle/synthetic/benchmark_output --release oracle   # offline
#   bash scripts/reproduce.sh --source ../shared/oracle/public/benchmark_output --suite public-n50      # a suite
#   bash scripts/reproduce.sh --release v2.0.0 --with-completions --rescore   # also re-score completions
#
# Any other option is passed to medhelm-import (see `medhelm-import --help`). Rerunning fetches only
# objects whose generation/size changed. Every number is then in <output-path>/medhelm.duckdb:
# leaderboard_comparison (cell by cell, with the cause where they differ), published_* tables.
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE=gs://crfm-helm-public/medhelm/benchmark_output
RELEASE=latest   # the newest under releases/ by version order (medhelm-import prints which)
SUITE=
OUT=${MEDHELM_OUTPUT_PATH:-benchmark_output}
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --source) SOURCE=$2; shift 2 ;;
    --release) RELEASE=$2; SUITE=; shift 2 ;;
    --suite) SUITE=$2; RELEASE=; shift 2 ;;
    --output-path|-o) OUT=$2; shift 2 ;;
    *) EXTRA+=("$1"); shift ;;
  esac
done
if [ -x .venv/bin/medhelm-import ]; then IMPORT=.venv/bin/medhelm-import
elif command -v medhelm-import >/dev/null 2>&1; then IMPORT=medhelm-import
else IMPORT="${PYTHON:-python3} -m medhelm_cli.imports"; fi
if [ -n "$SUITE" ]; then TARGET=(--suite "$SUITE"); else TARGET=(--release "$RELEASE"); fi
$IMPORT --source "$SOURCE" "${TARGET[@]}" --output-path "$OUT" --offline-hint "bash scripts/reproduce.sh" \
  ${EXTRA[@]+"${EXTRA[@]}"}
echo "tables: .venv/bin/python -m medhelm_core.query $OUT/medhelm.duckdb \"SELECT * FROM leaderboard_comparison WHERE NOT equal\"" >&2
