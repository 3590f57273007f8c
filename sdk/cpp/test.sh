#!/usr/bin/env bash
# Tests the C++ SDK without a daemon:
#   1. json_test.cpp (airlock_tool.hpp's JSON value), natively with the host C++ compiler,
#      with AddressSanitizer and UBSan when it has them;
#   2. the template (wordstats) natively, against every vector of sdk/wordstats/vectors.json
#      that reaches the tool;
#   3. json_test.cpp and the template build for wasm32-wasi with clang++ and libc++,
#      -Wall -Wextra -Wpedantic -Werror (failing when the toolchain is missing).
# sdk/wordstats/run-vectors.py tests the built template through a real daemon.
#
# Usage: sdk/cpp/test.sh   (from any directory; needs c++ and python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=sdk/toolchains.sh
source "$here/../toolchains.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(-std=c++17 -fno-exceptions -Wall -Wextra -Wpedantic -Werror -I"$here/template")

# shellcheck disable=SC2054 # the comma belongs to -fsanitize
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=all)
echo 'int main() { return 0; }' >"$work/probe.cpp"
c++ "${sanitize[@]}" "$work/probe.cpp" -o "$work/probe" 2>/dev/null || sanitize=()

echo "test.sh: json_test (native${sanitize:+, sanitizers})"
c++ "${flags[@]}" "${sanitize[@]}" "$here/json_test.cpp" -o "$work/json_test"
"$work/json_test"

echo "test.sh: the template against sdk/wordstats/vectors.json (native)"
c++ "${flags[@]}" "${sanitize[@]}" "$here/template/wordstats.cpp" -o "$work/wordstats"
native_vectors "$work/wordstats" "$work"

if command -v clang++ >/dev/null && [[ -f "$(clang++ --target=wasm32-wasi -print-file-name=libc++.a)" ]]; then
    echo "test.sh: wasm32-wasi builds with -Werror"
    for source in json_test.cpp template/wordstats.cpp; do
        clang++ --target=wasm32-wasi -O2 "${flags[@]}" -Wl,--strip-all "$here/$source" -o "$work/out.wasm"
        echo "  $source: $(stat -c %s "$work/out.wasm") bytes"
    done
else
    echo "test.sh: no clang++ with libc++ for WASI for the wasm32-wasi builds: run sdk/cpp/install.sh" >&2
    exit 1
fi
echo "test.sh: all passed"
