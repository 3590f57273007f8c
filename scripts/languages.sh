#!/usr/bin/env bash
# Builds and runs the example tool (sdk/wordstats) in every language airlock has a template
# for, the way an author would, and checks each against the example tool's vectors through
# a real daemon:
#
#   1. installs each language's toolchain (sdk/<lang>/install.sh: from PyPI, npm, Debian or
#      rustup; once per machine, under ~/.cache/airlock/toolchains);
#   2. for each language: `airlock tools new --lang <lang>`, `airlock tools build`, and
#      `airlock tools check` (airlockd's own loader and executor run the project's examples);
#   3. sdk/wordstats/run-vectors.py: one airlockd serves all of them, and every vector is
#      called through gRPC (`airlock tools exec`).
#
#   scripts/languages.sh [--install-only] [LANG ...]
#
# The projects go to <target dir>/languages/tools/wordstats_<lang>; checking and the daemon
# share one module cache there, so each module is compiled once per run. Uses the debug
# airlock and airlockd (build them first: cargo build --bins).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

install_only=0
languages=()
for arg in "$@"; do
    case $arg in
    --install-only) install_only=1 ;;
    -*) die "unknown option $arg (usage: scripts/languages.sh [--install-only] [LANG ...])" ;;
    *) languages+=("$arg") ;;
    esac
done
if ((${#languages[@]} == 0)); then
    for template in sdk/*/template; do
        languages+=("$(basename "$(dirname "$template")")")
    done
fi

# The toolchain each language builds with; the Rust component's is the Rust one.
install_script() {
    case $1 in
    rust-component) echo sdk/rust/install.sh ;;
    *) echo "sdk/$1/install.sh" ;;
    esac
}

installed=()
for lang in "${languages[@]}"; do
    [[ -d sdk/$lang/template ]] || die "no template for $lang (sdk/$lang/template)"
    script="$(install_script "$lang")"
    [[ " ${installed[*]} " == *" $script "* ]] && continue
    installed+=("$script")
    started=$SECONDS
    echo "${0##*/}: toolchain for $lang ($script)" >&2
    bash "$script" 2>&1 | sed "s/^/  [$lang] /" >&2
    echo "${0##*/}: toolchain for $lang ready in $((SECONDS - started)) s" >&2
done
((install_only)) && exit 0

bin="$(target_dir)/debug"
[[ -x $bin/airlock && -x $bin/airlockd ]] || die "build the binaries first: cargo build --bins"
out="$(target_dir)/languages"
rm -rf "$out/tools"
mkdir -p "$out/tools"
export AIRLOCKD="$bin/airlockd"

for lang in "${languages[@]}"; do
    name="wordstats_${lang//-/_}"
    project="$out/tools/$name"
    started=$SECONDS
    echo "${0##*/}: $lang: new, build, check ($project)" >&2
    "$bin/airlock" tools new --lang "$lang" "$name" --dir "$project"
    if ! "$bin/airlock" tools build "$project" 2>&1 | sed "s/^/  [$lang] /" >&2; then
        die "$lang: the build failed (above)"
    fi
    if ! "$bin/airlock" tools check "$project" --profiles-dir sandbox-profiles \
        --state-dir "$out/state" >"$out/$name.check" 2>&1; then
        cat "$out/$name.check" >&2
        die "$lang: airlock tools check failed (above)"
    fi
    echo "${0##*/}: $lang: passed its examples in $((SECONDS - started)) s ($(grep -c '^✓ example' "$out/$name.check") examples)" >&2
done

echo "${0##*/}: every language's vectors through one airlockd" >&2
AIRLOCK_BIN_DIR="$bin" python3 sdk/wordstats/run-vectors.py --state-dir "$out/state" "$out/tools"
