#!/usr/bin/env bash
# Split an executable's symbol table off into BIN.debug beside it, linked by .gnu_debuglink (a
# panic's backtrace reads it from there, as from Debian's -dbgsym files). BIN keeps the names of
# toolgraph's own functions and of the panic machinery, so its backtraces name toolgraph's frames
# even without the sidecar. Idempotent: a binary already split is left as it is.
#   scripts/split-symbols.sh BIN
set -euo pipefail
bin=${1:?usage: scripts/split-symbols.sh BIN}
if ! command -v objcopy >/dev/null || ! command -v nm >/dev/null; then
  echo "objcopy/nm (binutils) not found: $bin keeps its full symbol table" >&2
  exit 0
fi
if readelf -S -W "$bin" 2>/dev/null | grep -q '\.gnu_debuglink'; then
  exit 0
fi
dir=$(dirname "$bin")
name=$(basename "$bin")
tmp=$(mktemp -d "$dir/.split-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
objcopy --only-keep-debug "$bin" "$tmp/$name.debug"
nm --defined-only "$bin" | awk '{print $3}' | grep -E 'toolgraph|panicking|rust_begin_unwind|^main$' > "$tmp/keep" || true
objcopy --strip-all --keep-symbols="$tmp/keep" "$bin" "$tmp/$name"
(cd "$tmp" && objcopy --add-gnu-debuglink="$name.debug" "$name")
# New files moved into place: a hard link to the old binary (cargo's copy under deps/) stays whole.
mv "$tmp/$name.debug" "$bin.debug"
mv "$tmp/$name" "$bin"
echo "$bin: $(du -m "$bin" | cut -f1) MiB; its symbols in $bin.debug, $(du -m "$bin.debug" | cut -f1) MiB" >&2
