#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what is missing, builds the
# WebAssembly modules the tests run, then the Rust tests of the whole workspace, the C
# plugin's test, the example tool built in every language with a template and run through a
# daemon (scripts/languages.sh), the web console rebuilt and checked against the committed
# build (its pages are tested in Chromium by the Rust tests), a gRPC client written in Python against a real daemon,
# the Python and TypeScript client packages against real daemons, the deploy/ dashboards and
# alert rules against a Debian Prometheus scraping a daemon (deploy/test.sh), the Debian
# package and its systemd units in a debootstrap root (deploy/debian/test.sh), the container
# image in podman with the escape corpus inside it (deploy/container/test.sh), the Kubernetes
# manifests validated and played as a fleet (deploy/kubernetes/test.sh), and
# the benchmarks in smoke mode (seconds; nothing judged). Also checks formatting and lints, so what passes
# here passes CI (.ci/run calls this script). The store's tests get a real PostgreSQL server:
# Debian's, started by scripts/postgres.sh in a directory under /tmp on a free loopback port (its
# URL in AIRLOCK_TEST_POSTGRES), as an unprivileged user, and stopped when this script exits.
#
# The host build happens once: clippy lints the workspace's crates while they compile for
# the tests (it is their compiler, as `cargo clippy` makes it), so no dependency is built
# twice. Downloads (Debian packages, Rust targets, the Python client's packages, the
# languages' toolchains) and the WebAssembly modules' build run while that build does. Each
# step's wall time is printed, and the whole fails past AIRLOCK_TEST_BUDGET_S (45 minutes
# unless set): CI must stay well inside its limit.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

readonly budget_s="${AIRLOCK_TEST_BUDGET_S:-2700}"
# A build from scratch gains nothing from incremental compilation's caches, only the time and
# the gigabytes of writing them; set to 1 to keep them between runs of this script.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
readonly installs_log="$(mktemp)"
steps=()
step_name=""
step_start=$SECONDS
# Where the tests' PostgreSQL server runs once started (summary stops it).
postgres_dir=""
# The container image the deploy/ tests share, once built (summary removes it).
image=""

# Ends the step in progress (recording its time) and starts the next one.
step() {
    finish_step
    step_name="$*"
    step_start=$SECONDS
    printf '\n== %s (at %s)\n' "$step_name" "$(clock "$SECONDS")" >&2
}

finish_step() {
    [[ -n $step_name ]] && steps+=("$(printf '%8s  %s' "$(clock $((SECONDS - step_start)))" "$step_name")")
    step_name=""
}

clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

summary() {
    local status=$?
    finish_step
    printf '\n== wall time per step\n' >&2
    printf '%s\n' "${steps[@]}" >&2
    printf '%8s  total\n' "$(clock "$SECONDS")" >&2
    rm -f "$installs_log"
    # The PostgreSQL server of the tests, once started, whether they passed or not. Not
    # fatal here: the tests' own status is what this script exits with.
    [[ -z $image ]] || podman rmi -f "$image" >/dev/null 2>&1 || true
    if [[ -n $postgres_dir ]]; then
        scripts/postgres.sh stop "$postgres_dir" || echo "${0##*/}: could not stop PostgreSQL in $postgres_dir" >&2
        rm -rf -- "$postgres_dir"
    fi
    if ((status == 0 && SECONDS > budget_s)); then
        echo "${0##*/}: the tests took $(clock "$SECONDS"), past the budget of $(clock "$budget_s"): make them faster" >&2
        exit 1
    fi
}
trap summary EXIT

step "the build's own Debian package (libseccomp-dev, which airlockd links)"
# Before the background installs: the build below links it, and apt takes one at a time.
ensure_apt_packages libseccomp-dev

# What `cargo clippy -- -D warnings` sets, here for every build of this script, the
# WebAssembly modules' included (they are linted for the target they run on): the same
# settings keep cargo from building a crate again (scripts/bench.sh builds them once more).
use_lint_build

step "downloads and the WebAssembly modules, in the background: Debian packages (Chromium and PostgreSQL among them), Rust targets, the modules the tests run, Python and npm packages, each language's toolchain"
# The WebAssembly build runs here, beside the host build rather than as a step after it: both
# are CPU-bound, so this moves its time into the build's step rather than saving it, but the
# tests no longer wait for it. Its own cargo lock (target/wasm) is not the host build's
# (target/debug).
(
    ensure_apt_packages
    ensure_rust_targets
    scripts/build-wasm.sh
    tests/python/run.sh --install-only
    clients/python/test.sh --install-only
    clients/typescript/test.sh --install-only
    tests/mcp/install.sh
    scripts/languages.sh --install-only
    scripts/console.sh --install-only
    scripts/postgres.sh --install-only
    deploy/debian/build.sh --install-only
    deploy/kubernetes/test.sh --install-only
) >"$installs_log" 2>&1 &
installs=$!

