#!/usr/bin/env bash
# Tests the C SDK without a daemon:
#   1. json_test.c (the JSON value reader and writer of airlock_tool.h), natively, with
#      AddressSanitizer and UBSan when the host compiler has them;
#   2. the template (wordstats) natively, against every vector of sdk/wordstats/vectors.json
#      that reaches the tool;
#   3. airlock_tool.h, json_test.c, example.c and the template build for wasm32-wasi with
#      -Wall -Wextra -Wpedantic -Werror (failing when clang/wasi-libc are missing);
# plugins/wc/test.sh tests the rest of the header (through wc.c and example.c), and
# sdk/wordstats/run-vectors.py the built template through a real daemon.
#
# Usage: sdk/c/test.sh   (from any directory; needs cc and python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=sdk/toolchains.sh
source "$here/../toolchains.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(-std=c11 -Wall -Wextra -Wpedantic -Werror)

# shellcheck disable=SC2054 # the comma belongs to -fsanitize
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=all)
echo 'int main(void){return 0;}' >"$work/probe.c"
cc "${sanitize[@]}" "$work/probe.c" -o "$work/probe" 2>/dev/null || sanitize=()

echo "test.sh: json_test (native${sanitize:+, sanitizers})"
cc "${flags[@]}" "${sanitize[@]}" -I"$here" "$here/json_test.c" -o "$work/json_test" -lm
"$work/json_test"

echo "test.sh: the template against sdk/wordstats/vectors.json (native)"
cc "${flags[@]}" "${sanitize[@]}" "$here/template/wordstats.c" -o "$work/wordstats"
native_vectors "$work/wordstats" "$work"

if command -v clang >/dev/null && [[ -f "$(clang --target=wasm32-wasi -print-file-name=libc.a)" ]]; then
    echo "test.sh: wasm32-wasi builds with -Werror"
    for source in json_test.c example.c template/wordstats.c; do
        clang --target=wasm32-wasi -O2 "${flags[@]}" -I"$here" -Wl,--strip-all \
            "$here/$source" -o "$work/out.wasm"
        echo "  $source: $(stat -c %s "$work/out.wasm") bytes"
    done
else
    echo "test.sh: no clang with wasi-libc for the wasm32-wasi builds: run sdk/c/install.sh" >&2
    exit 1
fi

echo "test.sh: all passed"
