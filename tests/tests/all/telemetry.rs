//! What operators see, end to end against real daemons: the Prometheus endpoint (its token
//! rule, and `promtool check metrics` on what it serves); OTLP traces, metrics and audit
//! records reaching a collector on loopback built on `proto/otlp` — over gRPC with mutual
//! TLS and an API key, over HTTP/protobuf through a collector that first answers 503, and a
//! collector that accepts connections and never answers costing a run nothing; and the audit
//! log's chain, exported and verified with the CLI, then edited, cut and truncated in the
//! SQLite file, each named by `airlock audit verify`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use airlock_daemon::config::{HeaderValue, MetricsFile, OtlpFile, OtlpProtocol};
use airlock_proto::otlp::collector::logs::v1::logs_service_server::{
    LogsService, LogsServiceServer,
};
use airlock_proto::otlp::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use airlock_proto::otlp::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use airlock_proto::otlp::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use airlock_proto::otlp::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use airlock_proto::otlp::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use airlock_proto::otlp::common::v1::KeyValue;
use airlock_proto::otlp::common::v1::any_value::Value as AnyValue;
use airlock_tests::cli::Cli;
use airlock_tests::{DaemonOptions, TestDaemon, private_file, repo_root, scripted_run};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use prost::Message;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

/// What a collector received, whatever the transport.
#[derive(Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
    logs: Arc<Mutex<Vec<ExportLogsServiceRequest>>>,
    /// The `x-api-key` of every request.
    keys: Arc<Mutex<Vec<Option<String>>>>,
}

fn text(value: &Option<airlock_proto::otlp::common::v1::AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(text)) => text.clone(),
        Some(AnyValue::IntValue(n)) => n.to_string(),
        Some(AnyValue::DoubleValue(n)) => n.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(attributes: &[KeyValue]) -> BTreeMap<String, String> {
    attributes
        .iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

impl Received {
    fn span_names_and_attributes(&self) -> Vec<(String, BTreeMap<String, String>)> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| &s.spans)
            .map(|span| (span.name.clone(), attributes(&span.attributes)))
            .collect()
    }

    fn resources(&self) -> Vec<BTreeMap<String, String>> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_spans)
            .filter_map(|r| r.resource.as_ref())
            .map(|resource| attributes(&resource.attributes))
            .collect()
    }

    fn metric_names(&self) -> Vec<String> {
        self.metrics
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_metrics)
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| &s.metrics)
            .map(|metric| metric.name.clone())
            .collect()
    }

    fn log_kinds(&self) -> Vec<String> {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_logs)
            .flat_map(|r| &r.scope_logs)
            .flat_map(|s| &s.log_records)
            .map(|record| record.event_name.clone())
            .collect()
    }

    /// Waits until `done` holds of what was received.
    async fn wait(&self, what: &str, done: impl Fn(&Received) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "{what}: spans {:?}, metrics {:?}, logs {:?}",
                self.span_names_and_attributes()
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
                self.metric_names(),
                self.log_kinds()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn key<T>(&self, request: &tonic::Request<T>) {
        let key = request
            .metadata()
            .get("x-api-key")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        self.keys.lock().unwrap().push(key);
    }
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.key(&request);
        self.spans.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.key(&request);
        self.metrics.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl LogsService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        self.key(&request);
        self.logs.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportLogsServiceResponse::default()))
    }
}

