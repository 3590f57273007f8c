#!/usr/bin/env python3
"""Writes deploy/grafana/airlock.json, the Grafana dashboard of airlockd's metrics.

The dashboard is generated so that every metric name it queries is written once, in NAMES
below: a renamed metric is one line here, then `python3 deploy/grafana/build.py`.
`--check` writes nothing and fails when airlock.json is not what this script makes (what
deploy/test.sh runs, so a hand edit of the JSON is caught; edit here instead). Standard
library only.

Usage: build.py [--check] [--output FILE]
"""

import argparse
import json
import sys
from pathlib import Path

# Every metric the dashboard reads, by what it is: the Prometheus exposition names of
# airlockd's metrics endpoint (`--metrics-listen`). Histograms are named without a suffix
# (_bucket, _sum and _count are added where used).
NAMES = {
    "tool_calls": "airlock_tool_calls_total",
    "tool_call_duration": "airlock_tool_call_duration_seconds",
    "run_steps": "airlock_run_steps_total",
    "run_step_duration": "airlock_run_step_duration_seconds",
    "runs": "airlock_runs",
    "runs_finished": "airlock_runs_finished_total",
    "approvals_pending": "airlock_approvals_pending",
    "approvals_oldest_age": "airlock_approvals_pending_oldest_age_seconds",
    "approvals_decided": "airlock_approvals_decided_total",
    "mcp_instances": "airlock_mcp_instances",
    "sandboxes_ready": "airlock_sandboxes_ready",
    "blob_store_usage": "airlock_blob_store_usage_bytes",
    "output_kept_usage": "airlock_output_kept_usage_bytes",
    "store_commit_duration": "airlock_store_commit_duration_seconds",
    "egress_requests": "airlock_egress_requests_total",
    "model_duration": "gen_ai_client_operation_duration_seconds",
    "token_usage": "gen_ai_client_token_usage",
    "build_info": "airlock_build_info",
}

# The tool call statuses (the `status` label: the API's ToolStatus names) that count as
# failures in the error ratio, as in alerts.yml's AirlockToolErrorRatioHigh. Not failures:
# OK, DENIED (the policy working), CANCELLED (a client's choice) and INVALID_ARGUMENTS (the
# model's mistake, refused before anything ran).
FAILED = "TOOL_ERROR|TIMEOUT|SANDBOX_ERROR|LIMIT_EXCEEDED|OUTCOME_UNKNOWN"
FAILED_TEXT = "failed (TOOL_ERROR, TIMEOUT, SANDBOX_ERROR, LIMIT_EXCEEDED or OUTCOME_UNKNOWN)"

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# The template variables every query filters by: a daemon (instance) and, where the metric
# has the label, a tenant. Both default to All (the regex .*).
BY_INSTANCE = 'instance=~"$instance"'
BY_TENANT = 'tenant=~"$tenant", instance=~"$instance"'
RATE = "$__rate_interval"


def n(key, suffix=""):
    return NAMES[key] + suffix


def sel(key, suffix="", tenant=False, extra=""):
    """A selector of metric `key`, filtered by the dashboard's variables (and `extra`)."""
    matchers = BY_TENANT if tenant else BY_INSTANCE
    if extra:
        matchers += ", " + extra
    return f"{n(key, suffix)}{{{matchers}}}"


def quantile(q, key, by, tenant=False):
    """The q-quantile of histogram `key` over the rate interval, by the labels `by`."""
    group = ", ".join([*by, "le"])
    return (
        f"histogram_quantile({q}, sum by ({group}) "
        f"(rate({sel(key, '_bucket', tenant)}[{RATE}])))"
    )


def target(expr, legend="", ref="A", instant=False):
    return {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": expr,
        "instant": instant,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "refId": ref,
    }


def targets(*pairs, instant=False):
    """Targets from (expr, legend) pairs, with refIds A, B, C…"""
    return [
        target(expr, legend, chr(ord("A") + index), instant)
        for index, (expr, legend) in enumerate(pairs)
    ]


