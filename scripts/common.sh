# Shared by the scripts in this directory: what a fresh machine needs before anything
# builds. Source it; it defines functions and changes nothing by itself.

# The Rust targets tools are built for.
readonly AIRLOCK_RUST_TARGETS=(wasm32-wasip1 wasm32-wasip2)

# What the build and tests need from Debian: clang-14, wasm-ld, wasi-libc and the wasm
# builtins for the C plugin; python3 (with venv) reads `cargo metadata` and runs the
# Python gRPC client test and the hosted MCP servers of the tests; nodejs (with npm) runs
# the MCP servers from npm; libseccomp-dev is what the process engine compiles its seccomp
# filter with (its library, libseccomp2, is part of every Debian system); openssl makes the
# certificates of the client packages' TLS tests.
# python3, nodejs, gcc, make and git are also the toolchains the `toolchains` profile mounts for run_command.
# prometheus (with promtool) and curl run deploy/test.sh: the alert rules, the dashboard's
# queries against a Prometheus that scrapes a daemon. systemd gives the tests
# systemd-socket-activate (airlockd started as its socket unit starts it) and deploy/'s
# checks systemd-analyze; the machines here do not boot it. debootstrap makes the Debian root
# deploy/debian/test.sh installs the package into; dpkg-dev and binutils are what cargo-deb
# packages with (dpkg-shlibdeps, strip); podman and runc run the container image
# (deploy/container/test.sh), and catatonit the infra containers of the pods
# deploy/kubernetes/test.sh plays.
readonly AIRLOCK_APT_PACKAGES=(clang lld wasi-libc libclang-rt-14-dev-wasm32 libseccomp-dev python3 python3-venv nodejs gcc make git openssl prometheus curl systemd systemd-container debootstrap dpkg-dev binutils podman runc catatonit)

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

# What `cargo clippy -- -D warnings` sets, for every build of scripts/test.sh and the scripts
# that reuse its build: the same settings keep cargo from building a crate again.
use_lint_build() {
    RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver)"
    export RUSTC_WORKSPACE_WRAPPER
    export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
}

# The path of the integration tests' binary (tests/tests/all), built as scripts/test.sh
# builds it: for the whole workspace, whose features a build of the one package would not
# unify alike (it would compile the dependencies again). cargo's messages go to stderr.
integration_tests_binary() {
    use_lint_build
    cargo test --workspace --no-run --message-format=json |
        python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message["target"]["name"] == "all" and message.get("executable"):
        print(message["executable"])
'
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

# A heading for a step of a script that shows something by hand.
say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

# A TCP port nothing listens on right now, on loopback.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A fleet of daemons over a throwaway PostgreSQL, for the scripts that show one by hand
# (fleet-demo.sh, rolling-upgrade.sh). `fleet_up LEASE_MS` makes the scratch dir `work`,
# starts the database (`database`), writes `work/airlockd.toml` for it (a lease of
# LEASE_MS, a shared dir, `workspace` under the one workspace root) and cleans all of it up
# when the script exits, showing the daemons' logs when it failed. `start_node` and `on`
# need `airlock` (the CLI's path) set.
fleet_up() {
    local lease=$1
    work="$(mktemp -d)"
    # PostgreSQL runs as its own user, which must reach its data directory in here.
    chmod 711 "$work"
    pids=()
    declare -gA server=() pid_of=()
    trap fleet_cleanup EXIT
    database="$(scripts/postgres.sh start "$work/postgres" "$(free_port)")"
    echo "the fleet's store: $database" >&2
    workspace="$work/root/project"
    mkdir -p "$workspace"
    cat >"$work/airlockd.toml" <<TOML
workspace_roots = ["$work/root"]
[store]
url = "$database"
lease_ms = $lease
shared_dir = "$work/shared"
TOML
}

fleet_cleanup() {
    local status=$?
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    if ((status != 0)); then
        for log in "$work"/*.log; do
            [[ -f $log ]] || continue
            echo "---- the end of $(basename "$log")" >&2
            tail -n 25 "$log" >&2
        done
    fi
    scripts/postgres.sh stop "$work/postgres" || true
    rm -rf "$work"
}

# Starts daemon NAME of the fleet from BINARY on a free port, with its own state dir, in DIR
# (the repo by default: its tools and profiles are that tree's), and waits until it answers.
start_node() {
    local name=$1 binary=$2 dir=${3:-$PWD} port
    port="$(free_port)"
    server[$name]="http://127.0.0.1:$port"
    (cd "$dir" && exec "$binary" --config "$work/airlockd.toml" --listen "127.0.0.1:$port" \
        --state-dir "$work/state-$name") 2>"$work/$name.log" &
    pid_of[$name]=$!
    pids+=("$!")
    # Not a job of this shell's: its SIGKILL, by the script or the cleanup, is not reported.
    disown "$!"
    for _ in $(seq 600); do
        # The fleet's daemons share one token, in the shared dir.
        [[ -s $work/shared/token ]] && on "$name" tools list >/dev/null 2>&1 && {
            echo "daemon $name serves ${server[$name]} (log: $work/$name.log)" >&2
            return 0
        }
        kill -0 "${pid_of[$name]}" 2>/dev/null || { cat "$work/$name.log" >&2; die "airlockd $name exited"; }
        sleep 0.1
    done
    die "airlockd $name did not answer within a minute"
}

# `airlock ARGS` against daemon NAME.
on() {
    local name=$1
    shift
    AIRLOCK_TOKEN="$(cat "$work/shared/token")" "$airlock" --server "${server[$name]}" "$@"
}
