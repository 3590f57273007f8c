//! The MCP endpoint's walls, driven at the HTTP level as a minimal or hostile client would:
//! a session is its opener's alone (another tenant's token on it reaches nothing), an
//! approval question rides the POST stream of the call that raised it (a client that never
//! opens the GET stream still sees it, and so do the tenant's consoles), a tenant's cap on
//! calls in flight counts its calls on both edges, a tenant holds at most its cap of sessions,
//! a closed session is answered 200 and frees its place, and bytes no client would send get
//! an answer, never a panic.

use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::Console;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::{ALICE, BOB, TwoTenants};

/// One side of an MCP session over raw HTTP: what a client that reads only its POST streams
/// does.
struct Session {
    http: Client<HttpConnector, Full<Bytes>>,
    url: String,
    token: &'static str,
    id: String,
}

/// The JSON-RPC messages of an answer: one JSON body, or each `data:` of an SSE stream.
struct Messages {
    body: hyper::body::Incoming,
    json: bool,
    pending: Vec<u8>,
}

impl Messages {
    /// The next message, or `None` at the stream's end.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if self.json {
                if self.pending.is_empty() {
                    let body = http_body_util::BodyExt::collect(&mut self.body)
                        .await
                        .ok()?
                        .to_bytes();
                    self.pending = b"done".to_vec();
                    return serde_json::from_slice(&body).ok();
                }
                return None;
            }
            if let Some(end) = find(&self.pending, b"\n\n") {
                let event: Vec<u8> = self.pending.drain(..end + 2).collect();
                let data: String = String::from_utf8_lossy(&event)
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if let Ok(message) = serde_json::from_str(&data) {
                    return Some(message);
                }
                continue;
            }
            let frame = self.body.frame().await?.ok()?;
            if let Ok(data) = frame.into_data() {
                self.pending.extend_from_slice(&data);
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

impl Session {
    /// Initializes a session as `token`'s tenant, offering elicitation.
    async fn open(url: &str, token: &'static str) -> Session {
        let http = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        let mut session = Session {
            http,
            url: url.to_owned(),
            token,
            id: String::new(),
        };
        let response = session
            .send(
                Method::POST,
                None,
                json!({
                    "jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"elicitation": {}},
                        "clientInfo": {"name": "edge-test", "version": "1"}
                    }
                }),
            )
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        session.id = response
            .headers()
            .get("mcp-session-id")
            .expect("a session id")
            .to_str()
            .unwrap()
            .to_owned();
        let mut answers = messages(response);
        assert!(answers.next().await.expect("initialized")["result"].is_object());
        let notified = session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(notified.status(), StatusCode::ACCEPTED);
        session
    }

    async fn send(
        &self,
        method: Method,
        session: Option<&str>,
        body: Value,
    ) -> http::Response<hyper::body::Incoming> {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "application/json, text/event-stream");
        if method == Method::POST {
            request = request.header("content-type", "application/json");
        }
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        let body = if method == Method::POST {
            Bytes::from(body.to_string())
        } else {
            Bytes::new()
        };
        self.http
            .request(request.body(Full::new(body)).unwrap())
            .await
            .expect("the endpoint answers")
    }

    async fn post(&self, body: Value) -> http::Response<hyper::body::Incoming> {
        self.send(Method::POST, Some(&self.id), body).await
    }

    /// A request as `token`'s tenant on this session's id.
    async fn as_other(&self, token: &'static str, method: Method, body: Value) -> StatusCode {
        let other = Session {
            http: self.http.clone(),
            url: self.url.clone(),
            token,
            id: self.id.clone(),
        };
        other.send(method, Some(&self.id), body).await.status()
    }

    async fn call(&self, id: u64, tool: &str, arguments: Value) -> Messages {
        let response = self
            .post(json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}
            }))
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        messages(response)
    }
}

fn messages(response: http::Response<hyper::body::Incoming>) -> Messages {
    let json = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    Messages {
        body: response.into_body(),
        json,
        pending: Vec::new(),
    }
}

