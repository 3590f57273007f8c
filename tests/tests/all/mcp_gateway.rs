//! airlock's tools served to MCP clients: the official Python SDK's client drives
//! `airlock mcp` over stdio (tests/mcp/stdio_client.py) against a real daemon serving the
//! first-party plugins, as an IDE's MCP configuration would.

use airlock_tests::{DaemonOptions, TestDaemon, cargo_bin, mcp, repo_root};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_lists_and_calls_tools_and_risky_calls_ask_its_user() {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    let workspace = daemon.workspace("project");
    std::fs::write(workspace.join("README.md"), "# sample\nadd numbers\n").unwrap();
    let output = tokio::process::Command::new(mcp::python())
        .arg(mcp::dir().join("stdio_client.py"))
        .arg(cargo_bin("airlock"))
        .arg(&workspace)
        .env("AIRLOCK_SERVER", &daemon.endpoint)
        .env("AIRLOCK_TOKEN", &daemon.token)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();

    assert_eq!(
        seen["tools"]["read_file"]["read_only_hint"],
        json!(true),
        "{seen}"
    );
    assert_eq!(seen["tools"]["write_file"]["read_only_hint"], json!(false));
    assert_eq!(seen["read"]["error"], json!(false), "{seen}");
    assert!(
        seen["read"]["text"]
            .as_str()
            .unwrap()
            .contains("add numbers")
    );

    assert_eq!(seen["accepted"]["error"], json!(false), "{seen}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("accepted.txt")).unwrap(),
        "yes"
    );
    let asked = seen["asked"][0].as_str().unwrap();
    assert!(
        asked.contains("write_file") && asked.contains("accepted.txt"),
        "the exact call is shown: {asked}"
    );

    assert_eq!(seen["declined"]["error"], json!(true), "{seen}");
    assert!(
        seen["declined"]["text"]
            .as_str()
            .unwrap()
            .contains("declined")
    );
    assert!(!workspace.join("declined.txt").exists());

    assert_eq!(seen["unasked"]["error"], json!(true), "{seen}");
    assert!(
        seen["unasked"]["text"]
            .as_str()
            .unwrap()
            .contains("cannot be asked")
    );
    assert!(!workspace.join("unasked.txt").exists());
}
