#!/usr/bin/env bash
# Runaway-Cypher probe (issue 36, finding 4): a daemon on a FalkorDB of its own, then a 3-million-
# element row (the daemon's peak memory before and after), two `reduce` queries FalkorDB computes
# for seconds past their limit, and /readyz timed while they run. Loopback only.
#   bash scripts/probe_cypher.sh [TOOLGRAPH=target/release/toolgraph] [TIMEOUT_MS=5000]
set -euo pipefail
BIN=${1:-target/release/toolgraph}; T=${2:-5000}
D=$(mktemp -d); FPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
TOOLGRAPH_FALKORDB_DATA="$D/falkordb" bash scripts/falkordb.sh start "$FPORT" >/dev/null
trap 'kill $P 2>/dev/null || true; TOOLGRAPH_FALKORDB_DATA="$D/falkordb" bash scripts/falkordb.sh stop "$FPORT" >/dev/null; rm -rf "$D"' EXIT
TOOLGRAPH_LOG=warn TOOLGRAPH__VECTORS__URI="embedded:$D/v" TOOLGRAPH__EMBED__CACHE= TOOLGRAPH__STORE__QUERY_TIMEOUT_MS=$T \
  TOOLGRAPH__STORE__QUERY_MAX_BYTES=65536 "$BIN" --store "falkordb://127.0.0.1:$FPORT" serve --port "$PORT" 2>"$D/log" &
P=$!
for _ in $(seq 100); do curl -s -o /dev/null "127.0.0.1:$PORT/healthz" && break; sleep 0.2; done
hwm() { awk '/VmHWM/ {print $2}' /proc/$P/status; }
q() { curl -s -m 60 -o /dev/null -w "%{http_code} %{time_total}s" "127.0.0.1:$PORT/v1/graph/cypher" -H 'content-type: application/json' -d "{\"query\": \"$1\"}"; }
b=$(hwm); echo "3M-element row: $(q 'RETURN range(1, 3000000) AS xs'), peak +$(( ($(hwm) - b) / 1024 )) MB"
sleep 6
R="RETURN size(reduce(s = '', x IN range(1, 150000) | s + 'aaaaaaaaaa')) AS n"
(echo "runaway 1: $(q "$R")") & (sleep 0.2; echo "runaway 2: $(q "$R")") &
sleep 1.5
for _ in 1 2 3 4; do echo "readyz: $(curl -s -m 10 -o /dev/null -w '%{http_code} %{time_total}s' "127.0.0.1:$PORT/readyz")"; sleep 1; done
wait
