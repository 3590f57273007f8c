#!/usr/bin/env bash
# Tests the container image (deploy/container/build.sh) in Debian's podman, as root:
#
# 1. with the supported invocation (deploy/README.md), airlockd serves both engines: a
#    WebAssembly tool writes a file and run_command builds one through the process engine's
#    sandbox, in the workspace volume, as the airlock user;
# 2. started as Kubernetes' CRI runtimes and Docker start a user that is not root (the
#    capabilities in the bounding set, none ambient), it takes them up from the executable's
#    file capabilities; in a user namespace of its own (Kubernetes' `hostUsers: false`), it
#    still records writes (overlayfs's `userxattr`);
# 3. the escape corpus (tests/tests/all/escape_corpus.rs) runs inside the image, as its
#    airlock user with the supported invocation's privileges, and again in a user namespace:
#    the test binary of this build, the checkout mounted read-only at its own path;
# 4. with less, it still serves what it can and names what it lacks: with podman's default
#    capabilities (no CAP_SYS_ADMIN) and with none (the process engine and writing tools,
#    naming them), and with /proc masked (the process engine: a sandbox's own /proc).
#
# The image is built with python3, which the corpus's hostile process tool runs in.
# The state must not lie in the image's own overlay (overlayfs will not stack a call's
# layer on it): the image declares /var/lib/airlock and /srv/airlock volumes, so podman
# gives it volumes even when the invocation names none.
#
#   deploy/container/test.sh [--dev | --image TAG]
#
# --dev tests the image of the dev build; --image tests an image already built with
# `deploy/container/build.sh --with python3` (scripts/test.sh builds one for this test and
# deploy/kubernetes/test.sh), and leaves it.
#
# Everything it makes (the image, containers, volumes) is removed when it exits.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh
exec 1>&2

build_flags=()
given_image=""
case "${1:-}" in
    --dev) build_flags=(--dev) ;;
    --image) given_image="${2:?usage: deploy/container/test.sh --image TAG}" ;;
    "") ;;
    *) die "usage: deploy/container/test.sh [--dev | --image TAG]" ;;
esac
((EUID == 0)) || die "run as root: rootful podman"

step() { printf "\n== %s\n" "$*"; }
fail() { die "FAILED: $*"; }

