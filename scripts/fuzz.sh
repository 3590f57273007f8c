#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/ one after another, each for a set time, and fails when
# any of them finds a crash, a hang or a leak, printing how to reproduce it. Installs what it
# needs (the nightly toolchain, cargo-fuzz). Not part of scripts/test.sh: CI has no nightly.
#
#   scripts/fuzz.sh                      every target, 60 s each
#   scripts/fuzz.sh --seconds 600 abi_result profile
#
# Corpora: fuzz/corpus/<target> holds the committed seeds and is only read; what the fuzzer
# learns goes to fuzz/generated/<target> (gitignored) and is reused by the next run. Crashes
# land in fuzz/artifacts/<target> (gitignored). The build goes to $CARGO_TARGET_DIR when set,
# else fuzz/target: it uses nightly and sanitizer flags, so it never shares the stable one.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh
# The daemon links the system's libseccomp.
ensure_apt_packages libseccomp-dev

readonly TARGETS=(manifest profile arguments abi_result proto_requests sandbox_rules change_sets mcp_edge)

# One input taking longer than this is a hang: every target parses a few KiB.
readonly UNIT_TIMEOUT_SECONDS=10

usage() {
    echo "usage: ${0##*/} [--seconds N] [TARGET...]   (targets: ${TARGETS[*]})" >&2
    exit 2
}

seconds=60
selected=()
while (($#)); do
    case "$1" in
        --seconds)
            [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage
            seconds="$2"
            shift 2
            ;;
        -h | --help) usage ;;
        -*) usage ;;
        *)
            [[ " ${TARGETS[*]} " == *" $1 "* ]] || die "unknown target \`$1\` (targets: ${TARGETS[*]})"
            selected+=("$1")
            shift
            ;;
    esac
done
((${#selected[@]})) || selected=("${TARGETS[@]}")

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "${0##*/}: installing the nightly toolchain" >&2
    rustup toolchain install nightly --profile minimal >/dev/null
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "${0##*/}: installing cargo-fuzz" >&2
    cargo +nightly install cargo-fuzz --locked
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/fuzz/target}"

fuzz() { cargo +nightly fuzz "$1" --fuzz-dir fuzz "${@:2}"; }

echo "${0##*/}: building ${selected[*]} into $CARGO_TARGET_DIR" >&2
for target in "${selected[@]}"; do
    fuzz build "$target"
done

failed=()
for target in "${selected[@]}"; do
    mkdir -p "fuzz/generated/$target" "fuzz/artifacts/$target"
    marker="$(mktemp)"
    echo "${0##*/}: $target for ${seconds} s" >&2
    # The generated corpus comes first: libFuzzer writes new inputs to the first directory.
    if fuzz run "$target" "fuzz/generated/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -timeout="$UNIT_TIMEOUT_SECONDS" -print_final_stats=1; then
        rm -f "$marker"
        continue
    fi
    failed+=("$target")
    found=0
    while IFS= read -r artifact; do
        found=1
        echo "${0##*/}: $target failed; reproducer: $artifact" >&2
        echo "  reproduce: cargo +nightly fuzz run --fuzz-dir fuzz $target $artifact" >&2
    done < <(find "fuzz/artifacts/$target" -type f -newer "$marker")
    ((found)) || echo "${0##*/}: $target failed before writing a reproducer (see above)" >&2
    rm -f "$marker"
done

if ((${#failed[@]})); then
    die "findings in: ${failed[*]}"
fi
echo "${0##*/}: no findings in ${selected[*]} (${seconds} s each)" >&2
