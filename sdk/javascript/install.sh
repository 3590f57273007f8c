#!/usr/bin/env bash
# Installs the JavaScript toolchain of airlock tools: componentize-qjs (from npm), which
# embeds the QuickJS engine and snapshots a JavaScript module into a WebAssembly component.
# Its prebuilt native part comes in an npm package of its own (no other download).
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail
# shellcheck source=sdk/toolchains.sh
source "$(dirname "${BASH_SOURCE[0]}")/../toolchains.sh"

readonly COMPONENTIZE_QJS_VERSION=0.4.5
readonly PREFIX="$TOOLCHAINS/node-javascript"
readonly STAMP="$PREFIX/.airlock-componentize-qjs-$COMPONENTIZE_QJS_VERSION"
readonly COMPONENTIZE_QJS="$PREFIX/node_modules/.bin/componentize-qjs"

# Runs the installed componentize-qjs.
check_componentize_qjs() { "$COMPONENTIZE_QJS" --help >/dev/null; }

if stamp_matches "$STAMP" && [[ -x $COMPONENTIZE_QJS ]]; then
    already_installed "componentize-qjs $COMPONENTIZE_QJS_VERSION" "$PREFIX"
fi
ensure_node
(($(node_major) >= 18)) || die "componentize-qjs needs Node.js 18 or newer; this node is $(node --version)"
npm_toolchain "$PREFIX" "$STAMP" check_componentize_qjs "componentize-qjs@$COMPONENTIZE_QJS_VERSION"
say "componentize-qjs $COMPONENTIZE_QJS_VERSION installed in $PREFIX"
