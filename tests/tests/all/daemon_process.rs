//! `airlockd` as an operator runs it: the real binary, its flags and config file, serving
//! on loopback, and a graceful stop on SIGTERM.

use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonProcess, ToolsDir, cargo_bin, repo_root, test_module};
use tokio::process::Command;

#[tokio::test]
async fn serves_from_flags_and_stops_cleanly_on_sigterm() {
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let tools = ToolsDir::new();
    tools.add_file("echo", &test_module("echo"), "");
    let mut daemon = DaemonProcess::start(
        &[
            "--tools-dir",
            tools.path().to_str().unwrap(),
            "--state-dir",
            state.path().to_str().unwrap(),
            "--workspace-root",
            root.path().to_str().unwrap(),
        ],
        &repo_root(),
    )
    .await;
    let names = daemon.tool_names().await;
    // Started from the repository root with no profile or plugin flags, it also serves the
    // first-party plugins (once built) and the shipped profiles.
    for expected in ["echo", "read_file", "write_file", "wc"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing: {names:?}"
        );
    }
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = daemon.log();
    assert!(status.success(), "exit {status:?}\n{log}");
    assert!(
        log.contains("SIGTERM received") && log.contains("airlockd stopped"),
        "{log}"
    );
}

#[tokio::test]
async fn a_call_in_flight_at_shutdown_is_cancelled_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let tools = ToolsDir::new();
    tools.add_file("spin", &test_module("spin"), "timeout_ms = 120000");
    let config = dir.path().join("airlockd.toml");
    std::fs::write(
        &config,
        format!(
            "tools_dirs = [\"{}\"]\nstate_dir = \"state\"\nshutdown_grace_ms = 300\nprofiles_dir = \"{}\"\n",
            tools.path().display(),
            repo_root().join("sandbox-profiles").display()
        ),
    )
    .unwrap();
    let mut daemon =
        DaemonProcess::start(&["--config", config.to_str().unwrap()], dir.path()).await;
    assert!(
        dir.path().join("state/modules").is_dir(),
        "state_dir is relative to the config file"
    );
    let mut client = pb::tools_client::ToolsClient::new(daemon.channel().await);
    let mut stream = client
        .execute_tool(pb::ExecuteToolRequest {
            tool: "spin".into(),
            arguments_json: "{}".into(),
            workspace: String::new(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().expect("started");
    daemon.signal(libc::SIGTERM);
    let mut status = None;
    while let Ok(Some(event)) = stream.message().await {
        if let Some(pb::execute_tool_event::Event::Finished(result)) = event.event {
            status = Some(result.status);
        }
    }
    assert_eq!(status, Some(pb::ToolStatus::Cancelled as i32));
    let exit = daemon.wait().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = daemon.log();
    assert!(exit.success(), "{log}");
    assert!(log.contains("grace period over"), "{log}");
}

#[tokio::test]
async fn a_broken_config_file_stops_the_daemon_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "listne = \"127.0.0.1:1\"\n").unwrap();
    let output = Command::new(cargo_bin("airlockd"))
        .args(["--config", config.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.toml") && stderr.contains("listne"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_log_that_is_not_a_terminal_has_no_colour_codes() {
    use tokio::io::AsyncBufReadExt;
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut command = airlock_tests::airlockd_command(
        &[
            "--state-dir",
            state.path().to_str().unwrap(),
            "--workspace-root",
            root.path().to_str().unwrap(),
        ],
        &repo_root(),
        &airlock_tests::ProcessOptions::default(),
    );
    // Colour is the default, so only the pipe can turn it off here.
    command.env_remove("NO_COLOR");
    let mut child = command.spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(120), lines.next_line()).await
    {
        log.push_str(&line);
        log.push('\n');
        if line.contains("airlockd serving") {
            break;
        }
    }
    child.kill().await.unwrap();
    assert!(log.contains("airlockd serving"), "{log}");
    assert!(!log.contains('\x1b'), "colour codes in a piped log:\n{log}");
}
