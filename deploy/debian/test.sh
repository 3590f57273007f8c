#!/usr/bin/env bash
# Tests the Debian package and its systemd units on this machine, as root:
#
# 1. in a Debian 12 root made by debootstrap (minbase, with systemd's files as a server
#    has them), the package installs with apt (its dependencies from Debian's mirror): the
#    airlock system user, /var/lib/airlock (0700), /srv/airlock, the conffiles, the units
#    enabled;
# 2. the installed units pass `systemd-analyze verify`, and `systemd-analyze security`
#    scores the service at the exposure SECURITY.md records (a unit change that moves the
#    score must update it);
# 3. airlockd runs there as the service would: as the airlock user with exactly the unit's
#    capabilities (AmbientCapabilities=, read from the installed unit) and no new
#    privileges, on a socket handed over as airlockd.socket hands it (systemd's
#    systemd-socket-activate): the CLI lists the tools, a WebAssembly tool writes a file and
#    run_command builds one in a workspace, through the process engine's sandbox;
# 4. an upgrade to the next revision keeps the state (token and store unchanged), the
#    operator's edit of airlockd.toml and the workspace; the daemon serves again with them;
# 5. remove keeps the configuration and the state; purge removes both and every file of
#    the package, and leaves the workspaces and the airlock user (postrm says why).
#
#   deploy/debian/test.sh [--dev]     (--dev: package the dev build, as CI does)
#
# Needs debootstrap and systemd's tools (scripts/common.sh's packages) and the WebAssembly
# tools built (scripts/build-wasm.sh). Works in a directory under /tmp, unmounted and
# removed when it exits (AIRLOCK_DEB_TEST_KEEP=1 keeps it, unmounted).
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
    *) die "usage: deploy/debian/test.sh [--dev]" ;;
esac
((EUID == 0)) || die "run as root: it installs packages into a chroot"
ensure_apt_packages debootstrap systemd

step() { printf "\n== %s\n" "$*"; }
fail() { die "FAILED: $*"; }

work="$(mktemp -d /tmp/airlock-deb.XXXXXX)"
root="$work/root"
daemon_pid=""
cleanup() {
    if [[ -n $daemon_pid ]]; then
        kill "$daemon_pid" 2>/dev/null || true
        wait "$daemon_pid" 2>/dev/null || true
    fi
    # The root holds binds of the host's /proc, /sys and /dev: every mount below it goes
    # (lazily, so that a busy one cannot stop the rest) before anything is removed, and the
    # removal never crosses into a mount that is left.
    umount -R -l "$root" 2>/dev/null || true
    if grep -q " $work/" /proc/mounts; then
        echo "${0##*/}: mounts are left under $work; not removing it" >&2
    elif [[ -z ${AIRLOCK_DEB_TEST_KEEP:-} ]]; then
        rm -rf --one-file-system -- "$work"
    fi
}
trap cleanup EXIT

step "the package, twice (revisions 1 and 2)"
deb1="$(deploy/debian/build.sh "${build_flags[@]}" --revision 1 --output "$work/debs")"
deb2="$(deploy/debian/build.sh "${build_flags[@]}" --revision 2 --output "$work/debs")"
dpkg-deb -f "$deb1" Depends Recommends

step "a Debian 12 root (debootstrap --variant=minbase)"
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
# The root is a mount of its own: a sandbox's pivot_root needs the root it leaves to be one.
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" "$@"; }

step "install (revision 1), on a root with systemd's files as a server has them"
cp "$deb1" "$deb2" "$root/tmp/"
in_root apt-get install -y -qq --no-install-recommends systemd procps >"$work/apt0.log" 2>&1 ||
    { tail -20 "$work/apt0.log"; fail "apt-get install systemd"; }
in_root apt-get install -y -qq --no-install-recommends "/tmp/${deb1##*/}" >"$work/apt1.log" 2>&1 ||
    { tail -20 "$work/apt1.log"; fail "apt-get install"; }
