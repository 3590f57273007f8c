#!/usr/bin/env bash
# Tests the container image (deploy/container/build.sh) in Debian's podman, as root:
#
# 1. with the supported invocation (deploy/README.md), airlockd serves both engines: a
#    WebAssembly tool writes a file and run_command builds one through the process engine's
#    sandbox, in the workspace volume, as the airlock user;
# 2. with less, it still serves what it can and names what it lacks: without the four
#    capabilities (the process engine and writing tools, naming them), and with /proc
#    masked (the process engine: a sandbox's own /proc).
#
# The state must not lie in the image's own overlay (overlayfs will not stack a call's
# layer on it): the image declares /var/lib/airlock and /srv/airlock volumes, so podman
# gives it volumes even when the invocation names none.
#
#   deploy/container/test.sh [--dev]     (--dev: the image of the dev build, as CI does)
#
# Everything it makes (the image, containers, volumes) is removed when it exits.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh
exec 1>&2

build_flags=()
case "${1:-}" in
    --dev) build_flags=(--dev) ;;
    "") ;;
    *) die "usage: deploy/container/test.sh [--dev]" ;;
esac
((EUID == 0)) || die "run as root: rootful podman"

step() { printf "\n== %s\n" "$*"; }
fail() { die "FAILED: $*"; }

suffix="$$-$RANDOM"
image="localhost/airlock-test:$suffix"
state="airlock-test-state-$suffix"
work="airlock-test-work-$suffix"
containers=()
cleanup() {
    for container in "${containers[@]}"; do podman rm -f -v "$container" >/dev/null 2>&1 || true; done
    podman volume rm -f "$state" "$work" >/dev/null 2>&1 || true
    podman rmi -f "$image" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# What this host's podman needs whatever the image (deploy/README.md): runc, since crun
# refuses its hybrid cgroups, and explicit limits.
readonly PODMAN_BASE=(--runtime runc --ulimit nofile=1024:4096 --ulimit nproc=4096:4096)
# The supported invocation's privileges: exactly the packaged unit's capabilities, and /proc
# unmasked (each sandbox mounts a /proc of its own, which the kernel refuses while part of
# the container's is covered).
readonly PRIVILEGES=(--cap-drop=all --cap-add=SYS_ADMIN,SETUID,SETGID,DAC_OVERRIDE
    --security-opt 'unmask=/proc/*')
readonly VOLUMES=(-v "$state:/var/lib/airlock" -v "$work:/srv/airlock")

# Starts a container of the image with the given options, as `container` (removing the one
# before); waits until the daemon serves, and leaves its log so far in `log`.
container=""
log=""
start() {
    # One daemon at a time: the next uses the same volumes, and a state dir is one daemon's.
    [[ -z $container ]] || podman rm -f -v "$container" >/dev/null
    container="airlock-test-$suffix-${#containers[@]}"
    containers+=("$container")
    podman run -d --name "$container" "${PODMAN_BASE[@]}" "$@" "$image" >/dev/null
    for _ in $(seq 300); do
        log="$(podman logs "$container" 2>&1)"
        grep -q "airlockd serving" <<<"$log" && return 0
        [[ "$(podman inspect -f '{{.State.Running}}' "$container")" == true ]] ||
            { echo "$log"; fail "the daemon exited"; }
        sleep 0.2
    done
    echo "$log"
    fail "the daemon did not serve within a minute"
}

step "the image"
deploy/container/build.sh "${build_flags[@]}" --tag "$image" >/dev/null

step "the supported invocation: both engines"
start "${PRIVILEGES[@]}" "${VOLUMES[@]}"
if grep -E "will be refused|unavailable|tool refused" <<<"$log" | grep -v py_outline; then
    fail "the daemon refused something with the supported invocation"
fi
token="$(podman exec "$container" cat /var/lib/airlock/token)"
cli() {
    podman exec -e AIRLOCK_TOKEN="$token" -e AIRLOCK_SERVER=http://127.0.0.1:7411 "$container" \
        airlock "$@"
}
podman exec "$container" mkdir -p /srv/airlock/demo
cli tools exec write_file --workspace /srv/airlock/demo \
    --args '{"path": "notes.txt", "content": "written by a wasm tool\n"}'
cli tools exec run_command --workspace /srv/airlock/demo \
    --args '{"command": "cat notes.txt > built.txt && id -un >> built.txt", "workdir": "."}'
[[ "$(podman exec "$container" cat /srv/airlock/demo/built.txt)" == $'written by a wasm tool\nairlock' ]] ||
    fail "the workspace does not hold what the tools wrote"

step "with less: each missing layer named"
start "${VOLUMES[@]}"
grep -q "process tools are unavailable.*lacks CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID" <<<"$log" ||
    { echo "$log"; fail "no capabilities: not named"; }
grep -q "tools that write the workspace will be refused" <<<"$log" ||
    { echo "$log"; fail "no capabilities: writing tools not refused"; }
start --cap-drop=all --cap-add=SYS_ADMIN,SETUID,SETGID,DAC_OVERRIDE "${VOLUMES[@]}"
grep -q "process tools are unavailable.*mounting /proc" <<<"$log" ||
    { echo "$log"; fail "a masked /proc: not named"; }

echo "deploy/container/test.sh: the image serves both engines with the supported invocation, and names what it lacks with less"
