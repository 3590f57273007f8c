#!/usr/bin/env bash
# Tests deploy/: the Prometheus alert rules, their unit tests, the example Prometheus
# configuration and the Grafana dashboard — first on their own (promtool, and every dashboard
# query parsed by promtool), then, unless --static-only, against the real thing: the built
# airlockd with its metrics endpoint behind a token, a workload through the `airlock` CLI
# that makes every series the dashboard and the alerts read (tool calls of the three engines,
# failing ones too, agent runs with a scripted model, approvals approved, denied, expired
# and left waiting, a hosted MCP server, egress allowed and refused), the endpoint's text
# checked by `promtool check metrics`, and Debian's Prometheus scraping the daemon every
# second with alerts.yml loaded. Every panel's query must return series, every alert rule
# must evaluate without error, and every series selector in either must match series
# (deploy/queries.py, which reads the queries out of the dashboard and the rule file).
#
# Needs promtool and prometheus (Debian's `prometheus` package), python3 and curl; the live
# part needs target/debug/airlockd and target/debug/airlock built (CARGO_TARGET_DIR is
# honoured) and the WebAssembly tools (scripts/build-wasm.sh). Everything runs on free
# loopback ports in a temporary directory, and is stopped when the script exits;
# AIRLOCK_DEPLOY_TEST_KEEP=1 keeps the directory (logs, the exposition, Prometheus's config).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/common.sh
source scripts/common.sh
# Everything this script prints, in order: one stream.
exec 1>&2

static_only=0
case "${1:-}" in
    --static-only) static_only=1 ;;
    "") ;;
    *) die "usage: deploy/test.sh [--static-only]" ;;
esac

step() { printf "\n== %s\n" "$*"; }
# Prints a command, then runs it.
run() {
    show "$@"
    "$@"
}
show() { printf '$'; printf ' %q' "$@"; printf '\n'; }
# Prints a command, then starts it in the background with its output in LOG, and adds it to
# what the script stops when it exits (`started_pid` is its pid).
start() {
    local log=$1
    shift
    show "$@"
    "$@" >"$log" 2>&1 &
    started_pid=$!
    pids+=("$started_pid")
}

for program in promtool prometheus python3 curl; do
    command -v "$program" >/dev/null ||
        die "$program is missing: apt-get install prometheus python3 curl (Debian)"
done

