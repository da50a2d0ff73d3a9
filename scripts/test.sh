#!/usr/bin/env bash
# The test command: fetch the offline assets the tests need (FalkorDB binaries, model files),
# then run every test of the workspace. Tests start their own FalkorDB servers on 127.0.0.1.
# Neo4j tests run only when NEO4J_URI is set (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo check --workspace --benches   # benches build, but do not run as tests
cargo test --workspace --no-fail-fast
