#!/usr/bin/env bash
# A throwaway PostgreSQL server from Debian's package (scripts/setup.sh --with-postgres installs it),
# for the shared-store and Dagster-on-PostgreSQL set-ups and their tests:
#
#   bash scripts/postgres.sh start DIR [PORT]  # initdb into DIR (once), start on 127.0.0.1, print the URL
#   bash scripts/postgres.sh url DIR           # the URL of DIR's running server (exit 1 if it is not running)
#   bash scripts/postgres.sh stop DIR          # stop DIR's server, and only it (DIR stays; start again to reuse it)
#
# The URL is postgresql://medhelm@127.0.0.1:PORT/medhelm (trust authentication on loopback only) and is
# the only thing printed on stdout: `PG=$(bash scripts/postgres.sh start .postgres)`. Without PORT the
# server takes the port it had last time if that one is free, else a free one. `start` on a running
# server prints its URL. `stop` stops the server whose postmaster.pid is DIR's and whose process serves
# DIR's data (never a server of another folder or user, nor a process that reused a stale pid).
# No Unix socket (TCP on loopback only), so DIR may be as deep as a checkout's folder.
# PostgreSQL refuses to run as root: as root the server runs as the `postgres` user of the package,
# which must be able to reach DIR.
set -euo pipefail
usage() { echo "usage: $0 start DIR [PORT] | url DIR | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
CMD=$1
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
  echo "postgres.sh: no PostgreSQL server under /usr/lib/postgresql: run bash scripts/setup.sh --with-postgres" >&2
  exit 1
fi
if [ "$CMD" = start ]; then
  DIR=$(mkdir -p "$2" && cd "$2" && pwd)
elif [ -d "$2" ]; then
  DIR=$(cd "$2" && pwd)
else
  echo "postgres.sh: no server of $2 is running (no such folder)" >&2
  [ "$CMD" = stop ] && exit 0 || exit 1
fi
DATA=$DIR/data
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
python() {
  if [ -x "$HERE/../.venv/bin/python" ]; then "$HERE/../.venv/bin/python" "$@"; else python3 "$@"; fi
}
# The pid of DIR's running server: the pid its postmaster.pid names, if that file names DIR's data and
# that process is a postgres serving it (a stale file's pid may belong to anyone by now).
server_pid() {
  local f=$DATA/postmaster.pid pid dir cmd
  [ -f "$f" ] || return 1
  pid=$(sed -n 1p "$f"); dir=$(sed -n 2p "$f")
  [ "$dir" = "$DATA" ] && [ -n "$pid" ] || return 1
  if [ -r "/proc/$pid/cmdline" ]; then cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
  else cmd=$(ps -o command= -p "$pid" 2>/dev/null || true); fi
  case "$cmd " in *postgres*" -D $DATA "*) echo "$pid" ;; *) return 1 ;; esac
}
url_of_running() {
  echo "postgresql://medhelm@127.0.0.1:$(sed -n 4p "$DATA/postmaster.pid")/medhelm"
}
port_free() { python -c 'import socket, sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null; }
free_port() { python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

case "$CMD" in
  start)
    [ $# -le 3 ] || usage
    if server_pid >/dev/null; then
      echo "postgres.sh: the server of $2 is already running" >&2
      url_of_running
      exit 0
    fi
    if [ -f "$DATA/postmaster.pid" ]; then rm -f "$DATA/postmaster.pid"; fi  # stale (a crash) or another folder's (a copy)
    if [ "$(id -u)" -eq 0 ]; then
      chown postgres "$DIR"
      if ! runuser -u postgres -- test -w "$DIR"; then
        echo "postgres.sh: as root the server runs as the postgres user, who cannot reach $DIR (a parent folder" \
             "is not searchable by others): chmod o+x its parents, or use a folder such as /tmp/NAME" >&2
        exit 1
      fi
    fi
    if [ ! -f "$DATA/PG_VERSION" ]; then
      as_owner "$BIN/initdb" -D "$DATA" -U medhelm --auth=trust --encoding=UTF8 --no-instructions >"$DIR/initdb.log" 2>&1 \
        || { echo "postgres.sh: initdb failed, see $DIR/initdb.log" >&2; exit 1; }
    fi
    if [ $# -eq 3 ]; then
      PORTS=("$3")
    else   # the last port if free, else free ones (another process may take one between the check and the bind)
      PORTS=()
      LAST=$(cat "$DIR/port" 2>/dev/null || true)
      if [ -n "$LAST" ] && port_free "$LAST"; then PORTS+=("$LAST"); fi
      for _ in 1 2 3; do PORTS+=("$(free_port)"); done
    fi
    STARTED=
    for PORT in "${PORTS[@]}"; do
      if as_owner "$BIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 \
          -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories='' -c max_connections=200 -c fsync=off" \
          start >/dev/null; then
        STARTED=1; break
      fi
      LOGTAIL=$(tail -n 20 "$DIR/server.log" 2>/dev/null || true)
      case "$LOGTAIL" in *"could not bind"*|*"already in use"*) [ $# -eq 2 ] || break ;; *) break ;; esac
    done
    if [ -z "$STARTED" ]; then
      echo "postgres.sh: the server did not start, see $DIR/server.log:" >&2; tail -n 5 "$DIR/server.log" >&2; exit 1
    fi
    echo "$PORT" >"$DIR/port"
    if ! as_owner "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U medhelm -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'medhelm'" | grep -q 1; then
      as_owner "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U medhelm medhelm
    fi
    echo "postgres.sh: PostgreSQL for $2 on postgresql://medhelm@127.0.0.1:$PORT/medhelm (stop: bash scripts/postgres.sh stop $2)" >&2
    echo "postgresql://medhelm@127.0.0.1:$PORT/medhelm"
    ;;
  url)
    [ $# -eq 2 ] || usage
    server_pid >/dev/null || { echo "postgres.sh: the server of $2 is not running" >&2; exit 1; }
    url_of_running
    ;;
  stop)
    [ $# -eq 2 ] || usage
    if server_pid >/dev/null; then
      as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
    else
      echo "postgres.sh: no server of $2 is running" >&2
    fi
    ;;
  *) usage ;;
esac
