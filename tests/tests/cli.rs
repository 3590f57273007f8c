//! The `airlock` command line against a real daemon: listing tools, running one, and exit
//! codes that follow the result's status.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

use airlock_tests::{DaemonOptions, TestDaemon, ToolsDir, cargo_bin, repo_root, test_module};

async fn airlock(daemon_endpoint: &str, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(cargo_bin("airlock"));
    command
        .arg("--server")
        .arg(daemon_endpoint)
        .args(args)
        .env("COLUMNS", "200")
        .env_remove("AIRLOCK_SERVER");
    command.output().await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn daemon() -> (TestDaemon, ToolsDir) {
    let extra = ToolsDir::new();
    extra.add_file("spin", &test_module("spin"), "timeout_ms = 200");
    extra.add_file("exit_code", &test_module("exit_code"), "");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins"), extra.path().to_owned()],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    (daemon, extra)
}

#[tokio::test]
async fn tools_list_prints_a_table_of_the_tools() {
    let (daemon, _extra) = daemon().await;
    let output = airlock(&daemon.endpoint, &["tools", "list"]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let header = stdout.lines().next().unwrap();
    for column in [
        "NAME",
        "VERSION",
        "RISK",
        "ENGINE",
        "PROFILE",
        "DIGEST",
        "DESCRIPTION",
    ] {
        assert!(header.contains(column), "{header}");
    }
    for tool in ["read_file", "write_file", "grep", "list_dir", "wc"] {
        assert!(
            stdout.lines().any(|line| line.starts_with(tool)),
            "{tool} missing:\n{stdout}"
        );
    }
}

#[tokio::test]
async fn exec_runs_a_tool_and_prints_its_result() {
    let (daemon, _extra) = daemon().await;
    let workspace = daemon.workspace("project");
    std::fs::write(workspace.join("notes.txt"), "one\ntwo\n").unwrap();
    let output = airlock(
        &daemon.endpoint,
        &[
            "exec",
            "read_file",
            "--args",
            r#"{"path": "notes.txt"}"#,
            "--workspace",
            workspace.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["content"], "one\ntwo\n");
    assert!(
        text(&output.stderr).contains("status: OK"),
        "{}",
        text(&output.stderr)
    );
}

#[tokio::test]
async fn exit_codes_follow_the_status() {
    let (daemon, _extra) = daemon().await;
    let workspace = daemon.workspace("project");
    let workspace = workspace.to_str().unwrap();
    let cases: [(&[&str], i32); 5] = [
        (
            &[
                "exec",
                "read_file",
                "--args",
                r#"{"path": 1}"#,
                "--workspace",
                workspace,
            ],
            2,
        ),
        (&["exec", "exit_code", "--args", r#"{"code": 9}"#], 1),
        (&["exec", "spin"], 4),
        (&["exec", "no_such_tool"], 64),
        (&["exec", "read_file", "--args", "{not json"], 64),
    ];
    for (args, code) in cases {
        let output = airlock(&daemon.endpoint, args).await;
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
    let exited = airlock(
        &daemon.endpoint,
        &["exec", "exit_code", "--args", r#"{"code": 9}"#],
    )
    .await;
    assert!(
        text(&exited.stderr).contains("TOOL_ERROR"),
        "{}",
        text(&exited.stderr)
    );
}

#[tokio::test]
async fn an_unreachable_daemon_is_reported_as_such() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let output = airlock(&endpoint, &["tools", "list"]).await;
    assert_eq!(output.status.code(), Some(69));
    assert!(
        text(&output.stderr).contains("cannot reach airlockd"),
        "{}",
        text(&output.stderr)
    );
}

/// Runs `airlock ARGS` with `stdin` piped in.
async fn airlock_with_input(endpoint: &str, args: &[&str], stdin: &str) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(cargo_bin("airlock"))
        .arg("--server")
        .arg(endpoint)
        .args(args)
        .env("COLUMNS", "200")
        .env_remove("AIRLOCK_SERVER")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    child.wait_with_output().await.unwrap()
}

fn write_script(dir: &std::path::Path) -> std::path::PathBuf {
    let script = dir.join("model.json");
    std::fs::write(
        &script,
        serde_json::json!({"turns": [
            {"text": "Writing the fix.", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "fixed.txt", "content": "fixed\n"}}
            ]},
            {"final": "All done."}
        ]})
        .to_string(),
    )
    .unwrap();
    script
}

#[tokio::test]
async fn run_asks_at_the_terminal_and_finishes_when_approved() {
    let (daemon, extra) = daemon().await;
    let workspace = daemon.workspace("project");
    let script = write_script(extra.path());
    let output = airlock_with_input(
        &daemon.endpoint,
        &[
            "run",
            "fix it",
            "--workspace",
            workspace.to_str().unwrap(),
            "--model",
            &format!("scripted:{}", script.display()),
        ],
        "y\n",
    )
    .await;
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("approve? [y]es / [n]o / [a]lways for this session"),
        "{stderr}"
    );
    assert!(stdout.contains("stop: FINAL"), "{stdout}");
    assert!(stdout.trim_end().ends_with("All done."), "{stdout}");
    assert!(stdout.contains("write_file"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("fixed.txt")).unwrap(),
        "fixed\n"
    );
}

#[tokio::test]
async fn run_without_an_answer_denies_and_lists_the_run() {
    let (daemon, extra) = daemon().await;
    let workspace = daemon.workspace("project");
    let script = write_script(extra.path());
    let output = airlock_with_input(
        &daemon.endpoint,
        &[
            "run",
            "fix it",
            "--workspace",
            workspace.to_str().unwrap(),
            "--model",
            &format!("scripted:{}", script.display()),
        ],
        "",
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        !workspace.join("fixed.txt").exists(),
        "a call nobody approved ran"
    );
    let listed = airlock(&daemon.endpoint, &["runs", "list", "--json"]).await;
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let runs: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
}
