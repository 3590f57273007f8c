#!/usr/bin/env bash
# Builds the container image `localhost/airlock:<version>` from Debian packages and this
# project's build alone: a Debian 12 root from debootstrap (minbase), the Debian package
# (deploy/debian/build.sh) installed into it with apt, imported into Debian's podman.
#
#   deploy/container/build.sh [--dev] [--tag TAG] [--with 'PACKAGE...']
#
# --dev packages the dev build (as CI does; see deploy/debian/build.sh). --with installs more
# Debian packages into the image: what the operator's process tools run, such as the
# toolchains profile's (python3 nodejs gcc make git), which the image leaves out. The image
# runs airlockd as the airlock user (uid and gid 7411) on 0.0.0.0:7411, its state and
# workspaces in the volumes
# /var/lib/airlock and /srv/airlock; deploy/README.md gives the invocation it needs and why.
# Prints the image's name last.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

# The airlock user's uid and gid in the image.
readonly AIRLOCK_UID=7411

build_flags=()
tag=""
extra_packages=()
while (($#)); do
    case "$1" in
        --dev) build_flags=(--dev) ;;
        --tag) tag="$2"; shift ;;
        --with) read -ra extra_packages <<<"$2"; shift ;;
        *) die "usage: deploy/container/build.sh [--dev] [--tag TAG] [--with 'PACKAGE...']" ;;
    esac
    shift
done
((EUID == 0)) || die "run as root: debootstrap and the import need it"
# shellcheck source=deploy/container/rootfs.sh
source deploy/container/rootfs.sh

work="$(mktemp -d /tmp/airlock-image.XXXXXX)"
trap 'rm -rf --one-file-system -- "$work"' EXIT
deb="$(deploy/debian/build.sh "${build_flags[@]}" --output "$work")"
version="$(dpkg-deb -f "$deb" Version)"
tag="${tag:-localhost/airlock:$version}"

root="$work/root"
make_root "$root"
# The airlock user with fixed ids, made before the package (whose postinst then keeps it):
# an orchestrator's runAsUser, runAsGroup and fsGroup must name numbers
# (deploy/kubernetes/airlockd.yaml).
in_root "$root" groupadd --system --gid "$AIRLOCK_UID" airlock
in_root "$root" useradd --system --uid "$AIRLOCK_UID" --gid airlock --home-dir /var/lib/airlock \
    --no-create-home --shell /usr/sbin/nologin --comment "airlock daemon" airlock
install_into_root "$root" "$deb" "${extra_packages[@]}"
# The four capabilities as the file's permitted set, without its effective bit: a runtime
# that does not make an added capability ambient for a user that is not root (Kubernetes'
# CRI runtimes, Docker) still hands them over at exec when its bounding set holds them, and
# airlockd raises them itself (daemon/src/privileges.rs). Without the effective bit, a
# bounding set that lacks them is no error at exec: the daemon starts and names what it
# lacks. Processes in sandboxes gain nothing from it: they run with no_new_privs and an
# empty bounding set.
setcap cap_sys_admin,cap_setuid,cap_setgid,cap_dac_override=p "$root/usr/bin/airlockd"

import_root "$root" "$tag" \
    "USER $AIRLOCK_UID:$AIRLOCK_UID" \
    'WORKDIR /srv/airlock' \
    'EXPOSE 7411' \
    'VOLUME ["/var/lib/airlock", "/srv/airlock"]' \
    'ENTRYPOINT ["/usr/bin/airlockd", "--config", "/etc/airlock/airlockd.toml", "--listen", "0.0.0.0:7411"]'
echo "$tag"
