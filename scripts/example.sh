#!/usr/bin/env bash
# The shipped end-to-end example: start the deterministic demo model server on loopback, run the
# example suite (conf/example.conf) and build its leaderboard. No API key, no network.
# `--edition NAME` reproduces another upstream edition (suite `example-NAME`; stored answers are reused).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${MEDHELM_OUTPUT_PATH:-benchmark_output}
EDITION=helm-0.5.16
SUITE=example
if [ "${1:-}" = "--edition" ]; then
  [ -n "${2:-}" ] || { echo "example.sh: --edition needs a name (helm-0.5.16, medhelm-0.8.0)" >&2; exit 2; }
  EDITION=$2
  [ "$EDITION" = helm-0.5.16 ] || SUITE=example-$EDITION
elif [ -n "${1:-}" ]; then
  echo "example.sh: unknown argument $1 (usage: example.sh [--edition NAME])" >&2; exit 2
fi
export DAGSTER_HOME=${DAGSTER_HOME:-$(pwd)/.dagster_home}
.venv/bin/medhelm-demo-server --port 8765 >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf http://127.0.0.1:8765/stats >/dev/null && break; sleep 0.1; done
.venv/bin/medhelm-run --conf-paths conf/example.conf --suite "$SUITE" --max-eval-instances 10 \
  --local-path examples/prod_env --output-path "$OUT" --edition "$EDITION"
.venv/bin/medhelm-summarize --suite "$SUITE" --output-path "$OUT" --local-path examples/prod_env \
  --auto-generate-schema
echo "leaderboard: $OUT/runs/$SUITE/groups/  (SQL: .venv/bin/python -m medhelm_core.query $OUT/medhelm.duckdb)" >&2