in_root getent passwd airlock | grep -q ':/var/lib/airlock:' || fail "no airlock user"
uid="$(in_root id -u airlock)"
((uid < 1000)) || fail "airlock is not a system user (uid $uid)"
[[ "$(in_root stat -c '%a %U' /var/lib/airlock)" == "700 airlock" ]] || fail "/var/lib/airlock"
[[ "$(in_root stat -c '%a %U' /srv/airlock)" == "750 airlock" ]] || fail "/srv/airlock"
[[ -d $root/etc/airlock/tools ]] || fail "/etc/airlock/tools"
grep -qx /etc/airlock/airlockd.toml "$root/var/lib/dpkg/info/airlock.conffiles" ||
    fail "airlockd.toml is not a conffile"
[[ -L $root/etc/systemd/system/sockets.target.wants/airlockd.socket ]] || fail "socket not enabled"
[[ -L $root/etc/systemd/system/multi-user.target.wants/airlockd.service ]] || fail "service not enabled"
in_root dpkg -L airlock | sort >"$work/files"

step "the units in the root: systemd-analyze verify and security"
unit_dir="$root/usr/lib/systemd/system"
systemd-analyze verify --man=no --root="$root" "$unit_dir/airlockd.socket" "$unit_dir/airlockd.service"
score="$(systemd-analyze security --offline=true --root="$root" "$unit_dir/airlockd.service" 2>&1 |
    sed -n 's/^→ Overall exposure level for airlockd.service: \([0-9.]*\).*/\1/p')"
[[ -n $score ]] || fail "systemd-analyze security printed no exposure level"
echo "exposure level: $score"
grep -q "exposure level of \*\*$score\*\*" SECURITY.md ||
    fail "SECURITY.md does not record the service's exposure level $score"

# The capabilities the installed unit grants, as setpriv takes them: +sys_admin,+setuid,…
unit_caps="$(sed -n 's/^AmbientCapabilities=//p' "$root/usr/lib/systemd/system/airlockd.service" |
    tr ' ' '\n' | sed -n 's/^CAP_\(.*\)/+\L\1/p' | paste -sd, -)"
[[ -n $unit_caps ]] || fail "the unit grants no capabilities?"
echo "the unit's capabilities: $unit_caps"

# Runs airlockd in the root as airlockd.service runs it, on a socket made as airlockd.socket
# makes it; waits until the CLI gets an answer. Not through chroot: a chrooted process may
# not make user namespaces. A mount namespace pivoted into the root is a root of its own,
# as the service's is; systemd-socket-activate (systemd's, in the root) binds the socket
# there and execs setpriv, which execs airlockd: one process throughout, as LISTEN_PID says.
start_daemon() {
    local socket="$root/run/airlock/airlockd.sock"
    mkdir -p "$root/run/airlock" "$root/.oldroot"
    rm -f "$socket"
    unshare --mount --propagation private /bin/sh -c \
        'cd "$1" && pivot_root . .oldroot && cd / && umount -l /.oldroot && shift && exec "$@"' \
        sh "$root" \
        systemd-socket-activate --listen=/run/airlock/airlockd.sock \
        setpriv --reuid airlock --regid airlock --init-groups --no-new-privs \
        --inh-caps "$unit_caps" --ambient-caps "$unit_caps" --bounding-set "-all,$unit_caps" \
        /usr/bin/airlockd --config /etc/airlock/airlockd.toml 2>>"$work/airlockd.log" &
    daemon_pid=$!
    for _ in $(seq 300); do [[ -S $socket ]] && break; sleep 0.1; done
    # As airlockd.socket makes it: SocketUser=, SocketGroup=, SocketMode=.
    chown "$uid:$uid" "$socket" && chmod 0660 "$socket"
    for _ in $(seq 600); do
        in_root airlock --server unix:/run/airlock/airlockd.sock tools list >"$work/tools" 2>/dev/null && return 0
        kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/airlockd.log"; fail "airlockd exited"; }
        sleep 0.1
    done
    cat "$work/airlockd.log"
    fail "airlockd did not answer within a minute"
}
stop_daemon() {
    kill -TERM "$daemon_pid"
    wait "$daemon_pid" || { cat "$work/airlockd.log"; fail "airlockd did not stop cleanly"; }
    daemon_pid=""
}
cli() { in_root airlock --server unix:/run/airlock/airlockd.sock "$@"; }

