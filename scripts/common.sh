# Shared by the scripts in this directory: what a fresh machine needs before anything
# builds. Source it; it defines functions and changes nothing by itself.

# The Rust targets tools are built for.
readonly AIRLOCK_RUST_TARGETS=(wasm32-wasip1 wasm32-wasip2)

# What the build and tests need from Debian: clang-14, wasm-ld, wasi-libc and the wasm
# builtins for the C plugin; python3 (with venv) reads `cargo metadata` and runs the
# Python gRPC client test and the hosted MCP servers of the tests; nodejs (with npm) runs
# the MCP servers from npm.
# python3, nodejs, gcc, make and git are also the toolchains the `toolchains` profile mounts for run_command.
readonly AIRLOCK_APT_PACKAGES=(clang lld wasi-libc libclang-rt-14-dev-wasm32 python3 python3-venv nodejs gcc make git)

die() {
    echo "${0##*/}: $*" >&2
    exit 1
}

# Adds the wasm targets to the toolchain rust-toolchain.toml pins (run inside the repo).
ensure_rust_targets() {
    local installed missing=()
    installed="$(rustup target list --installed)"
    for target in "${AIRLOCK_RUST_TARGETS[@]}"; do
        grep -qx "$target" <<<"$installed" || missing+=("$target")
    done
    if ((${#missing[@]})); then
        echo "${0##*/}: adding Rust targets ${missing[*]}" >&2
        rustup target add "${missing[@]}" >/dev/null
    fi
}

# Installs the Debian packages that are missing (as root, or through sudo).
ensure_apt_packages() {
    local missing=()
    for package in "${AIRLOCK_APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$package")
    done
    ((${#missing[@]})) || return 0
    local sudo=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null || die "missing Debian packages: ${missing[*]}; install them as root"
        sudo=(sudo)
    fi
    echo "${0##*/}: installing ${missing[*]}" >&2
    "${sudo[@]}" apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
}
