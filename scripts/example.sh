#!/usr/bin/env bash
# The shipped end-to-end example: start the deterministic demo model server on a free loopback port,
# run the example suite (conf/example.conf) and build its leaderboard. No API key, no network.
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
# The demo server on a free port; the example's prod_env (examples/prod_env) pointed at it is written
# to $OUT/demo_prod_env. One already running for that folder (the Dagster commands of docs/how-to/dagster.md) is used
# and left running; one started here is stopped on exit.
DEMO_ENV=$OUT/demo_prod_env
if ! .venv/bin/medhelm-demo-server status "$DEMO_ENV" >/dev/null 2>&1; then
  trap '.venv/bin/medhelm-demo-server stop "$DEMO_ENV" || true' EXIT
  ERR=$(.venv/bin/medhelm-demo-server start "$DEMO_ENV" 2>&1 >/dev/null) || { echo "$ERR" >&2; exit 1; }
fi
echo "example.sh: the demo models on $(.venv/bin/medhelm-demo-server status "$DEMO_ENV") (prod_env: $DEMO_ENV)" >&2
.venv/bin/medhelm-run --conf-paths conf/example.conf --suite "$SUITE" --max-eval-instances 10 \
  --local-path "$DEMO_ENV" --output-path "$OUT" --edition "$EDITION"
.venv/bin/medhelm-summarize --suite "$SUITE" --output-path "$OUT" --local-path "$DEMO_ENV" \
  --auto-generate-schema
echo "leaderboard: $OUT/runs/$SUITE/groups/  (SQL: .venv/bin/python -m medhelm_core.query $OUT/medhelm.duckdb)" >&2