work="$(mktemp -d /tmp/airlock-deploy-test.XXXXXX)"
pids=()
cleanup() {
    local status=$?
    # Newest first: the CLI's runs, then the daemon, Prometheus and the HTTP server.
    local index
    for ((index = ${#pids[@]} - 1; index >= 0; index--)); do
        kill "${pids[index]}" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if ((status != 0)); then
        for log in "$work"/*.log; do
            [[ -s $log ]] || continue
            echo "---- the end of $log"
            tail -n 20 "$log"
        done
    fi
    if [[ ${AIRLOCK_DEPLOY_TEST_KEEP:-} == 1 ]]; then
        echo "kept $work"
    else
        rm -rf -- "$work"
    fi
    exit "$status"
}
trap cleanup EXIT

started=$SECONDS

# --- the static part ---------------------------------------------------------------------------

step "alert rules: promtool check rules"
run promtool check rules deploy/prometheus/alerts.yml

step "alert rules' unit tests: promtool test rules"
run promtool test rules deploy/prometheus/alerts_test.yml

step "example Prometheus configuration: promtool check config (a copy whose token file exists)"
# promtool checks that the credentials file exists, and reads rule_files relative to the
# configuration: a copy beside alerts.yml, pointing at a token file that exists.
mkdir -p "$work/example"
cp deploy/prometheus/alerts.yml "$work/example/"
sed "s|credentials_file: .*|credentials_file: $work/example/token|" deploy/prometheus/prometheus.yml \
    >"$work/example/prometheus.yml"
grep -q "credentials_file: $work/example/token" "$work/example/prometheus.yml" ||
    die "deploy/prometheus/prometheus.yml has no authorization credentials_file"
(umask 077 && echo "example-token" >"$work/example/token")
run promtool check config "$work/example/prometheus.yml"

step "dashboard: the JSON is what deploy/grafana/build.py makes; its structure; every query parses"
run python3 deploy/grafana/build.py --check
run python3 deploy/queries.py syntax deploy/grafana/airlock.json deploy/prometheus/alerts.yml \
    "$work/dashboard-queries.yml"
run promtool check rules "$work/dashboard-queries.yml"

if ((static_only)); then
    step "static checks passed in $((SECONDS - started))s (--static-only: no daemon, no Prometheus)"
    exit 0
fi

# --- the live part -----------------------------------------------------------------------------

target="${CARGO_TARGET_DIR:-$repo/target}"
airlockd="$target/debug/airlockd"
airlock="$target/debug/airlock"
[[ -x $airlockd && -x $airlock ]] ||
    die "build airlockd and airlock first (cargo build -p airlock-daemon -p airlock-cli)"
"$airlockd" --help | grep -q -- "--metrics-listen" ||
    die "$airlockd has no --metrics-listen: rebuild it"

step "a daemon with its metrics endpoint behind a token, a hosted MCP server and an egress tool"
mkdir -p "$work/root/project" "$work/www" "$work/profiles" "$work/tools"
printf 'These notes mention metrics.\n' >"$work/root/project/notes.txt"
printf 'hello from the upstream\n' >"$work/www/hello.txt"
workspace="$work/root/project"

# The upstream the egress tool may reach: the one address and port its profile allows.
http_port="$(free_port)"
start "$work/http.log" python3 -m http.server --bind 127.0.0.1 --directory "$work/www" "$http_port"
echo "an HTTP server on 127.0.0.1:$http_port (the egress tool's allowed upstream)"

# The repository's profiles, and the egress tool's.
cp sandbox-profiles/*.toml "$work/profiles/"
cat >"$work/profiles/metrics-net.toml" <<EOF
description = "deploy/test.sh: curl through the egress proxy to one loopback port."
network = { allow = ["127.0.0.1:$http_port"] }
[files]
read_only = ["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache"]
[env]
set = { LANG = "C.UTF-8", PATH = "/usr/bin:/bin", HOME = "/tmp", TMPDIR = "/tmp" }
[limits]
memory = "256 MiB"
wall_time_ms = 20000
output = "1 MiB"
processes = 32
open_files = 128
EOF
cp -r deploy/testdata/tools/. "$work/tools/"

(umask 077 && python3 -c 'import secrets; print(secrets.token_urlsafe(32))' >"$work/metrics.token")
port="$(free_port)"
metrics_port="$(free_port)"
server="http://127.0.0.1:$port"
metrics_url="http://127.0.0.1:$metrics_port/metrics"
start "$work/airlockd.log" "$airlockd" --listen "127.0.0.1:$port" --state-dir "$work/state" \
    --workspace-root "$work/root" --tools-dir "$work/tools" --profiles-dir "$work/profiles" \
    --policy deploy/testdata/policy.toml \
    --metrics-listen "127.0.0.1:$metrics_port" --metrics-token-file "$work/metrics.token"
daemon_pid=$started_pid
for _ in $(seq 300); do
    [[ -s $work/state/token ]] && break
    kill -0 "$daemon_pid" 2>/dev/null || die "airlockd exited"
    sleep 0.1
done
AIRLOCK_TOKEN="$(cat "$work/state/token")"
export AIRLOCK_TOKEN
export AIRLOCK_SERVER="$server"
for _ in $(seq 300); do
    "$airlock" tools list >/dev/null 2>&1 && break
    kill -0 "$daemon_pid" 2>/dev/null || die "airlockd exited"
    sleep 0.1
done
"$airlock" tools list >"$work/tools.txt" || die "airlockd does not answer on $server"
for tool in echo__echo fetch read_file workspace_grep; do
    grep -q "^$tool " "$work/tools.txt" || { cat "$work/tools.txt" >&2; die "airlockd does not serve $tool"; }
done
echo "airlockd serves $server, its metrics $metrics_url (log: $work/airlockd.log)"

step "the metrics endpoint refuses a scrape without the token, or with another"
status="$(curl -s -o /dev/null -w '%{http_code}' "$metrics_url")"
[[ $status == 401 || $status == 403 ]] || die "a scrape without a token got HTTP $status"
status="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer not-the-token" "$metrics_url")"
[[ $status == 401 || $status == 403 ]] || die "a scrape with a wrong token got HTTP $status"
echo "without a token: refused; with a wrong one: refused (HTTP $status)"

step "Prometheus scraping the daemon every second with alerts.yml loaded, before the workload"
prometheus_port="$(free_port)"
prometheus_url="http://127.0.0.1:$prometheus_port"
mkdir -p "$work/prometheus"
cat >"$work/prometheus/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $repo/deploy/prometheus/alerts.yml
scrape_configs:
  - job_name: airlock
    authorization:
      credentials_file: $work/metrics.token
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
EOF
run promtool check config "$work/prometheus/prometheus.yml"
start "$work/prometheus.log" prometheus --config.file "$work/prometheus/prometheus.yml" \
    --storage.tsdb.path "$work/prometheus/data" --web.listen-address "127.0.0.1:$prometheus_port"
prometheus_pid=$started_pid
for _ in $(seq 200); do
    curl -sf "$prometheus_url/-/ready" >/dev/null 2>&1 && break
    kill -0 "$prometheus_pid" 2>/dev/null || die "prometheus exited"
    sleep 0.1
done
curl -sf "$prometheus_url/-/ready" >/dev/null || die "prometheus is not ready"
echo "prometheus on $prometheus_url (log: $work/prometheus.log)"

# Runs `airlock ARGS` expecting exit status STATUS, with a deadline (no step of the workload
# may hang the test); its output goes to the workload's log.
expect() {
    local want=$1 got=0
    shift
    show airlock "$@"
    timeout 30 "$airlock" "$@" >>"$work/workload.log" 2>&1 || got=$?
    ((got == want)) || {
        tail -n 20 "$work/workload.log"
        die "airlock $* exited $got, not $want"
    }
}

# Tool calls of the three engines, failing ones too, egress allowed and refused, and agent
# runs of a scripted model (steps, model calls, tokens, a write, a kept output; stop reasons
# final, max steps and model error). Run twice, with scrapes between, so that counters and
# histograms grow between scrapes: rates and quantiles then have values.
workload() {
    expect 0 tools exec read_file --args '{"path": "notes.txt"}' --workspace "$workspace"
    expect 1 tools exec read_file --args '{"path": "missing.txt"}' --workspace "$workspace"
    expect 0 tools exec list_dir --workspace "$workspace"
    expect 0 tools exec grep --args '{"pattern": "metrics"}' --workspace "$workspace"
    expect 0 tools exec workspace_grep --args '{"pattern": "metrics"}' --workspace "$workspace"
    expect 1 tools exec workspace_grep --args '{"pattern": "no line has this"}' --workspace "$workspace"
    expect 0 tools exec echo__echo --args '{"text": "hello"}' --workspace "$workspace"
    # Arguments the tool's schema refuses (exit 2), a command past its deadline (4), a call
    # the operator's policy refuses (77: deploy/testdata/policy.toml).
    expect 2 tools exec read_file --args '{}' --workspace "$workspace"
    expect 4 tools exec run_command --args '{"command": "sleep 10", "workdir": "."}' --timeout-ms 300 \
        --workspace "$workspace"
    expect 77 tools exec wc --args '{"path": "notes.txt"}' --workspace "$workspace"
    : >"$work/workload.log"
    expect 0 tools exec fetch --args "{\"url\": \"http://127.0.0.1:$http_port/hello.txt\"}" --workspace "$workspace"
    grep -q "hello from the upstream" "$work/workload.log" || die "the egress tool did not reach the upstream"
    expect 0 tools exec fetch --args '{"url": "http://refused.example/"}' --workspace "$workspace"
    grep -q "egress to refused.example:80 refused" "$work/workload.log" ||
        die "the egress gate did not refuse refused.example"
    expect 0 run "look at the notes" --workspace "$workspace" --policy auto \
        --model "scripted:$repo/deploy/testdata/steps.yaml" </dev/null
    # The step budget: a run stopped by --max-steps exits 6.
    expect 6 run "look again" --workspace "$workspace" --policy never --max-steps 1 \
        --model "scripted:$repo/deploy/testdata/steps.yaml" </dev/null
    # A model that runs out of turns: a model error, exit 69.
    expect 69 run "read the notes" --workspace "$workspace" --policy never \
        --model "scripted:$repo/deploy/testdata/exhausted.yaml" </dev/null
}

step "workload: tool calls (wasm, process, mcp; ok and failing), egress, agent runs"
workload

step "workload: approvals approved, denied, expired, and one left waiting"
ask=(--workspace "$workspace" --policy always --model "scripted:$repo/deploy/testdata/ask.yaml")
printf 'y\n' | expect 0 run "approve it" "${ask[@]}"
printf 'n\n' | expect 0 run "deny it" "${ask[@]}"
# Nobody answers: standard input stays open (a FIFO this shell holds) and says nothing.
mkfifo "$work/silence"
exec 3<>"$work/silence"
expect 0 run "let it expire" "${ask[@]}" --approval-timeout 1s <"$work/silence"

# Starts a run whose approval waits (for nobody), in the background, and sets `run_id` to it.
waiting_run() {
    local before after
    before="$("$airlock" runs list --state waiting --json)"
    show airlock run "$1" "${ask[@]}" --approval-timeout 10m
    "$airlock" run "$1" "${ask[@]}" --approval-timeout 10m <"$work/silence" >>"$work/workload.log" 2>&1 &
    pids+=("$!")
    for _ in $(seq 100); do
        after="$("$airlock" runs list --state waiting --json)"
        run_id="$(python3 -c '
import json, sys
before = {r["run_id"] for r in json.loads(sys.argv[1]).get("runs", [])}
new = [r["run_id"] for r in json.loads(sys.argv[2]).get("runs", []) if r["run_id"] not in before]
print(new[0] if new else "")' "$before" "$after")"
        [[ -n $run_id ]] && return 0
        sleep 0.1
    done
    die "the run \"$1\" never waited for an approval"
}
waiting_run "cancel it"
expect 0 runs cancel "$run_id"
waiting_run "wait for an answer"
waiting="$run_id"
echo "run $waiting waits for an approval while Prometheus scrapes"

step "workload, a second time, once Prometheus has scraped the first"
run python3 deploy/queries.py scraped "$prometheus_url" "$(date +%s.%N)"
workload

step "the metrics endpoint with the token (Prometheus text format): promtool check metrics"
curl -sS --fail -H "Authorization: Bearer $(cat "$work/metrics.token")" "$metrics_url" \
    -o "$work/metrics.txt" -D "$work/metrics.headers"
grep -i '^content-type' "$work/metrics.headers" | tr -d '\r'
echo "$(grep -vc '^#' "$work/metrics.txt") samples in $(grep -c '^# TYPE' "$work/metrics.txt") families"
run promtool check metrics <"$work/metrics.txt"

step "what the workload made (the exposition's series by label value; ? marks what is not required)"
python3 deploy/queries.py coverage "$work/metrics.txt" \
    'airlock_tool_calls_total:engine=wasm,process,mcp' \
    'airlock_tool_calls_total:status=OK,TOOL_ERROR,TIMEOUT,INVALID_ARGUMENTS' \
    'airlock_tool_calls_total:status=DENIED' \
    'airlock_tool_call_duration_seconds_count:engine=wasm,process,mcp' \
    'airlock_runs:state=running,waiting_approval' \
    'airlock_runs_finished_total:reason=' \
    'airlock_approvals_decided_total:outcome=approved,denied,expired' \
    'airlock_egress_requests_total:decision=allowed,refused' \
    'airlock_store_commit_duration_seconds_count:backend=sqlite' \
    'gen_ai_client_operation_duration_seconds_count:gen_ai_request_model=' \
    'gen_ai_client_token_usage_count:gen_ai_token_type=input,output' \
    'airlock_approvals_pending:>0' \
    'airlock_approvals_pending_oldest_age_seconds:>0' \
    'airlock_mcp_instances:>0' \
    'airlock_blob_store_usage_bytes:>0' \
    'airlock_output_kept_usage_bytes:>0'

step "every panel query returns series; every alert rule evaluates; every selector matches"
# Prometheus asks for OpenMetrics (its Accept header names it first): its scrapes, which must
# succeed, check that format.
run python3 deploy/queries.py scraped "$prometheus_url" "$(date +%s.%N)"
run python3 deploy/queries.py live "$prometheus_url" deploy/grafana/airlock.json \
    deploy/prometheus/alerts.yml "$work/metrics.txt"

step "ending the waiting run; stopping the daemon"
expect 0 runs cancel "$waiting"
kill -TERM "$daemon_pid"
wait "$daemon_pid" || die "airlockd exited with status $? on SIGTERM"

step "deploy/ passed in $((SECONDS - started))s"
