#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: Debian's binaries, a fresh cluster in a
# directory of ours, listening on loopback only, run by an unprivileged user.
#
#   scripts/postgres.sh --install-only    Debian's postgresql, without the host-wide "main"
#                                         cluster the package would otherwise create and start
#   scripts/postgres.sh start DIR PORT    a fresh cluster in DIR (any earlier one there is
#                                         stopped and removed), serving 127.0.0.1:PORT; prints
#                                         its URL, postgres://airlock@127.0.0.1:PORT/postgres
#   scripts/postgres.sh stop DIR          stops the server in DIR, if one runs
#
# Everything but the URL goes to stderr, so `url="$(scripts/postgres.sh start ...)"` works.
# initdb and pg_ctl refuse to run as root: as root, the server runs as the `postgres`
# system user the package creates, and DIR must be reachable by it.
set -euo pipefail

# DIR is relative to where we were called from, not to the repo.
readonly caller_dir=$PWD
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

readonly usage="usage: scripts/postgres.sh --install-only | start DIR PORT | stop DIR"
# The unprivileged user the server runs as when we are root (postgresql-common creates it).
readonly system_user=postgres

say() { echo "${0##*/}: $*" >&2; }

absolute() { (cd "$caller_dir" && realpath -m -- "$1"); }

install() {
    if dpkg-query -W -f='${Status}' postgresql 2>/dev/null | grep -q 'install ok installed'; then
        return 0
    fi
    if ((EUID == 0)); then
        # On a first install, postgresql-NN's postinst creates a "main" cluster in
        # /var/lib/postgresql and starts it, for the whole host, on port 5432. We want no such
        # server: the tests start their own. The postinst asks
        # `pg_conftool /etc/postgresql-common/createcluster.conf show create_main_cluster`, and
        # that file (which postgresql-common writes from its template) ends with
        # `include_dir '/etc/postgresql-common/createcluster.d'`, whose files pg_conftool reads
        # too; so a file there, written before the package, turns the main cluster off.
        mkdir -p /etc/postgresql-common/createcluster.d
        cat >/etc/postgresql-common/createcluster.d/airlock.conf <<'EOF'
# Written by airlock's scripts/postgres.sh before installing postgresql: the tests start
# their own throwaway servers, so no host-wide "main" cluster is created.
create_main_cluster = false
EOF
    else
        say "not root: installing postgresql through sudo, Debian creates and starts its host-wide main cluster"
    fi
    ensure_apt_packages postgresql
}

# The directory of the newest PostgreSQL's binaries Debian installed (/usr/lib/postgresql/NN/bin).
newest_bin_dir() {
    local version
    version="$(find /usr/lib/postgresql -mindepth 3 -maxdepth 3 -path '*/bin/initdb' 2>/dev/null |
        awk -F/ '{ print $5 }' | sort -n | tail -n 1)"
    [[ -n $version ]] || die "no PostgreSQL server in /usr/lib/postgresql: run scripts/postgres.sh --install-only"
    echo "/usr/lib/postgresql/$version/bin"
}

# Runs a command as USER (the owner of the cluster), from /: as root through runuser (initdb
# and pg_ctl refuse root), otherwise as ourselves. From / because the user may not be able
# to enter our working directory.
as_user() {
    local user=$1
    shift
    if ((EUID == 0)); then
        (cd / && runuser -u "$user" -- "$@")
    else
        (cd / && "$@")
    fi
}

stop() {
    local dir=$1 bin user
    [[ -f $dir/PG_VERSION && -f $dir/postmaster.pid ]] || return 0
    # The binaries of the version that made the cluster, if still installed.
    bin="/usr/lib/postgresql/$(cat "$dir/PG_VERSION")/bin"
    [[ -x $bin/pg_ctl ]] || bin="$(newest_bin_dir)"
    user="$(stat -c %U "$dir")"
    # `status` fails when the pid file is stale (the server died): nothing to stop.
    as_user "$user" "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1 || return 0
    say "stopping the PostgreSQL server in $dir"
    as_user "$user" "$bin/pg_ctl" -D "$dir" -m fast -w stop >&2
}