/// A run that reads a file, then answers: spans of every kind, an audit record or two.
async fn traced_run(daemon: &TestDaemon) -> airlock_proto::v1::Trace {
    let workspace = daemon.workspace("w");
    std::fs::write(workspace.join("notes.txt"), "alpha\n").unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"final": "read it"}
    ]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    run.finished().await;
    let run_id = run.seen[0].run_id.clone();
    daemon
        .agent()
        .await
        .get_trace(airlock_proto::v1::GetTraceRequest { run_id })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn traces_metrics_and_audit_records_reach_a_collector_over_mutual_tls_with_a_key() {
    let pki = crate::auth::pki();
    let received = Received::default();
    let identity = tonic::transport::Identity::from_pem(
        std::fs::read(pki.dir.path().join("server.pem")).unwrap(),
        std::fs::read(pki.dir.path().join("server.key")).unwrap(),
    );
    let tls = tonic::transport::ServerTlsConfig::new()
        .identity(identity)
        .client_ca_root(tonic::transport::Certificate::from_pem(&pki.ca));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(
        tonic::transport::Server::builder()
            .tls_config(tls)
            .unwrap()
            .add_service(TraceServiceServer::new(received.clone()))
            .add_service(MetricsServiceServer::new(received.clone()))
            .add_service(LogsServiceServer::new(received.clone()))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let mut headers = BTreeMap::new();
    headers.insert("x-api-key".to_owned(), HeaderValue("k-123".to_owned()));
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        otlp: OtlpFile {
            endpoint: Some(format!("https://localhost:{port}")),
            headers,
            ca_file: Some(pki.dir.path().join("ca.pem")),
            client_cert_file: Some(pki.dir.path().join("client.pem")),
            client_key_file: Some(pki.dir.path().join("client.key")),
            metrics_interval_ms: Some(200),
            ..OtlpFile::default()
        },
        ..DaemonOptions::default()
    })
    .await;
    traced_run(&daemon).await;
    received
        .wait(
            "a run's spans, the tool call's metrics and the audit records",
            |r| {
                r.span_names_and_attributes()
                    .iter()
                    .any(|(name, _)| name == "invoke_agent airlock")
                    && r.metric_names()
                        .iter()
                        .any(|name| name == "airlock.tool.calls")
                    && r.log_kinds()
                        .iter()
                        .any(|kind| kind == "airlock.audit.auth.accepted")
            },
        )
        .await;
    // The GenAI conventions' names, airlock's own under `airlock.`.
    let spans = received.span_names_and_attributes();
    let (_, tool) = spans
        .iter()
        .find(|(name, _)| name == "execute_tool read_file")
        .expect("the tool call's span");
    assert_eq!(
        tool.get("gen_ai.operation.name").map(String::as_str),
        Some("execute_tool")
    );
    assert_eq!(
        tool.get("gen_ai.tool.name").map(String::as_str),
        Some("read_file")
    );
    assert!(tool.contains_key("gen_ai.tool.call.id"), "{tool:?}");
    assert_eq!(tool.get("airlock.status").map(String::as_str), Some("OK"));
    let (_, model) = spans
        .iter()
        .find(|(name, _)| name.starts_with("chat "))
        .expect("the model call's span");
    assert_eq!(
        model.get("gen_ai.provider.name").map(String::as_str),
        Some("airlock")
    );
    assert!(model.contains_key("gen_ai.usage.input_tokens"), "{model:?}");
    let resource = &received.resources()[0];
    assert_eq!(
        resource.get("service.name").map(String::as_str),
        Some("airlockd")
    );
    assert!(resource.contains_key("service.instance.id"), "{resource:?}");
    // Every export carried the key.
    let keys = received.keys.lock().unwrap().clone();
    assert!(
        !keys.is_empty() && keys.iter().all(|k| k.as_deref() == Some("k-123")),
        "{keys:?}"
    );
    // A metric point names its tenant and tool as attributes.
    let calls = received
        .metrics
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| &r.resource_metrics)
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .find(|m| m.name == "airlock.tool.calls")
        .cloned()
        .expect("calls");
    assert_eq!(calls.unit, "{call}");
    let shown = format!("{calls:?}");
    assert!(
        shown.contains("read_file") && shown.contains("default"),
        "{shown}"
    );
    daemon.stop().await;
}

