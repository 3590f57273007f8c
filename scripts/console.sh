#!/usr/bin/env bash
# The web console (console/): its build from the npm registry, and the browser its tests
# drive.
#
#   scripts/console.sh --install-only   Debian's chromium and chromium-driver, and console/'s
#                                       pinned npm packages (npm ci; skipped when current)
#   scripts/console.sh --check          rebuilds console/dist from console/src and fails when
#                                       the result differs from the committed files: the
#                                       console built into airlockd is reproducible from the
#                                       registries, and nobody forgot to rebuild it
#   scripts/console.sh                  installs, then rebuilds console/dist (after editing
#                                       console/src; airlockd embeds it when next built)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

mode=build
case ${1:-} in
--install-only) mode=install ;;
--check) mode=check ;;
"") ;;
*) die "usage: scripts/console.sh [--install-only | --check]" ;;
esac

install() {
    echo "console: Debian's chromium and chromium-driver" >&2
    ensure_apt_packages "${AIRLOCK_BROWSER_PACKAGES[@]}"
    console/build.sh --install-only
}

case $mode in
install) install ;;
build)
    install
    console/build.sh
    ;;
check)
    console/build.sh
    if ! git diff --quiet --exit-code -- console/dist || [[ -n $(git ls-files --others --exclude-standard console/dist) ]]; then
        git status --short -- console/dist >&2
        die "console/dist is not what console/src builds: run scripts/console.sh and commit console/dist"
    fi
    echo "console: console/dist is what console/src builds" >&2
    ;;
esac
