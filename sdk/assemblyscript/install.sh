#!/usr/bin/env bash
# Installs the AssemblyScript toolchain for airlock tools: the compiler and its WASI shim,
# pinned, from npm, into ${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}/node-assemblyscript.
# Needs Node.js >= 20 and npm (installed from Debian apt when missing).
set -euo pipefail

AS_VERSION=0.28.20
SHIM_VERSION=0.1.0
TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
DIR="$TOOLCHAINS/node-assemblyscript"
STAMP="$DIR/.airlock-installed"
WANT="assemblyscript@$AS_VERSION @assemblyscript/wasi-shim@$SHIM_VERSION"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$DIR/node_modules/.bin/asc" ]]; then
    echo "assemblyscript $AS_VERSION (wasi-shim $SHIM_VERSION) already installed in $DIR"
    exit 0
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "==> installing nodejs and npm from Debian apt"
    if [[ $(id -u) -eq 0 ]]; then
        apt-get update -q && apt-get install -y -q nodejs npm
    elif command -v sudo >/dev/null 2>&1; then
        sudo apt-get update -q && sudo apt-get install -y -q nodejs npm
    else
        echo "install.sh: node and npm are missing and this is not root (no sudo): install nodejs and npm" >&2
        exit 1
    fi
fi
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
echo "==> node $(node --version), npm $(npm --version)"
if (( NODE_MAJOR < 20 )); then
    echo "install.sh: warning: AssemblyScript $AS_VERSION declares node >= 20; this node is older" >&2
fi

echo "==> npm install $WANT into $DIR"
mkdir -p "$DIR"
rm -f "$STAMP"
npm install --prefix "$DIR" --save-exact --no-fund --no-audit --loglevel=error \
    "assemblyscript@$AS_VERSION" "@assemblyscript/wasi-shim@$SHIM_VERSION"

echo "==> checking the compiler"
"$DIR/node_modules/.bin/asc" --version
echo "$WANT" > "$STAMP"
echo "assemblyscript $AS_VERSION (wasi-shim $SHIM_VERSION) installed in $DIR"
