#!/usr/bin/env bash
# Sets everything up on a fresh machine and shows airlock working: installs what is
# missing, builds the daemon, the CLI and the WebAssembly tools, starts airlockd on a free
# loopback port over a copy of a sample workspace, runs the first tools against it with the
# `airlock` CLI, then an agent run (a scripted model, so no API key is needed) that reads
# the code, runs the tests with run_command (they fail), fixes the bug with apply_patch, runs
# the tests again (they pass) and finishes, each command and the patch accepted by an
# approver; checks all that from the run's events and the workspace rather than taking the
# model's word for it; prints the run's trace and its changes; undoes the fix with `airlock
# revert` and checks that the bug, and the failing test, are back; and stops the daemon.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

say "setting up (Rust targets, Debian packages)"
ensure_rust_targets
ensure_apt_packages

say "building airlockd, airlock and the tools"
# Only the two programs the demo runs (not the test crates' helpers).
cargo build -p airlock-daemon -p airlock-cli --bins
scripts/build-wasm.sh

target_dir="$(target_dir)"
airlock="$target_dir/debug/airlock"

work="$(mktemp -d)"
daemon_pid=""
cleanup() {
    [[ -n $daemon_pid ]] && kill -9 "$daemon_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/root"
cp -r scripts/demo/workspace "$work/root/calc"
workspace="$work/root/calc"
say "starting airlockd"
# The daemon creates its access token in its state dir on first start; the CLI finds the
# token of a daemon with the default state dir by itself, this one's it is told.
start_airlockd "$work"

run() {
    { printf '\n$ airlock'; printf ' %q' "$@"; printf '\n'; } >&2
    "$airlock" --server "$server" "$@"
}

# Runs the sample's tests in the workspace, outside any sandbox (-B: no __pycache__ left
# behind), prints their summary and returns their exit status.
sample_tests() {
    local output status=0
    output="$(cd "$workspace" && python3 -B -m unittest discover -s tests 2>&1)" || status=$?
    tail -n 3 <<<"$output" >&2
    return "$status"
}

say "the tools it serves"
run tools list

say "running them against a sample workspace, each in its own WebAssembly sandbox"
run tools exec list_dir --args '{"recursive": true}' --workspace "$workspace"
run tools exec grep --args '{"pattern": "def \\w+", "glob": "*.py"}' --workspace "$workspace"
run tools exec read_file --args '{"path": "src/calc.py"}' --workspace "$workspace"
run tools exec wc --args '{"path": "src/calc.py"}' --workspace "$workspace"

say "existing programs as tools, each call in a fresh Linux sandbox (namespaces, Landlock, seccomp)"
run tools exec workspace_grep --args '{"pattern": "def +mean"}' --workspace "$workspace"
run tools exec py_outline --args '{"path": "src/calc.py"}' --workspace "$workspace"

say "a write, previewed first: the diff it would make, and nothing written"
fixed="$(sed 's|(len(values) - 1)|len(values)|' "$workspace/src/calc.py")"
args="$(python3 -c 'import json, sys; print(json.dumps({"path": "src/calc.py", "content": sys.argv[1] + "\n", "preview": True}))' "$fixed")"
run tools exec write_file --args "$args" --workspace "$workspace"

say "what the sandbox refuses: a path outside the workspace"
run tools exec read_file --args '{"path": "../../etc/passwd"}' --workspace "$workspace" || true

say "an agent run: the model reads the code, runs the tests (they fail), patches the bug and runs them again"
# The policy puts every run_command (exec) and apply_patch (write) call to an approver: here,
# standard input, one line per request — the tests, the patch, the tests again. A request
# past the last line is denied, and the checks below catch the run that follows.
printf 'y\ny\ny\n' | run run "fix the failing test in this workspace" --workspace "$workspace" \
    --model "scripted:$repo/scripts/demo/fix-mean.yaml" --policy risky ||
    die "the agent run did not end with an answer"
# The daemon lists runs newest first, and this daemon has run only the demo's.
run_id="$("$airlock" --server "$server" runs list --limit 1 --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["runs"][0]["run_id"])')"

say "checking what happened from the run's events, not the model's final answer"
run runs attach "$run_id" --json >"$work/events.jsonl"
# Prints the failing test run's output and each step's result; the patch's step on stdout.
patch_step="$(python3 scripts/demo/check-run.py "$work/events.jsonl")" ||
    die "the agent run did not test, patch and test again as it should"
grep -qF "return sum(values) / len(values)" "$workspace/src/calc.py" ||
    die "the patch did not reach the workspace"
if grep -qF "(len(values) - 1)" "$workspace/src/calc.py"; then
    die "the bug is still in the workspace"
fi

say "the sample's tests, run here after the fix"
sample_tests || die "the sample's tests fail after the fix"

say "the run's trace: every step, model call, permission decision and tool call, timed"
run runs trace "$run_id"

say "what the run changed in the workspace, step by step"
run changes "$run_id" --diff

say "undoing the fix: the workspace back as it was before step $patch_step (the patch)"
run revert "$run_id" --to-step "$patch_step"
cmp -s scripts/demo/workspace/src/calc.py "$workspace/src/calc.py" ||
    die "src/calc.py is not back to the buggy version after the revert"
echo "src/calc.py is the original again:" >&2
grep -nF "(len(values) - 1)" "$workspace/src/calc.py" >&2

say "the sample's tests, run here after the revert: they fail again"
if sample_tests; then
    die "the sample's tests pass after the revert"
fi

say "stopping airlockd"
kill -TERM "$daemon_pid"
wait "$daemon_pid"
daemon_pid=""
echo "demo finished" >&2
