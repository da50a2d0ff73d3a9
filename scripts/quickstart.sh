#!/usr/bin/env bash
# Fresh machine → a tool graph on the embedded store (no server), from the shared public data:
# fetch assets, build, ingest ToolBench answers + StableToolBench queries + RapidAPI tool docs
# (and embed every API for retrieval: ~10 min the first time, cached after),
# then show the graph's counts and the most likely first calls of a chain; then learn the
# ComplexFuncBench chains, plan and execute a request through the replay sandbox (CLI, then the
# daemon over HTTP and SSE), and measure
# graph search against the baselines.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${TOOLGRAPH_SHARED_DATA:-../shared/data}
bash scripts/setup.sh
bash scripts/console.sh build   # the web console, embedded in the binary
bash scripts/release.sh        # the binary, its symbol table split off beside it
BIN=${CARGO_TARGET_DIR:-target}/release/toolgraph
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

# Plan and execute: learn the ComplexFuncBench chains (real recorded responses) into their own
# embedded stores — ingest teaches the graph, the argument model, the long-term memory and the
# usage vectors —, serve those responses from the replay sandbox, and ask for a chain.
CFB="$DATA/complexfuncbench"
$BIN convert complexfuncbench --data "$CFB/data.json.gz" --spec "$CFB/spec.json.gz" \
  --out .tgdata/cfb.jsonl --tools-out .tgdata/cfb-tools.jsonl >/dev/null
export TOOLGRAPH__VECTORS__URI=embedded:.tgdata/cfb-vectors
CFB_STORE=embedded:.tgdata/cfb-graph.redb
# Every chain but the first is ingested: the first one's request, worded another way, is asked below.
tail -n +2 .tgdata/cfb.jsonl > .tgdata/cfb-learned.jsonl
$BIN --store "$CFB_STORE" ingest --tools .tgdata/cfb-tools.jsonl --trajectories .tgdata/cfb-learned.jsonl >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
$BIN sandbox --chains "$CFB/data.json.gz" --spec "$CFB/spec.json.gz" --port "$PORT" 2>/dev/null &
SANDBOX=$!
trap 'kill $SANDBOX 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
# A request that is not among the chains ingested (the first chain's, worded another way): the
# engine recalls an ingested trajectory of the same kind and replays it by analogy with this
# request's values (`recalled … and replayed: "<the ingested request>"`).
REQUEST="Compare for me what a 24-hour car rental costs at the San Diego Marriott La Jolla when I pick it up at 8 AM tomorrow versus the day after tomorrow, same place both times. I only need the car for a day. Today is October 13th, 2024."
echo "plan and execute a request no ingested chain holds (replay sandbox on 127.0.0.1:$PORT):"
$BIN --store "$CFB_STORE" ask --no-learn --rewrite "https://=http://127.0.0.1:$PORT/" "$REQUEST" | tee .tgdata/ask.txt || true
grep -q 'and replayed:' .tgdata/ask.txt && echo "  ↑ recalled from a trajectory that ingest taught the memory"
echo "the daemon: the same request over HTTP, then streamed as Server-Sent Events:"
DPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
$BIN --store "$CFB_STORE" serve --port "$DPORT" --rewrite "https://=http://127.0.0.1:$PORT/" 2>/dev/null &
DAEMON=$!
trap 'kill $SANDBOX $DAEMON 2>/dev/null || true' EXIT
python3 - "$DPORT" "$REQUEST" <<'PY'
import json, sys, time, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(300):
    try:
        urllib.request.urlopen(base + "/readyz", timeout=2)
        break
    except Exception:
        time.sleep(0.2)
req = {"request": sys.argv[2]}
def post(path):
    r = urllib.request.Request(base + path, data=json.dumps(req).encode(), headers={"content-type": "application/json"})
    return urllib.request.urlopen(r, timeout=120).read().decode()
r = json.loads(post("/v1/orchestrate"))
print("  status:", r["status"], "| chain:", " -> ".join(c["name"] for c in r["chain"]), "| run", r["run_id"],
      "| recalled from memory" if r["stats"]["recalled"] else "")
events = [l[7:] for l in post("/v1/orchestrate?stream=true").splitlines() if l.startswith("event: ")]
print("  streamed events:", len(events), "(" + events[0], "…", events[-1] + ")")
PY
echo "the web console was served at http://127.0.0.1:$DPORT/ — see it again with: bash scripts/console.sh serve 8080  (then http://127.0.0.1:8080/)"
kill $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null || true
echo "graph search against the baselines, 5-fold over the chains (.tgdata/eval/chains.md):"
$BIN eval chains --train "$CFB/data.json.gz" --spec "$CFB/spec.json.gz" --folds 5 --report .tgdata/eval/chains.json
