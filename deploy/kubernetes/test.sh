#!/usr/bin/env bash
# Tests the Kubernetes manifests (deploy/kubernetes/*.yaml), as root:
#
# 1. every object validates against Kubernetes' own schemas, strictly (unknown fields
#    refused), for the oldest release the manifests need (1.33) and the newest that
#    kubernetes-validate bundles; and a copy with a misspelt field must fail;
# 2. they run on this machine in Debian's podman as a fleet: a PostgreSQL pod (the external
#    database, an image built the way airlock's is), then the StatefulSet's three daemons
#    (deploy/kubernetes/play.py turns the manifests into what podman 4.3 plays and says
#    what it changes). Each daemon takes its capabilities up from the image's file
#    capabilities, as on Kubernetes, and joins the fleet; all three accept the one token of
#    the shared volume. A run on the first daemon writes the shared workspace through both
#    engines; its pod is killed while the model thinks, and another daemon finishes the run
#    with each of its writes made exactly once.
#
#   deploy/kubernetes/test.sh [--dev | --image TAG]
#   deploy/kubernetes/test.sh --install-only    (kubernetes-validate, into a venv)
#
# --dev tests the image of the dev build; --image an image deploy/container/build.sh built
# (scripts/test.sh builds one for this test and the container test), which it leaves.
#
# Everything it makes (images, pods, volumes) is removed when it exits.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh
exec 1>&2

venv="$here/.venv"
if [[ ! -x $venv/bin/kubernetes-validate ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
build_flags=()
given_image=""
case "${1:-}" in
    --install-only) echo "kubernetes-validate: installed" && exit 0 ;;
    --dev) build_flags=(--dev) ;;
    --image) given_image="${2:?usage: deploy/kubernetes/test.sh --image TAG}" ;;
    "") ;;
    *) die "usage: deploy/kubernetes/test.sh [--dev | --image TAG | --install-only]" ;;
esac
((EUID == 0)) || die "run as root: rootful podman"

step() { printf "\n== %s\n" "$*"; }
fail() { die "FAILED: $*"; }

# The oldest Kubernetes the manifests need: user namespaces and ProcMountType on by default.
readonly OLDEST=1.33.0
manifests=("$here/namespace.yaml" "$here/airlockd.yaml")

step "the manifests against Kubernetes' schemas ($OLDEST and the newest bundled), strictly"
"$venv/bin/kubernetes-validate" --strict --quiet -k "$OLDEST" "${manifests[@]}"
"$venv/bin/kubernetes-validate" --strict --quiet "${manifests[@]}"
work="$(mktemp -d /tmp/airlock-kubernetes.XXXXXX)"
suffix="$$-$RANDOM"
airlock_image="${given_image:-localhost/airlock-kubernetes-test:$suffix}"
postgres_image="localhost/airlock-kubernetes-postgres:$suffix"
# The pods and volumes take the manifests' names: the test refuses to start where any of
# them exists already, and removes only what it made.
readonly PODS=(airlockd-0 airlockd-1 airlockd-2 airlock-test-postgres)
playing=""
cleanup() {
    if [[ -n $playing ]]; then
        for pod in "${PODS[@]}"; do podman pod rm -f "$pod" >/dev/null 2>&1 || true; done
        while read -r volume; do
            podman volume rm -f "$volume" >/dev/null 2>&1 || true
        done <"$work/volumes.txt"
    fi
    [[ -n $given_image ]] || podman rmi -f "$airlock_image" >/dev/null 2>&1 || true
    podman rmi -f "$postgres_image" >/dev/null 2>&1 || true
    rm -rf --one-file-system -- "$work"
}
trap cleanup EXIT
# The check must be able to fail: a misspelt field in the security context.
sed 's/procMount: Unmasked/procMount: Unmasked\n            procMonut: Unmasked/' "$here/airlockd.yaml" >"$work/misspelt.yaml"
if "$venv/bin/kubernetes-validate" --strict --quiet "$work/misspelt.yaml" >"$work/misspelt.log" 2>&1; then
    fail "kubernetes-validate accepted a misspelt field"
fi
grep -q procMonut "$work/misspelt.log" || { cat "$work/misspelt.log"; fail "the misspelt field was not named"; }

