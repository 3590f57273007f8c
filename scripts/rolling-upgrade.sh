#!/usr/bin/env bash
# A rolling upgrade by hand: a daemon of an earlier release and one of this checkout serving
# one fleet over one PostgreSQL database, then the earlier one restarted as this one.
#
#   scripts/rolling-upgrade.sh [FROM]     FROM: a git ref of the earlier release (v0.1.0)
#
# Builds FROM in a worktree of its own (a second full build: minutes, which is why this is a
# script beside the tests rather than part of scripts/test.sh; CI checks the release's
# fixtures under tests/fixtures instead), and this checkout. Starts a throwaway PostgreSQL
# server, daemon `old` (FROM) and daemon `new` (this checkout), the second migrating the
# schema past what `old` knows while `old` serves. A run on each appends a line, thinks for
# eight seconds and appends another; while they think `old` is killed and `new` resumes its
# run from the checkpoint `old` wrote. Then FROM is started again on the migrated database:
# it must either serve or refuse, naming both schema versions. Checks that both runs
# finished and every line was appended exactly once.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

readonly from="${1:-v0.1.0}"
readonly lease_ms=2000

from_sha="$(git rev-parse --verify "$from^{commit}" 2>/dev/null)" ||
    die "no such ref: $from (tag the release, or name a commit)"

say "setting up (Rust targets, Debian packages, PostgreSQL)"
ensure_rust_targets
ensure_apt_packages
scripts/postgres.sh --install-only

target_dir="$(target_dir)"
old_tree="$target_dir/rolling-upgrade/$from_sha"
say "building $from ($from_sha) in $old_tree"
if [[ ! -d $old_tree/.git && ! -f $old_tree/.git ]]; then
    mkdir -p "$(dirname "$old_tree")"
    git worktree add --detach "$old_tree" "$from_sha" >&2
fi
(cd "$old_tree" && cargo build --bins --target-dir "$target_dir/rolling-upgrade/target" && scripts/build-wasm.sh)
old_airlockd="$target_dir/rolling-upgrade/target/debug/airlockd"

say "building this checkout"
cargo build --bins
scripts/build-wasm.sh
new_airlockd="$target_dir/debug/airlockd"
airlock="$target_dir/debug/airlock"

say "starting PostgreSQL"
fleet_up "$lease_ms"

# The schema version the database is at.
schema_version() {
    local psql
    psql="$(find /usr/lib/postgresql -path '*/bin/psql' | sort -V | tail -n 1)"
    "$psql" -At "$database" -c 'SELECT version FROM airlock_schema'
}

say "daemon old ($from) migrates the database, then daemon new (this checkout) joins"
start_node old "$old_airlockd" "$old_tree"
echo "schema version after old: $(schema_version)" >&2
start_node new "$new_airlockd" "$repo"
echo "schema version after new: $(schema_version)" >&2

model() {
    cat >"$work/model-$1.yaml" <<EOF
turns:
  - tool_calls:
      - name: run_command
        arguments: {command: "echo started-$1 >> log.txt", workdir: "."}
  - delay_ms: 8000
    tool_calls:
      - name: run_command
        arguments: {command: "echo effect-$1 >> log.txt", workdir: "."}
  - final: "done"
EOF
}

say "a run on each daemon: each appends a line, thinks for eight seconds, appends another"
for name in old new; do
    model "$name"
    on "$name" run "append two lines" --workspace "$workspace" \
        --model "scripted:$work/model-$name.yaml" --policy auto >"$work/run-$name.txt" 2>&1 &
    pids+=("$!")
done
for name in old new; do
    for _ in $(seq 600); do
        grep -qx "started-$name" "$workspace/log.txt" 2>/dev/null && break
        sleep 0.1
    done
    grep -qx "started-$name" "$workspace/log.txt" || die "the run on $name did not start: $(cat "$work/run-$name.txt")"
done

# SIGKILL, not the SIGTERM of a planned restart: a daemon stopped with SIGTERM finishes the
# step it is in (here the model's eight seconds, and so the whole run) before it gives its
# lease up, and nothing would cross versions. Killed, its run is resumed by `new` from the
# checkpoint `old` wrote: the part of a mixed fleet that can break.
say "killing daemon old (SIGKILL) while its run thinks: daemon new must resume what old checkpointed"
kill -KILL "${pid_of[old]}"

say "waiting for both runs to finish"
for _ in $(seq 1200); do
    finished=$(on new runs list --json | python3 -c 'import json, sys; print(sum(1 for r in json.load(sys.stdin)["runs"] if "FINISHED" in str(r["state"]).upper()))')
    [[ $finished == 2 ]] && break
    sleep 0.1
done
on new runs list
[[ $finished == 2 ]] || die "the runs did not both finish"
grep -q "taking the run over" "$work/new.log" || die "daemon new did not take old's run over"

say "daemon old ($from) started again on the migrated database"
port="$(free_port)"
set +e
(cd "$old_tree" && timeout 20 "$old_airlockd" --config "$work/airlockd.toml" --listen "127.0.0.1:$port" \
    --state-dir "$work/state-old-again") 2>"$work/old-again.log"
status=$?
set -e
if grep -q "newer than this daemon knows" "$work/old-again.log"; then
    grep -o "schema version [0-9]* is newer than this daemon knows ([0-9]*)[^\"]*" "$work/old-again.log" | head -n 1 >&2
    echo "daemon old refused the newer schema, naming both versions (exit $status)" >&2
elif ((status == 124)); then
    echo "daemon old served the migrated database until stopped" >&2
else
    cat "$work/old-again.log" >&2
    die "daemon old neither served nor refused in words (exit $status)"
fi

say "checking the workspace: each line appended exactly once"
cat "$workspace/log.txt" >&2
for line in started-old effect-old started-new effect-new; do
    [[ $(grep -cx "$line" "$workspace/log.txt") == 1 ]] || die "$line is not there exactly once"
done
say "the upgrade lost nothing and repeated nothing"