fn endpoint(tenants: &TwoTenants, workspace: &std::path::Path) -> String {
    let addr = tenants.daemon.mcp_addr.expect("the daemon serves MCP");
    format!(
        "http://{addr}/mcp?workspace={}",
        workspace.to_str().unwrap().replace(' ', "%20")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_its_openers_alone_and_its_question_rides_the_calls_own_stream() {
    let tenants = TwoTenants::start().await;
    let workspace = tenants.workspace("alice");
    let alice = Session::open(&endpoint(&tenants, &workspace), ALICE).await;

    // Another tenant holding the session's id reaches nothing of it.
    let listing = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    for method in [Method::GET, Method::POST, Method::DELETE] {
        let status = alice.as_other(BOB, method.clone(), listing.clone()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} as bob");
    }

    // A write asks first; the question comes on this call's own stream, and alice never
    // opened the GET stream. Her consoles see it too, as every approval.
    let mut console = Console::on(tenants.agent(ALICE).await).await;
    let mut call = alice
        .call(
            2,
            "write_file",
            json!({"path": "out.txt", "content": "by alice\n"}),
        )
        .await;
    let question = call.next().await.expect("a question before the result");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap()
            .contains("write_file"),
        "{question}"
    );
    let shown = console.next_in(pb::ApprovalState::Pending).await;
    assert_eq!(
        (shown.tool.as_str(), shown.tenant.as_str()),
        ("write_file", "alice"),
        "{shown:?}"
    );
    // Bob cannot answer it, nor see the stream it would go to otherwise.
    let answer = json!({
        "jsonrpc": "2.0", "id": question["id"].clone(),
        "result": {"action": "accept", "content": {}}
    });
    assert_eq!(
        alice.as_other(BOB, Method::POST, answer.clone()).await,
        StatusCode::NOT_FOUND
    );
    assert!(!workspace.join("out.txt").exists());
    let accepted = alice.post(answer).await;
    assert_eq!(accepted.status(), StatusCode::ACCEPTED);
    let result = call.next().await.expect("the call's result");
    assert_eq!(result["id"], 2, "{result}");
    assert_ne!(result["result"]["isError"], true, "{result}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("out.txt")).unwrap(),
        "by alice\n"
    );

    // A closed session is answered as the MCP SDKs expect, and is gone.
    let closed = alice
        .send(Method::DELETE, Some(&alice.id), Value::Null)
        .await;
    assert_eq!(closed.status(), StatusCode::OK);
    let after = alice.post(listing).await;
    assert_eq!(after.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_cap_counts_its_calls_on_both_edges() {
    let tenants = TwoTenants::start().await;
    let workspace = tenants.workspace("bob");
    let bob = Session::open(&endpoint(&tenants, &workspace), BOB).await;
    let mut grpc = tenants.tools(BOB).await;
    let probe = || pb::ExecuteToolRequest {
        tool: "read_file".into(),
        arguments_json: json!({"path": "notes.txt"}).to_string(),
        workspace: workspace.to_str().unwrap().into(),
        ..Default::default()
    };

    // Bob's one call in flight is a spin over MCP …
    let mut spin_id = 100;
    let (spinning, refused) = loop {
        let mut spinning = bob.call(spin_id, "spin", json!({})).await;
        let mut refused = None;
        for _ in 0..200 {
            match grpc.execute_tool(probe()).await {
                Err(status) => {
                    refused = Some(status);
                    break;
                }
                Ok(stream) => {
                    let mut stream = stream.into_inner();
                    while stream.message().await.unwrap().is_some() {}
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if let Some(refused) = refused {
            break (spinning, refused);
        }
        // Every probe went through: one of them held the slot as the spin arrived, and the
        // spin was the call refused (a loaded machine makes the overlap likely). Again.
        let answer = tokio::time::timeout(Duration::from_secs(30), spinning.next())
            .await
            .expect("the spin neither holds the slot nor ends")
            .expect("the spin's answer");
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.starts_with("RESOURCE_EXHAUSTED: "), "{answer}");
        spin_id += 1;
        assert!(spin_id < 105, "the spin never held bob's slot");
    };
    // … so gRPC refuses his next one,
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    // and so does MCP, with the same words.
    let mut second = bob.call(3, "read_file", json!({"path": "notes.txt"})).await;
    let result = second.next().await.expect("a result");
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("RESOURCE_EXHAUSTED: "), "{text}");
    assert!(text.contains("bob"), "{text}");

    // Cancelled, the spin gives the slot back.
    let cancelled = bob
        .post(json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": spin_id, "reason": "done"}
        }))
        .await;
    assert_eq!(cancelled.status(), StatusCode::ACCEPTED);
    drop(spinning);
    let mut through = false;
    for _ in 0..200 {
        if let Ok(stream) = grpc.execute_tool(probe()).await {
            let mut stream = stream.into_inner();
            while stream.message().await.unwrap().is_some() {}
            through = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(through, "the slot came back");
}

/// Bytes a client library would never send, written to the socket as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_an_answer_not_a_panic() {
    let tenants = TwoTenants::start().await;
    let addr = tenants.daemon.mcp_addr.unwrap();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let requests: Vec<Vec<u8>> = vec![
        // Found by a reviewer: an escape cut by a multi-byte character panicked.
        format!("POST /mcp?workspace=%a\u{20ac} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ALICE}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{initialize}", initialize.len()).into_bytes(),
        format!("POST /mcp?workspace=%ff%fe%%%2 HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ALICE}\r\nContent-Length: 3\r\n\r\n{{[\"").into_bytes(),
        format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ALICE}\r\nMcp-Session-Id: \u{20ac}\u{20ac}\r\n\r\n").into_bytes(),
        b"POST /mcp HTTP/1.1\r\nAuthorization: Bearer \xff\xfe\r\nContent-Length: 0\r\n\r\n".to_vec(),
    ];
    for request in requests {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(&request).await.unwrap();
        let mut head = [0u8; 12];
        tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut head))
            .await
            .unwrap_or_else(|_| panic!("no answer to {:?}", String::from_utf8_lossy(&request)))
            .unwrap();
        assert!(head.starts_with(b"HTTP/1.1 "), "{head:?}");
    }
    // Through a session, the query reaches the handler: found by a reviewer, this panicked
    // (an escape cut by a multi-byte character) and left the stream open.
    let odd = Session::open(&format!("http://{addr}/mcp?workspace=%a\u{20ac}"), ALICE).await;
    let mut listed = messages(
        odd.post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
            .await,
    );
    assert!(listed.next().await.expect("a listing")["result"]["tools"].is_array());
    let mut call = odd.call(3, "read_file", json!({"path": "notes.txt"})).await;
    let refused = call.next().await.expect("an answer");
    let text = refused["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("DENIED: ") || text.contains("workspace"),
        "{refused}"
    );
    // Still serving.
    let workspace = tenants.workspace("alice");
    Session::open(&endpoint(&tenants, &workspace), ALICE).await;
}

/// A tenant that opens sessions in a loop is stopped at its cap, alone: another tenant still
/// opens one, and a session closed frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_holds_at_most_its_cap_of_sessions_and_a_closed_one_frees_its_place() {
    // The daemon's `MAX_SESSIONS_PER_TENANT`.
    const MAX_SESSIONS_PER_TENANT: usize = 64;
    let tenants = TwoTenants::start().await;
    let url = endpoint(&tenants, &tenants.workspace("alice"));
    let mut held = Vec::new();
    for _ in 0..MAX_SESSIONS_PER_TENANT {
        held.push(Session::open(&url, ALICE).await);
    }
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "edge-test", "version": "1"}
        }
    });
    let refused = held[0].send(Method::POST, None, initialize.clone()).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    // Another tenant is not held to alice's cap.
    Session::open(&endpoint(&tenants, &tenants.workspace("bob")), BOB).await;
    // A session alice closes frees its place.
    let closed = held.pop().expect("a session");
    let answer = closed
        .send(Method::DELETE, Some(&closed.id), Value::Null)
        .await;
    assert_eq!(answer.status(), StatusCode::OK);
    Session::open(&url, ALICE).await;
}