# What podman needs here whatever the manifests: runc (crun refuses these hosts' hybrid
# cgroups), explicit limits (kube play takes no --ulimit), and the OCI hook that does
# what a CRI runtime does for procMount: Unmasked (play.py). Through CONTAINERS_CONF, so
# nothing of the host's configuration changes.
mkdir -p "$work/hooks"
cat >"$work/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
hooks_dir = ["$work/hooks"]
EOF
python3 - "$here/testdata/unmask-proc" >"$work/hooks/unmask-proc.json" <<'EOF'
import json, sys
print(json.dumps({
    "version": "1.0.0",
    "hook": {"path": sys.argv[1]},
    "when": {"annotations": {r"^io\.airlock\.test/proc-mount$": "^Unmasked$"}},
    "stages": ["precreate"],
}))
EOF
export CONTAINERS_CONF="$work/containers.conf"
# One debootstrap a day for the images of the tests (deploy/container/rootfs.sh).
if [[ -z ${AIRLOCK_ROOTFS_CACHE:-} ]]; then
    AIRLOCK_ROOTFS_CACHE="$(target_dir)/rootfs-cache"
fi
export AIRLOCK_ROOTFS_CACHE
# The pods' infra containers run catatonit.
ensure_apt_packages catatonit

step "the images: airlock's (deploy/container/build.sh) and PostgreSQL's, built the same way"
[[ -n $given_image ]] || deploy/container/build.sh "${build_flags[@]}" --tag "$airlock_image" >/dev/null
"$here/postgres-image.sh" --tag "$postgres_image" >/dev/null

# Runs `airlock` in a daemon's container, with the fleet's token.
on() {
    local pod=$1
    shift
    podman exec -e AIRLOCK_TOKEN="$token" -e AIRLOCK_SERVER=http://127.0.0.1:7411 \
        "$pod-airlockd" /usr/bin/airlock "$@"
}
# The address of a pod on podman's network.
address() {
    podman inspect "$(podman pod inspect "$1" -f '{{.InfraContainerID}}')" \
        -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}'
}
# Waits until a container's log holds a line matching a pattern.
wait_for_log() {
    local container=$1 pattern=$2
    # Each read whole before it is searched: `podman logs | grep -q` fails under pipefail
    # when grep stops reading at its match.
    for _ in $(seq 300); do
        grep -qE "$pattern" <<<"$(podman logs "$container" 2>&1)" && return 0
        [[ "$(podman inspect -f '{{.State.Running}}' "$container")" == true ]] ||
            { podman logs "$container"; fail "$container exited"; }
        sleep 0.2
    done
    podman logs "$container"
    fail "$container: no line matching '$pattern' within a minute"
}

step "PostgreSQL, the fleet's external database"
"$venv/bin/python" "$here/play.py" fleet "$here/airlockd.yaml" --image "$airlock_image" \
    --store postgres://unused --out "$work"
echo airlock-test-postgres-data >>"$work/volumes.txt"
for pod in "${PODS[@]}"; do
    ! podman pod exists "$pod" || die "a pod $pod exists already: remove it, or run this elsewhere"
done
while read -r volume; do
    ! podman volume exists "$volume" || die "a volume $volume exists already: remove it, or run this elsewhere"
done <"$work/volumes.txt"
playing=yes
password="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
"$venv/bin/python" "$here/play.py" postgres "$here/testdata/postgres.yaml" \
    --image "$postgres_image" --password "$password" >"$work/postgres.yaml"
podman kube play "$work/postgres.yaml" >/dev/null
wait_for_log airlock-test-postgres-postgres "ready to accept connections"
store="postgres://airlock:$password@$(address airlock-test-postgres):5432/postgres"

step "three daemons from the StatefulSet"
"$venv/bin/python" "$here/play.py" fleet "$here/airlockd.yaml" --image "$airlock_image" \
    --store "$store" --out "$work"
