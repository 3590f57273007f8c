#!/usr/bin/env bash
# Drives a real airlockd from Python's grpcio with stubs generated from proto/: proof that
# a client in another language needs nothing but the .proto files — to run tools of both
# engines, and to drive agent runs and answer their approvals. Installs grpcio into a
# private virtualenv, generates the stubs, starts the daemon the Rust build produced on a
# free loopback port, runs test_client.py against it (with the access token the daemon
# created in its state dir), then stops the daemon with SIGTERM and checks that it exits
# cleanly. A second daemon on a Unix socket serves test_unix_socket.py, a grpcio client
# with its default settings.
#
#   tests/python/run.sh                 install what is missing, then test
#   tests/python/run.sh --install-only  only install (scripts/test.sh does it while cargo builds)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$here/.venv"

if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
if [[ ${1:-} == --install-only ]]; then
    echo "python grpc client: packages installed" >&2
    exit 0
fi

work="$(mktemp -d)"
daemon_pid=""
socket_pid=""
cleanup() {
    [[ -n $daemon_pid ]] && kill -9 "$daemon_pid" 2>/dev/null
    [[ -n $socket_pid ]] && kill -9 "$socket_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

"$venv/bin/python" -m grpc_tools.protoc -I "$repo/proto" --python_out="$work" \
    --grpc_python_out="$work" "$repo"/proto/airlock/v1/*.proto

airlockd="${AIRLOCKD:-${CARGO_TARGET_DIR:-$repo/target}/debug/airlockd}"
[[ -x $airlockd ]] || { echo "run.sh: $airlockd is missing; build it with cargo build --bins" >&2; exit 1; }
port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p "$work/root/project"
(cd "$repo" && exec "$airlockd" --listen "127.0.0.1:$port" --state-dir "$work/state" \
    --workspace-root "$work/root") 2>"$work/airlockd.log" &
daemon_pid=$!
# The daemon writes its access token into the state dir while it starts; the client reads it.
for _ in $(seq 1200); do
    [[ -s $work/state/token ]] && break
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/airlockd.log" >&2; exit 1; }
    sleep 0.1
done

status=0
PYTHONPATH="$work" "$venv/bin/python" "$here/test_client.py" "127.0.0.1:$port" "$work/root/project" \
    "$work/state" || status=$?

# The same client library over the Unix socket, with its default settings.
(cd "$repo" && exec "$airlockd" --listen "unix:$work/airlockd.sock" --state-dir "$work/socket-state" \
    --workspace-root "$work/root") 2>"$work/socket.log" &
socket_pid=$!
for _ in $(seq 1200); do
    [[ -S $work/airlockd.sock ]] && break
    kill -0 "$socket_pid" 2>/dev/null || { cat "$work/socket.log" >&2; exit 1; }
    sleep 0.1
done
PYTHONPATH="$work" "$venv/bin/python" "$here/test_unix_socket.py" "$work/airlockd.sock" \
    "$work/root/project" "$work/socket-state" || { status=$?; cat "$work/socket.log" >&2; }
kill -TERM "$socket_pid"
wait "$socket_pid" || true
socket_pid=""

kill -TERM "$daemon_pid"
daemon_status=0
wait "$daemon_pid" || daemon_status=$?
daemon_pid=""
if ((status != 0 || daemon_status != 0)); then
    echo "run.sh: client exit $status, daemon exit $daemon_status; daemon log:" >&2
    cat "$work/airlockd.log" >&2
    exit 1
fi
grep -q "airlockd stopped" "$work/airlockd.log" || { echo "run.sh: the daemon did not stop cleanly" >&2; exit 1; }
echo "python grpc client: ok" >&2
