//! OTLP export end to end: the real daemon sends a run's spans to an OTLP/gRPC receiver this
//! test starts, and they are the spans `GetTrace` returns; a collector that is down costs
//! spans, never the run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use airlock_daemon::config::OtlpFile;
use airlock_proto::otlp::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use airlock_proto::otlp::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use airlock_proto::otlp::common::v1::KeyValue;
use airlock_proto::otlp::common::v1::any_value::Value as AnyValue;
use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, TestDaemon, repo_root, scripted_run};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

/// An OTLP trace receiver on loopback that keeps every request.
#[derive(Clone, Default)]
struct Receiver {
    requests: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.requests.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// One exported span, flattened with its resource's attributes.
#[derive(Debug, Clone)]
struct Exported {
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    start: u64,
    end: u64,
    attributes: BTreeMap<String, String>,
    service_name: Option<String>,
}

impl Receiver {
    async fn serve(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(self.clone()))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        format!("http://{address}")
    }

    fn spans(&self) -> Vec<Exported> {
        let requests = self.requests.lock().unwrap();
        let mut spans = Vec::new();
        for resource_spans in requests.iter().flat_map(|r| &r.resource_spans) {
            let service_name = resource_spans
                .resource
                .as_ref()
                .and_then(|resource| text_attributes(&resource.attributes).remove("service.name"));
            for span in resource_spans.scope_spans.iter().flat_map(|s| &s.spans) {
                spans.push(Exported {
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    name: span.name.clone(),
                    start: span.start_time_unix_nano,
                    end: span.end_time_unix_nano,
                    attributes: text_attributes(&span.attributes),
                    service_name: service_name.clone(),
                });
            }
        }
        spans
    }

    /// Waits until `count` spans of `trace_id` have arrived.
    async fn wait_for(&self, trace_id: &str, count: usize) -> Vec<Exported> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let spans: Vec<Exported> = self
                .spans()
                .into_iter()
                .filter(|span| span.trace_id == trace_id)
                .collect();
            if spans.len() >= count {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver got {} of {count} spans: {spans:#?}",
                spans.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Attributes as text, whatever their OTLP value type.
fn text_attributes(attributes: &[KeyValue]) -> BTreeMap<String, String> {
    attributes
        .iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                AnyValue::StringValue(text) => text.clone(),
                AnyValue::IntValue(n) => n.to_string(),
                AnyValue::DoubleValue(n) => n.to_string(),
                AnyValue::BoolValue(b) => b.to_string(),
                other => format!("{other:?}"),
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

/// A run that reads a file, then answers.
async fn traced_run(daemon: &TestDaemon) -> pb::Trace {
    let workspace = daemon.workspace("w");
    std::fs::write(workspace.join("notes.txt"), "alpha\n").unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"final": "read it"}
    ]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    let run_id = run.seen[0].run_id.clone();
    daemon
        .agent()
        .await
        .get_trace(pb::GetTraceRequest { run_id })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn a_runs_spans_reach_the_collector_as_stored() {
    let receiver = Receiver::default();
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        otlp: OtlpFile {
            endpoint: Some(receiver.serve().await),
            ..OtlpFile::default()
        },
        ..DaemonOptions::default()
    })
    .await;
    let trace = traced_run(&daemon).await;
    let names: Vec<&str> = trace.spans.iter().map(|s| s.name.as_str()).collect();
    for name in ["run", "step", "model", "tool"] {
        assert!(names.contains(&name), "no {name} span in {names:?}");
    }

    let exported = receiver.wait_for(&trace.trace_id, trace.spans.len()).await;
    assert_eq!(exported.len(), trace.spans.len(), "each span is sent once");
    let by_id: BTreeMap<&str, &Exported> =
        exported.iter().map(|s| (s.span_id.as_str(), s)).collect();
    for stored in &trace.spans {
        let sent = by_id.get(stored.span_id.as_str()).unwrap_or_else(|| {
            panic!("span {} ({}) was not exported", stored.span_id, stored.name)
        });
        // Exported in the GenAI conventions' words: a run is `invoke_agent`, a model call
        // `chat {model}`, a tool call `execute_tool {tool}`; other spans keep their names.
        match stored.name.as_str() {
            "run" => assert_eq!(sent.name, "invoke_agent airlock"),
            "model" => assert!(sent.name.starts_with("chat "), "{sent:?}"),
            "tool" => assert!(sent.name.starts_with("execute_tool "), "{sent:?}"),
            other => assert_eq!(sent.name, other),
        }
        assert_eq!(
            sent.parent_span_id, stored.parent_span_id,
            "{}",
            stored.name
        );
        assert_eq!(sent.start, u64::try_from(stored.start_unix_nano).unwrap());
        assert_eq!(sent.end, u64::try_from(stored.end_unix_nano).unwrap());
        assert!(sent.end >= sent.start, "{sent:?}");
        assert_eq!(sent.service_name.as_deref(), Some("airlockd"));
        // Each attribute as stored: under its conventional name, or airlock's under
        // `airlock.`.
        for attribute in &stored.attributes {
            let conventional = match attribute.key.as_str() {
                "input_tokens" => "gen_ai.usage.input_tokens".to_owned(),
                "output_tokens" => "gen_ai.usage.output_tokens".to_owned(),
                "tool" => "gen_ai.tool.name".to_owned(),
                other => format!("airlock.{other}"),
            };
            assert_eq!(
                sent.attributes.get(&conventional),
                Some(&attribute.value),
                "attribute {} of {}",
                attribute.key,
                stored.name
            );
        }
    }
    // The root is the run, and every other span hangs under a span of the same trace.
    let roots: Vec<&Exported> = exported
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "{roots:#?}");
    assert_eq!(roots[0].name, "invoke_agent airlock");
    for span in &exported {
        assert!(
            span.parent_span_id.is_empty() || by_id.contains_key(span.parent_span_id.as_str()),
            "{span:?} has a parent outside the trace"
        );
    }
}

#[tokio::test]
async fn a_collector_that_is_down_costs_no_run_and_no_stored_span() {
    // A loopback port where nothing listens, on 127.0.0.2 where no test server binds: a
    // port freed on 127.0.0.1 may be handed to another test's server meanwhile.
    let closed = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        otlp: OtlpFile {
            endpoint: Some(endpoint),
            ..OtlpFile::default()
        },
        ..DaemonOptions::default()
    })
    .await;
    let trace = traced_run(&daemon).await;
    let names: Vec<&str> = trace.spans.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"run") && names.contains(&"tool"),
        "{names:?}"
    );
}
