//! The OTLP exporter against a scripted collector: batching, counting, retries and drops.

use std::collections::VecDeque;
use std::time::Instant;

use airlock_proto::otlp::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use airlock_proto::otlp::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use airlock_proto::otlp::resource::v1::Resource;
use airlock_proto::v1 as pb;
use tokio::sync::mpsc;
use tonic::Code;

use super::*;
use crate::telemetry::otlp::spans::{SpanExporter, Spans};
use crate::telemetry::otlp::transport::{TransportError, retryable_code};
use crate::trace::SpanSink;

fn start(settings: OtlpSettings) -> Result<Arc<SpanExporter>, OtlpError> {
    SpanExporter::start(
        settings,
        Spans {
            resource: Resource::default(),
        },
    )
}

/// A collector that answers with `script` in order (then accepts), and keeps what it
/// accepted.
#[derive(Clone, Default)]
struct Collector {
    script: Arc<Mutex<VecDeque<Result<i64, Code>>>>,
    calls: Arc<AtomicU64>,
    accepted: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let answer = self.script.lock().unwrap().pop_front().unwrap_or(Ok(0));
        let rejected = answer.map_err(|code| tonic::Status::new(code, "scripted"))?;
        self.accepted.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: (rejected > 0).then(|| ExportTracePartialSuccess {
                rejected_spans: rejected,
                error_message: "too old".into(),
            }),
        }))
    }
}

impl Collector {
    fn scripted(answers: impl IntoIterator<Item = Result<i64, Code>>) -> Collector {
        let collector = Collector::default();
        collector.script.lock().unwrap().extend(answers);
        collector
    }

