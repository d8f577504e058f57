#!/usr/bin/env bash
# A throwaway PostgreSQL server from Debian's package (scripts/setup.sh --with-postgres installs it),
# for the shared-store and Dagster-on-PostgreSQL set-ups and their tests:
#
#   bash scripts/postgres.sh start DIR PORT   # initdb into DIR (once), start on 127.0.0.1:PORT, print the URL
#   bash scripts/postgres.sh stop DIR         # stop it (DIR stays; start again to reuse it)
#
# The URL is postgresql://medhelm@127.0.0.1:PORT/medhelm (trust authentication on loopback only).
# PostgreSQL refuses to run as root: as root the server runs as the `postgres` user of the package.
set -euo pipefail
usage() { echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
CMD=$1
DIR=$(mkdir -p "$2" && cd "$2" && pwd)
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
  echo "postgres.sh: no PostgreSQL server under /usr/lib/postgresql: run bash scripts/setup.sh --with-postgres" >&2
  exit 1
fi
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
DATA=$DIR/data
case "$CMD" in
  start)
    [ $# -eq 3 ] || usage
    PORT=$3
    if [ "$(id -u)" -eq 0 ]; then chown postgres "$DIR"; fi
    if [ ! -f "$DATA/PG_VERSION" ]; then
      as_owner "$BIN/initdb" -D "$DATA" -U medhelm --auth=trust --encoding=UTF8 --no-instructions >"$DIR/initdb.log" 2>&1 \
        || { echo "postgres.sh: initdb failed, see $DIR/initdb.log" >&2; exit 1; }
    fi
    as_owner "$BIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR -c max_connections=200 -c fsync=off" start >/dev/null \
      || { echo "postgres.sh: the server did not start, see $DIR/server.log:" >&2; tail -n 5 "$DIR/server.log" >&2; exit 1; }
    if ! as_owner "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U medhelm -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'medhelm'" | grep -q 1; then
      as_owner "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U medhelm medhelm
    fi
    echo "postgresql://medhelm@127.0.0.1:$PORT/medhelm"
    ;;
  stop)
    if [ -f "$DATA/postmaster.pid" ]; then as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null; fi
    ;;
  *) usage ;;
esac
