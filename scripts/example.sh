#!/usr/bin/env bash
# The shipped end-to-end example: start the deterministic demo model server on loopback, run the
# example suite (conf/example.conf) and build its leaderboard. No API key, no network.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${MEDHELM_OUTPUT_PATH:-benchmark_output}
export DAGSTER_HOME=${DAGSTER_HOME:-$(pwd)/.dagster_home}
.venv/bin/medhelm-demo-server --port 8765 >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf http://127.0.0.1:8765/stats >/dev/null && break; sleep 0.1; done
.venv/bin/medhelm-run --conf-paths conf/example.conf --suite example --max-eval-instances 10 \
  --local-path examples/prod_env --output-path "$OUT"
.venv/bin/medhelm-summarize --suite example --output-path "$OUT" --local-path examples/prod_env \
  --auto-generate-schema
echo "leaderboard: $OUT/runs/example/groups/  (SQL: .venv/bin/python -m medhelm_core.query $OUT/medhelm.duckdb)" >&2
