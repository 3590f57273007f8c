//! The WebAssembly sandbox against purpose-built hostile tools (tests/hostile, tests/modules),
//! through gRPC on loopback. Every attack must end with the right status, and the daemon must
//! serve the next call afterwards.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use airlock_proto::v1 as pb;
use airlock_tests::{
    DaemonOptions, Execution, ProfilesDir, TestDaemon, ToolsDir, test_module, wat_module,
};
use pb::ToolStatus;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A profile with small limits, so limit tests finish quickly.
const TIGHT_PROFILE: &str = r#"
description = "small limits for tests"
[files]
read_only = ["$WORKSPACE"]
[limits]
memory = "64 MiB"
wall_time_ms = 20000
output = "1 MiB"
"#;

/// Starts a daemon serving `echo` (the health probe of every test) plus `tools`, with the
/// repository's profiles and `tight`.
async fn daemon_with(tools: &[(&str, Vec<u8>, &str)]) -> (TestDaemon, ToolsDir, ProfilesDir) {
    daemon_with_tight(TIGHT_PROFILE, tools).await
}

/// Starts a daemon serving `echo` plus `tools`, with the repository's profiles and `tight`
/// defined as `tight_profile`, and checks that it refused none of them.
pub(crate) async fn daemon_with_tight(
    tight_profile: &str,
    tools: &[(&str, Vec<u8>, &str)],
) -> (TestDaemon, ToolsDir, ProfilesDir) {
    let dir = ToolsDir::new();
    dir.add_file("echo", &test_module("echo"), "");
    for (name, module, extra) in tools {
        dir.add(name, module, extra);
    }
    let profiles = ProfilesDir::new();
    profiles.add("tight", tight_profile);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![dir.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    assert!(
        daemon.refused().is_empty(),
        "refused: {:?}",
        daemon.refused()
    );
    (daemon, dir, profiles)
}

pub(crate) fn hostile(name: &str) -> Vec<u8> {
    std::fs::read(test_module(name)).unwrap()
}

/// The daemon still answers a plain call.
async fn assert_serves_next_call(daemon: &TestDaemon) {
    let execution = daemon.exec("echo", json!({"still": "alive"}), None).await;
    execution.assert_status(ToolStatus::Ok);
    assert_eq!(execution.json(), json!({"still": "alive"}));
}

pub(crate) async fn exec_with_timeout(
    daemon: &TestDaemon,
    tool: &str,
    args: Value,
    timeout_ms: u64,
) -> Execution {
    daemon
        .exec_request(pb::ExecuteToolRequest {
            tool: tool.into(),
            arguments_json: args.to_string(),
            workspace: String::new(),
            timeout_ms,
            require_approval: false,
        })
        .await
        .expect("accepted")
}

/// Calls `tool` with `arguments` (a call that spins) and a timeout of 300 ms: it ends as
/// TIMEOUT, saying so, long before the manifest's deadline.
pub(crate) async fn assert_stopped_at_deadline(daemon: &TestDaemon, tool: &str, arguments: Value) {
    let started = Instant::now();
    let execution = exec_with_timeout(daemon, tool, arguments, 300).await;
    execution.assert_status(ToolStatus::Timeout);
    assert!(
        execution.result().error_message.contains("300 ms"),
        "{tool}: {:?}",
        execution.result()
    );
    assert!(started.elapsed() < Duration::from_secs(15), "{tool}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spinning_tool_is_stopped_at_its_deadline() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("spin", hostile("spin"), "profile = \"strict\"")]).await;
    assert_stopped_at_deadline(&daemon, "spin", json!({})).await;
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn a_tool_blocked_in_a_host_call_is_stopped_at_its_deadline() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("sleep", hostile("sleep"), "profile = \"strict\"")]).await;
    exec_with_timeout(&daemon, "sleep", json!({}), 300)
        .await
        .assert_status(ToolStatus::Timeout);
    assert_serves_next_call(&daemon).await;
}

