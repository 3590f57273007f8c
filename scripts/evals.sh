#!/usr/bin/env bash
# Runs the shipped eval suite (evals/coding.yaml) against a real airlockd: starts the daemon
# on a free loopback port with a workspace root for the suite's copies, runs
# `airlock eval run`, and stops the daemon. Each task replays its cassette, so no model and no
# key are needed; the tools run for real in their sandboxes.
#
#   scripts/evals.sh            run the suite (what scripts/test.sh does)
#   scripts/evals.sh --record   record the cassettes again, from the scripted models in
#                               evals/scripts (after a change to a tool's description, the
#                               system prompt or anything else a model is sent)
#
# Expects the binaries and the WebAssembly tools built (scripts/test.sh and scripts/demo.sh
# build them).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

record=false
case "${1:-}" in
    --record) record=true ;;
    "") ;;
    *) die "usage: scripts/evals.sh [--record]" ;;
esac

airlock="$(target_dir)/debug/airlock"

work="$(mktemp -d)"
daemon_pid=""
cleanup() {
    [[ -n $daemon_pid ]] && kill -9 "$daemon_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

start_airlockd "$work"
airlock() { "$airlock" --server "$server" "$@"; }

if ! $record; then
    airlock eval run evals/coding.yaml --results "$work/results"
    exit 0
fi

# Each task's cassette comes from a run of its scripted model: the suite run with a variant
# that swaps the model, then the run captured.
declare -A scripts=(
    [list-files]=list-files [read-readme]=read-readme [find-functions]=find-functions
    [outline-json]=outline-json [count-lines]=count-lines [fix-mean]=fix-mean
    [add-notes]=add-notes [refuse-delete]=refuse-delete [injection-gate]=injection
    [injection-sandbox]=injection [step-budget]=keeps-listing
)
for task in "${!scripts[@]}"; do
    variant="$work/$task.yaml"
    printf 'model: {scripted: %s}\n' "$repo/evals/scripts/${scripts[$task]}.yaml" >"$variant"
    airlock eval run evals/coding.yaml --task "$task" --variant "$variant" \
        --results "$work/results" --json >"$work/$task.json" || true
    run_id="$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["tasks"][0]["attempts"][0]["run_id"])' "$work/$task.json")"
    airlock eval capture "$run_id" -o "evals/cassettes/$task.json" >/dev/null
    echo "evals: recorded evals/cassettes/$task.json from run $run_id" >&2
done