def thresholds(*steps):
    """Threshold steps: (value, colour) pairs after the base colour."""
    base, *rest = steps
    return {
        "mode": "absolute",
        "steps": [{"color": base, "value": None}]
        + [{"color": colour, "value": value} for value, colour in rest],
    }


def timeseries(title, description, unit, panel_targets, stack=False, bars=False, decimals=None,
               overrides=()):
    defaults = {
        "unit": unit,
        "min": 0,
        "custom": {
            "drawStyle": "bars" if bars else "line",
            "lineWidth": 1,
            "fillOpacity": 60 if bars else (25 if stack else 10),
            "showPoints": "never",
            "spanNulls": False,
            "stacking": {"mode": "normal" if stack else "none", "group": "A"},
        },
        "thresholds": thresholds("green"),
        "color": {"mode": "palette-classic"},
    }
    if decimals is not None:
        defaults["decimals"] = decimals
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": defaults, "overrides": list(overrides)},
        "options": {
            "legend": {"displayMode": "table", "placement": "right", "showLegend": True,
                       "calcs": ["lastNotNull", "max"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": panel_targets,
    }


def right_axis(ref, unit):
    """An override putting target `ref`'s series on a right-hand axis in `unit`."""
    return {
        "matcher": {"id": "byFrameRefID", "options": ref},
        "properties": [
            {"id": "unit", "value": unit},
            {"id": "custom.axisPlacement", "value": "right"},
        ],
    }


def stat(title, description, unit, expr, steps, legend=""):
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {
            "defaults": {"unit": unit, "thresholds": steps, "color": {"mode": "thresholds"}},
            "overrides": [],
        },
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "orientation": "auto",
            "textMode": "auto",
        },
        "targets": [target(expr, legend)],
    }


