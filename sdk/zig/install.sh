#!/usr/bin/env bash
# Installs the Zig toolchain of airlock tools: Zig from PyPI's ziglang package (the official
# Zig release repackaged), in a Python venv. Zig builds WASI preview 1 modules by itself
# (-target wasm32-wasi), so nothing else is needed.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail

ZIGLANG_VERSION=0.17.1
TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
VENV="$TOOLCHAINS/venv-zig"
STAMP="$VENV/.airlock-ziglang-$ZIGLANG_VERSION"

find_zig() {
    local candidate
    for candidate in "$VENV"/lib/python*/site-packages/ziglang/zig; do
        if [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
    done
    return 1
}

if [ -f "$STAMP" ] && find_zig >/dev/null; then
    echo "zig $ZIGLANG_VERSION already installed in $VENV"
    exit 0
fi

PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "python3 not found: installing it with apt-get"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update
    $SUDO apt-get install -y python3 python3-venv
    PYTHON=python3
fi
if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "python3 has no venv/ensurepip: installing python3-venv with apt-get"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update
    $SUDO apt-get install -y python3-venv
fi

echo "creating the virtual environment $VENV"
mkdir -p "$TOOLCHAINS"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
echo "installing ziglang $ZIGLANG_VERSION from PyPI (about 100 MB)"
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "ziglang==$ZIGLANG_VERSION"
ZIG="$(find_zig)" || { echo "ziglang installed, but no zig binary under $VENV/lib/python*/site-packages/ziglang" >&2; exit 1; }
echo "zig $("$ZIG" version)"
touch "$STAMP"
echo "zig $ZIGLANG_VERSION installed: $ZIG"
