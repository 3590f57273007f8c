#!/usr/bin/env bash
# Backticks in the expected messages are literal text, not command substitutions.
# shellcheck disable=SC2016
# Tests the wc tool and sdk/c/airlock_tool.h natively: compiles wc.c (and the SDK's
# example.c) with the host C compiler against a temporary workspace and checks each
# result document. The same source is what scripts/build-wasm.sh compiles to wc.wasm.
#
# Usage: plugins/wc/test.sh   (from any directory; needs cc and python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
workspace="$work/workspace"
mkdir -p "$workspace/sub"

# CFLAGS lets a run add sanitizers: CFLAGS="-fsanitize=address,undefined" test.sh
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Wpedantic -Werror ${CFLAGS:-} -I"$repo/sdk/c" \
    -DAIRLOCK_WORKSPACE_ROOT="\"$workspace\"" "$here/wc.c" -o "$work/wc"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Wpedantic -Werror ${CFLAGS:-} -I"$repo/sdk/c" \
    "$repo/sdk/c/example.c" -o "$work/example"

printf 'one two\nthree  four five\n\tsix' > "$workspace/text.txt"
printf '' > "$workspace/empty"
printf 'x\n' > "$workspace/sub/quote\"d.txt"
printf 'caf\xe9\n' > "$workspace/latin1.txt"

passed=0
failed=0

# check NAME STDIN PYTHON_EXPR [PROGRAM]: runs PROGRAM (default wc) with STDIN (or the contents of FILE when STDIN
# is @FILE) and evaluates PYTHON_EXPR with `doc` bound to the parsed result document
# (parsing fails the check if it is not JSON).
check() {
    local name="$1" input="$2" expr="$3" program="$work/${4:-wc}" output status=0
    if [[ $input == @* ]]; then
        output="$("$program" < "${input#@}")" || status=$?
    else
        output="$(printf '%s' "$input" | "$program")" || status=$?
    fi
    if [[ $status -eq 0 ]] && python3 -c '
import json, sys
doc = json.loads(sys.argv[1])
sys.exit(0 if eval(sys.argv[2]) else 1)
' "$output" "$expr"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL $name: exit $status, output: $output" >&2
    fi
}

error_contains() {
    printf 'not doc["error"]["retryable"] and %s in doc["error"]["message"]' "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1")"
}

# What coreutils wc says, for the file with a missing final newline and a tab.
read -r lines words bytes < <(wc < "$workspace/text.txt")

check "counts like wc" '{"path": "text.txt"}' \
    "doc == {'ok': {'path': 'text.txt', 'lines': $lines, 'words': $words, 'bytes': $bytes}}"
check "empty file" '{"path": "./empty"}' \
    "doc == {'ok': {'path': 'empty', 'lines': 0, 'words': 0, 'bytes': 0}}"
check "absolute workspace path" "{\"path\": \"$workspace/sub/../text.txt\"}" \
    "doc['ok']['path'] == 'text.txt' and doc['ok']['bytes'] == $bytes"
check "escapes in the argument and the result" '{"path": "sub/quote\"d.t\u0078t"}' \
    "doc['ok'] == {'path': 'sub/quote\"d.txt', 'lines': 1, 'words': 1, 'bytes': 2}"
check "escaped key, other members skipped" \
    '{"other": {"n": [1, -2.5e3, "}", true, null]}, "p\u0061th": "text.txt"}' \
    "doc['ok']['path'] == 'text.txt'"
check "surrogate pair decodes to UTF-8" '{"path": "\ud83d\ude00.txt"}' \
    "doc['error']['message'] == 'no such file or directory: \U0001F600.txt'"
check "invalid UTF-8 file name bytes stay valid JSON" '{"path": "latin1.txt"}' \
    "doc['ok']['words'] == 1"
check "missing file" '{"path": "nope.txt"}' "$(error_contains 'no such file or directory: nope.txt')"
check "directory" '{"path": "sub"}' "$(error_contains '`sub` is a directory')"
check "outside the workspace" '{"path": "/etc/passwd"}' "$(error_contains 'is outside the workspace')"
check "dot dot above the root" '{"path": "sub/../../x"}' "$(error_contains 'climbs above the workspace root')"
check "NUL in the path" '{"path": "text.txt\u0000.png"}' "$(error_contains 'contains a NUL byte')"
check "empty path" '{"path": ""}' "$(error_contains 'is empty')"
check "missing field" '{"file": "text.txt"}' "$(error_contains 'invalid arguments: `path`: missing field')"
check "wrong type" '{"path": 7}' "$(error_contains 'the field is not a string')"
check "duplicate key" '{"path": "a", "path": "b"}' "$(error_contains 'appears more than once')"
check "bad JSON" '{"path": "text.txt"' "$(error_contains 'not one valid JSON object')"
check "trailing data" '{"path": "text.txt"} {}' "$(error_contains 'not one valid JSON object')"
check "lone surrogate" '{"path": "\udc00"}' "$(error_contains 'not one valid JSON object')"
check "raw control character" "$(printf '{"path": "a\tb"}')" "$(error_contains 'not one valid JSON object')"
check "deep nesting is refused, not a crash" \
    "{\"x\": $(printf '[%.0s' {1..100})$(printf ']%.0s' {1..100}), \"path\": \"text.txt\"}" \
    "$(error_contains 'not one valid JSON object')"
check "empty input" '' "$(error_contains 'not one valid JSON object')"

# One byte over the 1 MiB input limit; padding whitespace keeps the document valid.
big="$work/big.json"
python3 -c '
import sys
doc = "{\"path\": \"text.txt\"}"
sys.stdout.write(doc + " " * (1024 * 1024 - len(doc)))' > "$big"
check "input at the limit" "@$big" "doc['ok']['path'] == 'text.txt'"
printf ' ' >> "$big"
check "input over the limit" "@$big" "$(error_contains 'larger than')"

check "example greets" '{"name": "a\"d\u0000a"}' \
    "doc == {'ok': {'greeting': 'hello a\"d\\x00a'}}" example
check "example refuses a missing name" '{}' "$(error_contains 'missing field')" example

echo "wc: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
