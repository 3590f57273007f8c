#!/usr/bin/env bash
# Installs the JavaScript toolchain of airlock tools: componentize-qjs (from npm), which
# embeds the QuickJS engine and snapshots a JavaScript module into a WebAssembly component.
# Its prebuilt native part comes in an npm package of its own (no other download).
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail

COMPONENTIZE_QJS_VERSION=0.4.5
TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
PREFIX="$TOOLCHAINS/node-javascript"
STAMP="$PREFIX/.airlock-componentize-qjs-$COMPONENTIZE_QJS_VERSION"

if [ -f "$STAMP" ] && [ -x "$PREFIX/node_modules/.bin/componentize-qjs" ]; then
    echo "componentize-qjs $COMPONENTIZE_QJS_VERSION already installed in $PREFIX"
    exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "node/npm not found: installing nodejs and npm with apt-get"
    $SUDO apt-get update
    $SUDO apt-get install -y nodejs npm
fi
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$NODE_MAJOR" -lt 18 ]; then
    echo "install.sh: componentize-qjs needs Node.js 18 or newer; this node is $(node --version)" >&2
    exit 1
fi

echo "installing componentize-qjs $COMPONENTIZE_QJS_VERSION from npm into $PREFIX (node $(node --version))"
mkdir -p "$PREFIX"
rm -f "$PREFIX"/.airlock-componentize-qjs-*
npm install --prefix "$PREFIX" --save-exact --no-audit --no-fund --loglevel=error \
    "componentize-qjs@$COMPONENTIZE_QJS_VERSION"
"$PREFIX/node_modules/.bin/componentize-qjs" --help >/dev/null
touch "$STAMP"
echo "componentize-qjs $COMPONENTIZE_QJS_VERSION installed in $PREFIX"