/// An OTLP/HTTP collector: POSTs of protobuf to `/v1/{traces,metrics,logs}`; the first
/// `unavailable` requests are answered 503 with `Retry-After: 0`.
async fn http_collector(
    received: Received,
    unavailable: usize,
    refused: Arc<AtomicUsize>,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (received, refused) = (received.clone(), refused.clone());
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(
                        move |request: http::Request<hyper::body::Incoming>| {
                            let (received, refused) = (received.clone(), refused.clone());
                            async move {
                                let path = request.uri().path().to_owned();
                                let typed = request
                                    .headers()
                                    .get(http::header::CONTENT_TYPE)
                                    .is_some_and(|v| v == "application/x-protobuf");
                                let key = request
                                    .headers()
                                    .get("x-api-key")
                                    .and_then(|v| v.to_str().ok())
                                    .map(str::to_owned);
                                let body = request.into_body().collect().await.unwrap().to_bytes();
                                let answer = |status: u16, body: Vec<u8>| {
                                    http::Response::builder()
                                        .status(status)
                                        .header("content-type", "application/x-protobuf")
                                        .header("retry-after", "0")
                                        .body(Full::new(Bytes::from(body)))
                                        .unwrap()
                                };
                                // Span exports only: each refused batch must come again, or spans of
                                // the run would be missing.
                                if path == "/v1/traces"
                                    && refused.fetch_add(1, Ordering::SeqCst) < unavailable
                                {
                                    return Ok::<_, Infallible>(answer(503, Vec::new()));
                                }
                                assert!(typed, "an OTLP/HTTP export says application/x-protobuf");
                                received.keys.lock().unwrap().push(key);
                                let response =
                                    match path.as_str() {
                                        "/v1/traces" => {
                                            received.spans.lock().unwrap().push(
                                                ExportTraceServiceRequest::decode(body).unwrap(),
                                            );
                                            ExportTraceServiceResponse::default().encode_to_vec()
                                        }
                                        "/v1/metrics" => {
                                            received.metrics.lock().unwrap().push(
                                                ExportMetricsServiceRequest::decode(body).unwrap(),
                                            );
                                            ExportMetricsServiceResponse::default().encode_to_vec()
                                        }
                                        "/v1/logs" => {
                                            received.logs.lock().unwrap().push(
                                                ExportLogsServiceRequest::decode(body).unwrap(),
                                            );
                                            ExportLogsServiceResponse::default().encode_to_vec()
                                        }
                                        _ => return Ok(answer(404, Vec::new())),
                                    };
                                Ok(answer(200, response))
                            }
                        },
                    );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn http_protobuf_export_retries_a_collector_that_asks_to_wait() {
    let received = Received::default();
    let refused = Arc::new(AtomicUsize::new(0));
    let endpoint = http_collector(received.clone(), 2, refused.clone()).await;
    let mut headers = BTreeMap::new();
    headers.insert("x-api-key".to_owned(), HeaderValue("http-key".to_owned()));
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        otlp: OtlpFile {
            endpoint: Some(endpoint),
            protocol: Some(OtlpProtocol::HttpProtobuf),
            headers,
            metrics_interval_ms: Some(200),
            ..OtlpFile::default()
        },
        ..DaemonOptions::default()
    })
    .await;
    let trace = traced_run(&daemon).await;
    received
        .wait(
            "every span of the run, and the other signals, after two 503s",
            |r| {
                r.span_names_and_attributes().len() >= trace.spans.len()
                    && !r.metric_names().is_empty()
                    && !r.log_kinds().is_empty()
            },
        )
        .await;
    assert!(
        refused.load(Ordering::SeqCst) >= 2,
        "the collector refused twice"
    );
    assert_eq!(
        received.span_names_and_attributes().len(),
        trace.spans.len(),
        "each span exported once, the refused batches sent again"
    );
    let keys = received.keys.lock().unwrap().clone();
    assert!(
        keys.iter().all(|k| k.as_deref() == Some("http-key")),
        "{keys:?}"
    );
    daemon.stop().await;
}

#[tokio::test]
async fn a_collector_that_never_answers_costs_a_run_nothing_and_a_stop_little() {
    // Accepts connections, reads, never writes.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
            held.push(stream);
        }
    });
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        otlp: OtlpFile {
            endpoint: Some(format!("http://{address}")),
            timeout_ms: Some(300),
            metrics_interval_ms: Some(100),
            ..OtlpFile::default()
        },
        ..DaemonOptions::default()
    })
    .await;
    let started = Instant::now();
    traced_run(&daemon).await;
    let run = started.elapsed();
    let stopping = Instant::now();
    daemon.stop().await;
    let stop = stopping.elapsed();
    // Generous bounds: a run's time must not follow the collector's (which is forever), and
    // a stop waits at most the flush timeout per signal.
    assert!(run < Duration::from_secs(20), "the run took {run:?}");
    assert!(stop < Duration::from_secs(20), "the stop took {stop:?}");
}

