#!/bin/sh
# Builds wordstats.wasm, a WASI preview 1 module on the stdio ABI, from src/ with cargo
# (target wasm32-wasip1). Downloads the crates of Cargo.lock once; offline after that.
set -eu
cd "$(dirname "$0")"

TARGET=wasm32-wasip1
CRATE=wordstats
HOW="bash sdk/rust/install.sh   (from the airlock repository), or: rustup toolchain install 1.95.0 --target $TARGET"

# cargo: on PATH, or where rustup puts it.
if ! command -v cargo >/dev/null 2>&1; then
    PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "build.sh: cargo not found on PATH nor in ${CARGO_HOME:-$HOME/.cargo}/bin." >&2
    echo "build.sh: install Rust with rustup (https://rustup.rs), then: $HOW" >&2
    exit 1
fi
# The compiler rust-toolchain.toml names must have the target's standard library.
if ! SYSROOT="$(rustc --print sysroot)"; then
    echo "build.sh: no Rust compiler for this project (rust-toolchain.toml pins one); install it with: $HOW" >&2
    exit 1
fi
if [ ! -d "$SYSROOT/lib/rustlib/$TARGET" ]; then
    echo "build.sh: $(rustc --version) has no $TARGET standard library." >&2
    echo "build.sh: install it with: $HOW" >&2
    exit 1
fi
echo "build.sh: using $(cargo --version), target $TARGET"

# Its own target folder, whatever the environment says, so builds never collide.
CARGO_TARGET_DIR="$PWD/target"
export CARGO_TARGET_DIR

if cargo fetch --locked --offline --target "$TARGET" >/dev/null 2>&1; then
    echo "build.sh: the crates of Cargo.lock are all downloaded"
else
    echo "build.sh: downloading the crates of Cargo.lock (once)"
    cargo fetch --locked --target "$TARGET"
fi

echo "build.sh: compiling (release: opt-level s, LTO; about 10 s the first time)"
cargo build --release --offline --locked --target "$TARGET"

rm -f wordstats.wasm.tmp
cp "target/$TARGET/release/$CRATE.wasm" wordstats.wasm.tmp
mv wordstats.wasm.tmp wordstats.wasm
echo "build.sh: wrote wordstats.wasm ($(wc -c < wordstats.wasm) bytes)"
