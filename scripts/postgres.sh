#!/usr/bin/env bash
# Start / stop / check a local PostgreSQL (Debian's package; installed with apt-get when missing)
# for development and CI, bound to 127.0.0.1 only, password authentication (scram-sha-256).
#   scripts/postgres.sh start [PORT]   (default 5433) prints the state URL on stdout:
#                                      postgres://toolgraph@127.0.0.1:PORT/toolgraph
#                                      the password is in $DATA/password (point
#                                      TOOLGRAPH_STATE_PASSWORD_FILE at it)
#   scripts/postgres.sh stop [PORT]
#   scripts/postgres.sh status [PORT]
# Data in TOOLGRAPH_POSTGRES_DATA (default .tgdata/postgres-PORT). As root, the server runs as the
# `postgres` user (PostgreSQL refuses to run as root). TOOLGRAPH_POSTGRES_PARENT_PID: stop the
# server when that process ends (a test run that is killed does not leave it behind).
set -euo pipefail
cmd=${1:-start}
PORT=${2:-${TOOLGRAPH_POSTGRES_PORT:-5433}}
DATA=${TOOLGRAPH_POSTGRES_DATA:-.tgdata/postgres-$PORT}
mkdir -p "$DATA"
DATA=$(cd "$DATA" && pwd)
PGDATA_DIR="$DATA/pgdata"

bin_dir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$d" ] || [ ! -x "$d/initdb" ]; then
    echo "installing PostgreSQL from Debian (apt-get install postgresql)" >&2
    export DEBIAN_FRONTEND=noninteractive
    (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null) >&2
    d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  echo "$d"
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

ready() {
  "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" >/dev/null 2>&1
}

case "$cmd" in
  start)
    BIN=$(bin_dir)
    if ready; then echo "postgres already answering on 127.0.0.1:$PORT" >&2; echo "postgres://toolgraph@127.0.0.1:$PORT/toolgraph"; exit 0; fi
    if [ "$(id -u)" = 0 ]; then chown postgres "$DATA"; chmod 700 "$DATA"; fi
    if [ ! -f "$PGDATA_DIR/PG_VERSION" ]; then
      [ -f "$DATA/password" ] || (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(24))' > "$DATA/password")
      if [ "$(id -u)" = 0 ]; then chown postgres "$DATA/password"; fi
      as_pg "$BIN/initdb" -D "$PGDATA_DIR" -U toolgraph --pwfile="$DATA/password" --auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$DATA/initdb.log" 2>&1 \
        || { echo "initdb failed:" >&2; tail -20 "$DATA/initdb.log" >&2; exit 1; }
    fi
    as_pg "$BIN/pg_ctl" -D "$PGDATA_DIR" -l "$DATA/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DATA -c max_connections=200" start >&2 \
      || { echo "postgres did not start; log:" >&2; tail -20 "$DATA/server.log" >&2; exit 1; }
    export PGPASSWORD
    PGPASSWORD=$(cat "$DATA/password")
    if ! "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U toolgraph -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'toolgraph'" | grep -q 1; then
      "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U toolgraph toolgraph
    fi
    if [ -n "${TOOLGRAPH_POSTGRES_PARENT_PID:-}" ]; then
      # A watcher: when the parent (a test run) is gone, stop the server.
      nohup bash -c "while kill -0 $TOOLGRAPH_POSTGRES_PARENT_PID 2>/dev/null; do sleep 2; done; TOOLGRAPH_POSTGRES_DATA='$DATA' bash '$0' stop $PORT" >/dev/null 2>&1 &
    fi
    echo "postgres started on 127.0.0.1:$PORT (data $DATA)" >&2
    echo "postgres://toolgraph@127.0.0.1:$PORT/toolgraph"
    ;;
  stop)
    BIN=$(bin_dir)
    if [ -f "$PGDATA_DIR/postmaster.pid" ]; then as_pg "$BIN/pg_ctl" -D "$PGDATA_DIR" -m fast -w stop >&2 || true; fi
    ready && { echo "postgres on $PORT still answering" >&2; exit 1; }
    echo "postgres on $PORT stopped" >&2
    ;;
  status)
    BIN=$(bin_dir)
    if ready; then echo "up on 127.0.0.1:$PORT"; else echo "down on 127.0.0.1:$PORT"; exit 1; fi
    ;;
  *) echo "usage: $0 start|stop|status [PORT]" >&2; exit 2 ;;
esac