step "formatting; the imports between files (no cycles, no upward imports: scripts/imports.py)"
cargo fmt --all -- --check
python3 scripts/imports.py

step "build and lint the workspace (clippy compiles it)"
# Binaries first: the end-to-end tests run the real `airlockd` and `airlock`.
cargo build --workspace --bins
cargo test --workspace --no-run

step "waiting for the downloads"
if ! wait "$installs"; then
    cat "$installs_log" >&2
    die "installing what the tests need failed"
fi
cat "$installs_log" >&2

step "web console: console/dist rebuilt from the npm registry must be the committed one; its unit tests"
scripts/console.sh --check
(cd console && npm test --silent)

step "PostgreSQL for the store's tests (Debian's server, under /tmp, on loopback)"
# Set before starting, so that a server left half-started is stopped too. A free port rather
# than a fixed one: another server on the machine may hold any given port.
# Under /tmp, not target/: the server runs as the unprivileged postgres user, which may not
# be able to enter a checkout under /root.
postgres_dir="$(mktemp -d /tmp/airlock-postgres.XXXXXX)"
postgres_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
AIRLOCK_TEST_POSTGRES="$(scripts/postgres.sh start "$postgres_dir" "$postgres_port")"
export AIRLOCK_TEST_POSTGRES

step "Rust tests"
# The change-set boundary's search (daemon/src/changes/boundary.rs): random hostile upper
# layers and workspaces per run, a new seed each time (a failure prints it).
export AIRLOCK_BOUNDARY_CASES=500
# Four tests at a time on two cores: the integration tests mostly wait (on daemons, browsers,
# the database, servers from npm and PyPI), so at libtest's default of one per core the
# machine was half idle, and at four it is full (their binary took 8:30, then 6:47).
# AIRLOCK_TEST_THREADS sets another count.
cargo test --workspace --quiet -- --test-threads="${AIRLOCK_TEST_THREADS:-4}"

step "C plugin"
plugins/wc/test.sh

step "C and C++ SDKs (their JSON readers and writers, natively and for wasm32-wasi)"
sdk/c/test.sh
sdk/cpp/test.sh

step "tools in every language (sdk/<lang>: tools new, build, check, then the vectors through airlockd)"
scripts/languages.sh

step "deploy/: the alert rules and their unit tests, the Grafana dashboard, and Prometheus scraping a daemon's metrics (deploy/test.sh)"
deploy/test.sh

step "Debian package and systemd units (deploy/debian/test.sh --dev): packaged from this build, installed into a debootstrap root, run as the service runs it, upgraded, purged"
deploy/debian/test.sh --dev

step "container image (deploy/container/test.sh): built from the package (dev build, with python3), run in podman with the supported invocation, as Kubernetes starts it, in a user namespace, and with less; the escape corpus inside it"
# One image for this test and the next, from one debootstrap root a day.
AIRLOCK_ROOTFS_CACHE="$(target_dir)/rootfs-cache"
export AIRLOCK_ROOTFS_CACHE
image="localhost/airlock-ci:$$"
deploy/container/build.sh --dev --with python3 --tag "$image" >/dev/null
deploy/container/test.sh --image "$image"

step "Kubernetes manifests (deploy/kubernetes/test.sh): validated against Kubernetes' schemas, then played in podman as three daemons over a PostgreSQL pod, one killed mid-run"
deploy/kubernetes/test.sh --image "$image"
podman rmi -f "$image" >/dev/null
image=""

step "Python gRPC client"
tests/python/run.sh

step "client packages against real daemons: airlock-client for Python (mypy --strict, the framework adapters), @airlock/client for TypeScript (tsc --strict, gRPC and gRPC-Web)"
clients/python/test.sh
clients/typescript/test.sh

step "eval suite (evals/coding.yaml: each task replayed from its cassette, tools for real)"
scripts/evals.sh

step "benchmarks, smoke mode (every section runs; no figures are judged)"
scripts/bench.sh --smoke --languages-dir "$(target_dir)/languages/tools"

finish_step
echo "all tests passed" >&2
