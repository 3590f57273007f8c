//! Third-party MCP servers hosted in airlock's sandbox: a server written with the official
//! Python SDK that attacks its sandbox (tests/mcp/servers/hostile_server.py) and the
//! reference server from npm, listed and called through gRPC `ExecuteTool` on loopback.
//!
//! Each attack asserts its outcome and what it left behind. The servers come from
//! `tests/mcp/install.sh` (run by the test command); without them the tests fail saying so.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, Execution, ProfilesDir, TestDaemon, ToolsDir, mcp, repo_root};
use pb::ToolStatus;
use serde_json::json;

/// What every test profile grants: the system's programs and the loader's files.
const SYSTEM: &[&str] = &["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache"];

/// A secret the hostile server is given, to be kept out of everything a client reads.
const TOKEN: &str = "hostile-secret-4f1c9a77d2";

/// A process profile for a server: the system, `extra` read-only, the workspace read-only,
/// `env` set.
pub(crate) fn profile(extra: &[&Path], env: &[(&str, String)], output: &str) -> String {
    let mut read_only: Vec<String> = SYSTEM.iter().map(|path| format!("{path:?}")).collect();
    read_only.extend(
        extra
            .iter()
            .map(|path| format!("{:?}", path.display().to_string())),
    );
    read_only.push("\"$WORKSPACE\"".into());
    let mut set = vec![
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("HOME".to_owned(), "/tmp".to_owned()),
    ];
    set.extend(
        env.iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone())),
    );
    let set: Vec<String> = set
        .iter()
        .map(|(name, value)| format!("{name} = {value:?}"))
        .collect();
    format!(
        "description = \"mcp test\"\nnetwork = \"none\"\n[files]\nread_only = [{}]\n[env]\nset = {{ {} }}\n[limits]\nmemory = \"512 MiB\"\nwall_time_ms = 30000\noutput = {output:?}\nprocesses = 64\nopen_files = 256\nfile_size = \"1 MiB\"\ntmp = \"4 MiB\"\n",
        read_only.join(", "),
        set.join(", ")
    )
}

/// The hostile server's manifest, with `extra` appended to `[mcp]`. `marker` is an argument
/// the server ignores, so that a test finds its own server among the host's processes.
fn hostile_manifest(marker: &str, extra: &str) -> String {
    format!(
        r#"name = "hostile"
version = "1.0.0"
description = "a hostile MCP server"
risk = "read_only"
engine = "mcp"
profile = "mcp-python"
timeout_ms = 20000
[mcp]
transport = "stdio"
command = ["/usr/bin/python3", "/tool/hostile_server.py", "{marker}"]
{extra}
"#
    )
}

struct Hosted {
    daemon: TestDaemon,
    /// The workspace of calls that name none of their own.
    ws: PathBuf,
    _tools: ToolsDir,
    _profiles: ProfilesDir,
    _secrets: tempfile::TempDir,
}

impl std::ops::Deref for Hosted {
    type Target = TestDaemon;

    fn deref(&self) -> &TestDaemon {
        &self.daemon
    }
}

/// The folders a daemon hosting the hostile server and server-everything serves.
pub(crate) struct Fixture {
    pub(crate) tools: ToolsDir,
    pub(crate) profiles: ProfilesDir,
    pub(crate) secrets: tempfile::TempDir,
}