/// File calls run on the thread that polls the call: a FIFO in the workspace that nobody
/// writes to holds that thread in the kernel at `open`. Four such calls at once — more than
/// the daemon's runtime has threads — each still end at their deadline, and the daemon
/// answers the next call (the stall watch interrupts the stuck `open`s).
#[tokio::test]
async fn calls_stuck_opening_a_fifo_end_at_their_deadline() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("fs_ops", hostile("fs_ops"), "profile = \"readonly\"")]).await;
    let workspace = daemon.workspace("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(workspace.join("pipe"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let read_the_pipe = || {
        daemon.exec_request(pb::ExecuteToolRequest {
            tool: "fs_ops".into(),
            arguments_json:
                json!({"ops": [{"op": "read_repeatedly", "path": "pipe", "times": 1000}]})
                    .to_string(),
            workspace: workspace.to_string_lossy().into_owned(),
            timeout_ms: 500,
            require_approval: false,
        })
    };
    let started = Instant::now();
    let ends = futures::future::join_all((0..4).map(|_| read_the_pipe())).await;
    for execution in ends {
        execution
            .expect("accepted")
            .assert_status(ToolStatus::Timeout);
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn a_loop_in_the_start_function_is_stopped_during_instantiation() {
    let (daemon, _tools, _profiles) = daemon_with(&[(
        "start_spin",
        wat_module("start_spin"),
        "profile = \"strict\"",
    )])
    .await;
    exec_with_timeout(&daemon, "start_spin", json!({}), 300)
        .await
        .assert_status(ToolStatus::Timeout);
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn the_manifest_timeout_applies_and_a_request_cannot_extend_it() {
    let (daemon, _tools, _profiles) = daemon_with(&[(
        "spin",
        hostile("spin"),
        "profile = \"strict\"\ntimeout_ms = 300",
    )])
    .await;
    let execution = exec_with_timeout(&daemon, "spin", json!({}), 60_000).await;
    execution.assert_status(ToolStatus::Timeout);
    assert!(
        execution.result().error_message.contains("300 ms"),
        "{:?}",
        execution.result()
    );
}

/// Starts `tool` with `arguments` (a call that spins until its deadline) and returns the open
/// stream and its execution id.
async fn start_spinning(
    daemon: &TestDaemon,
    tool: &str,
    arguments: Value,
) -> (tonic::Streaming<pb::ExecuteToolEvent>, String) {
    let mut stream = daemon
        .tools()
        .await
        .execute_tool(pb::ExecuteToolRequest {
            tool: tool.into(),
            arguments_json: arguments.to_string(),
            workspace: String::new(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    let Some(pb::execute_tool_event::Event::Started(started)) = first.event else {
        panic!("expected started, got {first:?}");
    };
    (stream, started.execution_id)
}

#[tokio::test]
async fn cancel_execution_stops_a_spinning_tool() {
    // The deadline is a minute: a result well before it can only come from the cancel.
    let (daemon, _tools, _profiles) = daemon_with(&[(
        "spin",
        hostile("spin"),
        "profile = \"strict\"\ntimeout_ms = 60000",
    )])
    .await;
    assert_cancel_stops(&daemon, "spin", json!({}), Duration::from_secs(30)).await;
    assert_serves_next_call(&daemon).await;
}

/// Starts `tool` with `arguments` (a call that spins) and cancels it: the call finishes
/// CANCELLED within `within` (shorter than its deadline, so only the cancel can have ended it),
/// and once finished it is gone.
pub(crate) async fn assert_cancel_stops(
    daemon: &TestDaemon,
    tool: &str,
    arguments: Value,
    within: Duration,
) {
    let (mut stream, execution_id) = start_spinning(daemon, tool, arguments).await;
    let asked = Instant::now();
    daemon
        .tools()
        .await
        .cancel_execution(pb::CancelExecutionRequest {
            execution_id: execution_id.clone(),
        })
        .await
        .expect("the execution is running");
    let mut result = None;
    while let Some(event) = stream.message().await.unwrap() {
        if let Some(pb::execute_tool_event::Event::Finished(finished)) = event.event {
            result = Some(finished);
        }
    }
    let result = result.expect("a finished event");
    assert_eq!(result.status, ToolStatus::Cancelled as i32, "{result:?}");
    assert_eq!(result.execution_id, execution_id);
    assert!(asked.elapsed() < within, "{tool}");
    // Once finished, the execution is gone.
    let status = daemon
        .tools()
        .await
        .cancel_execution(pb::CancelExecutionRequest { execution_id })
        .await
        .expect_err("no longer running");
    assert_eq!(status.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_call() {
    let (daemon, _tools, _profiles) = daemon_with(&[(
        "spin",
        hostile("spin"),
        "profile = \"strict\"\ntimeout_ms = 60000",
    )])
    .await;
    let (stream, execution_id) = start_spinning(&daemon, "spin", json!({})).await;
    drop(stream);
    let mut tools = daemon.tools().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let outcome = tools
            .cancel_execution(pb::CancelExecutionRequest {
                execution_id: execution_id.clone(),
            })
            .await;
        match outcome {
            Err(status) if status.code() == tonic::Code::NotFound => break,
            _ if Instant::now() > deadline => panic!("the call kept running after its client left"),
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn unbounded_allocation_hits_the_memory_limit() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("grow", hostile("grow_memory"), "profile = \"tight\"")]).await;
    let execution = daemon
        .exec("grow", json!({}), Some(&daemon.workspace("w")))
        .await;
    assert_hit_the_memory_limit(&execution, "grow");
    assert_serves_next_call(&daemon).await;
}

/// `tool`'s call, which allocates without end, was stopped at the `tight` profile's 64 MiB.
pub(crate) fn assert_hit_the_memory_limit(execution: &Execution, tool: &str) {
    execution.assert_status(ToolStatus::LimitExceeded);
    let result = execution.result();
    assert!(
        result.error_message.contains("limits.memory"),
        "{tool}: {result:?}"
    );
    let peak = result.metadata.as_ref().unwrap().peak_memory_bytes;
    assert!(peak <= 64 << 20 && peak > 32 << 20, "{tool}: peak {peak}");
}

#[tokio::test]
async fn memory_grow_and_table_grow_hit_their_limits() {
    let (daemon, _tools, _profiles) = daemon_with(&[
        (
            "memory_grow",
            wat_module("memory_grow"),
            "profile = \"tight\"",
        ),
        (
            "table_grow",
            wat_module("table_grow"),
            "profile = \"tight\"",
        ),
        (
            "huge_memory",
            wat_module("huge_memory_decl"),
            "profile = \"tight\"",
        ),
    ])
    .await;
    let workspace = daemon.workspace("w");
    for tool in ["memory_grow", "table_grow", "huge_memory"] {
        let execution = daemon.exec(tool, json!({}), Some(&workspace)).await;
        execution.assert_status(ToolStatus::LimitExceeded);
        assert_serves_next_call(&daemon).await;
    }
}

#[tokio::test]
async fn an_endless_flood_is_stopped_at_the_output_limit() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("flood", hostile("flood"), "profile = \"tight\"")]).await;
    let execution = daemon
        .exec("flood", json!({}), Some(&daemon.workspace("w")))
        .await;
    execution.assert_status(ToolStatus::LimitExceeded);
    let result = execution.result();
    assert!(result.truncated);
    assert!(result.error_message.contains("1048576 bytes"), "{result:?}");
    // Nothing past the limit reached the client, and what did is the tool's own pattern.
    let streamed = execution.stdout.len() + execution.stderr.len();
    assert_eq!(streamed, 1 << 20);
    assert!(execution.stdout.iter().all(|b| *b == b'o' || *b == b'\n'));
    assert!(execution.stderr.iter().all(|b| *b == b'e' || *b == b'\n'));
    let metadata = result.metadata.as_ref().unwrap();
    assert!(metadata.stdout_bytes + metadata.stderr_bytes > 1 << 20);
    assert!(
        result.content.starts_with("ooo"),
        "{}",
        &result.content[..20]
    );
    assert!(result.content.len() as u64 <= 64 * 1024);
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn output_at_the_limit_passes_and_one_byte_more_does_not() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("flood", hostile("flood"), "profile = \"tight\"")]).await;
    let workspace = daemon.workspace("w");
    // Exactly the limit: the tool finishes (without a result document, which is its own
    // ABI error), and no limit was hit.
    let at = daemon
        .exec(
            "flood",
            json!({"stdout_bytes": 0, "stderr_bytes": 1 << 20}),
            Some(&workspace),
        )
        .await;
    at.assert_status(ToolStatus::ToolError);
    assert!(
        at.result().error_message.contains("no result"),
        "{:?}",
        at.result()
    );
    assert_eq!(at.stderr.len(), 1 << 20);
    let over = daemon
        .exec(
            "flood",
            json!({"stdout_bytes": 1, "stderr_bytes": 1 << 20}),
            Some(&workspace),
        )
        .await;
    over.assert_status(ToolStatus::LimitExceeded);
}

#[tokio::test]
async fn an_oversized_result_is_cut_by_the_output_policy() {
    let (daemon, _tools, _profiles) = daemon_with(&[
        (
            "big_head",
            hostile("big_result"),
            "profile = \"strict\"\n[output]\nmax_bytes = 1000\ntruncate = \"head\"",
        ),
        (
            "big_tail",
            hostile("big_result"),
            "profile = \"strict\"\n[output]\nmax_bytes = 1000\ntruncate = \"tail\"",
        ),
        (
            "big_both",
            hostile("big_result"),
            "profile = \"strict\"\n[output]\nmax_bytes = 1000\ntruncate = \"head_tail\"",
        ),
        (
            "big_fits",
            hostile("big_result"),
            "profile = \"strict\"\n[output]\nmax_bytes = 100002",
        ),
    ])
    .await;
    let args = json!({"bytes": 100_000});
    // The content is the `ok` value as JSON text: a string of 100000 `a`s and its quotes.
    let full_len = 100_002;
    let head = daemon.exec("big_head", args.clone(), None).await;
    head.assert_status(ToolStatus::Ok);
    let result = head.result();
    assert!(result.truncated);
    assert_eq!(result.original_bytes, full_len);
    assert_eq!(result.content, format!("\"{}", "a".repeat(999)));

    let tail = daemon.exec("big_tail", args.clone(), None).await;
    assert_eq!(tail.result().content, format!("{}\"", "a".repeat(999)));

    let both = daemon.exec("big_both", args.clone(), None).await;
    let content = &both.result().content;
    assert!(content.len() <= 1000 && content.starts_with("\"a") && content.ends_with("a\""));
    assert!(content.contains("bytes omitted"), "{content}");

    let fits = daemon.exec("big_fits", args, None).await;
    assert!(!fits.result().truncated);
    assert_eq!(fits.result().content.len() as u64, full_len);
}

/// Plants the escape fixtures: a secret beside the workspace and links pointing out of it.
fn plant_escape_fixtures(workspace: &Path) -> String {
    let secret = "TOP-SECRET-a6f1c2";
    let parent = workspace.parent().unwrap();
    std::fs::write(parent.join("secret.txt"), secret).unwrap();
    std::fs::write(workspace.join("inside.txt"), "inside").unwrap();
    std::os::unix::fs::symlink(parent, workspace.join("link_out")).unwrap();
    std::os::unix::fs::symlink(parent.join("secret.txt"), workspace.join("link_file")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", workspace.join("link_abs")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", workspace.join("link_dotdot")).unwrap();
    secret.to_owned()
}

fn attempts(result: &Value) -> BTreeMap<String, Value> {
    result
        .as_array()
        .expect("a list of attempts")
        .iter()
        .map(|attempt| {
            (
                attempt["attempt"].as_str().unwrap().to_owned(),
                attempt.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn nothing_outside_the_workspace_can_be_read() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("escape", hostile("escape"), "profile = \"readonly\"")]).await;
    let workspace = daemon.workspace("project");
    let secret = plant_escape_fixtures(&workspace);
    let execution = daemon
        .exec(
            "escape",
            json!({"extra_paths": ["/proc/self/root", "/proc/1/environ", "/dev/../etc/shadow"]}),
            Some(&workspace),
        )
        .await;
    execution.assert_status(ToolStatus::Ok);
    let content = &execution.result().content;
    assert!(!content.contains(&secret), "the secret leaked: {content}");
    assert!(
        !content.contains("root:x:0:0"),
        "/etc/passwd leaked: {content}"
    );
    assert!(!String::from_utf8_lossy(&execution.stderr).contains(&secret));
    let attempts = attempts(&execution.json());
    assert!(attempts.len() >= 14, "{attempts:#?}");
    for (name, attempt) in &attempts {
        match name.as_str() {
            // Both names of the workspace list it.
            "list ." | "list /workspace" | "list /" => {
                assert_eq!(attempt["succeeded"], true, "{name}: {attempt}");
                let listing = attempt["content"].as_str().unwrap();
                assert!(
                    listing.contains("inside.txt"),
                    "{name} is not the workspace: {listing}"
                );
            }
            _ => assert_eq!(attempt["succeeded"], false, "{name} succeeded: {attempt}"),
        }
    }
    assert_serves_next_call(&daemon).await;
}

/// Names, content, permissions and modification times of everything under `dir`.
fn snapshot(dir: &Path) -> BTreeMap<String, (Vec<u8>, u32, i64)> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        let content = if meta.is_file() {
            std::fs::read(entry.path()).unwrap()
        } else {
            Vec::new()
        };
        files.insert(
            entry.file_name().to_string_lossy().into_owned(),
            (
                content,
                meta.mode(),
                meta.mtime_nsec() + meta.mtime() * 1_000_000_000,
            ),
        );
    }
    files
}

