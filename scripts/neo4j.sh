#!/usr/bin/env bash
# Start / stop / check a local Neo4j 5 (the real database engine: community jars from Maven Central,
# scripts/neo4j/pom.xml, run by scripts/neo4j/Launcher.java) with Bolt on 127.0.0.1 only and
# authentication on. For development and CI; production uses the Neo4j server (deploy/).
#   scripts/neo4j.sh start [PORT]   (default 7687; data in .tgdata/neo4j-PORT) — prints the URI
#   scripts/neo4j.sh stop [PORT]
#   scripts/neo4j.sh status [PORT]
#   scripts/neo4j.sh fetch          (only fetch the jars; start does it when they are missing)
# The password of user `neo4j` comes from TOOLGRAPH_NEO4J_PASSWORD or TOOLGRAPH_NEO4J_PASSWORD_FILE;
# with neither, a random one is made once in DATA/password (mode 600) and its path printed. It is
# handed to Java through the environment, never on a command line.
# Environment: TOOLGRAPH_ASSETS (jars, Maven cache: ASSETS/neo4j), TOOLGRAPH_NEO4J_DATA (data folder),
# TOOLGRAPH_NEO4J_HEAP (default 1g), TOOLGRAPH_NEO4J_PAGECACHE_MB (256), TOOLGRAPH_NEO4J_TX_MEMORY_MB
# (512: the memory one transaction may use, db.memory.transaction.max), TOOLGRAPH_NEO4J_PARENT_PID
# (stop when that process ends), TOOLGRAPH_NEO4J_START_WAIT_S (120: how long start waits for Bolt;
# a JVM starting beside a busy test suite may need more). Needs a JDK 17+ and Maven (installed with
# apt-get when missing).
set -euo pipefail
cmd=${1:-start}
PORT=${2:-${TOOLGRAPH_NEO4J_PORT:-7687}}
HERE=$(cd "$(dirname "$0")" && pwd)
ASSETS=${TOOLGRAPH_ASSETS:-.assets}
mkdir -p "$ASSETS"
ASSETS=$(cd "$ASSETS" && pwd)
NEO=$ASSETS/neo4j
DATA=${TOOLGRAPH_NEO4J_DATA:-.tgdata/neo4j-$PORT}
PIDFILE="$DATA/neo4j.pid"

need_tools() {
  local missing=()
  command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null || missing+=(maven)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

fetch() {
  # The jars, once; the Maven repository cache stays under the assets folder (outside git).
  if [ ! -f "$NEO/lib/.complete" ]; then
    need_tools
    echo "fetching Neo4j from Maven Central into $NEO/lib (once)" >&2
    rm -rf "$NEO/lib"
    mkdir -p "$NEO"
    if ! mvn -q -B -Dstyle.color=never -f "$HERE/neo4j/pom.xml" -Dmaven.repo.local="$NEO/m2" \
      dependency:copy-dependencies -DoutputDirectory="$NEO/lib" -DincludeScope=runtime >"$NEO/fetch.log" 2>&1; then
      echo "Maven could not fetch Neo4j (log $NEO/fetch.log):" >&2
      tail -30 "$NEO/fetch.log" >&2
      exit 1
    fi
    touch "$NEO/lib/.complete"
  fi
  if [ ! -f "$NEO/classes/Launcher.class" ] || [ "$HERE/neo4j/Launcher.java" -nt "$NEO/classes/Launcher.class" ]; then
    need_tools
    mkdir -p "$NEO/classes"
    javac -nowarn -cp "$NEO/lib/*" -d "$NEO/classes" "$HERE/neo4j/Launcher.java"
  fi
}

# A Bolt handshake: the server answers with the protocol version it picked (non-zero).
bolt_answers() {
  timeout 3 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "\x60\x60\xb0\x17\x00\x04\x04\x05\x00\x00\x04\x04\x00\x00\x00\x00\x00\x00\x00\x00" >&3
    v=$(head -c 4 <&3 | od -An -tx1 | tr -d " \n")
    [ -n "$v" ] && [ "$v" != 00000000 ]' _ "$PORT" 2>/dev/null
}

running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE")
  kill -0 "$pid" 2>/dev/null && echo "$pid"
}

case "$cmd" in
  fetch)
    fetch
    echo "neo4j jars ready in $NEO/lib"
    ;;
  start)
    if running_pid >/dev/null && [ -f "$DATA/ready" ] && bolt_answers; then
      echo "neo4j://127.0.0.1:$PORT"
      exit 0
    fi
    fetch
    mkdir -p "$DATA"
    DATA=$(cd "$DATA" && pwd)
    PIDFILE="$DATA/neo4j.pid"
    if [ -z "${TOOLGRAPH_NEO4J_PASSWORD:-}" ] && [ -z "${TOOLGRAPH_NEO4J_PASSWORD_FILE:-}" ]; then
      if [ ! -s "$DATA/password" ]; then
        (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(24))' > "$DATA/password")
      fi
      export TOOLGRAPH_NEO4J_PASSWORD_FILE="$DATA/password"
      echo "password in $DATA/password (export TOOLGRAPH_NEO4J_PASSWORD_FILE=$DATA/password)" >&2
    fi
    rm -f "$DATA/ready"
    # setsid: the database outlives this script and is not hit by the caller's Ctrl-C.
    setsid java -Xms256m -Xmx"${TOOLGRAPH_NEO4J_HEAP:-1g}" -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError \
      -XX:-OmitStackTraceInFastThrow -Dfile.encoding=UTF-8 \
      --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED \
      --add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
      --add-opens=java.base/java.util.concurrent=ALL-UNNAMED --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED \
      --add-opens=java.base/java.lang.invoke=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED \
      -Dio.netty.tryReflectionSetAccessible=true \
      -cp "$NEO/lib/*:$NEO/classes" Launcher "$DATA" "$PORT" </dev/null >"$DATA/launcher.log" 2>&1 &
    echo $! > "$PIDFILE"
    for _ in $(seq 1 $(( ${TOOLGRAPH_NEO4J_START_WAIT_S:-120} * 10 ))); do
      if [ -f "$DATA/ready" ] && bolt_answers; then
        echo "neo4j://127.0.0.1:$PORT"
        exit 0
      fi
      running_pid >/dev/null || break
      sleep 0.1
    done
    echo "neo4j did not answer on 127.0.0.1:$PORT; log ($DATA/launcher.log):" >&2
    tail -30 "$DATA/launcher.log" >&2 || true
    exit 1
    ;;
  stop)
    if pid=$(running_pid); then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 600); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$PIDFILE"; echo "neo4j on $PORT stopped"; exit 0; }
        sleep 0.1
      done
      echo "neo4j on $PORT did not stop in 60 s; killing it" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE"
    echo "neo4j on $PORT stopped"
    ;;
  status)
    if bolt_answers; then echo "up on 127.0.0.1:$PORT"; else echo "down on 127.0.0.1:$PORT"; exit 1; fi
    ;;
  *) echo "usage: $0 start|stop|status [PORT] | fetch" >&2; exit 2 ;;
esac