/// The hostile server (its manifest with `extra`, see [`hostile_manifest`]) and
/// server-everything, with the profiles they run under.
pub(crate) fn fixture(marker: &str, extra: &str) -> Fixture {
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("hostile-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let tools = ToolsDir::new();
    let manifest = hostile_manifest(
        marker,
        &format!(
            "{extra}\n[[secrets]]\nenv = \"HOSTILE_TOKEN\"\nfrom_file = {:?}\n",
            token_file.display().to_string()
        ),
    );
    tools.write_manifest("hostile", &manifest);
    std::fs::copy(
        mcp::dir().join("servers/hostile_server.py"),
        tools.path().join("hostile/hostile_server.py"),
    )
    .unwrap();
    let everything = mcp::npm_server("@modelcontextprotocol/server-everything", "dist/index.js");
    tools.write_manifest(
        "everything",
        &format!(
            r#"name = "everything"
version = "2026.8.31"
description = "the MCP reference server"
risk = "read_only"
engine = "mcp"
profile = "mcp-node"
[mcp]
transport = "stdio"
command = ["/usr/bin/node", {:?}, "stdio"]
allow = ["echo", "get-sum"]
"#,
            everything.display().to_string()
        ),
    );
    let site = mcp::python_site_packages();
    let node_modules = mcp::dir().join("node_modules");
    let profiles = ProfilesDir::new();
    profiles.add(
        "mcp-python",
        &profile(
            &[&site],
            &[("PYTHONPATH", site.display().to_string())],
            "1 MiB",
        ),
    );
    profiles.add("mcp-node", &profile(&[&node_modules], &[], "1 MiB"));
    Fixture {
        tools,
        profiles,
        secrets,
    }
}

/// A daemon serving [`fixture`]'s tools.
async fn host(marker: &str, extra: &str) -> Hosted {
    let Fixture {
        tools,
        profiles,
        secrets,
    } = fixture(marker, extra);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    assert!(
        daemon.refused().is_empty(),
        "tools were refused: {:#?}",
        daemon.refused()
    );
    let ws = daemon.workspace("default");
    Hosted {
        daemon,
        ws,
        _tools: tools,
        _profiles: profiles,
        _secrets: secrets,
    }
}

impl Hosted {
    /// Calls `tool` in the default workspace.
    async fn call(&self, tool: &str, arguments: serde_json::Value) -> Execution {
        self.daemon.exec(tool, arguments, Some(&self.ws)).await
    }
}

fn text(execution: &Execution) -> String {
    let result = execution.result();
    format!("{}{}", result.content, result.error_message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_servers_tools_are_served_under_their_server_name() {
    let hosted = host("plain", "").await;
    let tools = hosted
        .tools()
        .await
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tools;
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    for expected in [
        "hostile__read_path",
        "hostile__crash",
        "everything__echo",
        "everything__get-sum",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(
        !names.iter().any(|name| name.starts_with("everything__")
            && !["everything__echo", "everything__get-sum"].contains(name)),
        "the allow list keeps the rest out: {names:?}"
    );
    let read = tools
        .iter()
        .find(|tool| tool.name == "hostile__read_path")
        .unwrap();
    assert_eq!(read.engine, "mcp");
    assert_eq!(read.mcp_server, "hostile");
    assert_eq!(read.mcp_tool, "read_path");
    assert_eq!(read.module_digest.len(), 64);
    let schema: serde_json::Value = serde_json::from_str(&read.input_schema_json).unwrap();
    assert_eq!(schema["required"], json!(["path"]));

    let echo = hosted
        .call(
            "everything__echo",
            json!({"message": "through the sandbox"}),
        )
        .await;
    echo.assert_status(ToolStatus::Ok);
    assert!(
        echo.result().content.contains("through the sandbox"),
        "{echo:?}"
    );
    let sum = hosted
        .call("everything__get-sum", json!({"a": 2, "b": 40}))
        .await;
    sum.assert_status(ToolStatus::Ok);
    assert!(sum.result().content.contains("42"), "{sum:?}");
    let invalid = hosted
        .call("everything__get-sum", json!({"a": "two"}))
        .await;
    invalid.assert_status(ToolStatus::InvalidArguments);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_server_sees_only_its_sandbox() {
    let hosted = host("plain", "").await;
    let workspace = hosted.workspace("project");
    std::fs::write(workspace.join("hello.txt"), "hello from the workspace").unwrap();
    let ws = Some(workspace.as_path());

    let read = hosted
        .exec(
            "hostile__read_path",
            json!({"path": "/workspace/hello.txt"}),
            ws,
        )
        .await;
    read.assert_status(ToolStatus::Ok);
    assert!(read.result().content.contains("hello from the workspace"));

    let who = hosted.exec("hostile__whoami", json!({}), ws).await;
    who.assert_status(ToolStatus::Ok);
    let who: serde_json::Value = serde_json::from_str(who.json().as_str().unwrap()).unwrap();
    assert_ne!(who["uid"], json!(0), "never root: {who}");
    assert_eq!(who["pid"], json!(1), "pid 1 of its own namespace: {who}");
    let env: Vec<String> = serde_json::from_value(who["env"].clone()).unwrap();
    assert!(
        !env.iter()
            .any(|name| name == "AIRLOCK_TOKEN" || name == "CARGO"),
        "nothing of the daemon's environment: {env:?}"
    );

    for outside in [
        "/etc/shadow".to_owned(),
        hosted.state_dir.join("token").display().to_string(),
        hosted.state_dir.join("airlock.db").display().to_string(),
        repo_root().join("Cargo.toml").display().to_string(),
    ] {
        let attempt = hosted
            .exec("hostile__read_path", json!({"path": outside}), ws)
            .await;
        attempt.assert_status(ToolStatus::ToolError);
        assert!(
            text(&attempt).contains("No such file") || text(&attempt).contains("Permission denied"),
            "{outside}: {attempt:?}"
        );
    }
    let write = hosted
        .exec(
            "hostile__write_path",
            json!({"path": "/workspace/planted", "text": "x"}),
            ws,
        )
        .await;
    write.assert_status(ToolStatus::ToolError);
    assert!(
        !workspace.join("planted").exists(),
        "the workspace is read-only for a server"
    );

    let roots = hosted.exec("hostile__roots", json!({}), ws).await;
    roots.assert_status(ToolStatus::Ok);
    assert_eq!(
        roots.json(),
        json!({"result": ["file:///workspace"]}),
        "roots are the sandbox's view"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_servers_network_and_resources_are_contained() {
    let hosted = host("plain", "").await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let direct = hosted
        .call(
            "hostile__connect",
            json!({"host": "127.0.0.1", "port": port}),
        )
        .await;
    direct.assert_status(ToolStatus::ToolError);
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "nothing reached the host's listener"
    );
    let proxied = hosted
        .call("hostile__fetch", json!({"url": "http://example.com/"}))
        .await;
    proxied.assert_status(ToolStatus::ToolError);

    let flood = hosted.call("hostile__flood", json!({"megabytes": 2})).await;
    flood.assert_status(ToolStatus::LimitExceeded);

    // Last: the bomb's children hold the instance's process slots for a while, so the
    // server itself may not start a thread until they are gone — its own harm, and its
    // cgroup's limit; the daemon and other servers go on.
    let bomb = hosted.call("hostile__fork_bomb", json!({})).await;
    bomb.assert_status(ToolStatus::Ok);
    assert!(bomb.result().content.contains("stopped after"), "{bomb:?}");
    let others = hosted
        .call("everything__echo", json!({"message": "still here"}))
        .await;
    others.assert_status(ToolStatus::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_times_out_and_a_crash_mid_call_is_a_tool_error() {
    let hosted = host("plain", "").await;
    let hung = hosted
        .exec_request(pb::ExecuteToolRequest {
            tool: "hostile__hang".into(),
            arguments_json: "{}".into(),
            timeout_ms: 1500,
            workspace: hosted.ws.display().to_string(),
            require_approval: false,
        })
        .await
        .unwrap();
    hung.assert_status(ToolStatus::Timeout);
    // The server did not answer its cancel and was killed; the next call gets a new one.
    let after = hosted.call("hostile__whoami", json!({})).await;
    after.assert_status(ToolStatus::Ok);

    let crash = hosted.call("hostile__crash", json!({})).await;
    crash.assert_status(ToolStatus::ToolError);
    let message = text(&crash);
    assert!(message.contains("exited with code 3"), "{message}");
    assert!(
        message.contains("crashing on purpose"),
        "its stderr is kept: {message}"
    );
    let restarted = hosted.call("hostile__whoami", json!({})).await;
    restarted.assert_status(ToolStatus::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_reaches_the_server_and_never_the_client() {
    let hosted = host("plain", "").await;
    let secret = hosted.call("hostile__secret", json!({})).await;
    secret.assert_status(ToolStatus::Ok);
    let shown = format!("{secret:?}");
    assert!(shown.contains("[redacted:HOSTILE_TOKEN]"), "{shown}");
    assert!(!shown.contains(TOKEN), "the value leaked: {shown}");
    assert!(!String::from_utf8_lossy(&secret.stdout).contains(TOKEN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_is_refused_until_an_operator_trusts_it() {
    let hosted = host("plain", "").await;
    let pulled = hosted.workspace("pulled");
    std::fs::write(pulled.join("rug-pull"), "").unwrap();
    let refused = hosted
        .exec(
            "hostile__read_path",
            json!({"path": "/workspace/rug-pull"}),
            Some(&pulled),
        )
        .await;
    refused.assert_status(ToolStatus::Denied);
    let message = text(&refused);
    assert!(
        message.contains("changed since it was trusted"),
        "{message}"
    );
    assert!(message.contains("airlock tools trust hostile"), "{message}");

    // An acceptance bound to a review of another listing trusts nothing.
    let mut daemon = pb::daemon_client::DaemonClient::new(hosted.authed_channel().await);
    let stale = daemon
        .trust_mcp_server(pb::TrustMcpServerRequest {
            server: "hostile".into(),
            show: false,
            reviewed: "0".repeat(64),
            refuse: false,
        })
        .await
        .unwrap_err();
    assert_eq!(stale.code(), tonic::Code::FailedPrecondition, "{stale:?}");
    assert!(
        stale.message().starts_with("reviewed: ") && stale.message().contains("review it again"),
        "{stale:?}"
    );
    hosted
        .exec(
            "hostile__read_path",
            json!({"path": "/workspace/rug-pull"}),
            Some(&pulled),
        )
        .await
        .assert_status(ToolStatus::Denied);

    // The operator reviews the new listing and accepts what the review showed; the same
    // call now runs.
    let review = daemon
        .trust_mcp_server(pb::TrustMcpServerRequest {
            server: "hostile".into(),
            show: true,
            reviewed: String::new(),
            refuse: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(review.differences.len(), 1, "{review:?}");
    let accepted = daemon
        .trust_mcp_server(pb::TrustMcpServerRequest {
            server: "hostile".into(),
            show: false,
            reviewed: review.listing,
            refuse: false,
        })
        .await
        .unwrap()
        .into_inner()
        .accepted;
    assert_eq!(accepted, ["read_path"]);
    let trusted = hosted
        .exec(
            "hostile__read_path",
            json!({"path": "/workspace/rug-pull"}),
            Some(&pulled),
        )
        .await;
    trusted.assert_status(ToolStatus::Ok);
    let unknown = daemon
        .trust_mcp_server(pb::TrustMcpServerRequest {
            show: false,
            server: "../hostile".into(),
            reviewed: String::new(),
            refuse: false,
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_changes_its_tools_while_running_is_caught_at_its_next_call() {
    let hosted = host("plain", "").await;
    let clean = hosted.workspace("clean");
    let before = hosted
        .exec(
            "hostile__read_path",
            json!({"path": "/workspace"}),
            Some(&clean),
        )
        .await;
    assert_ne!(before.status(), ToolStatus::Denied, "{before:?}");
    hosted
        .exec("hostile__mutate", json!({}), Some(&clean))
        .await
        .assert_status(ToolStatus::Ok);
    let after = hosted
        .exec(
            "hostile__read_path",
            json!({"path": "/workspace"}),
            Some(&clean),
        )
        .await;
    after.assert_status(ToolStatus::Denied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_instances_stop_and_none_outlives_the_daemon() {
    let hosted = host("idle-test", "idle_timeout_ms = 200").await;
    hosted
        .call("hostile__whoami", json!({}))
        .await
        .assert_status(ToolStatus::Ok);
    assert!(
        !servers_running("idle-test").is_empty(),
        "an instance runs after a call"
    );
    wait_until(
        || servers_running("idle-test").is_empty(),
        "the idle instance to stop",
    )
    .await;

    hosted
        .call("hostile__whoami", json!({}))
        .await
        .assert_status(ToolStatus::Ok);
    assert!(!servers_running("idle-test").is_empty());
    let Hosted { daemon, .. } = hosted;
    daemon.stop().await;
    wait_until(
        || servers_running("idle-test").is_empty(),
        "the instance to stop with the daemon",
    )
    .await;
}

/// A reload keeps a hosted server whose manifest did not change, with its running instance;
/// a server whose manifest changed is imported afresh, and its old instance stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_an_unchanged_servers_instance_and_replaces_a_changed_ones() {
    let marker = "reload-test";
    let hosted = host(marker, "").await;
    hosted
        .call("hostile__whoami", json!({}))
        .await
        .assert_status(ToolStatus::Ok);
    let before = servers_running(marker);
    assert!(!before.is_empty(), "an instance runs after a call");

    let reloaded = hosted.reload().await;
    assert!(reloaded.refused.is_empty(), "{reloaded:?}");
    assert_eq!(servers_running(marker), before, "the instance was kept");
    hosted
        .call("hostile__whoami", json!({}))
        .await
        .assert_status(ToolStatus::Ok);
    assert_eq!(servers_running(marker), before, "and it took the call");

    let manifest = hosted._tools.path().join("hostile/tool.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}\n# edited\n")).unwrap();
    let reloaded = hosted.reload().await;
    assert!(reloaded.refused.is_empty(), "{reloaded:?}");
    wait_until(
        || {
            let running = servers_running(marker);
            before.iter().all(|pid| !running.contains(pid))
        },
        "the changed server's old instance to stop",
    )
    .await;
    hosted
        .call("hostile__whoami", json!({}))
        .await
        .assert_status(ToolStatus::Ok);
    let after = servers_running(marker);
    assert!(
        !after.is_empty() && after.iter().all(|pid| !before.contains(pid)),
        "a new instance: {before:?} then {after:?}"
    );
}

/// A writing server that goes on writing after its call returned (a background thread) is
/// bounded between calls too: past its profile's `[changes]` bounds it is stopped, nothing of
/// what it wrote is applied, and the next call starts it afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_writing_between_calls_is_stopped_at_its_bounds() {
    let marker = "late-writer";
    let Fixture {
        tools,
        profiles,
        secrets: _secrets,
    } = fixture(marker, "workspace = \"read-write\"");
    let site = mcp::python_site_packages();
    let writable = profile(
        &[&site],
        &[("PYTHONPATH", site.display().to_string())],
        "1 MiB",
    )
    .replace("\"$WORKSPACE\"]", "]\nread_write = [\"$WORKSPACE\"]")
        + "[changes]\nmax_files = 50\n";
    profiles.add("mcp-python", &writable);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    let ws = daemon.workspace("late");
    let wrote = daemon
        .exec("hostile__write_later", json!({"count": 500}), Some(&ws))
        .await;
    wrote.assert_status(ToolStatus::Ok);
    assert!(!servers_running(marker).is_empty());
    wait_until(
        || servers_running(marker).is_empty(),
        "the server past its bounds to be stopped",
    )
    .await;
    assert_eq!(
        std::fs::read_dir(&ws).unwrap().count(),
        0,
        "nothing it wrote between calls landed"
    );
    let again = daemon.exec("hostile__whoami", json!({}), Some(&ws)).await;
    again.assert_status(ToolStatus::Ok);
    assert_eq!(std::fs::read_dir(&ws).unwrap().count(), 0);
}

/// Processes of the host running the hostile server started with `marker`.
fn servers_running(marker: &str) -> Vec<i32> {
    airlock_tests::procs::all()
        .into_iter()
        .filter(|proc| {
            std::fs::read(format!("/proc/{}/cmdline", proc.pid))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
                && proc.state != 'Z'
        })
        .map(|proc| proc.pid)
        .collect()
}

/// Polls `done` until it holds; a minute without it fails the test.
async fn wait_until(done: impl Fn() -> bool, what: &str) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "waited a minute for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_run_a_hosted_tool_is_approved_like_any_and_a_crash_is_an_unknown_outcome() {
    use pb::run_event::Event;
    let hosted = host("run", "[mcp.tools.write_path]\nrisk = \"write\"").await;
    let script = json!({"turns": [
        {"tool_calls": [{"name": "hostile__write_path",
                         "arguments": {"path": "/workspace/x", "text": "x"}}]},
        {"tool_calls": [{"name": "hostile__crash", "arguments": {}}]},
        {"alternatives": [
            {"when": {"status": "OUTCOME_UNKNOWN"}, "final": "outcome unknown"},
            {"final": "something else"}
        ]}
    ]});
    let mut start = airlock_tests::scripted_run(&hosted.ws, &script);
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;
    let mut run = hosted.start_run(start).await;
    let request = run.approval_requested().await;
    assert_eq!(request.tool, "hostile__write_path");
    assert_eq!(request.risk, pb::Risk::Write as i32, "the manifest's risk");
    assert!(request.arguments_json.contains("/workspace/x"));
    run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    let finished = run.finished().await;
    assert_eq!(finished.final_text, "outcome unknown");
    let statuses: Vec<i32> = run.of(|event| match event {
        Event::ToolFinished(finished) => finished.result.as_ref().map(|result| result.status),
        _ => None,
    });
    assert_eq!(
        statuses,
        [
            ToolStatus::ToolError as i32,
            ToolStatus::OutcomeUnknown as i32
        ],
        "the write failed on the read-only workspace; the crash left its outcome unknown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_server_continues_the_runs_trace_under_the_tool_span() {
    use pb::run_event::Event;
    let hosted = host("trace", "").await;
    let script = json!({"turns": [
        {"tool_calls": [{"name": "hostile__trace_context", "arguments": {}}]},
        {"final": "done"}
    ]});
    let mut run = hosted
        .start_run(airlock_tests::scripted_run(&hosted.ws, &script))
        .await;
    run.finished().await;
    let said: Vec<String> = run.of(|event| match event {
        Event::ToolFinished(finished) => finished.result.as_ref().map(|r| r.content.clone()),
        _ => None,
    });
    let run_id = run.seen[0].run_id.clone();
    let trace = hosted
        .agent()
        .await
        .get_trace(pb::GetTraceRequest { run_id })
        .await
        .unwrap()
        .into_inner();
    let tool = trace
        .spans
        .iter()
        .find(|span| span.name == "tool")
        .expect("the tool span");
    // The MCP semantic conventions' propagation: the W3C traceparent in `_meta`, naming
    // the run's trace and the tool call's span, sampled.
    let expected = format!("00-{}-{}-01", trace.trace_id, tool.span_id);
    assert!(
        said.iter().any(|content| content.contains(&expected)),
        "the server was told {said:?}, not {expected}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filesystem_example_serves_the_workspace_and_nothing_else() {
    // The example manifest and profile as shipped, with the server where the tests'
    // installer put it rather than where `npm install --global` would.
    let installed = mcp::npm_server("@modelcontextprotocol/server-filesystem", "dist/index.js");
    let example =
        std::fs::read_to_string(repo_root().join("examples/mcp-servers/filesystem/tool.toml"))
            .unwrap()
            .replace(
                "/usr/local/lib/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
                &installed.display().to_string(),
            );
    let tools = ToolsDir::new();
    tools.write_manifest("fs", &example);
    let profile = std::fs::read_to_string(repo_root().join("sandbox-profiles/mcp-node.toml"))
        .unwrap()
        .replace(
            "\"/etc/localtime\"]",
            &format!(
                "\"/etc/localtime\", {:?}]",
                mcp::dir().join("node_modules").display().to_string()
            ),
        );
    let profiles = ProfilesDir::new();
    profiles.add("mcp-node", &profile);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    let listed = daemon
        .tools()
        .await
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tools;
    let write = listed
        .iter()
        .find(|tool| tool.name == "fs__write_file")
        .unwrap();
    assert_eq!(write.risk, pb::Risk::Write as i32);
    assert!(
        listed.iter().all(|tool| tool.name != "fs__move_file"),
        "denied by the manifest"
    );

    let workspace = daemon.workspace("project");
    std::fs::write(workspace.join("notes.md"), "# notes\n").unwrap();
    // A user's workspace: the server acts as its owner.
    std::os::unix::fs::chown(&workspace, Some(42103), Some(42103)).unwrap();
    let ws = Some(workspace.as_path());
    let listing = daemon
        .exec("fs__list_directory", json!({"path": "/workspace"}), ws)
        .await;
    listing.assert_status(ToolStatus::Ok);
    assert!(listing.result().content.contains("notes.md"), "{listing:?}");
    let wrote = daemon
        .exec(
            "fs__write_file",
            json!({"path": "/workspace/todo.md", "content": "- ship it\n"}),
            ws,
        )
        .await;
    wrote.assert_status(ToolStatus::Ok);
    assert_eq!(
        std::fs::read_to_string(workspace.join("todo.md")).unwrap(),
        "- ship it\n"
    );
    // Each call's change set is that call's alone: the server writes an overlay, recorded
    // and applied after every call.
    let changed = |execution: &airlock_tests::Execution| -> Vec<(String, i32)> {
        execution
            .result()
            .changes
            .as_ref()
            .map(|set| {
                set.changes
                    .iter()
                    .map(|change| (change.path.clone(), change.kind))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        changed(&wrote),
        [("todo.md".into(), pb::ChangeKind::Added as i32)]
    );
    let meta = std::fs::metadata(workspace.join("todo.md")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (42103, 42103),
        "the workspace owner's"
    );
    let rewrote = daemon
        .exec(
            "fs__write_file",
            json!({"path": "/workspace/notes.md", "content": "# notes\n\nmore\n"}),
            ws,
        )
        .await;
    rewrote.assert_status(ToolStatus::Ok);
    assert_eq!(
        changed(&rewrote),
        [("notes.md".into(), pb::ChangeKind::Modified as i32)]
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes.md")).unwrap(),
        "# notes\n\nmore\n"
    );

    // A person edits notes.md on the host. The server's next call writes another file: its
    // set is that file alone, and the server's older copy of notes.md (in its overlay) never
    // lands over the person's version.
    std::fs::write(workspace.join("notes.md"), "# notes\n\nthe person's line\n").unwrap();
    let other = daemon
        .exec(
            "fs__write_file",
            json!({"path": "/workspace/todo.md", "content": "- ship it\n- then rest\n"}),
            ws,
        )
        .await;
    other.assert_status(ToolStatus::Ok);
    assert_eq!(
        changed(&other),
        [("todo.md".into(), pb::ChangeKind::Modified as i32)]
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes.md")).unwrap(),
        "# notes\n\nthe person's line\n"
    );
    // Each call is shown the workspace as it is: the server reads the person's version, and
    // an edit of it builds on that version and lands.
    let read = daemon
        .exec(
            "fs__read_text_file",
            json!({"path": "/workspace/notes.md"}),
            ws,
        )
        .await;
    read.assert_status(ToolStatus::Ok);
    assert!(
        read.result().content.contains("the person's line"),
        "{read:?}"
    );
    let edited = daemon
        .exec(
            "fs__edit_file",
            json!({"path": "/workspace/notes.md", "edits": [{"oldText": "the person's line", "newText": "the person's line, and the server's"}]}),
            ws,
        )
        .await;
    edited.assert_status(ToolStatus::Ok);
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes.md")).unwrap(),
        "# notes\n\nthe person's line, and the server's\n"
    );

    // A root-owned workspace is writable too, through the idmapped mount; files stay root's.
    let rooted = daemon.workspace("rooted");
    let wrote = daemon
        .exec(
            "fs__write_file",
            json!({"path": "/workspace/a.txt", "content": "a\n"}),
            Some(rooted.as_path()),
        )
        .await;
    wrote.assert_status(ToolStatus::Ok);
    assert_eq!(std::fs::metadata(rooted.join("a.txt")).unwrap().uid(), 0);
    // Outside the directory it was given, and outside its sandbox either way.
    let secret = daemon
        .exec("fs__read_text_file", json!({"path": "/etc/passwd"}), ws)
        .await;
    assert_ne!(secret.status(), ToolStatus::Ok, "{secret:?}");
    assert!(!format!("{secret:?}").contains("root:x:0:0"));
}

/// A Python MCP server serving Streamable HTTP on a loopback port, stopped when dropped.
pub(crate) struct RemoteServer {
    child: tokio::process::Child,
    pub(crate) port: u16,
}

impl RemoteServer {
    pub(crate) async fn start() -> RemoteServer {
        RemoteServer::serving("echo_server.py").await
    }

    /// Serves `script` of tests/mcp/servers, which takes `--http PORT`.
    pub(crate) async fn serving(script: &str) -> RemoteServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = tokio::process::Command::new(mcp::python())
            .arg(mcp::dir().join("servers").join(script))
            .args(["--http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let server = RemoteServer { child, port };
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the remote server never listened"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        server
    }
}

impl Drop for RemoteServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_is_reached_through_the_egress_gate_or_not_at_all() {
    let remote = RemoteServer::start().await;
    let port = remote.port;
    let manifest = |name: &str, profile: &str, host: &str| {
        format!(
            "name = \"{name}\"\nversion = \"1\"\ndescription = \"a remote MCP server\"\nrisk = \"read_only\"\nengine = \"mcp\"\nprofile = \"{profile}\"\n[mcp]\ntransport = \"http\"\nurl = \"http://{host}:{port}/mcp\"\n"
        )
    };
    let tools = ToolsDir::new();
    tools.write_manifest("remote", &manifest("remote", "allowed", "127.0.0.1"));
    tools.write_manifest("offline", &manifest("offline", "offline", "127.0.0.1"));
    tools.write_manifest(
        "elsewhere",
        &manifest("elsewhere", "elsewhere", "127.0.0.1"),
    );
    // Listed by name, the name resolves to loopback: the gate refuses it, so the server
    // cannot even be listed — the proof that its connections go through the gate.
    tools.write_manifest("byname", &manifest("byname", "byname", "localhost"));
    let profiles = ProfilesDir::new();
    let network = |allow: &str| {
        format!(
            "description = \"remote\"\nnetwork = {allow}\n[limits]\nmemory = \"64 MiB\"\nwall_time_ms = 10000\noutput = \"1 MiB\"\n"
        )
    };
    // A loopback address is reachable only when the allow-list names it by address.
    profiles.add(
        "allowed",
        &network(&format!("{{ allow = [\"127.0.0.1:{port}\"] }}")),
    );
    profiles.add("offline", &network("\"none\""));
    profiles.add(
        "elsewhere",
        &network("{ allow = [\"api.example.com:443\"] }"),
    );
    profiles.add(
        "byname",
        &network(&format!("{{ allow = [\"localhost:{port}\"] }}")),
    );
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    let refused = daemon.refused().join("\n");
    assert!(
        refused.contains("offline") && refused.contains("has network = \"none\""),
        "{refused}"
    );
    assert!(
        refused.contains("elsewhere") && refused.contains("is not in the network allow-list"),
        "{refused}"
    );
    assert!(
        refused.contains("byname") && refused.contains("did not initialize"),
        "{refused}"
    );
    assert_eq!(daemon.refused().len(), 3, "{refused}");
    let echo = daemon
        .exec("remote__echo", json!({"text": "over the gate"}), None)
        .await;
    echo.assert_status(ToolStatus::Ok);
    assert!(echo.result().content.contains("over the gate"), "{echo:?}");
}

/// A real `airlockd` process hosting the servers of a [`fixture`] marked `marker`, with a
/// workspace under its one workspace root.
struct HostingProcess {
    daemon: airlock_tests::DaemonProcess,
    workspace: PathBuf,
    _fixture: Fixture,
    _root: tempfile::TempDir,
    _state: tempfile::TempDir,
}

impl HostingProcess {
    async fn start(marker: &str) -> HostingProcess {
        let fixture = fixture(marker, "");
        let root = tempfile::tempdir().unwrap();
        let workspace = root.path().join("w");
        std::fs::create_dir_all(&workspace).unwrap();
        let state = tempfile::tempdir().unwrap();
        let args = [
            "--tools-dir",
            fixture.tools.path().to_str().unwrap(),
            "--profiles-dir",
            fixture.profiles.path().to_str().unwrap(),
            "--state-dir",
            state.path().to_str().unwrap(),
            "--workspace-root",
            root.path().to_str().unwrap(),
        ];
        let daemon = airlock_tests::DaemonProcess::start(&args, root.path()).await;
        HostingProcess {
            daemon,
            workspace,
            _fixture: fixture,
            _root: root,
            _state: state,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_with_sigkill_leaves_no_server_behind() {
    let hosting = HostingProcess::start("sigkill-test").await;
    let (daemon, workspace) = (hosting.daemon, hosting.workspace.clone());
    let mut tools =
        pb::tools_client::ToolsClient::new(airlock_tests::connect(&daemon.endpoint).await.unwrap());
    let mut stream = tools
        .execute_tool(pb::ExecuteToolRequest {
            tool: "hostile__whoami".into(),
            arguments_json: "{}".into(),
            workspace: workspace.display().to_string(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .unwrap()
        .into_inner();
    while stream.message().await.unwrap().is_some() {}
    assert!(
        !servers_running("sigkill-test").is_empty(),
        "an instance runs"
    );
    let before = airlock_tests::procs::descendants(daemon.pid());
    daemon.kill().await;
    let left = airlock_tests::procs::await_gone(&before, Duration::from_secs(10)).await;
    assert!(
        left.is_empty(),
        "still running after the daemon's SIGKILL: {left:?}"
    );
    assert!(servers_running("sigkill-test").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_daemons_call_ends_with_its_server_soon_after_the_deadline() {
    let hosting = HostingProcess::start("keeper-test").await;
    let (daemon, workspace) = (&hosting.daemon, hosting.workspace.clone());
    let mut console = airlock_tests::Console::on(daemon.agent().await).await;
    let mut tools =
        pb::tools_client::ToolsClient::new(airlock_tests::connect(&daemon.endpoint).await.unwrap());
    let timeout = Duration::from_secs(3);
    let call = tokio::spawn(async move {
        let stream = tools
            .execute_tool(pb::ExecuteToolRequest {
                tool: "hostile__ask".into(),
                arguments_json: json!({"question": "anyone there?"}).to_string(),
                workspace: workspace.display().to_string(),
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap(),
                require_approval: false,
            })
            .await
            .unwrap()
            .into_inner();
        Execution::read(stream).await.unwrap()
    });
    // The server's question reached the console: the call is in the server, which now waits
    // for an answer that a frozen daemon cannot carry.
    let asked = console.next_in(pb::ApprovalState::Pending).await;
    assert!(asked.reason.contains("anyone there?"), "{asked:?}");
    let servers: Vec<_> = servers_running("keeper-test")
        .into_iter()
        .filter_map(airlock_tests::procs::stat)
        .collect();
    assert!(!servers.is_empty(), "no server runs");
    daemon.signal(libc::SIGSTOP);
    let left = airlock_tests::procs::await_gone(&servers, timeout + Duration::from_secs(10)).await;
    assert!(
        left.is_empty(),
        "the frozen daemon's server ran on past the call's deadline: {left:?}"
    );
    assert_eq!(
        airlock_tests::procs::stat(daemon.pid()).map(|proc| proc.state),
        Some('T'),
        "the daemon is no longer stopped: the test proves nothing"
    );
    // Woken, the daemon reports the call as past its deadline.
    daemon.signal(libc::SIGCONT);
    tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the call ends once the daemon wakes")
        .unwrap()
        .assert_status(ToolStatus::Timeout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_breaks_the_protocol_is_bounded_and_the_daemon_unharmed() {
    let tools = ToolsDir::new();
    tools.write_manifest(
        "raw",
        "name = \"raw\"\nversion = \"1\"\ndescription = \"breaks the protocol\"\nrisk = \"read_only\"\nengine = \"mcp\"\nprofile = \"mcp-python\"\ntimeout_ms = 3000\n[mcp]\ntransport = \"stdio\"\ncommand = [\"/usr/bin/python3\", \"/tool/raw_server.py\"]\n",
    );
    std::fs::copy(
        mcp::dir().join("servers/raw_server.py"),
        tools.path().join("raw/raw_server.py"),
    )
    .unwrap();
    let profiles = ProfilesDir::new();
    profiles.add("mcp-python", &profile(&[], &[], "1 MiB"));
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    let ws = daemon.workspace("w");
    let ws = Some(ws.as_path());
    // Lines that are not JSON-RPC, a line past the size bound, an answer to nobody: none
    // completes the call, which ends at its deadline.
    for tool in ["raw__garbage", "raw__oversize", "raw__wrong_id"] {
        let broken = daemon.exec(tool, json!({}), ws).await;
        broken.assert_status(ToolStatus::Timeout);
        assert!(
            broken.result().error_message.contains("deadline"),
            "{tool}: {broken:?}"
        );
    }
    // A flood of notifications is read and dropped; the answer behind it arrives.
    let flooded = daemon.exec("raw__flood", json!({}), ws).await;
    flooded.assert_status(ToolStatus::Ok);
    assert!(flooded.result().content.contains("flooded"));
    daemon
        .exec("raw__fine", json!({}), ws)
        .await
        .assert_status(ToolStatus::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_servers_question_goes_to_its_tenants_approvers() {
    let hosted = host("plain", "").await;
    // Approves the question that says "yes", denies the other; open until both answers
    // counted (a console that goes away takes its unsent decisions with it).
    let mut console = airlock_tests::Console::open(&hosted).await;
    let console = tokio::spawn(async move {
        let (mut asked, mut resolved) = (Vec::new(), 0);
        while resolved < 2 {
            let request = console.next().await;
            if request.state == pb::ApprovalState::Resolved as i32 {
                resolved += 1;
            }
            if request.state != pb::ApprovalState::Pending as i32 {
                continue;
            }
            let decision = if request.reason.contains("yes") {
                pb::Decision::ApproveOnce
            } else {
                pb::Decision::Deny
            };
            console.answer(&request, decision);
            asked.push(request);
        }
        asked
    });
    let yes = hosted
        .call("hostile__ask", json!({"question": "say yes?"}))
        .await;
    yes.assert_status(ToolStatus::Ok);
    assert!(
        yes.result().content.contains("accepted: proceed=True"),
        "approved, the form's defaults: {yes:?}"
    );
    let no = hosted
        .call("hostile__ask", json!({"question": "delete everything?"}))
        .await;
    no.assert_status(ToolStatus::Ok);
    assert!(no.result().content.contains("decline"), "{no:?}");
    let asked = console.await.unwrap();
    assert_eq!(asked[0].tenant, "default");
    assert_eq!(asked[0].run_id, "");
    assert!(asked[0].tool.contains("hostile"), "{:?}", asked[0]);
    assert!(asked[1].reason.contains("delete everything?"));
}