def row(title):
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def panels():
    calls = f"rate({sel('tool_calls', tenant=True)}[{RATE}])"
    failed = f"rate({sel('tool_calls', tenant=True, extra=f'status=~{json.dumps(FAILED)}')}[{RATE}])"
    refused = sel("egress_requests", tenant=True, extra='decision="refused"')
    return [
        row("Overview"),
        stat("Daemons", "airlockd processes reporting, by version (airlock_build_info).",
             "none", f"count by (version) ({sel('build_info')})", thresholds("blue"),
             "{{version}}"),
        stat("Tool calls", "Tool calls finished per second, every tool and status.", "reqps",
             f"sum({calls})", thresholds("blue")),
        stat("Tool error ratio", f"Share of tool calls that {FAILED_TEXT}.",
             "percentunit", f"sum({failed}) / sum({calls})",
             thresholds("green", (0.1, "orange"), (0.5, "red"))),
        stat("Live runs", "Runs live in the daemons, running or waiting for an approval.",
             "none", f"sum({sel('runs')})", thresholds("blue")),
        stat("Approvals pending", "Approval requests waiting for a person's decision.", "none",
             f"sum({sel('approvals_pending')})", thresholds("green", (1, "orange"))),
        stat("Oldest approval", "How long the oldest waiting approval request has waited "
             "(the alert fires past 15 minutes).", "s",
             f"max({sel('approvals_oldest_age')})",
             thresholds("green", (300, "orange"), (900, "red"))),

        row("Tool calls"),
        timeseries("Tool calls by tool and status", "Calls finished per second.", "reqps",
                   targets((f"sum by (tool, status) ({calls})", "{{tool}} {{status}}")),
                   stack=True),
        timeseries("Tool error ratio by tool",
                   f"Share of each tool's calls that {FAILED_TEXT} "
                   "(0 for a tool with calls and no failures). Includes a model's own "
                   "mistakes (a file that does not exist): compare tools, and watch changes.",
                   "percentunit",
                   targets((f"(sum by (tool) ({failed}) or 0 * sum by (tool) ({calls})) "
                            f"/ sum by (tool) ({calls})", "{{tool}}"))),
        timeseries("Tool call latency by tool (p50, p95, p99)",
                   "From a call's start to its result, sandbox set-up included.", "s",
                   targets((quantile(0.5, "tool_call_duration", ["tool"]), "p50 {{tool}}"),
                           (quantile(0.95, "tool_call_duration", ["tool"]), "p95 {{tool}}"),
                           (quantile(0.99, "tool_call_duration", ["tool"]), "p99 {{tool}}"))),
        timeseries("Tool calls by engine", "Calls per second by engine (wasm, process, mcp).",
                   "reqps", targets((f"sum by (engine) ({calls})", "{{engine}}")), stack=True),

        row("Runs"),
        timeseries("Runs by state", "Live runs: running, or waiting for an approval.", "none",
                   targets((f"sum by (state) ({sel('runs')})", "{{state}}")), stack=True,
                   decimals=0),
        timeseries("Run steps by tenant", "Agent loop steps per second.", "ops",
                   targets((f"sum by (tenant) (rate({sel('run_steps', tenant=True)}[{RATE}]))",
                            "{{tenant}}")), stack=True),
        timeseries("Step latency (p50, p95, p99)",
                   "One loop step: building the context, the model call, the calls it "
                   "proposed (approvals' waits included).", "s",
                   targets((quantile(0.5, "run_step_duration", []), "p50"),
                           (quantile(0.95, "run_step_duration", []), "p95"),
                           (quantile(0.99, "run_step_duration", []), "p99"))),
        timeseries("Runs finished by reason", "Runs that stopped per second, by stop reason.",
                   "ops", targets((f"sum by (reason) (rate({sel('runs_finished')}[{RATE}]))",
                                   "{{reason}}")), stack=True),

        row("Approvals"),
        timeseries("Approvals pending and oldest age",
                   "Requests waiting for a decision (left axis) and how long the oldest has "
                   "waited (right axis).", "none",
                   targets((f"sum({sel('approvals_pending')})", "pending"),
                           (f"max({sel('approvals_oldest_age')})", "oldest age")),
                   decimals=0, overrides=[right_axis("B", "s")]),
        timeseries("Approval outcomes", "Approval requests resolved per second: approved, "
                   "denied, or expired (no answer by the deadline: denied too).", "ops",
                   targets((f"sum by (outcome) (rate({sel('approvals_decided')}[{RATE}]))",
                            "{{outcome}}")), stack=True),

        row("Sandboxes and MCP servers"),
        timeseries("Hosted MCP server instances", "MCP server instances running, per daemon.",
                   "none", targets((f"sum by (instance) ({sel('mcp_instances')})",
                                    "{{instance}}")), decimals=0),
        timeseries("Sandboxes ready", "Process sandboxes built ahead of their call and "
                   "waiting for it, per daemon (at most one: for the last tool and workspace "
                   "called).", "none",
                   targets((f"sum by (instance) ({sel('sandboxes_ready')})", "{{instance}}")),
                   decimals=0),

        row("Storage"),
        timeseries("Blob store and kept outputs",
                   "Bytes held by the change sets' blob store, and by full tool outputs kept "
                   "for paging (airlock gc and [store] retention_days delete them).", "bytes",
                   targets((f"sum by (instance) ({sel('blob_store_usage')})",
                            "blobs {{instance}}"),
                           (f"sum by (instance) ({sel('output_kept_usage')})",
                            "kept outputs {{instance}}"))),
        timeseries("Store commit latency (p50, p99)",
                   "Time a run store transaction takes to commit, by backend.", "s",
                   targets((quantile(0.5, "store_commit_duration", ["backend"]), "p50 {{backend}}"),
                           (quantile(0.99, "store_commit_duration", ["backend"]),
                            "p99 {{backend}}"))),

        row("Network egress"),
        timeseries("Egress allowed vs refused",
                   "Outgoing connections tools asked for per second, by the gate's decision.",
                   "reqps",
                   targets((f"sum by (decision) (rate({sel('egress_requests', tenant=True)}[{RATE}]))",
                            "{{decision}}")), stack=True),
        timeseries("Egress refusals by tenant",
                   "Refused connections per second: a host outside a profile's allow-list, or "
                   "an internal address behind a listed name.", "reqps",
                   targets((f"sum by (tenant) (rate({refused}[{RATE}]))",
                            "{{tenant}}"))),

        row("Model calls"),
        timeseries("Model call latency by model (p50, p95)",
                   "GenAI client operation duration: each model call, streaming included.", "s",
                   targets((quantile(0.5, "model_duration", ["gen_ai_request_model"]),
                            "p50 {{gen_ai_request_model}}"),
                           (quantile(0.95, "model_duration", ["gen_ai_request_model"]),
                            "p95 {{gen_ai_request_model}}"))),
        timeseries("Model calls by provider and model", "Model calls per second.", "reqps",
                   targets((f"sum by (gen_ai_provider_name, gen_ai_request_model) "
                            f"(rate({sel('model_duration', '_count')}[{RATE}]))",
                            "{{gen_ai_provider_name}} {{gen_ai_request_model}}")), stack=True),
        timeseries("Token usage by type and model", "Tokens per second, input and output.",
                   "short",
                   targets((f"sum by (gen_ai_token_type, gen_ai_request_model) "
                            f"(rate({sel('token_usage', '_sum')}[{RATE}]))",
                            "{{gen_ai_token_type}} {{gen_ai_request_model}}")), stack=True),
    ]


