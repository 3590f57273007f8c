#!/bin/sh
# Builds wordstats.wasm, a WebAssembly component of the world `tool` (wit/tool.wit), from
# app.js with componentize-qjs (QuickJS). Offline once the toolchain is installed.
set -eu
cd "$(dirname "$0")"

TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
if [ -x "$TOOLCHAINS/node-javascript/node_modules/.bin/componentize-qjs" ]; then
    COMPONENTIZE_QJS="$TOOLCHAINS/node-javascript/node_modules/.bin/componentize-qjs"
elif command -v componentize-qjs >/dev/null 2>&1; then
    COMPONENTIZE_QJS="$(command -v componentize-qjs)"
else
    echo "build.sh: componentize-qjs not found in $TOOLCHAINS/node-javascript nor on PATH." >&2
    echo "build.sh: install it with: bash sdk/javascript/install.sh   (from the airlock repository)" >&2
    echo "build.sh: or: npm install --prefix \"$TOOLCHAINS/node-javascript\" componentize-qjs@0.4.5" >&2
    exit 1
fi
if ! command -v node >/dev/null 2>&1; then
    echo "build.sh: node not found (componentize-qjs runs on Node.js 18 or newer): apt-get install nodejs" >&2
    exit 1
fi
if [ ! -f wit/tool.wit ]; then
    echo "build.sh: wit/tool.wit is missing (airlock tools new copies it from sdk/wit/)" >&2
    exit 1
fi

# One WIT folder as componentize-qjs reads it: world.wit, with the packages it uses in deps/.
echo "build.sh: assembling the WIT of world.wit in .build/wit"
rm -rf .build/wit
mkdir -p .build/wit/deps/airlock-tool
cp world.wit .build/wit/world.wit
cp wit/tool.wit .build/wit/deps/airlock-tool/tool.wit
for file in wasi/*.wit; do
    package="$(basename "$file" .wit)"
    mkdir -p ".build/wit/deps/wasi-$package"
    cp "$file" ".build/wit/deps/wasi-$package/package.wit"
done

echo "build.sh: componentizing app.js into wordstats.wasm with $COMPONENTIZE_QJS (QuickJS, synchronous ABI)"
rm -f wordstats.wasm.tmp
"$COMPONENTIZE_QJS" --sync --wit .build/wit --world tool-with-wasi --js app.js -o wordstats.wasm.tmp >.build/componentize.log 2>&1 || {
    cat .build/componentize.log >&2
    echo "build.sh: componentize-qjs failed" >&2
    exit 1
}
mv wordstats.wasm.tmp wordstats.wasm
echo "build.sh: wrote wordstats.wasm ($(wc -c < wordstats.wasm) bytes)"
