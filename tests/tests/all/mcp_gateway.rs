//! airlock's tools served to MCP clients: the official Python SDK's client drives
//! `airlock mcp` over stdio (tests/mcp/stdio_client.py) against a real daemon serving the
//! first-party plugins, as an IDE's MCP configuration would.

use airlock_proto::v1 as pb;
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
    // An approver console, as `airlock approvals` is: it approves the call to console.txt
    // alone, leaving the others to the person at the MCP client.
    let mut agent = daemon.agent().await;
    let (decisions, queued) = tokio::sync::mpsc::unbounded_channel();
    let mut requests = agent
        .approvals(tokio_stream::wrappers::UnboundedReceiverStream::new(queued))
        .await
        .unwrap()
        .into_inner();
    let console = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(request) = requests.message().await.unwrap() {
            if request.state == pb::ApprovalState::Pending as i32
                && request.arguments_json.contains("console.txt")
            {
                decisions
                    .send(pb::ApprovalDecision {
                        approval_id: request.approval_id.clone(),
                        decision: pb::Decision::ApproveOnce as i32,
                        reason: String::new(),
                        digest: request.digest.clone(),
                    })
                    .unwrap();
            }
            seen.push(request);
            if seen
                .iter()
                .filter(|r| r.state == pb::ApprovalState::Resolved as i32)
                .count()
                == 3
            {
                return seen;
            }
        }
        seen
    });
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

    assert_eq!(seen["console"]["error"], json!(false), "{seen}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("console.txt")).unwrap(),
        "ok"
    );

    // Every risky call was put to the tenant's consoles too, outside any run; the first
    // answer won each.
    let requests = console.await.unwrap();
    let pending: Vec<_> = requests
        .iter()
        .filter(|r| r.state == pb::ApprovalState::Pending as i32)
        .collect();
    assert_eq!(pending.len(), 3, "{requests:#?}");
    for request in &pending {
        assert_eq!(request.run_id, "");
        assert_eq!(request.tenant, "default");
        assert_eq!(request.tool, "write_file");
        assert_eq!(request.digest.len(), 64);
    }
    let diff = pending[0].preview.as_ref().unwrap();
    assert_eq!(diff.kind, "diff", "{diff:?}");
}
