#!/usr/bin/env bash
# Builds a PostgreSQL image for deploy/kubernetes/test.sh the way deploy/container/build.sh
# builds airlock's: a Debian 12 root from debootstrap with Debian's postgresql-15 installed
# by apt, imported into Debian's podman. It is the fleet's external database in the test,
# not something to run in production.
#
#   deploy/kubernetes/postgres-image.sh --tag TAG
#
# The container runs postgres as the postgres user with its data in the volume
# /var/lib/postgresql/data; at its first start it makes the cluster with the superuser
# `airlock`, whose password is POSTGRES_PASSWORD, reachable with it over TCP.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

tag=""
while (($#)); do
    case "$1" in
        --tag) tag="$2"; shift ;;
        *) die "usage: deploy/kubernetes/postgres-image.sh --tag TAG" ;;
    esac
    shift
done
[[ -n $tag ]] || die "usage: deploy/kubernetes/postgres-image.sh --tag TAG"
((EUID == 0)) || die "run as root: debootstrap and the import need it"
# shellcheck source=deploy/container/rootfs.sh
source deploy/container/rootfs.sh

work="$(mktemp -d /tmp/airlock-postgres-image.XXXXXX)"
trap 'rm -rf --one-file-system -- "$work"' EXIT
root="$work/root"
make_root "$root"
# The package's own cluster is not made: the container makes its cluster at first start,
# in its volume.
mkdir -p "$root/etc/postgresql-common/createcluster.d"
echo "create_main_cluster = false" >"$root/etc/postgresql-common/createcluster.d/no-main.conf"
install_into_root "$root" postgresql-15
install -d -m 0700 "$root/var/lib/postgresql/data"
in_root "$root" chown postgres:postgres /var/lib/postgresql/data
cat >"$root/usr/local/bin/postgres-entrypoint" <<'SCRIPT'
#!/bin/sh
# Makes the cluster on first start (superuser airlock, password POSTGRES_PASSWORD), then
# runs the server in the foreground, listening on every address.
set -eu
data=/var/lib/postgresql/data
bin=/usr/lib/postgresql/15/bin
if [ ! -s "$data/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
    printf '%s\n' "$POSTGRES_PASSWORD" >/tmp/password
    "$bin/initdb" --pgdata="$data" --username=airlock --pwfile=/tmp/password \
        --auth-local=peer --auth-host=scram-sha-256 >/dev/null
    rm -f /tmp/password
    echo "host all all 0.0.0.0/0 scram-sha-256" >>"$data/pg_hba.conf"
fi
exec "$bin/postgres" -D "$data" -c listen_addresses='*' -c unix_socket_directories=/tmp
SCRIPT
chmod 0755 "$root/usr/local/bin/postgres-entrypoint"

import_root "$root" "$tag" \
    'USER postgres' \
    'EXPOSE 5432' \
    'VOLUME ["/var/lib/postgresql/data"]' \
    'ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]'
echo "$tag"
