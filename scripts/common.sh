# Shared by the scripts in this directory: what a fresh machine needs before anything
# builds. Source it; it defines functions and changes nothing by itself.

# The Rust targets tools are built for.
readonly AIRLOCK_RUST_TARGETS=(wasm32-wasip1 wasm32-wasip2)

# What the build and tests need from Debian: clang-14, wasm-ld, wasi-libc and the wasm
# builtins for the C plugin; python3 (with venv) reads `cargo metadata` and runs the
# Python gRPC client test and the hosted MCP servers of the tests; nodejs (with npm) runs
# the MCP servers from npm; libseccomp-dev is what the process engine compiles its seccomp
# filter with (its library, libseccomp2, is part of every Debian system).
# python3, nodejs, gcc, make and git are also the toolchains the `toolchains` profile mounts for run_command.
readonly AIRLOCK_APT_PACKAGES=(clang lld wasi-libc libclang-rt-14-dev-wasm32 libseccomp-dev python3 python3-venv nodejs gcc make git)

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

# The browser the web console's tests run in (scripts/console.sh installs it).
readonly AIRLOCK_BROWSER_PACKAGES=(chromium chromium-driver)

# Installs the Debian packages that are missing (as root, or through sudo): those named, or
# AIRLOCK_APT_PACKAGES.
ensure_apt_packages() {
    local missing=() wanted=("$@")
    ((${#wanted[@]})) || wanted=("${AIRLOCK_APT_PACKAGES[@]}")
    for package in "${wanted[@]}"; do
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

# The directory cargo builds into (inside the repo, or CARGO_TARGET_DIR).
target_dir() {
    cargo metadata --no-deps --format-version 1 |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

# Starts the built airlockd on a free loopback port with its state in WORK/state and
# WORK/root as its workspace root, and waits until it answers. Sets `server` (its URL) and
# `daemon_pid`, and exports AIRLOCK_TOKEN (the token the daemon made on its first start).
# The caller stops the daemon (kill "$daemon_pid").
start_airlockd() {
    local work=$1 airlockd airlock port
    airlockd="$(target_dir)/debug/airlockd"
    airlock="$(target_dir)/debug/airlock"
    mkdir -p "$work/root"
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    server="http://127.0.0.1:$port"
    echo "${0##*/}: starting airlockd on $server (log: $work/airlockd.log)" >&2
    "$airlockd" --listen "127.0.0.1:$port" --state-dir "$work/state" --workspace-root "$work/root" \
        2>"$work/airlockd.log" &
    daemon_pid=$!
    for _ in $(seq 600); do
        [[ -s $work/state/token ]] && break
        kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/airlockd.log" >&2; die "airlockd exited"; }
        sleep 0.1
    done
    AIRLOCK_TOKEN="$(cat "$work/state/token")"
    export AIRLOCK_TOKEN
    for _ in $(seq 600); do
        "$airlock" --server "$server" tools list >/dev/null 2>&1 && return 0
        kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/airlockd.log" >&2; die "airlockd exited"; }
        sleep 0.1
    done
    die "airlockd did not answer on $server within a minute"
}
