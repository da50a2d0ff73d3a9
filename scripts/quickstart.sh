#!/usr/bin/env bash
# Fresh machine → a tool graph on the embedded store (no server), from the shared public data:
# fetch assets, build, ingest ToolBench answers + StableToolBench queries + RapidAPI tool docs
# (and embed every API for retrieval: ~10 min the first time, cached after),
# then show the graph's counts and the most likely first calls of a chain.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${TOOLGRAPH_SHARED_DATA:-../shared/data}
bash scripts/setup.sh
cargo build --release --bin toolgraph
BIN=target/release/toolgraph
$BIN ingest \
  --toolbench "$DATA/toolbench/answer" \
  --queries "$DATA"/stabletoolbench/queries/*.json \
  --tools "$DATA/toolenv/tools.jsonl.gz" \
  --report .tgdata/ingest-report.json
echo "report: .tgdata/ingest-report.json"
$BIN graph stats
echo "most likely first calls (successors of START):"
$BIN graph neighbors START -k 5
echo "seed tools for a request (hybrid retrieval over every API):"
$BIN search "what will the weather be in Paris tomorrow" -k 5
