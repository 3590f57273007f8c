#!/usr/bin/env bash
# A fleet by hand: three airlockd over one PostgreSQL database. Starts a throwaway
# PostgreSQL server (Debian's, on loopback, in a temporary directory), three daemons that
# share it and one workspace root, and an agent run on the first daemon (a scripted model,
# no API key) that appends a line to a file, thinks for eight seconds, appends another and
# finishes, followed live by a client of the third daemon. While it thinks, the first daemon
# is killed with SIGKILL: the others see its lease lapse, one of them takes the run over from
# its last checkpoint and finishes it. The script then checks, from the workspace, the run's
# record as another daemon reads it and what the third daemon's client saw, that the run
# finished, that each line was appended exactly once and that the client saw every event
# once and in order across the takeover; and prints which daemon took the run over and how
# long after the kill.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh

# The lease of this demo's daemons: short, so the takeover comes in seconds.
readonly lease_ms=2000

say "setting up (Rust targets, Debian packages, PostgreSQL)"
ensure_rust_targets
ensure_apt_packages
scripts/postgres.sh --install-only

say "building airlockd, airlock and the tools"
cargo build --bins
scripts/build-wasm.sh

target_dir="$(target_dir)"
airlockd="$target_dir/debug/airlockd"
airlock="$target_dir/debug/airlock"

say "starting PostgreSQL"
fleet_up "$lease_ms"

say "starting three daemons over it"
for name in a b c; do start_node "$name" "$airlockd"; done

cat >"$work/model.yaml" <<'EOF'
turns:
  - text: "Noting that the task started."
    tool_calls:
      - name: run_command
        arguments: {command: "echo started >> log.txt", workdir: "."}
  - delay_ms: 8000
    text: "Thought it over; noting the effect."
    tool_calls:
      - name: run_command
        arguments: {command: "echo effect >> log.txt", workdir: "."}
  - final: "Both lines are in log.txt."
EOF

say "a run on daemon a: it appends a line, thinks for eight seconds, appends another"
on a run "append two lines to log.txt" --workspace "$workspace" \
    --model "scripted:$work/model.yaml" --policy auto >"$work/run.txt" 2>&1 &
client=$!
pids+=("$client")
for _ in $(seq 600); do
    grep -qx started "$workspace/log.txt" 2>/dev/null && break
    sleep 0.1
done
grep -qx started "$workspace/log.txt" || die "the run did not start: $(cat "$work/run.txt")"
run_id="$(on a runs list --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["runs"][0]["run_id"])')"

say "a client of daemon c follows the run daemon a executes"
on c attach "$run_id" --json >"$work/followed.jsonl" 2>"$work/follow-errors.txt" &
follower=$!
pids+=("$follower")
sleep 1

say "killing daemon a (SIGKILL) while its run $run_id thinks"
kill -9 "${pid_of[a]}"
killed=$SECONDS
wait "$client" 2>/dev/null || true

say "waiting for daemon b or c to take the run over (lease: $lease_ms ms)"
state=""
for _ in $(seq 1200); do
    state="$(on b runs show "$run_id" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["state"])')"
    [[ $state == *FINISHED* || $state == finished ]] && break
    sleep 0.1
done
taker=""
for name in b c; do
    grep -q "taking the run over" "$work/$name.log" && taker=$name
done
[[ -n $taker ]] || die "no daemon took the run over"
echo "daemon $taker took run $run_id over and finished it $((SECONDS - killed)) s after the kill" \
    "(a lease, then the model's eight seconds again: the step it was in is asked anew)" >&2
on c runs show "$run_id"

say "checking what daemon c's client saw: every event once, in order, to the run's end"
wait "$follower" || die "the follower on c failed: $(cat "$work/follow-errors.txt")"
python3 - "$work/followed.jsonl" <<'PY' || die "daemon c's client saw a gap or a repeat"
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
stored = [e for e in events if not e.get("delta")]
seqs = [int(e["seq"]) for e in stored]
assert seqs == list(range(1, len(seqs) + 1)), seqs
kinds = [next(k for k in e if k not in ("run_id", "seq", "step_id", "time_ms", "turn_id", "delta")) for e in stored]
assert "run_resumed" in kinds and kinds[-1] == "run_finished", kinds
print(f"daemon c's client saw events 1 to {seqs[-1]}, the takeover's run_resumed among them", file=sys.stderr)
PY

say "checking the workspace: each line appended exactly once"
cat "$workspace/log.txt" >&2
[[ $(grep -cx started "$workspace/log.txt") == 1 ]] || die "the first line is not there exactly once"
[[ $(grep -cx effect "$workspace/log.txt") == 1 ]] || die "the second line is not there exactly once"
say "the fleet lost nothing and repeated nothing"
