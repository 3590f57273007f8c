#!/usr/bin/env bash
# Tests the Debian package and its systemd units on this machine, as root:
#
# 1. in a Debian 12 root made by debootstrap (minbase, with systemd), the package installs
#    with apt: the airlock system user, /var/lib/airlock (0700), /srv/airlock, the
#    conffiles, the units enabled;
# 2. the installed units pass `systemd-analyze verify`, and `systemd-analyze security`
#    scores the service at the exposure SECURITY.md records (a unit change that moves the
#    score must update it);
# 3. that root boots in systemd-nspawn, systemd and all: airlockd.socket starts the daemon
#    with every protection of its unit (its user and capabilities, the system call filter,
#    the file system read-only but for its own), and a check unit drives it through the
#    socket: the tools listed, a WebAssembly tool writes a file, run_command builds one
#    through the process engine's sandbox, `systemctl reload` reloads the tools (the daemon
#    reports reloading and ready) and a command runs after it; the daemon's journal must
#    show nothing refused;
# 4. an upgrade to the next revision keeps the state (token and store unchanged), an edited
#    conffile and the workspace, and the daemon boots with them again;
# 5. remove keeps the configuration and the state; purge removes both and every file of
#    the package, and leaves the workspaces and the airlock user (postrm says why).
#
#   deploy/debian/test.sh [--dev]     (--dev: package the dev build, as CI does)
#
# nspawn's own seccomp filter refuses Landlock, which the host's kernel offers and the
# daemon's sandboxes use: the boot allows it (--system-call-filter). Nothing of the host is
# mounted into the root (nspawn gives it /proc, /sys and /dev in a namespace of its own), so
# removing it cannot reach the host. Needs debootstrap and systemd-container
# (scripts/common.sh's packages) and the WebAssembly tools built (scripts/build-wasm.sh).
# Works in a directory under /tmp, removed when it exits (AIRLOCK_DEB_TEST_KEEP=1 keeps it).
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
((EUID == 0)) || die "run as root: it installs packages into a root of its own and boots it"
ensure_apt_packages debootstrap systemd systemd-container

step() { printf "\n== %s\n" "$*"; }
fail() { die "FAILED: $*"; }

work="$(mktemp -d /tmp/airlock-deb.XXXXXX)"
root="$work/root"
cleanup() {
    if grep -q " $work/" /proc/mounts; then
        echo "${0##*/}: mounts are left under $work; not removing it" >&2
    elif [[ -z ${AIRLOCK_DEB_TEST_KEEP:-} ]]; then
        rm -rf --one-file-system -- "$work"
    fi
}
trap cleanup EXIT

# nspawn, registered with no machine manager (the host runs none) and in the caller's
# cgroup; its note about the propagation directory of a root that is no image is dropped.
nspawn() {
    local status=0
    systemd-nspawn --quiet --directory="$root" --register=no --keep-unit "$@" 2>"$work/nspawn.err" ||
        status=$?
    grep -v 'Attempted to remove disk file system' "$work/nspawn.err" >&2 || true
    return "$status"
}
# A command in the root, its output piped.
in_root() { nspawn --pipe "$@"; }

step "the package, twice (revisions 1 and 2)"
deb1="$(deploy/debian/build.sh "${build_flags[@]}" --revision 1 --output "$work/debs")"
deb2="$(deploy/debian/build.sh "${build_flags[@]}" --revision 2 --output "$work/debs")"
dpkg-deb -f "$deb1" Depends Recommends

step "a Debian 12 root (debootstrap --variant=minbase, with systemd)"
debootstrap --variant=minbase --include=systemd,dbus,procps bookworm "$root" \
    http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
cp /etc/resolv.conf "$root/etc/resolv.conf"

step "install (revision 1)"
# Not /tmp: nspawn gives the root a fresh one.
mkdir -p "$root/var/tmp/debs"
cp "$deb1" "$deb2" "$root/var/tmp/debs/"
in_root apt-get install -y -qq --no-install-recommends "/var/tmp/debs/${deb1##*/}" >"$work/apt1.log" 2>&1 ||
    { tail -20 "$work/apt1.log"; fail "apt-get install"; }
in_root getent passwd airlock | grep -q ':/var/lib/airlock:' || fail "no airlock user"
uid="$(in_root id -u airlock)"
gid="$(in_root id -g airlock)"
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

# The check that runs in the booted root: airlock-check.service, after the socket, runs
# /root/check (the commands each boot gives it), writes what they print and the daemon's
# journal to /root/result, and powers the container off whatever happened.
cat >"$root/etc/systemd/system/airlock-check.service" <<'UNIT'
[Unit]
Description=drives airlockd through its socket, then powers off
Wants=airlockd.socket
After=airlockd.socket multi-user.target
SuccessAction=poweroff
FailureAction=poweroff

[Service]
Type=oneshot
ExecStart=/bin/bash -c '/root/check >/root/result 2>&1; echo "check: $?" >>/root/result; journalctl --no-pager -o cat -u airlockd >/root/journal'
UNIT
ln -sf /etc/systemd/system/airlock-check.service \
    "$root/etc/systemd/system/multi-user.target.wants/airlock-check.service"
