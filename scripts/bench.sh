#!/usr/bin/env bash
# Runs airlock's benchmark suite (tests/bench, issue 6) in one go and prints its tables:
# every case with its p50/p99, each airlock case against its peer as a ratio, and the
# targets judged.
#
#   scripts/bench.sh                 full run (several minutes); installs the peers
#   scripts/bench.sh --smoke         every section with tiny counts, in seconds, for CI;
#                                    judges nothing and never installs wasmtime-cli
#   scripts/bench.sh [--smoke] ARGS  ARGS go to airlock-bench (sections: wasm process agent
#                                    scale cold mcp changes streaming cassettes languages console
#                                    fleet policy telemetry;
#                                    --scale 10,100; --output FILE; --languages-dir DIR)
#   scripts/bench.sh wasm            the warm call's figures and targets alone, in under a
#                                    minute once built (issue 24)
#
# The languages section (issue 20: module size, compile, cached load and warm call of the
# example tool in each SDK language) needs the tools built first — scripts/languages.sh puts
# them in <target dir>/languages/tools — and that folder as `--languages-dir DIR`; without it
# the section reports itself skipped.
#
# Installs what is missing first: the build's own needs (as scripts/build-wasm.sh does),
# Debian's bubblewrap, the MCP peers (tests/mcp/install.sh), and — outside --smoke — wasmtime-cli from crates.io at exactly the
# wasmtime version the workspace pins, into <target dir>/bench-tools, once. Builds the
# WebAssembly modules and the release binaries (debug ones for --smoke), then runs
# airlock-bench against that build's airlockd. The full run's tables are also written to
# <target dir>/bench/latest.md. Needs root: the process engine and the peers make
# namespaces.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# shellcheck source=scripts/common.sh
source scripts/common.sh

smoke=0
bench_args=()
sections=()
for arg in "$@"; do
    case $arg in
    --smoke) smoke=1 ;;
    wasm | process | agent | scale | cold | mcp | changes | streaming | cassettes | languages | console | fleet)
        sections+=("$arg")
        bench_args+=("$arg")
        ;;
    *) bench_args+=("$arg") ;;
    esac
done

# True when section $1 runs: every section runs when none is named. What only some sections
# need is installed only for them, so that `scripts/bench.sh wasm` starts measuring at once.
runs() {
    ((${#sections[@]} == 0)) && return 0
    local section
    for section in "${sections[@]}"; do
        [[ $section == "$1" ]] && return 0
    done
    return 1
}

# The wasmtime version the daemon is built with: the CLI peer must be the same, or the
# comparison measures two wasmtimes rather than airlock against the CLI.
wasmtime_version="$(sed -n 's/^wasmtime = { version = "=\([0-9][0-9.]*\)".*/\1/p' Cargo.toml)"
[[ -n $wasmtime_version ]] || die "cannot find the pinned wasmtime version (wasmtime = { version = \"=X.Y.Z\" …) in Cargo.toml"

target_dir="$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
tools_root="$target_dir/bench-tools"
wasmtime="$tools_root/bin/wasmtime"

# Installs Debian's bubblewrap when missing. A smoke run goes on without it (its cases
# are reported as skipped); a full run needs it.
ensure_bubblewrap() {
    command -v bwrap >/dev/null && return 0
    echo "${0##*/}: installing bubblewrap" >&2
    if apt-get update -qq >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null; then
        return 0
    fi
    ((smoke)) || die "cannot install bubblewrap; install it with apt-get install bubblewrap"
    echo "${0##*/}: bubblewrap is not installed; its cases are skipped" >&2
}

# True when the cached wasmtime CLI is the pinned version.
wasmtime_current() {
    [[ -x $wasmtime ]] && [[ "$("$wasmtime" --version 2>/dev/null)" == "wasmtime $wasmtime_version"* ]]
}

ensure_rust_targets
ensure_apt_packages
if runs process; then ensure_bubblewrap; fi
# The MCP section's server and its direct peer: the Python MCP SDK (skipped when present).
if runs mcp; then tests/mcp/install.sh; fi
# The console section's browser: Debian's Chromium and its driver (skipped when present).
if runs console; then scripts/console.sh --install-only; fi
# The fleet section's database: the PostgreSQL server AIRLOCK_TEST_POSTGRES names (as
# scripts/test.sh sets it), else a throwaway one of Debian's, started below.
needs_postgres=0
if runs fleet && [[ -z ${AIRLOCK_TEST_POSTGRES:-} ]]; then
    needs_postgres=1
    scripts/postgres.sh --install-only
fi

wasmtime_args=()
if ! runs wasm; then
    : # only the wasm section compares with the CLI
elif wasmtime_current; then
    wasmtime_args=(--wasmtime "$wasmtime")
elif ((smoke)); then
    echo "skipped: wasmtime-cli not installed (a full run of scripts/bench.sh installs wasmtime-cli $wasmtime_version)"
else
    echo "${0##*/}: installing wasmtime-cli $wasmtime_version into $tools_root (once; several minutes)" >&2
    cargo install --locked "wasmtime-cli@$wasmtime_version" --root "$tools_root"
    wasmtime_current || die "$wasmtime is not wasmtime $wasmtime_version after installing it"
    wasmtime_args=(--wasmtime "$wasmtime")
fi

# A smoke run checks that every section works, not how fast: it uses the debug build that
# scripts/test.sh has already made, rather than a release build of its own.
profile=release
((smoke)) && profile=dev
bin_dir="$target_dir/$([[ $profile == dev ]] && echo debug || echo release)"
echo "${0##*/}: building the WebAssembly tools and the workspace's binaries ($profile)" >&2
scripts/build-wasm.sh >/dev/null
# The whole workspace's binaries, as scripts/test.sh builds them: building only some
# packages resolves their dependencies' features differently and rebuilds them all.
cargo build --profile "$profile" --workspace --bins

run_args=(--airlockd "$bin_dir/airlockd" "${wasmtime_args[@]}")
if ((smoke)); then
    run_args+=(--smoke)
else
    mkdir -p "$target_dir/bench"
    run_args+=(--output "$target_dir/bench/latest.md")
fi
if ((!needs_postgres)); then
    echo "${0##*/}: running airlock-bench ${run_args[*]} ${bench_args[*]}" >&2
    exec "$bin_dir/airlock-bench" "${run_args[@]}" "${bench_args[@]}"
fi
# Under /tmp: the server's user may not be able to enter a checkout under /root.
postgres_dir="$(mktemp -d /tmp/airlock-postgres.XXXXXX)"
postgres_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
trap 'scripts/postgres.sh stop "$postgres_dir"; rm -rf -- "$postgres_dir"' EXIT
AIRLOCK_TEST_POSTGRES="$(scripts/postgres.sh start "$postgres_dir" "$postgres_port")"
export AIRLOCK_TEST_POSTGRES
echo "${0##*/}: running airlock-bench ${run_args[*]} ${bench_args[*]}" >&2
"$bin_dir/airlock-bench" "${run_args[@]}" "${bench_args[@]}"