#[tokio::test]
async fn a_read_only_workspace_cannot_be_changed() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("write_ro", hostile("write_ro"), "profile = \"readonly\"")]).await;
    let workspace = daemon.workspace("project");
    std::fs::write(workspace.join("existing.txt"), "original\n").unwrap();
    std::fs::create_dir(workspace.join("existing_dir")).unwrap();
    let before = snapshot(&workspace);
    for base in [".", "/workspace"] {
        let execution = daemon
            .exec("write_ro", json!({"base": base}), Some(&workspace))
            .await;
        execution.assert_status(ToolStatus::Ok);
        let attempts = attempts(&execution.json());
        assert!(attempts.len() >= 14, "{attempts:#?}");
        for (name, attempt) in attempts {
            assert_eq!(attempt["succeeded"], false, "{name} succeeded: {attempt}");
        }
    }
    assert_eq!(snapshot(&workspace), before, "the workspace changed");
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn a_tool_sees_only_the_environment_and_directories_its_profile_grants() {
    let profiles_extra = r#"
description = "passes PATH"
[env]
pass = ["PATH", "AIRLOCK_NOT_SET_ANYWHERE"]
set = { GREETING = "hello" }
"#;
    let dir = ToolsDir::new();
    dir.add_file(
        "env_readonly",
        &test_module("env"),
        "profile = \"readonly\"",
    );
    dir.add_file("env_strict", &test_module("env"), "profile = \"strict\"");
    dir.add_file("env_pass", &test_module("env"), "profile = \"pass\"");
    let profiles = ProfilesDir::new();
    profiles.add("pass", profiles_extra);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![dir.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    let workspace = daemon.workspace("w");

    let readonly = daemon
        .exec("env_readonly", json!({}), Some(&workspace))
        .await;
    let report = readonly.assert_status(ToolStatus::Ok).json();
    assert_eq!(report["argv"], json!(["env_readonly"]));
    assert_eq!(report["env"], json!({"LANG": "C.UTF-8"}));
    assert_eq!(report["preopens"], json!(["/workspace", "."]));

    let strict = daemon.exec("env_strict", json!({}), Some(&workspace)).await;
    let report = strict.assert_status(ToolStatus::Ok).json();
    assert_eq!(report["env"], json!({}));
    assert_eq!(report["preopens"], json!([]));

    let pass = daemon.exec("env_pass", json!({}), None).await;
    let report = pass.assert_status(ToolStatus::Ok).json();
    let path = std::env::var("PATH").unwrap();
    assert_eq!(report["env"], json!({"PATH": path, "GREETING": "hello"}));
}

#[tokio::test]
async fn sockets_and_name_lookups_are_refused() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("socket", hostile("socket"), "profile = \"strict\"")]).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let execution = daemon
        .exec(
            "socket",
            json!({
                "tcp": listener.local_addr().unwrap().to_string(),
                "udp": udp.local_addr().unwrap().to_string(),
                "dns": "localhost",
            }),
            None,
        )
        .await;
    execution.assert_status(ToolStatus::Ok);
    let attempts = attempts(&execution.json());
    assert!(attempts.len() >= 4, "{attempts:#?}");
    for (name, attempt) in attempts {
        assert_eq!(attempt["succeeded"], false, "{name} succeeded: {attempt}");
    }
    assert!(listener.accept().is_err(), "a connection reached the host");
    let mut buf = [0u8; 64];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "a datagram reached the host"
    );
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn traps_and_panics_are_tool_errors_that_say_what_happened() {
    let (daemon, _tools, _profiles) =
        daemon_with(&[("trap", hostile("trap"), "profile = \"strict\"")]).await;
    for (kind, expected) in [
        ("unreachable", "unreachable"),
        ("panic", "panicked"),
        ("div_zero", "divide by zero"),
        ("abort", "unreachable"),
        ("stack_overflow", ""),
    ] {
        let execution = daemon.exec("trap", json!({"kind": kind}), None).await;
        execution.assert_status(ToolStatus::ToolError);
        let message = &execution.result().error_message;
        assert!(message.contains("crashed"), "{kind}: {message}");
        assert!(message.contains(expected), "{kind}: {message}");
        assert_eq!(execution.result().exit_code, None, "{kind}");
        assert_serves_next_call(&daemon).await;
    }
}

