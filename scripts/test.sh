#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what is missing, builds the
# WebAssembly modules the tests run, then the Rust tests of the whole workspace, the C
# plugin's test, a gRPC client written in Python against a real daemon, and the benchmarks
# in smoke mode (seconds; nothing judged). Also checks formatting and lints, so what passes
# here passes CI (.ci/run calls this script).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

step() { printf '\n== %s\n' "$*" >&2; }

step "toolchain and packages"
ensure_rust_targets
ensure_apt_packages

step "formatting and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "WebAssembly modules"
scripts/build-wasm.sh

step "Rust tests"
# Binaries first: the end-to-end tests run the real `airlockd` and `airlock`.
cargo build --workspace --bins --quiet
cargo test --workspace --quiet

step "C plugin"
plugins/wc/test.sh

step "Python gRPC client"
tests/python/run.sh

step "benchmarks, smoke mode (every section runs; no figures are judged)"
scripts/bench.sh --smoke

echo "all tests passed" >&2
