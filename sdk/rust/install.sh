#!/usr/bin/env bash
# Installs what the Rust templates (sdk/rust/template, sdk/rust-component/template) build
# with: Rust 1.95.0, the toolchain their rust-toolchain.toml pins, with its wasm32-wasip1
# and wasm32-wasip2 standard libraries (through rustup, into rustup's own home, not
# $AIRLOCK_TOOLCHAINS), and the crates of their Cargo.lock files (into cargo's registry
# cache), so that `airlock tools build` works offline afterwards. Idempotent.
set -euo pipefail
# shellcheck source=sdk/toolchains.sh
source "$(dirname "${BASH_SOURCE[0]}")/../toolchains.sh"

readonly TOOLCHAIN=1.95.0
readonly TARGETS=(wasm32-wasip1 wasm32-wasip2)
ALREADY="already "
SDK="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

command -v rustup >/dev/null || die "rustup not found (on PATH nor in ${CARGO_HOME:-$HOME/.cargo}/bin); install it from https://rustup.rs, e.g. \`curl --proto '=https' -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal\`, then run this script again"

if ! rustup toolchain list | grep -q "^$TOOLCHAIN-"; then
    say "installing Rust $TOOLCHAIN with ${TARGETS[*]} (rustup)"
    rustup toolchain install "$TOOLCHAIN" --profile minimal "${TARGETS[@]/#/--target=}"
    ALREADY=""
fi

SYSROOT="$(rustup run "$TOOLCHAIN" rustc --print sysroot)"
MISSING=()
for target in "${TARGETS[@]}"; do
    [ -d "$SYSROOT/lib/rustlib/$target" ] || MISSING+=("$target")
done
if [ ${#MISSING[@]} -gt 0 ]; then
    say "adding ${MISSING[*]} to Rust $TOOLCHAIN (rustup)"
    rustup target add --toolchain "$TOOLCHAIN" "${MISSING[@]}"
    ALREADY=""
fi

for template in "$SDK/rust/template" "$SDK/rust-component/template"; do
    [ -f "$template/Cargo.lock" ] || continue
    if ! cargo "+$TOOLCHAIN" fetch --locked --offline --manifest-path "$template/Cargo.toml" >/dev/null 2>&1; then
        say "downloading the crates of ${template#"$SDK/"}/Cargo.lock (crates.io)"
        cargo "+$TOOLCHAIN" fetch --locked --manifest-path "$template/Cargo.toml"
        ALREADY=""
    fi
done

say "Rust $TOOLCHAIN with ${TARGETS[*]} ${ALREADY}installed ($(rustup run "$TOOLCHAIN" rustc --version))"
