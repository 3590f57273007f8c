#!/bin/sh
# Builds wordstats.wasm, a WASI preview 1 command module (exports `_start`, stdio ABI), from
# main.zig with the Zig compiler (target wasm32-wasi, ReleaseSmall), standard library only.
# Offline; the compiler's caches live in the toolchains folder, nothing is written elsewhere.
set -eu
cd "$(dirname "$0")"

ZIG_SERIES=0.17
TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
ZIG=""
# sdk/zig/install.sh puts Zig in a Python venv (PyPI's ziglang): use the real binary in it.
for candidate in "$TOOLCHAINS"/venv-zig/lib/python*/site-packages/ziglang/zig; do
    if [ -x "$candidate" ]; then ZIG="$candidate"; fi
done
if [ -z "$ZIG" ] && command -v zig >/dev/null 2>&1; then
    ZIG="$(command -v zig)"
fi
if [ -z "$ZIG" ]; then
    echo "build.sh: Zig not found in $TOOLCHAINS/venv-zig nor on PATH." >&2
    echo "build.sh: install it with: bash sdk/zig/install.sh   (from the airlock repository)" >&2
    echo "build.sh: or: python3 -m venv \"$TOOLCHAINS/venv-zig\" && \"$TOOLCHAINS/venv-zig/bin/pip\" install ziglang==0.17.1" >&2
    exit 1
fi
VERSION="$("$ZIG" version)"
case "$VERSION" in
    "$ZIG_SERIES" | "$ZIG_SERIES".*) ;;
    *)
        echo "build.sh: $ZIG is Zig $VERSION, but this code is written for Zig $ZIG_SERIES (its standard library changes between versions): bash sdk/zig/install.sh" >&2
        exit 1
        ;;
esac

export ZIG_GLOBAL_CACHE_DIR="$TOOLCHAINS/zig-cache/global" ZIG_LOCAL_CACHE_DIR="$TOOLCHAINS/zig-cache/local"
mkdir -p "$ZIG_GLOBAL_CACHE_DIR" "$ZIG_LOCAL_CACHE_DIR"

echo "build.sh: using $ZIG (Zig $VERSION)"
echo "build.sh: compiling main.zig to wordstats.wasm (wasm32-wasi, ReleaseSmall; the first build also compiles the standard library: up to 40 s)"
rm -f wordstats.wasm.tmp
"$ZIG" build-exe main.zig -target wasm32-wasi -O ReleaseSmall --name wordstats -femit-bin=wordstats.wasm.tmp
mv wordstats.wasm.tmp wordstats.wasm
echo "build.sh: wrote wordstats.wasm ($(wc -c < wordstats.wasm) bytes)"
