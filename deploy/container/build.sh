#!/usr/bin/env bash
# Builds the container image `localhost/airlock:<version>` from Debian packages and this
# project's build alone: a Debian 12 root from debootstrap (minbase), the Debian package
# (deploy/debian/build.sh) installed into it with apt, imported into Debian's podman.
#
#   deploy/container/build.sh [--dev] [--tag TAG]
#
# --dev packages the dev build (as CI does; see deploy/debian/build.sh). The image runs
# airlockd as the airlock user on 0.0.0.0:7411, its state and workspaces in the volumes
# /var/lib/airlock and /srv/airlock; deploy/README.md gives the invocation it needs and why.
# Prints the image's name last.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

build_flags=()
tag=""
while (($#)); do
    case "$1" in
        --dev) build_flags=(--dev) ;;
        --tag) tag="$2"; shift ;;
        *) die "usage: deploy/container/build.sh [--dev] [--tag TAG]" ;;
    esac
    shift
done
((EUID == 0)) || die "run as root: debootstrap and the import need it"
ensure_apt_packages debootstrap systemd-container podman runc

work="$(mktemp -d /tmp/airlock-image.XXXXXX)"
trap 'rm -rf --one-file-system -- "$work"' EXIT
deb="$(deploy/debian/build.sh "${build_flags[@]}" --output "$work")"
version="$(dpkg-deb -f "$deb" Version)"
tag="${tag:-localhost/airlock:$version}"

echo "${0##*/}: a Debian 12 root (debootstrap --variant=minbase)" >&2
root="$work/root"
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/var/tmp/debs"
cp "$deb" "$root/var/tmp/debs/"
echo "${0##*/}: installing ${deb##*/} into it" >&2
# In a namespace of nspawn's own: nothing of the host is mounted into the root.
systemd-nspawn --quiet --directory="$root" --register=no --keep-unit --pipe \
    apt-get install -y -qq --no-install-recommends "/var/tmp/debs/${deb##*/}" >"$work/apt.log" 2>&1 ||
    { tail -20 "$work/apt.log" >&2; die "installing the package failed"; }
# What an image does not need: the package files, apt's lists and caches, the host's resolver.
rm -rf "$root/var/tmp/debs" "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
    "$root"/var/cache/apt/archives/*.deb "$root/etc/resolv.conf"
: >"$root/etc/resolv.conf"

echo "${0##*/}: importing it as $tag" >&2
tar -C "$root" -c . | podman import --quiet \
    --change 'USER airlock' \
    --change 'WORKDIR /srv/airlock' \
    --change 'EXPOSE 7411' \
    --change 'VOLUME ["/var/lib/airlock", "/srv/airlock"]' \
    --change 'ENTRYPOINT ["/usr/bin/airlockd", "--config", "/etc/airlock/airlockd.toml", "--listen", "0.0.0.0:7411"]' \
    - "$tag" >/dev/null
echo "$tag"
