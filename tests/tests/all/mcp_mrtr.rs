//! Approvals answered in-band by MCP clients of the 2026-07-28 revision (no sessions, no
//! server-to-client requests): a risky call is answered with an input-required result whose
//! elicitation asks the person, and the retry with the answer and the request state runs
//! the call — once, for that very call, tenant and workspace. The tenant's approver
//! consoles see the same question, and the broker's first answer counts. Served without
//! sessions, so two daemons behind one address serve one client's listing and calls; the
//! request state's key is each daemon's own, so a retry that lands on the other daemon is
//! refused (the limit SECURITY.md states).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_daemon::config::{ApprovalRights, AuthSettings};
use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, TestDaemon, private_file, repo_root, tenant};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use crate::auth::{ALICE, BOB, TwoTenants};

const REVISION: &str = "2026-07-28";

/// A client of the 2026-07-28 revision over raw HTTP: every request stands alone.
pub(crate) struct Modern {
    http: Client<HttpConnector, Full<Bytes>>,
    url: String,
    token: &'static str,
}

impl Modern {
    pub(crate) fn new(url: String, token: &'static str) -> Modern {
        // A connection per request: behind a proxy that balances connections, each request
        // may reach another daemon.
        let http = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build_http::<Full<Bytes>>();
        Modern { http, url, token }
    }

    fn as_tenant(&self, token: &'static str) -> Modern {
        Modern {
            http: self.http.clone(),
            url: self.url.clone(),
            token,
        }
    }

    fn at(&self, url: String) -> Modern {
        Modern {
            http: self.http.clone(),
            url,
            token: self.token,
        }
    }

    /// Sends `method` with `params` (and the revision's per-request metadata); the
    /// JSON-RPC answer.
    pub(crate) async fn request(&self, method: &str, mut params: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": REVISION,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "mrtr-test", "version": "1"},
        });
        let mut request = Request::post(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", REVISION)
            .header("mcp-method", method);
        if let Some(name) = params.get("name").and_then(Value::as_str) {
            request = request.header("mcp-name", name);
        }
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let response = self
            .http
            .request(
                request
                    .body(Full::new(Bytes::from(body.to_string())))
                    .unwrap(),
            )
            .await
            .expect("the endpoint answers");
        assert_eq!(response.status(), StatusCode::OK, "{method}");
        assert!(
            response.headers().get("mcp-session-id").is_none(),
            "no session for {REVISION}"
        );
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(message) = serde_json::from_str::<Value>(&text) {
            return message;
        }
        // An SSE stream: its last message with an id is the answer.
        text.split("\n\n")
            .filter_map(|event| {
                let data: String = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                serde_json::from_str::<Value>(&data).ok()
            })
            .filter(|message| message.get("id").is_some())
            .last()
            .unwrap_or_else(|| panic!("no answer to {method}: {text}"))
    }

    async fn call(&self, tool: &str, arguments: Value) -> Value {
        self.retry(tool, arguments, None, None).await
    }

    async fn retry(
        &self,
        tool: &str,
        arguments: Value,
        state: Option<&str>,
        action: Option<&str>,
    ) -> Value {
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(state) = state {
            params["requestState"] = json!(state);
        }
        if let Some(action) = action {
            params["inputResponses"] = json!({"airlock_approval": {"action": action}});
        }
        let answer = self.request("tools/call", params).await;
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("a result: {answer}"))
    }
}

/// The request state of an input-required result, after checking it asks about `tool`.
fn asked(result: &Value, tool: &str) -> String {
    assert_eq!(result["resultType"], "input_required", "{result}");
    let question = &result["inputRequests"]["airlock_approval"];
    assert_eq!(question["method"], "elicitation/create", "{result}");
    let message = question["params"]["message"].as_str().unwrap();
    assert!(message.starts_with("airlock: allow this"), "{message}");
    assert!(message.contains(tool), "{message}");
    result["requestState"].as_str().expect("a state").to_owned()
}