# Fails with the first directory from / down to DIR that USER cannot enter.
check_reachable() {
    local user=$1 dir=$2 path=""
    local IFS=/
    for part in $dir; do
        [[ -n $part ]] || continue
        path+="/$part"
        runuser -u "$user" -- test -x "$path" ||
            die "the $user user (who runs the server, initdb refusing root) cannot enter $path ($(stat -c '%A %U:%G' "$path")): put the cluster elsewhere, or let others enter it (chmod o+x $path)"
    done
}

start() {
    local dir=$1 port=$2 bin user url
    [[ $port =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) || die "not a port: $port"
    dir="$(absolute "$dir")"
    # The server's unix socket is DIR/.s.PGSQL.PORT, and a socket's path has at most 107 bytes.
    ((${#dir} + ${#port} + 10 <= 107)) || die "$dir is too long a path for the server's unix socket (107 bytes at most)"
    bin="$(newest_bin_dir)"

    if [[ -e $dir ]]; then
        # Only what this script made (or an empty directory) is removed: DIR is rm -rf'd.
        [[ -f $dir/PG_VERSION || -z $(ls -A "$dir") ]] ||
            die "$dir exists and is not a PostgreSQL cluster: not removing it"
        stop "$dir"
        rm -rf -- "$dir"
    fi
    mkdir -p -- "$dir"
    user="$(id -un)"
    if ((EUID == 0)); then
        user=$system_user
        getent passwd "$user" >/dev/null || die "no $user user: run scripts/postgres.sh --install-only"
        chown "$user:" "$dir"
        check_reachable "$user" "$dir"
    fi

    say "initdb: a fresh cluster in $dir ($bin, as $user)"
    # The bootstrap superuser is `airlock`: the tests create a database each, so it needs
    # at least CREATEDB. UTF8 with the C locale: the same on every machine, whatever
    # locales it has installed.
    as_user "$user" "$bin/initdb" -D "$dir" -U airlock --auth=trust --encoding=UTF8 --locale=C >/dev/null

    # Tests only: trust means no password, for anyone on this machine who can reach the
    # socket (in DIR, mode 0700) or the loopback port. Nothing else may connect.
    cat >"$dir/pg_hba.conf" <<'EOF'
# scripts/postgres.sh: a throwaway server for the tests, no passwords (trust) on loopback.
local all all trust
host all all 127.0.0.1/32 trust
EOF
    # Later settings win over initdb's defaults above them.
    cat >>"$dir/postgresql.conf" <<EOF

# scripts/postgres.sh: a throwaway server for the tests.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
# A fleet test runs three daemons, each with its pool, besides the per-test databases.
max_connections = 300
# Tests only: durability is pointless for a server thrown away after the run, and these
# make creating a database per test, and every commit, much faster.
fsync = off
full_page_writes = off
# The log goes to stderr, which pg_ctl -l sends to DIR/server.log.
log_destination = 'stderr'
logging_collector = off
EOF

    say "starting PostgreSQL on 127.0.0.1:$port (log: $dir/server.log)"
    if ! as_user "$user" "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >&2; then
        tail -n 30 "$dir/server.log" >&2 || true
        die "PostgreSQL did not start in $dir"
    fi
    for _ in $(seq 300); do
        "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres -U airlock && break
        sleep 0.1
    done
    "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres -U airlock ||
        die "PostgreSQL in $dir does not accept connections on 127.0.0.1:$port (log: $dir/server.log)"

    url="postgres://airlock@127.0.0.1:$port/postgres"
    say "PostgreSQL is ready: $url"
    echo "$url"
}

case ${1:-} in
--install-only)
    (($# == 1)) || die "$usage"
    install
    ;;
start)
    (($# == 3)) || die "$usage"
    start "$2" "$3"
    ;;
stop)
    (($# == 2)) || die "$usage"
    stop "$(absolute "$2")"
    ;;
*) die "$usage" ;;
esac
