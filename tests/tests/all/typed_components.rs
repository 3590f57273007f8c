//! Typed components (the world `airlock:tool/tool` of sdk/wit/tool.wit) against a real daemon
//! over gRPC: the purpose-built `typed_probe` (tests/hostile) must get the same statuses,
//! limits, cancellation, output policy and metadata as a preview 1 module, with its context
//! right and its prints as logs. Where a module can do the same thing, the test runs both and
//! compares.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use airlock_proto::v1 as pb;
use airlock_tests::{Execution, ProfilesDir, TestDaemon, ToolsDir};
use pb::ToolStatus;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::registry::list_tools;
use crate::wasm_sandbox::{
    assert_cancel_stops, assert_carries_metadata, assert_hit_the_memory_limit,
    assert_stopped_at_deadline, daemon_with_tight, hostile,
};

/// Small limits and no files, so limit tests finish quickly and need no workspace.
const TIGHT_PROFILE: &str = r#"
description = "small limits for typed component tests"
[limits]
memory = "64 MiB"
wall_time_ms = 20000
output = "1 MiB"
"#;

/// The strict profile, with an output policy that cuts any result past 1000 bytes to its head.
const CUT: &str = "profile = \"strict\"\n[output]\nmax_bytes = 1000\ntruncate = \"head\"";

/// Every tool the tests call besides `echo` (which every daemon of the binary serves): the probe
/// under each profile, and the modules (and the command component) it is compared with.
const TOOLS: &[(&str, &str, &str)] = &[
    ("probe", "typed_probe", "profile = \"readonly\""),
    ("probe_strict", "typed_probe", "profile = \"strict\""),
    ("probe_tight", "typed_probe", "profile = \"tight\""),
    ("probe_cut", "typed_probe", CUT),
    ("big_cut", "big_result", CUT),
    ("big_tight", "big_result", "profile = \"tight\""),
    ("grow_tight", "grow_memory", "profile = \"tight\""),
    ("spin", "spin", "profile = \"strict\""),
    ("tool_error", "tool_error", "profile = \"strict\""),
    ("read_file_p2", "read_file_p2", "profile = \"readonly\""),
];

/// Starts a daemon serving [`TOOLS`], and checks that it refused none of them.
async fn daemon() -> (TestDaemon, ToolsDir, ProfilesDir) {
    let tools: Vec<_> = TOOLS
        .iter()
        .map(|&(name, module, extra)| (name, hostile(module), extra))
        .collect();
    daemon_with_tight(TIGHT_PROFILE, &tools).await
}

/// Calls the probe under the strict profile: no workspace, and no timeout of the request's.
async fn probe(daemon: &TestDaemon, arguments: Value) -> Execution {
    daemon.exec("probe_strict", arguments, None).await
}

/// The probe's `echo` still answers: a call that went wrong left nothing behind.
async fn assert_serves_next_call(daemon: &TestDaemon) {
    let execution = probe(daemon, json!({"mode": "echo"})).await;
    execution.assert_status(ToolStatus::Ok);
    assert_eq!(execution.json()["arguments"], json!({"mode": "echo"}));
}

/// Has the probe fail as `arguments` ask: a tool error, which `check` looks at further; then
/// the probe still serves.
async fn assert_probe_fails(arguments: Value, check: impl FnOnce(&Execution, &pb::ToolResult)) {
    let (daemon, _tools, _profiles) = daemon().await;
    let execution = probe(&daemon, arguments).await;
    execution.assert_status(ToolStatus::ToolError);
    check(&execution, execution.result());
    assert_serves_next_call(&daemon).await;
}

fn unix_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    u64::try_from(since.as_millis()).unwrap()
}

#[tokio::test]
async fn a_typed_call_gets_its_arguments_and_its_context() {
    let (daemon, _tools, _profiles) = daemon().await;
    let workspace = daemon.workspace("w");
    let arguments = json!({"mode": "echo", "nested": {"list": [1, "two", null]}, "text": "é\n"});
    let timeout_ms = 15_000;
    let before = unix_ms();
    let execution = daemon
        .exec_request(pb::ExecuteToolRequest {
            tool: "probe".into(),
            arguments_json: arguments.to_string(),
            workspace: workspace.to_str().unwrap().into(),
            timeout_ms,
            require_approval: false,
        })
        .await
        .unwrap();
    let after = unix_ms();
    execution.assert_status(ToolStatus::Ok);
    let echoed = execution.json();
    assert_eq!(echoed["arguments"], arguments);
    let context = &echoed["context"];
    assert_eq!(context["workspace"], "/workspace", "{context}");
    assert_eq!(
        context["call_id"].as_str(),
        Some(execution.result().execution_id.as_str()),
        "{context}"
    );
    assert_eq!(
        execution.execution_id.as_deref(),
        Some(execution.result().execution_id.as_str())
    );
    // The deadline is the call's (the request's shorter timeout), counted from its start.
    let deadline = context["deadline_unix_ms"].as_u64().unwrap();
    assert!(
        deadline + 1 >= before + timeout_ms && deadline <= after + timeout_ms,
        "deadline {deadline}, called between {before} and {after} with {timeout_ms} ms"
    );

    // Under a profile that grants no workspace, the context has none.
    let before = unix_ms();
    let strict = probe(&daemon, json!({"mode": "echo"})).await;
    let after = unix_ms();
    strict.assert_status(ToolStatus::Ok);
    let context = &strict.json()["context"];
    assert_eq!(context["workspace"], Value::Null, "{context}");
    assert_eq!(
        context["call_id"].as_str(),
        Some(strict.result().execution_id.as_str())
    );
    // The request asked for no timeout: the manifest's 20 s, capped by the strict profile's
    // wall time of 10 s.
    let deadline = context["deadline_unix_ms"].as_u64().unwrap();
    assert!(
        deadline + 1 >= before + 10_000 && deadline <= after + 10_000,
        "deadline {deadline}, called between {before} and {after}"
    );
}

