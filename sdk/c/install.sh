#!/usr/bin/env bash
# Installs the C toolchain of airlock tools: Debian's clang 14, wasm-ld (lld 14),
# wasi-libc and the wasm32 compiler-rt builtins, from apt, at pinned versions (Debian 12
# "bookworm"). Then links clang into
#
#     ${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}/wasi-c/bin/clang
#
# where the template's build.sh looks first, and checks it by building a small program.
# Idempotent: when the stamp matches and the packages are there, it only says so.
# apt-get runs only for missing packages, as root or through sudo.
#
# Usage: bash sdk/c/install.sh
set -euo pipefail

# Debian 12's versions; apt-get is asked for exactly these.
readonly LLVM_VERSION=1:14.0.6-12
readonly WASI_LIBC_VERSION=0.0~git20220510.9886d3d-2
readonly PACKAGES=(
    "clang-14=$LLVM_VERSION"
    "lld-14=$LLVM_VERSION"
    "libclang-rt-14-dev-wasm32=$LLVM_VERSION"
    "wasi-libc=$WASI_LIBC_VERSION"
)
readonly CLANG=/usr/lib/llvm-14/bin/clang
readonly STAMP_TEXT="clang $LLVM_VERSION, wasi-libc $WASI_LIBC_VERSION"

toolchains="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
dest="$toolchains/wasi-c"

say() { echo "install.sh: $*"; }
die() {
    echo "install.sh: error: $*" >&2
    exit 1
}

# Packages (name=version) not installed at all. An installed package of another
# version (a Debian point release) is kept: its version is reported, not replaced.
missing_packages() {
    local spec name
    for spec in "${PACKAGES[@]}"; do
        name="${spec%%=*}"
        dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q 'install ok installed' ||
            echo "$spec"
    done
}

command -v dpkg-query >/dev/null || die "this installs Debian packages with apt; on another system install clang, lld, wasi-libc and the wasm32 compiler-rt builtins (LLVM 14 or later) and put clang on PATH"

mapfile -t missing < <(missing_packages)
if ((${#missing[@]} == 0)) && [[ -x $dest/bin/clang && "$(cat "$dest/stamp" 2>/dev/null)" == "$STAMP_TEXT" ]]; then
    say "clang $("$CLANG" --version | sed -n 's/.*clang version \([^ ]*\).*/\1/p;q') + wasi-libc $WASI_LIBC_VERSION already installed ($dest)"
    exit 0
fi

if ((${#missing[@]})); then
    sudo=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null || die "missing Debian packages: ${missing[*]}; install them as root: apt-get install ${missing[*]}"
        sudo=(sudo)
    fi
    say "apt-get update"
    "${sudo[@]}" apt-get update -qq
    say "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" || die "apt-get could not install ${missing[*]} (these versions are Debian 12's)"
fi
[[ -x $CLANG ]] || die "$CLANG is missing after the install"

say "checking the toolchain with a test build"
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf '#include <stdio.h>\nint main(void) { puts("ok"); return 0; }\n' >"$probe/probe.c"
"$CLANG" --target=wasm32-wasi -O2 "$probe/probe.c" -o "$probe/probe.wasm" ||
    die "clang could not build a wasm32-wasi program"

mkdir -p "$dest/bin"
ln -sfn "$CLANG" "$dest/bin/clang"
printf '%s\n' "$STAMP_TEXT" >"$dest/stamp"
say "installed: $("$CLANG" --version | head -n 1), wasi-libc $WASI_LIBC_VERSION; clang linked at $dest/bin/clang"
