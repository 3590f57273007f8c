#!/bin/sh
# Builds wordstats.wasm, a WASI preview 1 command module (the stdio ABI), from
# wordstats.cpp with clang++ 14, libc++ and wasi-libc (C++17, no exceptions). Offline;
# `airlock tools build` runs it in this folder. The toolchain comes from sdk/cpp/install.sh
# (the airlock repository), which links it under
# ${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}/wasi-cpp, or from PATH.
set -eu
cd "$(dirname "$0")"

say() { echo "build.sh: $*"; }
die() {
    echo "build.sh: error: $*" >&2
    exit 1
}
install_hint="install it with: bash sdk/cpp/install.sh (from the airlock repository), or as root: apt-get install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32 libc++-14-dev-wasm32 libc++abi-14-dev-wasm32"

toolchains="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
if [ -x "$toolchains/wasi-cpp/bin/clang++" ]; then
    cxx="$toolchains/wasi-cpp/bin/clang++"
elif command -v clang++-14 >/dev/null 2>&1; then
    cxx="$(command -v clang++-14)"
elif command -v clang++ >/dev/null 2>&1; then
    cxx="$(command -v clang++)"
else
    die "no clang++ found ($toolchains/wasi-cpp/bin/clang++, clang++-14 or clang++ on PATH); $install_hint"
fi
say "compiler: $cxx ($("$cxx" --version | head -n 1))"

# A wasi-sdk style sysroot when one is named or present; Debian's wasi-libc and libc++
# otherwise live in clang's default multiarch paths (/usr/include/wasm32-wasi, ...).
sysroot="${WASI_SYSROOT:-/usr/share/wasi-sysroot}"
if [ -d "$sysroot" ]; then
    set -- "--target=wasm32-wasi" "--sysroot=$sysroot"
else
    set -- "--target=wasm32-wasi"
fi
libc="$("$cxx" "$@" -print-file-name=libc.a)"
[ -f "$libc" ] || die "wasi-libc is missing (clang++ cannot find libc.a for wasm32-wasi); $install_hint"
libcxx="$("$cxx" "$@" -print-file-name=libc++.a)"
[ -f "$libcxx" ] || die "libc++ for wasm32-wasi is missing (no libc++.a); $install_hint"
libcxxabi="$("$cxx" "$@" -print-file-name=libc++abi.a)"
[ -f "$libcxxabi" ] || die "libc++abi for wasm32-wasi is missing (no libc++abi.a); $install_hint"
builtins="$("$cxx" "$@" -print-libgcc-file-name)"
[ -f "$builtins" ] || die "the wasm32 compiler-rt builtins are missing ($builtins); $install_hint"
linker="$("$cxx" "$@" -print-prog-name=wasm-ld)"
[ -x "$linker" ] || command -v "$linker" >/dev/null 2>&1 ||
    die "the WebAssembly linker wasm-ld (lld) is missing; $install_hint"

say "compiling wordstats.cpp -> wordstats.wasm"
rm -f wordstats.wasm.tmp
"$cxx" "$@" -std=c++17 -O2 -fno-exceptions -Wall -Wextra -Wpedantic \
    -Wl,--strip-all wordstats.cpp -o wordstats.wasm.tmp ||
    die "clang++ failed (see above)"
[ "$(od -An -tx1 -N8 wordstats.wasm.tmp | tr -d ' \n')" = "0061736d01000000" ] ||
    die "clang++ did not produce a WebAssembly module"
mv wordstats.wasm.tmp wordstats.wasm
say "built wordstats.wasm ($(wc -c <wordstats.wasm | tr -d ' ') bytes)"