fn ran(result: &Value) -> bool {
    result["isError"] != true
        && result
            .get("resultType")
            .is_none_or(|kind| kind == "complete")
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn endpoint(addr: SocketAddr, workspace: &Path) -> String {
    format!(
        "http://{addr}/mcp?workspace={}",
        workspace.to_str().unwrap().replace(' ', "%20")
    )
}

fn alice(tenants: &TwoTenants, workspace: &Path) -> Modern {
    Modern::new(
        endpoint(tenants.daemon.mcp_addr.expect("MCP"), workspace),
        ALICE,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_question_runs_the_call_once_and_a_declined_one_refuses_it() {
    let tenants = TwoTenants::start().await;
    let workspace = tenants.workspace("alice");
    let client = alice(&tenants, &workspace);

    let listed = client.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|tool| tool["name"] == "write_file"));
    // A read-only call is not asked about.
    let read = client.call("read_file", json!({"path": "notes.txt"})).await;
    assert!(ran(&read), "{read}");
    assert!(text(&read).contains("hello"), "{read}");

    let arguments = json!({"path": "out.txt", "content": "by alice\n"});
    let first = client.call("write_file", arguments.clone()).await;
    let state = asked(&first, "write_file");
    assert!(!workspace.join("out.txt").exists(), "asked before it runs");

    let accepted = client
        .retry(
            "write_file",
            arguments.clone(),
            Some(&state),
            Some("accept"),
        )
        .await;
    assert!(ran(&accepted), "{accepted}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("out.txt")).unwrap(),
        "by alice\n"
    );

    // Replayed, the answered state runs nothing.
    std::fs::remove_file(workspace.join("out.txt")).unwrap();
    let replayed = client
        .retry(
            "write_file",
            arguments.clone(),
            Some(&state),
            Some("accept"),
        )
        .await;
    assert_eq!(replayed["isError"], true, "{replayed}");
    assert!(text(&replayed).starts_with("DENIED: "), "{replayed}");
    assert!(!workspace.join("out.txt").exists(), "ran once");

    // Declined or cancelled at the client: a denial, and nothing written.
    for action in ["decline", "cancel"] {
        let arguments = json!({"path": format!("{action}.txt"), "content": "no"});
        let first = client.call("write_file", arguments.clone()).await;
        let state = asked(&first, "write_file");
        let refused = client
            .retry("write_file", arguments, Some(&state), Some(action))
            .await;
        assert_eq!(refused["isError"], true, "{refused}");
        let said = text(&refused);
        assert!(said.starts_with("DENIED: "), "{said}");
        assert!(said.contains("declined at the MCP client"), "{said}");
        assert!(!workspace.join(format!("{action}.txt")).exists());
    }
    // An answer without the state that asked for it is a first call: asked again.
    let unasked = client
        .retry(
            "write_file",
            json!({"path": "bare.txt", "content": "x"}),
            None,
            Some("accept"),
        )
        .await;
    asked(&unasked, "write_file");
    assert!(!workspace.join("bare.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_holds_for_its_own_call_tenant_and_workspace_only() {
    let tenants = TwoTenants::start().await;
    // Bob's root, which alice may use too: both tenants may make this very call.
    let shared = tenants.workspace("bob");
    let client = alice(&tenants, &shared);
    let arguments = json!({"path": "a.txt", "content": "alice's\n"});
    let state = asked(
        &client.call("write_file", arguments.clone()).await,
        "write_file",
    );

    let refused = |result: &Value| {
        assert_eq!(result["isError"], true, "{result}");
        assert!(text(result).starts_with("DENIED: "), "{result}");
        assert!(text(result).contains("request state"), "{result}");
    };
    // Other arguments.
    let other = json!({"path": "b.txt", "content": "alice's\n"});
    refused(
        &client
            .retry("write_file", other, Some(&state), Some("accept"))
            .await,
    );
    // A changed state: one character in its body, or its tag.
    let bytes = state.as_bytes();
    for at in [bytes.len() / 2, bytes.len() - 2] {
        let mut changed = bytes.to_vec();
        changed[at] = if changed[at] == b'A' { b'B' } else { b'A' };
        let changed = String::from_utf8(changed).unwrap();
        refused(
            &client
                .retry(
                    "write_file",
                    arguments.clone(),
                    Some(&changed),
                    Some("accept"),
                )
                .await,
        );
    }
    // Another tenant bringing it, for the same call in the same workspace.
    refused(
        &client
            .as_tenant(BOB)
            .retry(
                "write_file",
                arguments.clone(),
                Some(&state),
                Some("accept"),
            )
            .await,
    );
    // Another workspace.
    let elsewhere = client.at(endpoint(
        tenants.daemon.mcp_addr.unwrap(),
        &tenants.workspace("alice"),
    ));
    refused(
        &elsewhere
            .retry(
                "write_file",
                arguments.clone(),
                Some(&state),
                Some("accept"),
            )
            .await,
    );
    // Another risky tool (a read-only one is not asked about, and refuses a state that is
    // no question's of its own: tests/tests/all/mcp_questions.rs).
    let patch = "*** Begin Patch\n*** Add File: c.txt\n+patched\n*** End Patch\n";
    refused(
        &client
            .retry(
                "apply_patch",
                json!({"patch": patch}),
                Some(&state),
                Some("accept"),
            )
            .await,
    );
    assert!(!shared.join("c.txt").exists());
    assert!(!shared.join("a.txt").exists());
    assert!(!shared.join("b.txt").exists());
    assert!(!tenants.workspace("alice").join("a.txt").exists());

    // None of those took the question: its own retry still runs the call.
    let accepted = client
        .retry("write_file", arguments, Some(&state), Some("accept"))
        .await;
    assert!(ran(&accepted), "{accepted}");
    assert_eq!(
        std::fs::read_to_string(shared.join("a.txt")).unwrap(),
        "alice's\n"
    );
}

/// The first pending approval of `tool` an approver of `tenants` (as `token`) sees.
async fn pending(tenants: &TwoTenants, token: &str, tool: &str) -> pb::ApprovalRequest {
    let mut agent = tenants.agent(token).await;
    let mut watched = agent
        .watch_approvals(pb::WatchApprovalsRequest::default())
        .await
        .unwrap()
        .into_inner();
    loop {
        let request = tokio::time::timeout(Duration::from_secs(30), watched.message())
            .await
            .expect("a pending approval within 30 s")
            .unwrap()
            .expect("the stream stays open");
        if request.tool == tool && request.state == pb::ApprovalState::Pending as i32 {
            return request;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consoles_see_the_question_and_the_first_answer_counts() {
    let tenants = TwoTenants::start().await;
    let workspace = tenants.workspace("alice");
    let client = alice(&tenants, &workspace);
    let decide = |request: &pb::ApprovalRequest, decision: pb::Decision| pb::ApprovalDecision {
        approval_id: request.approval_id.clone(),
        decision: decision as i32,
        reason: "from the console".into(),
        digest: request.digest.clone(),
        grant_prefix: Vec::new(),
    };

    // Denied at the console first: the client's later accept is too late.
    let arguments = json!({"path": "denied.txt", "content": "no"});
    let state = asked(
        &client.call("write_file", arguments.clone()).await,
        "write_file",
    );
    let question = pending(&tenants, ALICE, "write_file").await;
    assert_eq!(question.tenant, "alice");
    tenants
        .agent(ALICE)
        .await
        .decide_approval(decide(&question, pb::Decision::Deny))
        .await
        .expect("the console's answer counts");
    let refused = client
        .retry("write_file", arguments, Some(&state), Some("accept"))
        .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("console"), "{refused}");
    assert!(!workspace.join("denied.txt").exists());

    // Approved at the console: the retry runs the call, with or without an answer of its
    // own.
    let arguments = json!({"path": "approved.txt", "content": "yes"});
    let state = asked(
        &client.call("write_file", arguments.clone()).await,
        "write_file",
    );
    let question = pending(&tenants, ALICE, "write_file").await;
    tenants
        .agent(ALICE)
        .await
        .decide_approval(decide(&question, pb::Decision::ApproveOnce))
        .await
        .expect("the console's answer counts");
    let accepted = client
        .retry("write_file", arguments, Some(&state), None)
        .await;
    assert!(ran(&accepted), "{accepted}");
    assert!(workspace.join("approved.txt").exists());

    // Answered in-band, the question is resolved for the consoles: it is no longer pending.
    let arguments = json!({"path": "inband.txt", "content": "yes"});
    let state = asked(
        &client.call("write_file", arguments.clone()).await,
        "write_file",
    );
    let question = pending(&tenants, ALICE, "write_file").await;
    let accepted = client
        .retry("write_file", arguments, Some(&state), Some("accept"))
        .await;
    assert!(ran(&accepted), "{accepted}");
    let late = tenants
        .agent(ALICE)
        .await
        .decide_approval(decide(&question, pb::Decision::Deny))
        .await
        .expect_err("answered already");
    assert_eq!(late.code(), tonic::Code::NotFound, "{late:?}");
}

/// A TCP proxy on one address that hands each connection to the next of `backends` in
/// turn: no stickiness of any kind.
async fn round_robin(backends: Vec<SocketAddr>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let turns = Arc::new(AtomicUsize::new(0));
    let counted = turns.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let turn = counted.fetch_add(1, Ordering::SeqCst);
            let backend = backends[turn % backends.len()];
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (addr, turns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_behind_one_address_serve_a_client_without_sessions() {
    let secrets = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let token_file = private_file(secrets.path(), "alice", ALICE);
    let start = || {
        TestDaemon::start(DaemonOptions {
            tools_dirs: vec![repo_root().join("plugins")],
            auth: AuthSettings {
                unix_socket_trust: false,
                tenants: vec![tenant(
                    "alice",
                    token_file.clone(),
                    &["*"],
                    ApprovalRights::Own,
                )],
            },
            extra_workspace_roots: vec![shared.path().to_owned()],
            mcp_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            ..DaemonOptions::default()
        })
    };
    let first = start().await;
    let second = start().await;
    let (addr, turns) = round_robin(vec![
        first.mcp_addr.expect("MCP"),
        second.mcp_addr.expect("MCP"),
    ])
    .await;
    std::fs::write(shared.path().join("notes.txt"), "hello\n").unwrap();
    let client = Modern::new(endpoint(addr, shared.path()), ALICE);

    // Listing and read-only calls need no session: each daemon serves each request alone.
    for _ in 0..2 {
        let listed = client.request("tools/list", json!({})).await;
        assert!(
            listed["result"]["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty())
        );
        let read = client.call("read_file", json!({"path": "notes.txt"})).await;
        assert!(ran(&read), "{read}");
    }
    assert_eq!(turns.load(Ordering::SeqCst), 4, "a connection per request");

    // The question is asked by one daemon, the retry reaches the other: its state does not
    // open there (each daemon's key is its own), and nothing runs.
    let arguments = json!({"path": "fleet.txt", "content": "x"});
    let state = asked(
        &client.call("write_file", arguments.clone()).await,
        "write_file",
    );
    let retried = client
        .retry(
            "write_file",
            arguments.clone(),
            Some(&state),
            Some("accept"),
        )
        .await;
    assert_eq!(retried["isError"], true, "{retried}");
    assert!(text(&retried).contains("daemon"), "{retried}");
    assert!(!shared.path().join("fleet.txt").exists());

    // Brought back to the daemon that asked, the same state still runs the call: the
    // refusal elsewhere did not take the question.
    let asker = Modern::new(
        endpoint(
            // The call went out on the fifth connection, to the first daemon.
            first.mcp_addr.unwrap(),
            shared.path(),
        ),
        ALICE,
    );
    let accepted = asker
        .retry("write_file", arguments, Some(&state), Some("accept"))
        .await;
    assert!(ran(&accepted), "{accepted}");
    assert!(shared.path().join("fleet.txt").exists());
}

/// The official Python SDK (`mcp` 2.3.0) on the 2026-07-28 revision answers the
/// input-required result with its elicitation callback and retries on its own
/// (tests/mcp/mrtr_client.py).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_answers_the_question_in_band() {
    let tenants = TwoTenants::start().await;
    let workspace = tenants.workspace("alice");
    let output = tokio::process::Command::new(airlock_tests::mcp::python())
        .arg(airlock_tests::mcp::dir().join("mrtr_client.py"))
        .arg(endpoint(tenants.daemon.mcp_addr.unwrap(), &workspace))
        .env("AIRLOCK_TOKEN", ALICE)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["version"], REVISION, "{seen}");
    assert!(
        seen["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("write_file"))
    );
    assert_eq!(seen["accepted"]["error"], false, "{seen}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("accepted.txt")).unwrap(),
        "yes\n"
    );
    assert_eq!(seen["declined"]["error"], true, "{seen}");
    let declined = seen["declined"]["text"].as_str().unwrap();
    assert!(declined.starts_with("DENIED: "), "{declined}");
    assert!(!workspace.join("declined.txt").exists());
    let asked = seen["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{seen}");
    assert!(
        asked[0]
            .as_str()
            .unwrap()
            .starts_with("airlock: allow this write call?"),
        "{seen}"
    );
}
