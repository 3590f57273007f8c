#!/bin/sh
# Builds wordstats.wasm (a WASI preview 1 command module) from assembly/index.ts with the
# AssemblyScript compiler and its WASI shim. Offline once the toolchain is installed.
set -eu
cd "$(dirname "$0")"

AS_VERSION=0.28.20
SHIM_VERSION=0.1.0
TOOLCHAIN="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}/node-assemblyscript"
INSTALL="npm install --prefix \"$TOOLCHAIN\" --save-exact assemblyscript@$AS_VERSION @assemblyscript/wasi-shim@$SHIM_VERSION
  (or: bash sdk/assemblyscript/install.sh from the airlock repository)"

fail() {
    echo "build.sh: $*" >&2
    exit 1
}

echo "[1/3] finding the toolchain"
command -v node >/dev/null 2>&1 || fail "node (>= 20) is not on PATH; install Node.js (Debian: apt-get install nodejs npm), then: $INSTALL"
if [ -x "$TOOLCHAIN/node_modules/.bin/asc" ] && [ -f "$TOOLCHAIN/node_modules/@assemblyscript/wasi-shim/asconfig.json" ]; then
    ASC="$TOOLCHAIN/node_modules/.bin/asc"
    SHIM="$TOOLCHAIN/node_modules/@assemblyscript/wasi-shim"
elif [ -x node_modules/.bin/asc ] && [ -f node_modules/@assemblyscript/wasi-shim/asconfig.json ]; then
    ASC=node_modules/.bin/asc
    SHIM=node_modules/@assemblyscript/wasi-shim
elif command -v asc >/dev/null 2>&1; then
    ASC=$(command -v asc)
    # The shim sits next to the compiler's package in the same node_modules.
    SHIM="$(dirname "$(node -e 'console.log(require("fs").realpathSync(process.argv[1]))' "$ASC")")/../../@assemblyscript/wasi-shim"
    [ -f "$SHIM/asconfig.json" ] || fail "asc is on PATH ($ASC) but @assemblyscript/wasi-shim is not installed next to it; install the toolchain with: $INSTALL"
else
    fail "the AssemblyScript toolchain is not installed in $TOOLCHAIN; install it with: $INSTALL"
fi
echo "      asc $("$ASC" --version 2>/dev/null | sed 's/^Version //') ($ASC)"

echo "[2/3] compiling assembly/index.ts -> wordstats.wasm"
# asc resolves the shim's library folder against the working directory, so it wants the
# shim's config by a relative path.
CONFIG=$(node -e 'console.log(require("path").relative(process.cwd(), process.argv[1]))' "$SHIM/asconfig.json")
# -O2z: optimise for size; --noAssert: assert() keeps its value without trapping.
# The default runtime (incremental GC) is used; `--runtime stub` (never frees) saves ~11 KB.
"$ASC" assembly/index.ts --config "$CONFIG" -O2z --noAssert -o wordstats.wasm.tmp
mv wordstats.wasm.tmp wordstats.wasm

echo "[3/3] checking the module imports only WASI preview 1 and exports _start"
node -e '
const m = new WebAssembly.Module(require("fs").readFileSync(process.argv[1]));
const bad = WebAssembly.Module.imports(m).filter(i => i.module !== "wasi_snapshot_preview1");
if (bad.length) { console.error("build.sh: the module imports " + bad.map(i => i.module + "." + i.name).join(", ") + ": airlock refuses it"); process.exit(1); }
if (!WebAssembly.Module.exports(m).some(e => e.name === "_start" && e.kind === "function")) { console.error("build.sh: the module does not export _start"); process.exit(1); }
' wordstats.wasm
echo "built wordstats.wasm ($(wc -c < wordstats.wasm | tr -d ' ') bytes)"