install -d -o "$uid" -g "$gid" "$root/srv/airlock/demo"

# Boots the root with `check` (a bash script) as /root/check; fails unless it exits 0 and
# the daemon's journal shows nothing refused.
boot_with() {
    printf '#!/bin/bash\nset -euo pipefail\nairlock() { command airlock --server unix:/run/airlock/airlockd.sock "$@"; }\n%s\n' \
        "$1" >"$root/root/check"
    chmod 755 "$root/root/check"
    rm -f "$root/root/result" "$root/root/journal"
    timeout 300 systemd-nspawn --quiet --directory="$root" --register=no --keep-unit --boot \
        --system-call-filter="landlock_create_ruleset landlock_add_rule landlock_restrict_self" \
        >"$work/boot.log" 2>&1 || { tail -30 "$work/boot.log"; fail "the boot"; }
    cat "$root/root/result" 2>/dev/null || { tail -30 "$work/boot.log"; fail "the check did not run"; }
    grep -qx "check: 0" "$root/root/result" || { cat "$root/root/journal"; fail "the check failed"; }
    if grep -E "will be refused|unavailable|tool refused" "$root/root/journal" | grep -v py_outline; then
        fail "the daemon refused something under its unit"
    fi
}

step "boot: airlockd started by its socket under every protection of its unit"
boot_with '
airlock tools list
airlock tools exec write_file --workspace /srv/airlock/demo \
    --args "{\"path\": \"notes.txt\", \"content\": \"written by a wasm tool\\n\"}"
airlock tools exec run_command --workspace /srv/airlock/demo \
    --args "{\"command\": \"cat notes.txt > built.txt && echo built >> built.txt\", \"workdir\": \".\"}"
systemctl show airlockd --property=ActiveState --property=SubState --property=User
systemctl reload airlockd
# systemd 252 returns once the signal is sent (Type=notify-reload, which waits, came in 253).
for _ in $(seq 600); do
    [[ "$(journalctl --no-pager -o cat -u airlockd)" == *"tools reloaded"* ]] && break
    sleep 0.1
done
airlock tools exec run_command --workspace /srv/airlock/demo \
    --args "{\"command\": \"id -un > who.txt\", \"workdir\": \".\"}"'
[[ "$(cat "$root/srv/airlock/demo/built.txt")" == $'written by a wasm tool\nbuilt' ]] ||
    fail "the workspace does not hold what the tools wrote"
[[ "$(cat "$root/srv/airlock/demo/who.txt")" == airlock ]] ||
    fail "the sandbox did not run as the workspace's owner"
grep -q "ActiveState=active" "$root/root/result" || fail "the service was not active"
grep -q "tools reloaded" "$root/root/journal" || fail "the reload did not reload"
# The journal names the socket handed over and the capabilities' result.
grep -q "socket=unix:/run/airlock/airlockd.sock" "$root/root/journal" || fail "not socket-activated"

step "upgrade to revision 2: state, configuration and workspace kept"
token="$(sha256sum <"$root/var/lib/airlock/token")"
store="$(sha256sum <"$root/var/lib/airlock/airlock.db")"
echo "# an operator's note" >>"$root/etc/airlock/airlockd.toml"
in_root apt-get install -y -qq --no-install-recommends "/var/tmp/debs/${deb2##*/}" >"$work/apt2.log" 2>&1 ||
    { tail -20 "$work/apt2.log"; fail "the upgrade"; }
[[ "$(in_root dpkg-query -W -f '${Version}' airlock)" == *-2 ]] || fail "not upgraded"
[[ "$(sha256sum <"$root/var/lib/airlock/token")" == "$token" ]] || fail "the token changed"
[[ "$(sha256sum <"$root/var/lib/airlock/airlock.db")" == "$store" ]] || fail "the store changed"
grep -q "an operator's note" "$root/etc/airlock/airlockd.toml" || fail "the operator's edit was lost"
boot_with '
airlock tools exec read_file --workspace /srv/airlock/demo --args "{\"path\": \"built.txt\"}" | grep built'

step "remove: configuration and state stay"
in_root apt-get remove -y -qq airlock >"$work/apt3.log" 2>&1 || { tail -20 "$work/apt3.log"; fail "remove"; }
[[ ! -e $root/usr/bin/airlockd ]] || fail "airlockd left after remove"
[[ -f $root/etc/airlock/airlockd.toml && -f $root/var/lib/airlock/token ]] ||
    fail "remove took the configuration or the state"

step "purge: nothing of the package left; workspaces and the user stay"
in_root apt-get purge -y -qq airlock >"$work/apt4.log" 2>&1 || { tail -20 "$work/apt4.log"; fail "purge"; }
in_root dpkg-query -W -f '${db:Status-Status}' airlock 2>/dev/null | grep -qx installed &&
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

echo "deploy/debian/test.sh: the package installs, boots, serves, upgrades and purges cleanly"