/// `GET /metrics` with `token` as bearer (none: no header); the status and body.
async fn scrape(address: std::net::SocketAddr, token: Option<&str>) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let auth = token.map_or_else(String::new, |t| format!("authorization: Bearer {t}\r\n"));
    stream
        .write_all(
            format!("GET /metrics HTTP/1.1\r\nhost: localhost\r\n{auth}connection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The body of a chunked HTTP/1.1 response, unchunked.
fn unchunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_owned();
        };
        if size == 0 {
            break;
        }
        out.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    out
}

#[tokio::test]
async fn the_metrics_endpoint_needs_its_token_and_passes_promtool() {
    let secrets = tempfile::tempdir().unwrap();
    let token_file = private_file(secrets.path(), "metrics-token", "scrape-secret\n");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        metrics: MetricsFile {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            token_file: Some(token_file),
            record: None,
        },
        ..DaemonOptions::default()
    })
    .await;
    let address = daemon.metrics_addr.expect("the metrics endpoint is bound");
    let workspace = daemon.workspace("w");
    std::fs::write(workspace.join("a.txt"), "a").unwrap();
    let read = daemon
        .exec("read_file", json!({"path": "a.txt"}), Some(&workspace))
        .await;
    assert_eq!(
        read.result.map(|r| r.status),
        Some(airlock_proto::v1::ToolStatus::Ok as i32)
    );

    assert_eq!(scrape(address, None).await.0, 401);
    assert_eq!(scrape(address, Some("scrape-secre")).await.0, 401);
    let (status, body) = scrape(address, Some("scrape-secret")).await;
    assert_eq!(status, 200, "{body}");
    let body = if body.starts_with('#') {
        body
    } else {
        unchunk(&body)
    };
    assert!(
        body.contains(
            "airlock_tool_calls_total{tool=\"read_file\",engine=\"wasm\",tenant=\"default\",status=\"OK\"}"
        ),
        "{body}"
    );
    // Prometheus's own linter: names, types, units and help as Prometheus wants them.
    let mut promtool = tokio::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; scripts/test.sh installs it)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .await
        .unwrap();
    let checked = promtool.wait_with_output().await.unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    daemon.stop().await;
}

async fn airlock(endpoint: &str, token: &str, args: &[&str]) -> std::process::Output {
    Cli::new(endpoint, args).token(token).output().await
}

fn out(output: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test]
async fn each_tenant_sees_and_verifies_its_own_chain() {
    let tenants = crate::auth::TwoTenants::start().await;
    let endpoint = &tenants.daemon.endpoint;
    for token in [crate::auth::ALICE, crate::auth::BOB] {
        let listed = airlock(endpoint, token, &["tools", "list"]).await;
        assert!(listed.status.success(), "{}", out(&listed));
    }
    let exported = airlock(endpoint, crate::auth::ALICE, &["audit", "export"]).await;
    assert!(exported.status.success(), "{}", out(&exported));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&exported.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(!lines.is_empty());
    assert!(lines.iter().all(|l| l["tenant"] == "alice"), "{lines:#?}");
    let kinds: Vec<&str> = lines.iter().filter_map(|l| l["kind"].as_str()).collect();
    assert!(
        kinds.contains(&"tenant.loaded") && kinds.contains(&"auth.accepted"),
        "{kinds:?}"
    );
    let verified = airlock(endpoint, crate::auth::BOB, &["audit", "verify", "--json"]).await;
    assert!(verified.status.success(), "{}", out(&verified));
    let verified: serde_json::Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(verified["intact"], true);
    // Bob's chain is his: alice's head is not in it.
    let alice_head = lines.last().unwrap()["digest"].as_str().unwrap().to_owned();
    let foreign = airlock(
        endpoint,
        crate::auth::BOB,
        &["audit", "verify", "--expect-head", &alice_head],
    )
    .await;
    assert_eq!(foreign.status.code(), Some(1), "{}", out(&foreign));
    // A wrong token on a connection of its own is in the operator's chain.
    let refused = airlock(endpoint, "not-a-token-of-this-daemon", &["tools", "list"]).await;
    assert!(!refused.status.success());
    let operator = airlock(
        endpoint,
        &airlock_tests::token_for(endpoint),
        &["audit", "export"],
    )
    .await;
    assert!(
        String::from_utf8_lossy(&operator.stdout).contains("\"auth.refused\""),
        "{}",
        out(&operator)
    );
}

