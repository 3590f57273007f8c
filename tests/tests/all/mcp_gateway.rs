//! airlock's tools served to MCP clients: the official Python SDK's client
//! (tests/mcp/client.py) drives `airlock mcp` over stdio, as an IDE's MCP configuration
//! would, and the daemon's own Streamable HTTP endpoint, against a real daemon serving the
//! first-party plugins. The same scenario both ways: list, read, and a risky call accepted
//! at the client, declined there, and approved from an approver console.

use airlock_proto::v1 as pb;
use airlock_tests::{Console, DaemonOptions, TestDaemon, cargo_bin, mcp, repo_root};
use serde_json::{Value, json};

/// How the client reaches airlock.
#[derive(Clone, Copy)]
enum Transport {
    /// `airlock mcp` over stdio.
    Stdio,
    /// The daemon's `/mcp` endpoint.
    Http,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_on_stdio_lists_and_calls_tools_and_risky_calls_ask_a_person() {
    scenario(Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_over_http_lists_and_calls_tools_and_risky_calls_ask_a_person() {
    scenario(Transport::Http).await;
}

async fn scenario(transport: Transport) {
    // A tool that runs until it is stopped; its argument marks its process as this test's.
    let marker = match transport {
        Transport::Stdio => "297.1",
        Transport::Http => "297.2",
    };
    let slow = airlock_tests::ToolsDir::new();
    slow.write_manifest(
        "slow",
        &format!(
            "name = \"slow\"\nversion = \"1\"\ndescription = \"sleeps\"\nrisk = \"read_only\"\nengine = \"process\"\ncommand = [\"/bin/sleep\", \"{marker}\"]\nabi = \"argv\"\nprofile = \"process-readonly\"\ninput_schema = {{ type = \"object\" }}\n"
        ),
    );
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins"), slow.path().to_owned()],
        mcp_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..DaemonOptions::default()
    })
    .await;
    let workspace = daemon.workspace("project");
    std::fs::write(workspace.join("README.md"), "# sample\nadd numbers\n").unwrap();
    // An approver console, as `airlock approvals` is: it approves the call to console.txt
    // alone, leaving the others to the person at the MCP client, and stays open until the
    // three risky calls were answered.
    let mut console = Console::open(&daemon).await;
    let console = tokio::spawn(async move {
        let mut seen = Vec::new();
        loop {
            let request = console.next().await;
            if request.state == pb::ApprovalState::Pending as i32
                && request.arguments_json.contains("console.txt")
            {
                console.answer(&request, pb::Decision::ApproveOnce);
            }
            seen.push(request);
            let resolved = seen
                .iter()
                .filter(|r| r.state == pb::ApprovalState::Resolved as i32)
                .count();
            if resolved == 3 {
                return seen;
            }
        }
    });
    let mut client = tokio::process::Command::new(mcp::python());
    client.arg(mcp::dir().join("client.py"));
    match transport {
        Transport::Stdio => client
            .arg("stdio")
            .arg(cargo_bin("airlock"))
            .arg(&workspace),
        Transport::Http => client.arg("http").arg(format!(
            "http://{}/mcp?workspace={}",
            daemon.mcp_addr.unwrap(),
            workspace.display()
        )),
    };
    let output = client
        .env("AIRLOCK_SERVER", &daemon.endpoint)
        .env("AIRLOCK_TOKEN", &daemon.token)
        .env("SLOW_MARKER", marker)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    // Each session the SDK closed (DELETE) was answered as it expects: it logs a warning on
    // any other status (rmcp's own answer, 202, was one).
    let logged = String::from_utf8_lossy(&output.stderr);
    assert!(!logged.contains("Session termination failed"), "{logged}");

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

    // The client gave up on the slow call, and saw its process stop while it stayed
    // connected: the cancel notification stopped it, not the end of the session.
    assert_eq!(seen["stopped_while_connected"], json!(true), "{seen}");
}

/// One POST of an `initialize` to the MCP endpoint; its status code.
async fn initialize(
    addr: std::net::SocketAddr,
    path: &str,
    host: &str,
    token: Option<&str>,
    origin: Option<&str>,
) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "probe", "version": "1"}}
    })
    .to_string();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if let Some(origin) = origin {
        head.push_str(&format!("Origin: {origin}\r\n"));
    }
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("{head}\r\n{body}").as_bytes())
        .await
        .unwrap();
    let mut status = [0u8; 12];
    stream.read_exact(&mut status).await.unwrap();
    std::str::from_utf8(&status[9..12])
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_endpoint_wants_a_token_and_refuses_other_hosts_and_origins() {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        mcp_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..DaemonOptions::default()
    })
    .await;
    let addr = daemon.mcp_addr.unwrap();
    let host = addr.to_string();
    let token = Some(daemon.token.as_str());
    assert_eq!(initialize(addr, "/mcp", &host, token, None).await, 200);
    assert_eq!(
        initialize(
            addr,
            "/mcp",
            &format!("localhost:{}", addr.port()),
            token,
            Some(&format!("http://localhost:{}", addr.port()))
        )
        .await,
        200
    );
    assert_eq!(initialize(addr, "/mcp", &host, None, None).await, 401);
    assert_eq!(
        initialize(addr, "/mcp", &host, Some("not-the-token"), None).await,
        401
    );
    assert_eq!(initialize(addr, "/other", &host, token, None).await, 404);
    // DNS rebinding: a name the attacker controls, resolving to loopback.
    assert_eq!(
        initialize(addr, "/mcp", "rebind.attacker.example", token, None).await,
        403
    );
    assert_eq!(
        initialize(addr, "/mcp", &host, token, Some("https://attacker.example")).await,
        403
    );
}
