#!/usr/bin/env bash
# The release build: `cargo build --release --bin toolgraph` (extra arguments go to cargo), then the
# binary's symbol table is split off into target/release/toolgraph.debug, which a panic's backtrace
# finds through the binary's .gnu_debuglink when it lies beside it (as Debian's -dbgsym packages
# do). The binary itself keeps the names of toolgraph's own functions and of the panic machinery,
# so a backtrace names toolgraph's frames even without the sidecar. Without objcopy (binutils) the
# binary keeps its whole symbol table. The split is scripts/split-symbols.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin toolgraph "$@"
bash scripts/split-symbols.sh "${CARGO_TARGET_DIR:-target}/release/toolgraph"
