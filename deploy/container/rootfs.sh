# Sourced by the image builds (deploy/container/build.sh, deploy/kubernetes/postgres-image.sh):
# a Debian 12 root from debootstrap with Debian packages installed by apt, imported into
# Debian's podman. Nothing else goes into an image, and nothing of the host is mounted into
# the root while it is built: apt runs in a namespace of systemd-nspawn's own.
#
# The caller has sourced scripts/common.sh and runs as root.

# Makes a Debian 12 minbase root in ROOT (its log in ROOT.log).
#
# With AIRLOCK_ROOTFS_CACHE set (the tests set it; a build for use does not, so that its
# packages are the archive's newest), the root debootstrap made is kept there for the day
# as a tarball, and unpacked instead of made again by the images that follow: its package
# lists are a day old at most, which apt's installs into it rely on.
make_root() {
    local root=$1 cache=${AIRLOCK_ROOTFS_CACHE:-} tarball
    ensure_apt_packages debootstrap systemd-container podman runc
    tarball="${cache:+$cache/bookworm-minbase-$(date -u +%Y%m%d).tar}"
    if [[ -n $cache && -f $tarball ]]; then
        echo "${0##*/}: a Debian 12 root (debootstrap --variant=minbase, kept in $cache)" >&2
        mkdir -p "$root"
        tar -C "$root" --xattrs --numeric-owner -xpf "$tarball"
    else
        echo "${0##*/}: a Debian 12 root (debootstrap --variant=minbase)" >&2
        debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$root.log" 2>&1 ||
            { tail -20 "$root.log" >&2; die "debootstrap failed"; }
        if [[ -n $cache ]]; then
            mkdir -p "$cache"
            rm -f "$cache"/bookworm-minbase-*.tar
            tar -C "$root" --xattrs --numeric-owner -cf "$tarball.part" .
            mv "$tarball.part" "$tarball"
        fi
    fi
    cp /etc/resolv.conf "$root/etc/resolv.conf"
}

# Runs a command in ROOT, in a namespace of nspawn's own (its output in ROOT.log).
in_root() {
    local root=$1
    shift
    systemd-nspawn --quiet --directory="$root" --register=no --keep-unit --pipe "$@" \
        >>"$root.log" 2>&1 ||
        { tail -20 "$root.log" >&2; die "in the image's root, failed: $*"; }
}

# Installs Debian packages into ROOT with apt: names, or paths of .deb files outside the root
# (copied in for the install, then removed).
install_into_root() {
    local root=$1 packages=() package
    shift
    mkdir -p "$root/var/tmp/debs"
    for package in "$@"; do
        if [[ $package == *.deb ]]; then
            cp "$package" "$root/var/tmp/debs/"
            packages+=("/var/tmp/debs/${package##*/}")
        else
            packages+=("$package")
        fi
    done
    echo "${0##*/}: installing ${*##*/} into it" >&2
    in_root "$root" apt-get install -y -qq --no-install-recommends "${packages[@]}"
    rm -rf "$root/var/tmp/debs"
}

# Imports ROOT into podman as TAG, with the given `--change` instructions (each an argument:
# `'USER airlock'`, ...) after a PATH (which `podman kube play`, unlike `podman run`, does
# not supply). What an image does not need goes first: apt's lists and caches, the host's
# resolver. Extended attributes go with the files (an executable's capabilities).
import_root() {
    local root=$1 tag=$2 changes=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin') change
    shift 2
    for change in "$@"; do changes+=(--change "$change"); done
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
    : >"$root/etc/resolv.conf"
    echo "${0##*/}: importing it as $tag" >&2
    tar -C "$root" --xattrs --xattrs-include='security.capability' -c . |
        podman import --quiet "${changes[@]}" - "$tag" >/dev/null
}