#[tokio::test]
async fn abi_violations_exits_and_reported_errors_are_tool_errors() {
    let (daemon, _tools, _profiles) = daemon_with(&[
        ("bad_json", hostile("bad_json"), "profile = \"strict\""),
        (
            "two_results",
            hostile("two_results"),
            "profile = \"strict\"",
        ),
        ("exit_code", hostile("exit_code"), "profile = \"strict\""),
        ("tool_error", hostile("tool_error"), "profile = \"strict\""),
    ])
    .await;
    for tool in ["bad_json", "two_results"] {
        let execution = daemon.exec(tool, json!({}), None).await;
        execution.assert_status(ToolStatus::ToolError);
        assert!(
            execution.result().error_message.contains("broke the ABI"),
            "{:?}",
            execution.result()
        );
    }
    let exited = daemon.exec("exit_code", json!({"code": 3}), None).await;
    exited.assert_status(ToolStatus::ToolError);
    assert_eq!(exited.result().exit_code, Some(3));
    assert!(
        exited.result().error_message.contains("code 3"),
        "{:?}",
        exited.result()
    );
    assert!(!exited.stderr.is_empty());
    let stderr_line = String::from_utf8_lossy(&exited.stderr).trim().to_owned();
    assert!(
        exited.result().error_message.contains(&stderr_line),
        "{:?}",
        exited.result()
    );

    let reported = daemon.exec("tool_error", json!({}), None).await;
    reported.assert_status(ToolStatus::ToolError);
    assert_eq!(reported.result().error_message, "the thing is busy");
    assert!(reported.result().retryable);
    assert_serves_next_call(&daemon).await;
}