echo airlock-test-postgres-data >>"$work/volumes.txt"
podman kube play --configmap "$work/configmap.yaml" "$work/fleet.yaml" >/dev/null
for pod in airlockd-0 airlockd-1 airlockd-2; do
    wait_for_log "$pod-airlockd" "airlockd serving"
    log="$(podman logs "$pod-airlockd" 2>&1)"
    grep -q "took up CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_DAC_OVERRIDE" <<<"$log" ||
        { echo "$log"; fail "$pod did not take its capabilities up from the file"; }
    grep -q "joined the fleet" <<<"$log" || { echo "$log"; fail "$pod did not join the fleet"; }
    # py_outline runs python3, which the image leaves out (deploy/container/build.sh --with).
    if grep -E "will be refused|unavailable|tool refused" <<<"$log" | grep -v py_outline; then
        fail "$pod refused something"
    fi
    [[ "$(podman inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$pod-airlockd")" == true ]] ||
        fail "$pod: the root filesystem is writable"
done
# The daemons made their directories inside the volumes, private, and left the roots' modes
# as podman made them (the kubelet's fsGroup handling owns them on Kubernetes).
modes="$(podman exec airlockd-0-airlockd /usr/bin/stat -c '%a %n' /var/lib/airlock-shared \
    /var/lib/airlock-shared/fleet /var/lib/airlock/state)"
[[ $modes == $'755 /var/lib/airlock-shared\n700 /var/lib/airlock-shared/fleet\n700 /var/lib/airlock/state' ]] ||
    { echo "$modes"; fail "the daemon changed a volume's root, or left its own directories open"; }
token="$(podman exec airlockd-0-airlockd /bin/cat /var/lib/airlock-shared/fleet/token)"
for pod in airlockd-0 airlockd-1 airlockd-2; do
    on "$pod" info >/dev/null || {
        for other in airlockd-0 airlockd-1 airlockd-2; do
            podman logs "$other-airlockd" 2>&1 | grep -E "access token|shared_dir|fleet"
        done
        podman exec "$pod-airlockd" /bin/ls -la --time-style=full-iso /var/lib/airlock-shared/fleet
        fail "$pod does not accept the shared token"
    }
done

step "a run on airlockd-0, its pod killed while the model thinks, finished by another daemon"
podman exec airlockd-1-airlockd /bin/mkdir -p /srv/airlock/demo
podman exec -i airlockd-1-airlockd /bin/sh -c 'cat > /srv/airlock/model.yaml' <<'EOF'
turns:
  - text: "Noting that the task started."
    tool_calls:
      - name: write_file
        arguments: {path: notes.txt, content: "written by a wasm tool\n"}
      - name: run_command
        arguments: {command: "echo started >> log.txt", workdir: "."}
  - delay_ms: 10000
    text: "Thought it over; noting the effect."
    tool_calls:
      - name: run_command
        arguments: {command: "echo effect >> log.txt", workdir: "."}
  - final: "Both lines are in log.txt."
EOF
on airlockd-0 run "note two lines in log.txt" --workspace /srv/airlock/demo \
    --model scripted:/srv/airlock/model.yaml --policy auto >"$work/run.txt" 2>&1 &
client=$!
for _ in $(seq 300); do
    podman exec airlockd-1-airlockd /bin/grep -qx started /srv/airlock/demo/log.txt 2>/dev/null && break
    sleep 0.2
done
podman exec airlockd-1-airlockd /bin/grep -qx started /srv/airlock/demo/log.txt ||
    { cat "$work/run.txt"; fail "the run did not start"; }
run_id="$(on airlockd-1 runs list --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["runs"][0]["run_id"])')"
# The kill must come while the model thinks (ten seconds), before its second call.
! podman exec airlockd-1-airlockd /bin/grep -q effect /srv/airlock/demo/log.txt ||
    fail "the run went on past the model's delay before the kill: this machine is too slow for the test"
podman pod kill airlockd-0 >/dev/null
wait "$client" 2>/dev/null || true
state=""
for _ in $(seq 600); do
    state="$(on airlockd-2 runs show "$run_id" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["state"])')"
    [[ $state == *FINISHED* || $state == finished ]] && break
    sleep 0.2
done
[[ $state == *FINISHED* || $state == finished ]] || fail "run $run_id did not finish after its daemon was killed (state $state)"
taker=""
for pod in airlockd-1 airlockd-2; do
    ! grep -q "taking the run over" <<<"$(podman logs "$pod-airlockd" 2>&1)" || taker=$pod
done
[[ -n $taker ]] || {
    for pod in airlockd-0 airlockd-1 airlockd-2; do
        podman logs "$pod-airlockd" 2>&1 | grep -E "run|lease|fleet" | grep -v "serving tool" | tail -15
    done
    cat "$work/run.txt"
    fail "no daemon took run $run_id over"
}
lines="$(podman exec airlockd-2-airlockd /bin/cat /srv/airlock/demo/log.txt /srv/airlock/demo/notes.txt)"
[[ $lines == $'started\neffect\nwritten by a wasm tool' ]] ||
    { echo "$lines"; fail "the workspace does not hold each write exactly once"; }
echo "$taker took run $run_id over and finished it; each write landed once"

echo "deploy/kubernetes/test.sh: the manifests validate, and run in podman as a fleet of three daemons over PostgreSQL that survives losing one"
