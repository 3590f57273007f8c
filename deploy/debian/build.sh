#!/usr/bin/env bash
# Builds the Debian package `airlock` with cargo-deb (the metadata is in daemon/Cargo.toml):
# airlockd and airlock, the shipped tools and profiles, /etc/airlock/airlockd.toml and the
# systemd units of this directory.
#
#   deploy/debian/build.sh [--dev] [--revision N] [--output DIR]
#   deploy/debian/build.sh --install-only
#
# By default it builds both binaries in release mode, as an operator's package is. --dev
# packages the dev build scripts/test.sh has already made instead (deploy/debian/test.sh
# does, in CI: what it tests is the package's contents and maintainer scripts, not the
# binaries' speed, and a release build costs CI minutes; cargo-deb warns that it is meant for
# releases; it is compressed fast, too). --install-only installs cargo-deb and stops.
# --revision sets the Debian revision (1 unless given): test.sh upgrades from one
# revision to the next. The package is written to DIR (target/debian unless given), and its
# path printed last.
#
# cargo-deb is installed once per machine, at the version pinned below, under
# ~/.cache/airlock/cargo-deb (a minute's build).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

# The cargo-deb release whose options and metadata keys daemon/Cargo.toml uses.
readonly CARGO_DEB_VERSION=3.8.0

profile=release
revision=1
install_only=0
output="$(target_dir)/debian"
while (($#)); do
    case "$1" in
        --dev) profile=dev ;;
        --install-only) install_only=1 ;;
        --revision) revision="$2"; shift ;;
        --output) output="$2"; shift ;;
        *) die "usage: deploy/debian/build.sh [--dev] [--revision N] [--output DIR] | --install-only" ;;
    esac
    shift
done

# dpkg-shlibdeps (dpkg-dev) fills in `$auto`: the libraries the binaries link.
ensure_apt_packages dpkg-dev binutils
tools="${XDG_CACHE_HOME:-$HOME/.cache}/airlock/cargo-deb"
if ! "$tools/bin/cargo-deb" --version 2>/dev/null | grep -qx "cargo-deb $CARGO_DEB_VERSION"; then
    echo "${0##*/}: installing cargo-deb $CARGO_DEB_VERSION into $tools (once per machine)" >&2
    cargo install --quiet --locked --root "$tools" cargo-deb --version "$CARGO_DEB_VERSION"
fi
((install_only)) && exit 0

if [[ $profile == release ]]; then
    echo "${0##*/}: building airlockd and airlock (release)" >&2
    cargo build --release -p airlock-daemon -p airlock-cli --bins
fi
for wasm in plugins/*/Cargo.toml; do
    module="$(dirname "$wasm")/$(basename "$(dirname "$wasm")").wasm"
    [[ -f $module ]] || die "$module is missing: run scripts/build-wasm.sh first"
done
mkdir -p "$output"
echo "${0##*/}: packaging ($profile build, revision $revision)" >&2
# A dev build is packaged for tests alone: compressed fast rather than small.
fast=()
[[ $profile == dev ]] && fast=(--fast)
"$tools/bin/cargo-deb" -p airlock-daemon --no-build --profile "$profile" "${fast[@]}" \
    --deb-revision "$revision" --output "$output" --quiet >/dev/null
ls -t "$output"/airlock_*-"$revision"_*.deb | head -1