#[tokio::test]
async fn the_cpu_time_limit_stops_a_spinning_tool() {
    let profiles = ProfilesDir::new();
    profiles.add(
        "cpu",
        "description = \"cpu\"\n[limits]\ncpu_time_ms = 200\nwall_time_ms = 60000",
    );
    let dir = ToolsDir::new();
    dir.add_file(
        "spin",
        &test_module("spin"),
        "profile = \"cpu\"\ntimeout_ms = 60000",
    );
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![dir.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    let execution = daemon.exec("spin", json!({}), None).await;
    execution.assert_status(ToolStatus::LimitExceeded);
    assert!(
        execution.result().error_message.contains("CPU"),
        "{:?}",
        execution.result()
    );
    let cpu = execution.result().metadata.as_ref().unwrap().cpu_time_us;
    assert!(cpu >= 200_000, "cpu {cpu}");
}

#[tokio::test]
async fn results_carry_their_metadata() {
    let (daemon, _tools, _profiles) = daemon_with(&[]).await;
    let execution = daemon.exec("echo", json!({"x": 1}), None).await;
    assert_carries_metadata(&execution, "echo");
}

/// A successful call's result carries the metadata of a call of `module` (`tests/modules`)
/// under the strict profile.
pub(crate) fn assert_carries_metadata(execution: &Execution, module: &str) {
    execution.assert_status(ToolStatus::Ok);
    let result = execution.result();
    let metadata = result.metadata.as_ref().unwrap();
    let digest = hex::encode(Sha256::digest(hostile(module)));
    assert_eq!(metadata.module_digest, digest);
    assert_eq!(metadata.engine, "wasm");
    assert_eq!(metadata.profile, "strict");
    assert!(metadata.peak_memory_bytes > 0, "{metadata:?}");
    assert!(metadata.cpu_time_us > 0, "{metadata:?}");
    assert_eq!(metadata.stdout_bytes, execution.stdout.len() as u64);
    assert_eq!(result.exit_code, Some(0));
    assert!(result.execution_id.starts_with("exe_"));
    assert_eq!(Some(&result.execution_id), execution.execution_id.as_ref());
}

#[tokio::test]
async fn calls_beyond_the_pool_wait_for_a_slot() {
    let dir = ToolsDir::new();
    dir.add_file("echo", &test_module("echo"), "profile = \"strict\"");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![dir.path().to_owned()],
        max_concurrent_calls: 2,
        ..DaemonOptions::default()
    })
    .await;
    let calls = (0..12).map(|i| {
        let daemon = &daemon;
        async move { daemon.exec("echo", json!({"i": i}), None).await }
    });
    for (i, execution) in futures::future::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        execution.assert_status(ToolStatus::Ok);
        assert_eq!(execution.json(), json!({"i": i}));
    }
}
