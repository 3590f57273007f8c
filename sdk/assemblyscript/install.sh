#!/usr/bin/env bash
# Installs the AssemblyScript toolchain for airlock tools: the compiler and its WASI shim,
# pinned, from npm, into ${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}/node-assemblyscript.
# Needs Node.js >= 20 and npm (installed from Debian apt when missing).
# Idempotent: does nothing when the pinned versions are already there.
set -euo pipefail
# shellcheck source=sdk/toolchains.sh
source "$(dirname "${BASH_SOURCE[0]}")/../toolchains.sh"

readonly AS_VERSION=0.28.20
readonly SHIM_VERSION=0.1.0
readonly DIR="$TOOLCHAINS/node-assemblyscript"
readonly STAMP="$DIR/.airlock-installed"
readonly WANT=("assemblyscript@$AS_VERSION" "@assemblyscript/wasi-shim@$SHIM_VERSION")
readonly ASC="$DIR/node_modules/.bin/asc"

# Runs the installed compiler.
check_asc() {
    say "checking the compiler"
    "$ASC" --version
}

if stamp_matches "$STAMP" "${WANT[*]}" && [[ -x $ASC ]]; then
    already_installed "assemblyscript $AS_VERSION (wasi-shim $SHIM_VERSION)" "$DIR"
fi
ensure_node
(($(node_major) >= 20)) || warn "AssemblyScript $AS_VERSION declares node >= 20; this node is older"
npm_toolchain "$DIR" "$STAMP" check_asc "${WANT[@]}"
say "assemblyscript $AS_VERSION (wasi-shim $SHIM_VERSION) installed in $DIR"