step "airlockd as the service runs it: the airlock user, the unit's capabilities, the socket"
start_daemon
for tool in read_file write_file run_command workspace_grep; do
    grep -q "$tool" "$work/tools" || { cat "$work/tools" "$work/airlockd.log"; fail "$tool is not served"; }
done
in_root install -d -o airlock -g airlock /srv/airlock/demo
cli tools exec write_file --workspace /srv/airlock/demo \
    --args '{"path": "notes.txt", "content": "written by a wasm tool\n"}'
cli tools exec run_command --workspace /srv/airlock/demo \
    --args '{"command": "cat notes.txt > built.txt && echo built >> built.txt", "workdir": "."}'
[[ "$(cat "$root/srv/airlock/demo/built.txt")" == $'written by a wasm tool\nbuilt' ]] ||
    fail "the workspace does not hold what the tools wrote"
[[ "$(in_root stat -c %U /srv/airlock/demo/built.txt)" == airlock ]] || fail "owner of built.txt"
stop_daemon
grep -q "tools that write the workspace will be refused" "$work/airlockd.log" &&
    { cat "$work/airlockd.log"; fail "the overlay was refused"; }

step "upgrade to revision 2: state, configuration and workspace kept"
token="$(sha256sum <"$root/var/lib/airlock/token")"
store="$(sha256sum <"$root/var/lib/airlock/airlock.db")"
echo "# an operator's note" >>"$root/etc/airlock/airlockd.toml"
in_root apt-get install -y -qq --no-install-recommends "/tmp/${deb2##*/}" >"$work/apt2.log" 2>&1 ||
    { tail -20 "$work/apt2.log"; fail "the upgrade"; }
[[ "$(in_root dpkg-query -W -f '${Version}' airlock)" == *-2 ]] || fail "not upgraded"
[[ "$(sha256sum <"$root/var/lib/airlock/token")" == "$token" ]] || fail "the token changed"
[[ "$(sha256sum <"$root/var/lib/airlock/airlock.db")" == "$store" ]] || fail "the store changed"
grep -q "an operator's note" "$root/etc/airlock/airlockd.toml" || fail "the operator's edit was lost"
[[ -f $root/srv/airlock/demo/built.txt ]] || fail "the workspace lost a file"
start_daemon
cli tools exec read_file --workspace /srv/airlock/demo --args '{"path": "built.txt"}' |
    grep -q built || fail "the upgraded daemon cannot read the workspace"
stop_daemon

step "remove: configuration and state stay"
in_root apt-get remove -y -qq airlock >"$work/apt3.log" 2>&1 || { tail -20 "$work/apt3.log"; fail "remove"; }
[[ ! -e $root/usr/bin/airlockd ]] || fail "airlockd left after remove"
[[ -f $root/etc/airlock/airlockd.toml && -f $root/var/lib/airlock/token ]] ||
    fail "remove took the configuration or the state"

step "purge: nothing of the package left; workspaces and the user stay"
in_root apt-get purge -y -qq airlock >"$work/apt4.log" 2>&1 || { tail -20 "$work/apt4.log"; fail "purge"; }
in_root dpkg-query -W -f '${db:Status-Status}' airlock 2>/dev/null | grep -q installed &&
    fail "still installed"
left=()
while read -r path; do
    [[ -e $root$path && ! -d $root$path ]] && left+=("$path")
done <"$work/files"
((${#left[@]} == 0)) || fail "files left after purge: ${left[*]}"
[[ ! -e $root/var/lib/airlock && ! -e $root/etc/airlock ]] || fail "state or configuration left"
[[ -f $root/srv/airlock/demo/built.txt ]] || fail "purge took a workspace"
in_root getent passwd airlock >/dev/null || fail "purge removed the user"
[[ ! -e $root/etc/systemd/system/sockets.target.wants/airlockd.socket ]] || fail "the socket stays enabled"

echo "deploy/debian/test.sh: the package installs, serves, upgrades and purges cleanly"