/// The store's files (`airlock.db` and any journal beside it), by name.
fn store_files(state: &std::path::Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    std::fs::read_dir(state)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("airlock.db")
        })
        .map(|entry| (entry.file_name(), std::fs::read(entry.path()).unwrap()))
        .collect()
}

fn restore(state: &std::path::Path, files: &[(std::ffi::OsString, Vec<u8>)]) {
    for (name, _) in store_files(state) {
        std::fs::remove_file(state.join(name)).unwrap();
    }
    for (name, bytes) in files {
        std::fs::write(state.join(name), bytes).unwrap();
    }
}

/// Runs SQL on a stopped daemon's store.
fn tamper(state: &std::path::Path, sql: &str) {
    let db = rusqlite::Connection::open(state.join("airlock.db")).unwrap();
    db.execute_batch(sql).unwrap();
}

#[tokio::test]
async fn verify_names_the_first_edited_removed_or_truncated_record() {
    let state = tempfile::tempdir().unwrap();
    let options = || DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        state_dir: Some(state.path().to_owned()),
        ..DaemonOptions::default()
    };
    // Each start records its configuration and tenant; each CLI connection its token.
    let daemon = TestDaemon::start(options()).await;
    let token = airlock_tests::token_for(&daemon.endpoint);
    for _ in 0..3 {
        let listed = airlock(&daemon.endpoint, &token, &["tools", "list"]).await;
        assert!(listed.status.success(), "{}", out(&listed));
    }
    let verified = airlock(&daemon.endpoint, &token, &["audit", "verify", "--json"]).await;
    assert!(verified.status.success(), "{}", out(&verified));
    let verified: serde_json::Value = serde_json::from_slice(&verified.stdout).unwrap();
    let head = verified["head"].as_str().unwrap().to_owned();
    let last = verified["last_seq"].as_u64().unwrap();
    assert!(last >= 3, "{verified}");
    daemon.stop().await;

    // Each case on a copy of the intact store (with its journal files, if any are left).
    let intact = store_files(state.path());
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "UPDATE audit_log SET reason = 'nothing to see' WHERE tenant = 'default' AND seq = 2",
            "record 2: its digest does not match",
            &[],
        ),
        (
            "DELETE FROM audit_log WHERE tenant = 'default' AND seq = 2",
            "record 3: it does not follow record 1",
            &[],
        ),
        (
            "DELETE FROM audit_log WHERE tenant = 'default' AND seq = 1",
            "starts at record 2, which is not a checkpoint",
            &[],
        ),
        // A record added past the head, its digest right: the head row tells.
        (
            "INSERT INTO audit_log (tenant, seq, at_ms, kind, actor, subject, reason, details, prev, digest)
             SELECT tenant, seq + 1000, at_ms, kind, actor, subject, reason, details, prev, digest
             FROM audit_log WHERE tenant = 'default' AND seq = 1",
            "goes on past its head",
            &[],
        ),
        // The tail cut and the head row rewritten to match: only the kept head tells.
        (
            "DELETE FROM audit_log WHERE tenant = 'default' AND seq >= 3;
             UPDATE audit_heads SET seq = 2,
                 digest = (SELECT digest FROM audit_log WHERE tenant = 'default' AND seq = 2)
             WHERE tenant = 'default'",
            "is not in the chain",
            &["--expect-head"],
        ),
    ];
    for (sql, says, flags) in cases {
        restore(state.path(), &intact);
        tamper(state.path(), sql);
        let daemon = TestDaemon::start(options()).await;
        let mut args = vec!["audit", "verify"];
        if !flags.is_empty() {
            args.extend_from_slice(flags);
            args.push(&head);
        }
        let verified = airlock(&daemon.endpoint, &token, &args).await;
        assert_eq!(verified.status.code(), Some(1), "{sql}: {}", out(&verified));
        assert!(out(&verified).contains(says), "{sql}: {}", out(&verified));
        daemon.stop().await;
    }
    // Untouched, with the kept head: intact.
    restore(state.path(), &intact);
    let daemon = TestDaemon::start(options()).await;
    let verified = airlock(
        &daemon.endpoint,
        &token,
        &["audit", "verify", "--expect-head", &head],
    )
    .await;
    assert!(verified.status.success(), "{}", out(&verified));
    daemon.stop().await;
}
