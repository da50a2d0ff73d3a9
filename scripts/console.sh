#!/usr/bin/env bash
# The web console (console/): a Vite + TypeScript front end whose built assets are embedded in the
# toolgraph binary (server/build.rs reads console/dist at compile time).
#   bash scripts/console.sh build     npm ci + type-check + vite build → console/dist (then rebuild toolgraph)
#   bash scripts/console.sh browser   install Debian's chromium + chromium-driver when missing (apt-get)
#   bash scripts/console.sh serve [PORT]  the console on the ComplexFuncBench graph that quickstart.sh
#                                     made (.tgdata/cfb-*), calls answered by the replay sandbox
# Packages come from the npm registry (console/package-lock.json); nothing is fetched at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-build}
need_node() {
  if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
    echo "installing Node.js and npm (apt-get)" >&2
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
  fi
  major=$(node -p 'process.versions.node.split(".")[0]')
  if [ "$major" -lt 20 ]; then echo "the console needs Node.js 20+ (found $(node --version))" >&2; exit 1; fi
}
case "$cmd" in
  build)
    need_node
    cd console
    if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
      npm ci --no-audit --no-fund --loglevel=error
    fi
    npm run --silent build
    echo "console built: console/dist (rebuild toolgraph to embed it)" >&2
    ;;
  browser)
    if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
      echo "installing Debian's chromium and chromium-driver (apt-get)" >&2
      (apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1) || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null)
    fi
    /usr/bin/chromium --version
    ;;
  serve)
    port=${2:-8080}
    DATA=${TOOLGRAPH_SHARED_DATA:-../shared/data}
    BIN=${CARGO_TARGET_DIR:-target}/release/toolgraph
    [ -x "$BIN" ] && [ -e .tgdata/cfb-graph.redb ] || { echo "run bash scripts/quickstart.sh first (it builds toolgraph with the console and the ComplexFuncBench graph)" >&2; exit 1; }
    sb=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$BIN" sandbox --chains "$DATA/complexfuncbench/data.json.gz" --spec "$DATA/complexfuncbench/spec.json.gz" --port "$sb" 2>/dev/null &
    SANDBOX=$!
    trap 'kill $SANDBOX 2>/dev/null || true' EXIT
    echo "the console: http://127.0.0.1:$port/  (no login on a local daemon without users; add one with: $BIN users add NAME --role admin --password-stdin)" >&2
    TOOLGRAPH__VECTORS__URI=embedded:.tgdata/cfb-vectors "$BIN" --store embedded:.tgdata/cfb-graph.redb serve --port "$port" --rewrite "https://=http://127.0.0.1:$sb/"
    ;;
  *)
    echo "usage: $0 build|browser|serve [PORT]" >&2
    exit 2
    ;;
esac
