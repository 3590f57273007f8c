#!/bin/sh
# Builds wordstats.wasm, a WebAssembly component of the world `tool` (wit/tool.wit), from
# app.py with componentize-py. Offline once the toolchain is installed.
set -eu
cd "$(dirname "$0")"

TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
if [ -x "$TOOLCHAINS/venv-python/bin/componentize-py" ]; then
    COMPONENTIZE_PY="$TOOLCHAINS/venv-python/bin/componentize-py"
elif command -v componentize-py >/dev/null 2>&1; then
    COMPONENTIZE_PY="$(command -v componentize-py)"
else
    echo "build.sh: componentize-py not found in $TOOLCHAINS/venv-python nor on PATH." >&2
    echo "build.sh: install it with: bash sdk/python/install.sh   (from the airlock repository)" >&2
    echo "build.sh: or: python3 -m venv \"$TOOLCHAINS/venv-python\" && \"$TOOLCHAINS/venv-python/bin/pip\" install componentize-py==0.25.1" >&2
    exit 1
fi
if [ ! -f wit/tool.wit ]; then
    echo "build.sh: wit/tool.wit is missing (airlock tools new copies it from sdk/wit/)" >&2
    exit 1
fi

echo "build.sh: using $COMPONENTIZE_PY ($("$COMPONENTIZE_PY" --version))"
echo "build.sh: componentizing app.py into wordstats.wasm (CPython for WASI is bundled: a few seconds)"
rm -f wordstats.wasm.tmp
"$COMPONENTIZE_PY" -d wit -w tool componentize app -p . -o wordstats.wasm.tmp
mv wordstats.wasm.tmp wordstats.wasm
echo "build.sh: wrote wordstats.wasm ($(wc -c < wordstats.wasm) bytes)"