#[tokio::test]
async fn a_typed_component_reads_the_workspace_its_context_names() {
    let (daemon, _tools, _profiles) = daemon().await;
    let workspace = daemon.workspace("w");
    std::fs::write(workspace.join("notes.txt"), "hello from the host\n").unwrap();
    let read = daemon
        .exec(
            "probe",
            json!({"mode": "read", "path": "notes.txt"}),
            Some(&workspace),
        )
        .await;
    read.assert_status(ToolStatus::Ok);
    assert_eq!(read.json(), json!("hello from the host\n"));

    // No workspace in the context: the probe says so, as a tool error.
    let strict = probe(&daemon, json!({"mode": "read", "path": "notes.txt"})).await;
    strict.assert_status(ToolStatus::ToolError);
    assert!(
        strict.result().error_message.contains("no workspace"),
        "{:?}",
        strict.result()
    );
}

#[tokio::test]
async fn a_returned_tool_error_is_a_tool_error_as_a_modules_is() {
    let (daemon, _tools, _profiles) = daemon().await;
    let typed = probe(
        &daemon,
        json!({"mode": "error", "message": "the thing is busy"}),
    )
    .await;
    typed.assert_status(ToolStatus::ToolError);
    let module = daemon.exec("tool_error", json!({}), None).await;
    module.assert_status(ToolStatus::ToolError);
    for result in [typed.result(), module.result()] {
        assert_eq!(result.error_message, "the thing is busy");
        assert!(result.retryable, "{result:?}");
        assert_eq!(result.exit_code, Some(0), "{result:?}");
    }

    // Arguments the probe cannot parse: its own error, not retryable.
    let bad = probe(&daemon, json!({"mode": "no_such_mode"})).await;
    bad.assert_status(ToolStatus::ToolError);
    assert!(
        bad.result().error_message.contains("invalid arguments"),
        "{:?}",
        bad.result()
    );
    assert!(!bad.result().retryable);
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn a_result_that_is_not_json_broke_the_abi() {
    assert_probe_fails(json!({"mode": "not_json"}), |_, result| {
        assert!(result.error_message.contains("broke the ABI"), "{result:?}");
        assert!(result.content.is_empty(), "{result:?}");
        assert!(!result.retryable);
    })
    .await;
}

#[tokio::test]
async fn a_trapping_typed_component_crashed() {
    assert_probe_fails(json!({"mode": "trap"}), |execution, result| {
        assert!(result.error_message.contains("crashed"), "{result:?}");
        // The panic message is on stderr, and so in the message's stderr tail.
        assert!(result.error_message.contains("asked to trap"), "{result:?}");
        assert!(String::from_utf8_lossy(&execution.stderr).contains("asked to trap"));
        assert_eq!(result.exit_code, None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spinning_typed_component_is_stopped_at_its_deadline() {
    let (daemon, _tools, _profiles) = daemon().await;
    for tool in ["probe_strict", "spin"] {
        assert_stopped_at_deadline(&daemon, tool, json!({"mode": "spin"})).await;
    }
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn cancel_execution_stops_a_spinning_typed_component() {
    // The deadline is the strict profile's 10 s: a timeout would say TIMEOUT.
    let (daemon, _tools, _profiles) = daemon().await;
    let spin = json!({"mode": "spin"});
    assert_cancel_stops(&daemon, "probe_strict", spin, Duration::from_secs(10)).await;
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn a_typed_result_past_the_output_limit_is_limit_exceeded() {
    let (daemon, _tools, _profiles) = daemon().await;
    let bytes = 2 << 20;
    for (tool, args) in [
        ("probe_tight", json!({"mode": "big", "bytes": bytes})),
        ("big_tight", json!({"bytes": bytes})),
    ] {
        let execution = daemon.exec(tool, args, None).await;
        execution.assert_status(ToolStatus::LimitExceeded);
        let result = execution.result();
        assert!(result.truncated, "{tool}: {result:?}");
        assert!(
            result.error_message.contains("1048576 bytes"),
            "{tool}: {result:?}"
        );
        // Nothing past the limit reached the client.
        assert!(
            execution.stdout.len() + execution.stderr.len() <= 1 << 20,
            "{tool}"
        );
    }
    // Just under the limit passes (the envelope `{"ok":…}` adds 7 bytes to the JSON string).
    let under = daemon
        .exec(
            "probe_tight",
            json!({"mode": "big", "bytes": (1 << 20) - 9}),
            None,
        )
        .await;
    under.assert_status(ToolStatus::Ok);
    assert_eq!(under.result().original_bytes, (1 << 20) - 7);
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn a_long_typed_result_is_cut_by_the_output_policy_as_a_modules_is() {
    let (daemon, _tools, _profiles) = daemon().await;
    let args = json!({"mode": "big", "bytes": 100_000});
    let typed = daemon.exec("probe_cut", args.clone(), None).await;
    typed.assert_status(ToolStatus::Ok);
    let module = daemon
        .exec("big_cut", json!({"bytes": 100_000}), None)
        .await;
    module.assert_status(ToolStatus::Ok);
    for result in [typed.result(), module.result()] {
        assert!(result.truncated, "{result:?}");
        // The JSON string: 100000 `a`s and its quotes.
        assert_eq!(result.original_bytes, 100_002);
        assert_eq!(result.content, format!("\"{}", "a".repeat(999)));
    }
    // Under the policy's limit, nothing is cut.
    let small = daemon
        .exec("probe_cut", json!({"mode": "big", "bytes": 10}), None)
        .await;
    small.assert_status(ToolStatus::Ok);
    assert!(!small.result().truncated);
    assert_eq!(small.json(), json!("a".repeat(10)));
}

#[tokio::test]
async fn what_a_typed_component_prints_is_a_log_not_its_result() {
    let (daemon, _tools, _profiles) = daemon().await;
    let execution = daemon
        .exec(
            "probe_strict",
            json!({"mode": "log", "stdout": "printed on stdout", "stderr": "printed on stderr"}),
            None,
        )
        .await;
    execution.assert_status(ToolStatus::Ok);
    assert_eq!(execution.json(), json!({"logged": true}));
    let logs = String::from_utf8_lossy(&execution.stderr);
    assert!(logs.contains("printed on stdout\n"), "{logs}");
    assert!(logs.contains("printed on stderr\n"), "{logs}");
    // The stdout stream is the result alone, as a module's result document is.
    let stdout = String::from_utf8_lossy(&execution.stdout);
    assert!(!stdout.contains("printed"), "{stdout}");
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap(),
        json!({"ok": {"logged": true}})
    );
    let result = execution.result();
    assert!(!result.content.contains("printed"), "{result:?}");
    let metadata = result.metadata.as_ref().unwrap();
    assert_eq!(metadata.stderr_bytes, execution.stderr.len() as u64);
    assert_eq!(metadata.stdout_bytes, execution.stdout.len() as u64);
}

#[tokio::test]
async fn a_typed_component_that_allocates_without_end_hits_the_memory_limit() {
    let (daemon, _tools, _profiles) = daemon().await;
    for tool in ["probe_tight", "grow_tight"] {
        let execution = daemon.exec(tool, json!({"mode": "grow"}), None).await;
        assert_hit_the_memory_limit(&execution, tool);
        assert_serves_next_call(&daemon).await;
    }
}

#[tokio::test]
async fn typed_results_carry_their_metadata() {
    let (daemon, _tools, _profiles) = daemon().await;
    let execution = probe(&daemon, json!({"mode": "echo"})).await;
    assert_carries_metadata(&execution, "typed_probe");
}

#[tokio::test]
async fn list_tools_reports_the_kind_of_each_tool() {
    let (daemon, _tools, _profiles) = daemon().await;
    let tools = list_tools(&daemon).await;
    let kind = |name: &str| {
        let tool = tools
            .iter()
            .find(|tool| tool.name == name)
            .unwrap_or_else(|| panic!("{name} is not listed: {tools:#?}"));
        pb::ToolKind::try_from(tool.kind).unwrap()
    };
    assert_eq!(kind("probe"), pb::ToolKind::WasmComponent);
    assert_eq!(kind("probe_strict"), pb::ToolKind::WasmComponent);
    assert_eq!(kind("echo"), pb::ToolKind::WasmModule);
    assert_eq!(kind("spin"), pb::ToolKind::WasmModule);
    assert_eq!(kind("read_file_p2"), pb::ToolKind::WasmCommand);
    let probe = tools.iter().find(|tool| tool.name == "probe").unwrap();
    assert_eq!(probe.engine, "wasm");
    let digest = hex::encode(Sha256::digest(hostile("typed_probe")));
    assert_eq!(probe.module_digest, digest);
}
