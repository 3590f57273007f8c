//! The store when it fails: a full disk stops new tool executions instead of running
//! unrecorded side effects, and a damaged database is refused at start, by name.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::{
    DaemonOptions, DaemonProcess, TestDaemon, ToolsDir, cargo_bin, repo_root, scripted_run,
    test_module,
};
use pb::run_event::Event;
use serde_json::json;

/// A size-limited tmpfs, unmounted when dropped. Mounting needs root, which CI has.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "this test mounts a small tmpfs to fill it, which needs root (CAP_SYS_ADMIN); mount failed: {status}"
        );
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes until the disk is full.
    fn fill(&self) {
        use std::io::Write;
        let mut file = std::fs::File::create(self.path().join("filler")).unwrap();
        let block = vec![0u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        let _ = file.sync_all();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.path()).status();
    }
}

#[tokio::test]
async fn a_full_disk_stops_the_run_before_its_side_effect() {
    let disk = SmallDisk::mount("4m");
    let tools = ToolsDir::new();
    tools.add_file(
        "append",
        &test_module("append_then_sleep"),
        "risk = \"write\"\nprofile = \"workspace-write\"\ninput_schema = { type = \"object\" }",
    );
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        state_dir: Some(disk.path().join("state")),
        ..DaemonOptions::default()
    })
    .await;
    let workspace = daemon.workspace("w");
    let script = json!({"turns": [
        {"delay_ms": 500, "tool_calls": [{"name": "append", "arguments": {"path": "log.txt", "line": "effect", "sleep_ms": 0}}]},
        {"final": "done"}
    ]});
    let mut start = scripted_run(&workspace, &script);
    start.approval_policy = pb::ApprovalPolicy::Auto as i32;
    let mut run = daemon.start_run(start).await;
    run.until(|event| matches!(event, Event::ContextBuilt(_)).then_some(()))
        .await;
    // The model is thinking; the disk fills up.
    disk.fill();
    let ended = loop {
        match tokio::time::timeout(Duration::from_secs(60), run.next_raw())
            .await
            .expect("the stream ends")
        {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the stream ended without saying why: {:#?}", run.seen),
            Err(status) => break status,
        }
    };
    assert_eq!(ended.code(), tonic::Code::Unavailable, "{ended:?}");
    assert!(ended.message().contains("cannot be written"), "{ended:?}");
    assert!(
        !workspace.join("log.txt").exists(),
        "the call ran although it could not be recorded"
    );

    // New runs are refused while the store cannot write.
    let refused = daemon
        .open_run(pb::run_request::Request::Start(scripted_run(
            &workspace, &script,
        )))
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    drop(run);
    // Stopped before the disk is unmounted: the daemon holds the store open.
    daemon.stop().await;
}

fn start_with_state(state: &Path) -> std::process::Output {
    Command::new(cargo_bin("airlockd"))
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused_by_name() {
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("airlock.db"), vec![0x5au8; 64 * 1024]).unwrap();
    let output = start_with_state(state.path());
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("airlock.db") && stderr.contains("damaged"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_database_with_damaged_pages_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // A real store with a finished run in it.
    {
        let tools = ToolsDir::new();
        tools.add_file("echo", &test_module("echo"), "");
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("w")).unwrap();
        let daemon = DaemonProcess::start(
            &[
                "--state-dir",
                state.to_str().unwrap(),
                "--tools-dir",
                tools.path().to_str().unwrap(),
                "--workspace-root",
                root.to_str().unwrap(),
            ],
            &repo_root(),
        )
        .await;
        let (requests, receiver) = tokio::sync::mpsc::unbounded_channel();
        let turns: Vec<_> = (0..40)
            .map(|i| json!({"text": "x".repeat(2000), "tool_calls": [{"name": "echo", "arguments": {"i": i}}]}))
            .chain([json!({"final": "done"})])
            .collect();
        let mut start = scripted_run(&root.join("w"), &json!({ "turns": turns }));
        start.approval_policy = pb::ApprovalPolicy::Auto as i32;
        requests
            .send(pb::RunRequest {
                request: Some(pb::run_request::Request::Start(start)),
            })
            .unwrap();
        let mut events = pb::agent_client::AgentClient::new(daemon.channel().await)
            .run(tokio_stream::wrappers::UnboundedReceiverStream::new(
                receiver,
            ))
            .await
            .unwrap()
            .into_inner();
        while events.message().await.unwrap().is_some() {}
        daemon.signal(libc::SIGTERM);
        let mut daemon = daemon;
        assert!(daemon.wait().await.success());
    }
    let path = state.join("airlock.db");
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(
        bytes.len() > 64 * 1024,
        "the store is {} bytes",
        bytes.len()
    );
    // Keep the header; wreck pages in the middle.
    for byte in &mut bytes[16 * 1024..48 * 1024] {
        *byte = 0xa5;
    }
    std::fs::write(&path, bytes).unwrap();
    let output = start_with_state(&state);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("airlock.db") && stderr.contains("damaged"),
        "{stderr}"
    );
}
