#!/usr/bin/env bash
# Installs the C++ toolchain of airlock tools: Debian's clang 14, wasm-ld (lld 14),
# wasi-libc, libc++ and libc++abi for wasm32-wasi and the wasm32 compiler-rt builtins,
# from apt, at pinned versions (Debian 12 "bookworm"). Then links clang++ into
#
#     ${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}/wasi-cpp/bin/clang++
#
# where the template's build.sh looks first, and checks it by building a small program.
# Idempotent: when the stamp matches and the packages are there, it only says so.
# apt-get runs only for missing packages, as root or through sudo.
#
# Usage: bash sdk/cpp/install.sh
set -euo pipefail
# shellcheck source=sdk/toolchains.sh
source "$(dirname "${BASH_SOURCE[0]}")/../toolchains.sh"

readonly PACKAGES=(
    "${WASI_C_PACKAGES[@]}"
    "libc++-14-dev-wasm32=$LLVM_VERSION"
    "libc++abi-14-dev-wasm32=$LLVM_VERSION"
)
readonly CLANG=/usr/lib/llvm-14/bin/clang++
readonly STAMP_TEXT="clang++ $LLVM_VERSION, libc++ $LLVM_VERSION, wasi-libc $WASI_LIBC_VERSION"
readonly DEST="$TOOLCHAINS/wasi-cpp"

command -v dpkg-query >/dev/null || die "this installs Debian packages with apt; on another system install clang, lld, wasi-libc, libc++/libc++abi for wasm32-wasi and the wasm32 compiler-rt builtins (LLVM 14 or later) and put clang++ on PATH"

if [[ -z "$(missing_debian_packages "${PACKAGES[@]}")" && -x $DEST/bin/clang++ ]] &&
    stamp_matches "$DEST/stamp" "$STAMP_TEXT"; then
    already_installed "clang++ $("$CLANG" --version | sed -n 's/.*clang version \([^ ]*\).*/\1/p;q') + libc++ + wasi-libc $WASI_LIBC_VERSION" "$DEST"
fi

ensure_debian_packages "${PACKAGES[@]}"
[[ -x $CLANG ]] || die "$CLANG is missing after the install"
check_build probe.cpp '#include <string>
#include <vector>
int main() { std::vector<std::string> v{"ok"}; return v.size() == 1 ? 0 : 1; }' \
    "$CLANG" --target=wasm32-wasi -std=c++17 -O2 -fno-exceptions

mkdir -p "$DEST/bin"
ln -sfn "$CLANG" "$DEST/bin/clang++" # the name makes the driver C++
write_stamp "$DEST/stamp" "$STAMP_TEXT"
say "installed: $("$CLANG" --version | head -n 1), libc++ and wasi-libc $WASI_LIBC_VERSION; clang++ linked at $DEST/bin/clang++"