suffix="$$-$RANDOM"
image="${given_image:-localhost/airlock-test:$suffix}"
state="airlock-test-state-$suffix"
work="airlock-test-work-$suffix"
corpus="airlock-test-corpus-$suffix"
containers=()
work_log="$(mktemp)"
cleanup() {
    rm -f "$work_log"
    for container in "${containers[@]}"; do podman rm -f -v "$container" >/dev/null 2>&1 || true; done
    podman volume rm -f "$state" "$work" "$corpus" >/dev/null 2>&1 || true
    [[ -n $given_image ]] || podman rmi -f "$image" >/dev/null 2>&1 || true
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
# A user namespace of the container's own, as Kubernetes' `hostUsers: false` gives a pod:
# 65,536 ids from an unprivileged range of the host.
readonly USERNS=(--uidmap 0:300000:65536 --gidmap 0:300000:65536)
# How Kubernetes' CRI runtimes and Docker start a user that is not root: the added
# capabilities in the bounding set, none ambient (podman makes them ambient itself).
readonly NO_AMBIENT=(--entrypoint setpriv)
readonly NO_AMBIENT_ARGS=(--ambient-caps=-all --inh-caps=-all /usr/bin/airlockd
    --config /etc/airlock/airlockd.toml --listen 0.0.0.0:7411)

# Removes a container. Right after a container in a user namespace stops, removing it can
# find its /dev/shm still busy while the kernel tears its mount namespaces down: try again.
remove() {
    for _ in 1 2 3 4 5; do
        podman rm -f -v "$1" >/dev/null 2>&1 && return 0
        sleep 1
    done
    podman rm -f -v "$1" >/dev/null
}

# Starts a container of the image with the given options, as `container` (removing the one
# before); waits until the daemon serves, and leaves its log so far in `log`.
container=""
log=""
start() {
    # One daemon at a time: the next uses the same volumes, and a state dir is one daemon's.
    [[ -z $container ]] || remove "$container"
    container="airlock-test-$suffix-${#containers[@]}"
    containers+=("$container")
    # Options, then `--` and the arguments for the entrypoint, if any.
    local options=() arguments=()
    while (($#)) && [[ $1 != -- ]]; do options+=("$1"); shift; done
    (($#)) && shift && arguments=("$@")
    podman run -d --name "$container" "${PODMAN_BASE[@]}" "${options[@]}" "$image" "${arguments[@]}" >/dev/null
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

# One debootstrap a day for the images of the tests (deploy/container/rootfs.sh).
if [[ -z ${AIRLOCK_ROOTFS_CACHE:-} ]]; then
    AIRLOCK_ROOTFS_CACHE="$(target_dir)/rootfs-cache"
fi
export AIRLOCK_ROOTFS_CACHE

step "the image (with python3, for the escape corpus's hostile process tool)"
if [[ -z $given_image ]]; then
    deploy/container/build.sh "${build_flags[@]}" --with python3 --tag "$image" >/dev/null
fi
podman run --rm "${PODMAN_BASE[@]}" --entrypoint /usr/bin/python3 "$image" -c '' ||
    fail "$image has no python3 (deploy/container/build.sh --with python3)"

cli() {
    podman exec -e AIRLOCK_TOKEN="$token" -e AIRLOCK_SERVER=http://127.0.0.1:7411 "$container" \
        airlock "$@"
}
# Serves both engines in the container started last: a WebAssembly write, then three
# run_commands (three sandboxes: a daemon that is not root must be able to make more than
# one), each adding a line, the last replacing a directory (an opaque one in the upper layer).
both_engines() {
    local demo
    demo="/srv/airlock/demo-${#containers[@]}"
    if grep -E "will be refused|unavailable|tool refused" <<<"$log" | grep -v py_outline; then
        fail "the daemon refused something: $1"
    fi
    token="$(podman exec "$container" cat /var/lib/airlock/token)"
    podman exec "$container" mkdir -p "$demo/old"
    podman exec "$container" touch "$demo/old/gone.txt"
    cli tools exec write_file --workspace "$demo" \
        --args '{"path": "notes.txt", "content": "written by a wasm tool\n"}' >/dev/null
    for command in 'id -un >> notes.txt' 'echo second >> notes.txt' \
        'rm -r old && mkdir old && echo new > old/new.txt'; do
        cli tools exec run_command --workspace "$demo" \
            --args "{\"command\": \"$command\", \"workdir\": \".\"}" >/dev/null
    done
    [[ "$(podman exec "$container" cat "$demo/notes.txt" "$demo/old/new.txt")" == $'written by a wasm tool\nairlock\nsecond\nnew' ]] ||
        fail "$1: the workspace does not hold what the tools wrote"
    [[ -z "$(podman exec "$container" find "$demo/old" -name gone.txt)" ]] ||
        fail "$1: the replaced directory kept what it held"
}

step "the supported invocation: both engines"
start "${PRIVILEGES[@]}" "${VOLUMES[@]}"
both_engines "the supported invocation"

step "as Kubernetes' runtimes start it: the capabilities taken up from the file"
start "${PRIVILEGES[@]}" "${VOLUMES[@]}" "${NO_AMBIENT[@]}" -- "${NO_AMBIENT_ARGS[@]}"
grep -q "took up CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_DAC_OVERRIDE" <<<"$log" ||
    { echo "$log"; fail "the capabilities were not taken up"; }
both_engines "capabilities from the file"

step "in a user namespace of its own (hostUsers: false), capabilities from the file"
# Volumes of its own: the ids of the other containers' files are not mapped here.
remove "$container"
container=""
podman volume rm -f "$state" "$work" >/dev/null
start "${PRIVILEGES[@]}" "${VOLUMES[@]}" "${USERNS[@]}" "${NO_AMBIENT[@]}" -- "${NO_AMBIENT_ARGS[@]}"
both_engines "in a user namespace"
# A workspace that root owns is another user's: refused, saying what to do (it would take
# CAP_CHOWN and CAP_FOWNER, and then an idmapped mount, which a daemon in a user namespace
# cannot make on a volume mounted outside it).
podman exec --user 0 "$container" mkdir /srv/airlock/root-owned
if refusal="$(cli tools exec write_file --workspace /srv/airlock/root-owned \
    --args '{"path": "x.txt", "content": "x"}' 2>&1)"; then
    fail "in a user namespace: a root-owned workspace was written"
fi
grep -q "give the workspace to the daemon's user" <<<"$refusal" ||
    { echo "$refusal"; fail "in a user namespace: the refusal does not say what to do"; }
remove "$container"
container=""
podman volume rm -f "$state" "$work" >/dev/null

step "the escape corpus inside the image, as its airlock user: the supported invocation, then in a user namespace"
binary="$(integration_tests_binary)" || fail "cannot build the integration tests' binary"
[[ -x $binary ]] || fail "no integration tests' binary (cargo test -p airlock-tests --test all --no-run)"
for userns in no yes; do
    podman volume rm -f "$corpus" >/dev/null 2>&1 || true
    extra=()
    [[ $userns == no ]] || extra=("${USERNS[@]}")
    # Its temporary directories and module cache in a volume (overlayfs will not stack a
    # call's layer on the image's own overlay); the checkout read-only.
    podman run --rm "${PODMAN_BASE[@]}" "${PRIVILEGES[@]}" "${extra[@]}" \
        -v "$corpus:/srv/airlock" -v "$repo:$repo:ro" -v "$binary:$binary:ro" \
        -e TMPDIR=/srv/airlock -e AIRLOCK_TEST_MODULE_CACHE=/srv/airlock/modules \
        --entrypoint "$binary" "$image" escape_corpus --quiet >"$work_log" 2>&1 ||
        { cat "$work_log"; fail "the escape corpus failed inside the image (user namespace: $userns)"; }
    grep -E "^test result" "$work_log"
    grep -qE "^test result: ok\. [1-9][0-9]* passed; 0 failed" "$work_log" ||
        { cat "$work_log"; fail "the escape corpus ran no test inside the image"; }
done

step "with less: each missing layer named"
# podman's default capabilities: CAP_SYS_ADMIN is not among them (the file grants the rest).
start "${VOLUMES[@]}"
grep -q "process tools are unavailable.*lacks CAP_SYS_ADMIN " <<<"$log" ||
    { echo "$log"; fail "podman's default capabilities: CAP_SYS_ADMIN not named"; }
grep -q "tools that write the workspace will be refused.*lacks CAP_SYS_ADMIN," <<<"$log" ||
    { echo "$log"; fail "podman's default capabilities: writing tools not refused"; }
start --cap-drop=all "${VOLUMES[@]}"
grep -q "process tools are unavailable.*lacks CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID " <<<"$log" ||
    { echo "$log"; fail "no capabilities: not named"; }
grep -q "tools that write the workspace will be refused.*lacks CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_DAC_OVERRIDE," <<<"$log" ||
    { echo "$log"; fail "no capabilities: writing tools not refused"; }
start --cap-drop=all --cap-add=SYS_ADMIN,SETUID,SETGID,DAC_OVERRIDE "${VOLUMES[@]}"
grep -q "process tools are unavailable.*mounting /proc" <<<"$log" ||
    { echo "$log"; fail "a masked /proc: not named"; }

echo "deploy/container/test.sh: the image serves both engines with the supported invocation, with its capabilities from the file and in a user namespace; the escape corpus holds inside it; with less it names what it lacks"