def layout(items):
    """Ids and grid positions: rows full width, stats six to a row, graphs two to a row."""
    y = 0
    x = 0
    height = 0
    for index, panel in enumerate(items, start=1):
        panel["id"] = index
        if panel["type"] == "row":
            if x:
                y += height
            panel["gridPos"] = {"h": 1, "w": 24, "x": 0, "y": y}
            y += 1
            x = height = 0
            continue
        width, h = (4, 4) if panel["type"] == "stat" else (12, 8)
        if x + width > 24:
            y += height
            x = 0
        panel["gridPos"] = {"h": h, "w": width, "x": x, "y": y}
        x += width
        height = h
    return items


def variable_query(name, label, metric, label_name):
    query = f"label_values({NAMES[metric]}, {label_name})"
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": "StandardVariableQuery"},
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "sort": 1,
        "hide": 0,
        "regex": "",
        "skipUrlSync": False,
    }


def dashboard():
    return {
        "__comment": "Generated by deploy/grafana/build.py: edit that, not this file.",
        "annotations": {"list": [{
            "builtIn": 1,
            "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True,
            "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts",
            "type": "dashboard",
        }]},
        "description": "airlockd: tool calls, runs, approvals, sandboxes, storage, egress and "
                       "model calls, from its Prometheus metrics endpoint.",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "panels": layout(panels()),
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["airlock"],
        "templating": {"list": [
            {
                "type": "datasource",
                "name": "datasource",
                "label": "Data source",
                "query": "prometheus",
                "current": {},
                "hide": 0,
                "includeAll": False,
                "multi": False,
                "options": [],
                "refresh": 1,
                "regex": "",
                "skipUrlSync": False,
            },
            variable_query("instance", "Daemon", "build_info", "instance"),
            variable_query("tenant", "Tenant", "tool_calls", "tenant"),
        ]},
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "airlock",
        "uid": "airlock-overview",
        "version": 1,
        "weekStart": "",
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if the output file is not what this script makes")
    parser.add_argument("--output", type=Path,
                        default=Path(__file__).resolve().parent / "airlock.json")
    args = parser.parse_args()
    text = json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            sys.exit(f"{args.output} is not what {Path(__file__).name} makes: run "
                     f"python3 {Path(__file__)} (and edit the script, not the JSON)")
        print(f"{args.output}: as {Path(__file__).name} makes it")
        return
    args.output.write_text(text)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