    async fn serve(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let service = TraceServiceServer::new(self.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        format!("http://{address}")
    }

    /// The span names received so far, in order.
    fn names(&self) -> Vec<String> {
        self.accepted
            .lock()
            .unwrap()
            .iter()
            .flat_map(|request| &request.resource_spans)
            .flat_map(|resource| &resource.scope_spans)
            .flat_map(|scope| &scope.spans)
            .map(|span| span.name.clone())
            .collect()
    }

    fn requests(&self) -> usize {
        self.accepted.lock().unwrap().len()
    }

    async fn wait_for(&self, spans: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.names().len() < spans {
            assert!(
                Instant::now() < deadline,
                "the collector got {:?}",
                self.names()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn span(name: &str) -> pb::Span {
    pb::Span {
        trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
        span_id: "b7ad6b7169203331".into(),
        parent_span_id: String::new(),
        name: name.into(),
        start_unix_nano: 1,
        end_unix_nano: 2,
        attributes: Vec::new(),
        status: pb::SpanStatus::Ok as i32,
        status_message: String::new(),
    }
}

/// Short enough for a test to wait, long enough that spans exported back to back share
/// a batch even on a loaded machine.
fn settings(endpoint: &str) -> OtlpSettings {
    OtlpSettings {
        batch_delay: Duration::from_millis(500),
        ..OtlpSettings::new(endpoint)
    }
}

/// Waits until the exporter has counted `spans` exported: it counts a batch when the
/// collector's answer reaches it, a moment after the collector has the spans.
async fn counted(exporter: &SpanExporter, spans: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while exporter.stats().exported < spans {
        assert!(Instant::now() < deadline, "{:?}", exporter.stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A loopback address where nothing listens. It is on 127.0.0.2, where no collector of
/// these tests binds: a port freed on 127.0.0.1 can be handed to the next test's collector,
/// which would then receive this exporter's retries (CI saw a refusal test's collector
/// answer another test's span).
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

#[tokio::test]
async fn spans_travel_in_batches_and_are_counted() {
    let collector = Collector::default();
    let exporter = start(settings(&collector.serve().await)).unwrap();
    for name in ["context", "permission", "step"] {
        exporter.export(&span(name));
    }
    collector.wait_for(3).await;
    assert_eq!(collector.names(), ["context", "permission", "step"]);
    assert_eq!(collector.requests(), 1, "one batch within the delay");
    counted(&exporter, 3).await;
    assert_eq!(
        exporter.stats(),
        ExportStats {
            exported: 3,
            dropped: 0,
            failed: 0
        }
    );
}

#[tokio::test]
async fn a_full_batch_goes_without_waiting_for_the_delay() {
    let collector = Collector::default();
    let exporter = start(OtlpSettings {
        max_batch: 2,
        batch_delay: Duration::from_secs(3600),
        ..OtlpSettings::new(collector.serve().await)
    })
    .unwrap();
    for name in ["a", "b", "c"] {
        exporter.export(&span(name));
    }
    collector.wait_for(2).await;
    assert_eq!(collector.names(), ["a", "b"]);
    // The third waits for its batch's delay, or for the shutdown.
    assert!(exporter.shutdown(Duration::from_secs(10)).await);
    assert_eq!(collector.names(), ["a", "b", "c"]);
}

#[tokio::test]
async fn shutdown_sends_what_is_queued_then_refuses_more() {
    let collector = Collector::default();
    let exporter = start(OtlpSettings {
        batch_delay: Duration::from_secs(3600),
        ..OtlpSettings::new(collector.serve().await)
    })
    .unwrap();
    exporter.export(&span("validate"));
    exporter.export(&span("context"));
    assert!(exporter.shutdown(Duration::from_secs(10)).await);
    assert_eq!(collector.names(), ["validate", "context"]);
    exporter.export(&span("late"));
    assert_eq!(exporter.stats().dropped, 1);
    assert!(
        exporter.shutdown(Duration::from_secs(10)).await,
        "idempotent"
    );
    assert_eq!(collector.names(), ["validate", "context"]);
}

#[tokio::test]
async fn transient_failures_are_retried_with_the_same_spans() {
    let collector = Collector::scripted([Err(Code::Unavailable), Err(Code::DeadlineExceeded)]);
    let exporter = start(settings(&collector.serve().await)).unwrap();
    exporter.export(&span("permission"));
    collector.wait_for(1).await;
    assert_eq!(collector.calls.load(Ordering::SeqCst), 3);
    assert_eq!(collector.names(), ["permission"]);
    counted(&exporter, 1).await;
    assert_eq!(exporter.stats().exported, 1);
}

#[tokio::test]
async fn a_refusal_is_final_and_later_batches_still_go() {
    let collector = Collector::scripted([Err(Code::InvalidArgument)]);
    let exporter = start(settings(&collector.serve().await)).unwrap();
    exporter.export(&span("refused"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while exporter.stats().failed < 1 {
        assert!(Instant::now() < deadline, "{:?}", exporter.stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(collector.calls.load(Ordering::SeqCst), 1, "not retried");
    exporter.export(&span("accepted"));
    collector.wait_for(1).await;
    assert_eq!(collector.names(), ["accepted"]);
}

#[tokio::test]
async fn spans_a_collector_rejects_are_counted_as_failed() {
    let collector = Collector::scripted([Ok(1)]);
    let exporter = start(settings(&collector.serve().await)).unwrap();
    exporter.export(&span("a"));
    exporter.export(&span("b"));
    collector.wait_for(2).await;
    assert!(exporter.shutdown(Duration::from_secs(10)).await);
    assert_eq!(
        exporter.stats(),
        ExportStats {
            exported: 1,
            dropped: 0,
            failed: 1
        }
    );
}

#[tokio::test]
async fn a_collector_that_is_down_costs_spans_not_time() {
    let exporter = start(settings(&closed_port())).unwrap();
    let started = Instant::now();
    for _ in 0..100 {
        exporter.export(&span("permission"));
    }
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "export waited: {:?}",
        started.elapsed()
    );
    // Every span is given up after the retries, and the exporter stays usable.
    let deadline = Instant::now() + Duration::from_secs(20);
    while exporter.stats().failed < 100 {
        assert!(Instant::now() < deadline, "{:?}", exporter.stats());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(exporter.stats().exported, 0);
    exporter.export(&span("late"));
    assert!(
        tokio::time::timeout(
            Duration::from_secs(10),
            exporter.shutdown(Duration::from_secs(5))
        )
        .await
        .is_ok(),
        "shutdown is bounded"
    );
}

#[tokio::test]
async fn a_full_queue_drops_spans_instead_of_waiting() {
    // An exporter whose worker never reads: the queue fills and stays full.
    let (queue, _spans) = mpsc::channel(2);
    let exporter: SpanExporter = BatchExporter {
        queue,
        counters: Arc::default(),
        stop: Mutex::new(None),
        endpoint: "http://127.0.0.1:4317".into(),
    };
    for _ in 0..5 {
        exporter.export(&span("step"));
    }
    assert_eq!(exporter.stats().dropped, 3);
}

#[tokio::test]
async fn endpoints_are_checked_at_start() {
    for (endpoint, reason) in [
        ("grpc://collector:4317", "unsupported scheme"),
        ("http://", ""),
        ("collector 4317", ""),
    ] {
        match start(OtlpSettings::new(endpoint)) {
            Err(OtlpError::Transport(TransportError::InvalidEndpoint { reason: got, .. })) => {
                assert!(got.contains(reason), "{endpoint}: {got}");
            }
            Err(other) => panic!("{endpoint}: {other}"),
            Ok(_) => panic!("{endpoint} was accepted"),
        }
    }
    assert!(start(OtlpSettings::new("127.0.0.1:4317")).is_ok());
    // TLS: the Mozilla roots unless a CA file is named.
    assert!(start(OtlpSettings::new("https://collector.example:4317")).is_ok());
    // A CA file with a plaintext endpoint is a mistake worth refusing.
    let mut plain_with_ca = OtlpSettings::new("http://collector:4317");
    plain_with_ca.transport.ca_file = Some("/nonexistent/ca.pem".into());
    assert!(matches!(
        start(plain_with_ca),
        Err(OtlpError::Transport(TransportError::File { .. }))
    ));
}

#[test]
fn starting_outside_a_runtime_is_an_error_not_a_panic() {
    assert!(matches!(
        start(OtlpSettings::new("http://127.0.0.1:4317")),
        Err(OtlpError::NoRuntime)
    ));
}

#[test]
fn only_transient_codes_are_retried() {
    assert!(retryable_code(Code::Unavailable));
    assert!(retryable_code(Code::DeadlineExceeded));
    assert!(!retryable_code(Code::InvalidArgument));
    assert!(!retryable_code(Code::ResourceExhausted));
    assert!(!retryable_code(Code::Unimplemented));
}
