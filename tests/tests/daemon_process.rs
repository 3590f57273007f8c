//! `airlockd` as an operator runs it: the real binary, its flags and config file, serving
//! on loopback, and a graceful stop on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::{ToolsDir, cargo_bin, repo_root, test_module};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Starts `airlockd` with `args` on an ephemeral port and returns it with its endpoint,
/// read from its log line `airlockd serving`.
async fn start(args: &[&str], cwd: &Path) -> (Child, String, tokio::task::JoinHandle<String>) {
    let mut child = Command::new(cargo_bin("airlockd"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .current_dir(cwd)
        .env("AIRLOCK_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    let endpoint = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("airlockd starts within a minute")
            .unwrap()
            .unwrap_or_else(|| panic!("airlockd exited before serving:\n{log}"));
        log.push_str(&line);
        log.push('\n');
        if line.contains("airlockd serving")
            && let Some(addr) = line
                .split("listen=Some(")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
        {
            break format!("http://{addr}");
        }
    };
    let rest = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            log.push_str(&line);
            log.push('\n');
        }
        log
    });
    (child, endpoint, rest)
}

fn sigterm(child: &Child) {
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc_kill(pid, 15) }, 0);
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}

#[tokio::test]
async fn serves_from_flags_and_stops_cleanly_on_sigterm() {
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let tools = ToolsDir::new();
    tools.add_file("echo", &test_module("echo"), "");
    let (mut child, endpoint, log) = start(
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
    let mut client = pb::tools_client::ToolsClient::connect(endpoint)
        .await
        .unwrap();
    let names: Vec<String> = client
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools
        .into_iter()
        .map(|tool| tool.name)
        .collect();
    // Started from the repository root with no profile or plugin flags, it also serves the
    // first-party plugins (once built) and the shipped profiles.
    for expected in ["echo", "read_file", "write_file", "wc"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing: {names:?}"
        );
    }
    sigterm(&child);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    let log = log.await.unwrap();
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
    let (mut child, endpoint, log) =
        start(&["--config", config.to_str().unwrap()], dir.path()).await;
    assert!(
        dir.path().join("state/modules").is_dir(),
        "state_dir is relative to the config file"
    );
    let mut client = pb::tools_client::ToolsClient::connect(endpoint)
        .await
        .unwrap();
    let mut stream = client
        .execute_tool(pb::ExecuteToolRequest {
            tool: "spin".into(),
            arguments_json: "{}".into(),
            workspace: String::new(),
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().expect("started");
    sigterm(&child);
    let mut status = None;
    while let Ok(Some(event)) = stream.message().await {
        if let Some(pb::execute_tool_event::Event::Finished(result)) = event.event {
            status = Some(result.status);
        }
    }
    assert_eq!(status, Some(pb::ToolStatus::Cancelled as i32));
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    let log = log.await.unwrap();
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
