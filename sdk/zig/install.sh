#!/usr/bin/env bash
# Installs the Zig toolchain of airlock tools: Zig from PyPI's ziglang package (the official
# Zig release repackaged), in a Python venv. Zig builds WASI preview 1 modules by itself
# (-target wasm32-wasi), so nothing else is needed.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail
# shellcheck source=sdk/toolchains.sh
source "$(dirname "${BASH_SOURCE[0]}")/../toolchains.sh"

readonly ZIGLANG_VERSION=0.17.1
readonly VENV="$TOOLCHAINS/venv-zig"

# The zig binary of ziglang (its path has the venv's Python version in it).
find_zig() { first_executable "$VENV"/lib/python*/site-packages/ziglang/zig; }

# Runs the installed zig.
check_zig() {
    local zig
    zig="$(find_zig)" || die "ziglang installed, but no zig binary under $VENV/lib/python*/site-packages/ziglang"
    say "zig $("$zig" version)"
}

if stamp_matches "$(pip_stamp "$VENV" ziglang "$ZIGLANG_VERSION")" && find_zig >/dev/null; then
    already_installed "zig $ZIGLANG_VERSION" "$VENV"
fi
pip_toolchain "$VENV" ziglang "$ZIGLANG_VERSION" check_zig "about 100 MB"
say "zig $ZIGLANG_VERSION installed: $(find_zig)"
