//! OTLP trace export: every finished span goes to an OpenTelemetry collector over OTLP/gRPC
//! (`TraceService.Export`), off the run loop.
//!
//! A run never waits for a collector. [`OtlpExporter`]'s [`SpanSink::export`] only puts the
//! span on a bounded queue, and drops it (counted, with a warning) when the queue is full. A
//! background task takes spans off the queue in batches — a batch goes when it is full or when
//! its first span has waited [`OtlpSettings::batch_delay`] — and sends them, retrying transient
//! failures with backoff. A collector that is down or slow costs spans, never a run's time.
//! On graceful shutdown, [`OtlpExporter::shutdown`] sends what is still queued, for a bounded
//! time. The store keeps every span whatever happens here: export is a copy.

mod mapping;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_proto::otlp::collector::trace::v1::trace_service_client::TraceServiceClient;
use airlock_proto::v1 as pb;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

use super::SpanSink;

/// Spans waiting to be sent: the OpenTelemetry SDKs' default. A run records a few spans per
/// step, so this holds minutes of a busy daemon's spans while the collector is briefly away,
/// at a few hundred bytes each.
pub const DEFAULT_QUEUE_CAPACITY: usize = 2048;

/// Spans per `Export` request: the SDKs' default, which keeps a request well under the 4 MiB
/// message limit collectors apply by default.
pub const DEFAULT_MAX_BATCH: usize = 512;

/// How long a span waits for its batch to fill: short enough that a trace shows up in the
/// backend while the run is watched, long enough that a step's spans travel together.
pub const DEFAULT_BATCH_DELAY: Duration = Duration::from_secs(1);

/// Attempts per batch before it is given up. With the backoff below, a batch is retried for
/// about a second and a half against a collector that refuses connections.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;

/// How long one `Export` call may take. A collector that accepts the connection and never
/// answers must not hold the queue for longer.
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long connecting to the collector may take; an address that drops packets would
/// otherwise hold a batch for as long as the kernel retries the handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The wait before the first retry; it doubles with each further one, up to [`MAX_BACKOFF`].
/// One daemon sends one batch at a time, so there is no herd to spread with jitter.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Where to send spans, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The collector's OTLP/gRPC address, `http://host:port` (a bare `host:port` means http).
    pub endpoint: String,
    pub queue_capacity: usize,
    pub max_batch: usize,
    pub batch_delay: Duration,
    pub max_attempts: u32,
    pub export_timeout: Duration,
}

impl OtlpSettings {
    /// The defaults above, sending to `endpoint`.
    pub fn new(endpoint: impl Into<String>) -> OtlpSettings {
        OtlpSettings {
            endpoint: endpoint.into(),
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            max_batch: DEFAULT_MAX_BATCH,
            batch_delay: DEFAULT_BATCH_DELAY,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            export_timeout: DEFAULT_EXPORT_TIMEOUT,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error("invalid OTLP endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },
    #[error("the OTLP exporter must be started inside a Tokio runtime")]
    NoRuntime,
}

/// What became of the spans handed to an exporter so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Accepted by the collector.
    pub exported: u64,
    /// Dropped before sending: the queue was full, or the exporter had shut down.
    pub dropped: u64,
    /// Sent and not accepted: the collector failed or refused them, or they could not be
    /// put in OTLP form.
    pub failed: u64,
}

#[derive(Debug, Default)]
struct Counters {
    exported: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
}

/// Sends finished spans to an OTLP collector; see the module documentation.
pub struct OtlpExporter {
    queue: mpsc::Sender<pb::Span>,
    counters: Arc<Counters>,
    /// Taken by the first [`OtlpExporter::shutdown`]; the worker answers on the enclosed
    /// sender once it has sent what was queued.
    stop: Mutex<Option<oneshot::Sender<oneshot::Sender<()>>>>,
    endpoint: String,
}

impl OtlpExporter {
    /// Checks the endpoint and starts the background task that sends spans. Connecting is
    /// left to the first batch: a collector that is not up yet is no reason to refuse to start.
    pub fn start(settings: OtlpSettings) -> Result<Arc<OtlpExporter>, OtlpError> {
        let endpoint = endpoint(&settings)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
        let (queue, spans) = mpsc::channel(settings.queue_capacity.max(1));
        let (stop, stop_requests) = oneshot::channel();
        let counters = Arc::new(Counters::default());
        let worker = Worker {
            spans,
            counters: counters.clone(),
            endpoint: settings.endpoint.clone(),
            max_batch: settings.max_batch.max(1),
            batch_delay: settings.batch_delay,
            max_attempts: settings.max_attempts.max(1),
            failing: false,
        };
        // The channel spawns its connection task, which needs the runtime: it is made in the
        // worker, not here.
        runtime.spawn(worker.run(endpoint, stop_requests));
        Ok(Arc::new(OtlpExporter {
            queue,
            counters,
            stop: Mutex::new(Some(stop)),
            endpoint: settings.endpoint,
        }))
    }

    /// The collector's address, as configured.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn stats(&self) -> ExportStats {
        ExportStats {
            exported: self.counters.exported.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
        }
    }

    /// Sends what is queued and stops the exporter; spans that end later are dropped. Waits at
    /// most `timeout` (the collector may be down) and says whether everything was sent in
    /// time. Only the first call does anything.
    pub async fn shutdown(&self, timeout: Duration) -> bool {
        let stop = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(stop) = stop else {
            return true;
        };
        let (done, flushed) = oneshot::channel();
        if stop.send(done).is_err() {
            // The worker is gone already (its runtime shut down): nothing left to wait for.
            return true;
        }
        match tokio::time::timeout(timeout, flushed).await {
            Ok(_) => true,
            Err(_) => {
                tracing::warn!(
                    endpoint = %self.endpoint,
                    ?timeout,
                    "the OTLP collector did not take the last spans in time; they are lost"
                );
                false
            }
        }
    }
}

impl SpanSink for OtlpExporter {
    fn export(&self, span: &pb::Span) {
        match self.queue.try_send(span.clone()) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // One warning per doubling: a collector that stays away is reported without
                // one log line per span.
                if dropped.is_power_of_two() {
                    tracing::warn!(
                        endpoint = %self.endpoint,
                        dropped,
                        "the OTLP export queue is full (the collector is slow or down); \
                         spans are dropped from export (they stay in the store)"
                    );
                }
            }
            // After shutdown: nothing is exported any more, and that was asked for.
            Err(TrySendError::Closed(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The endpoint to connect to, or why `settings.endpoint` cannot be one.
fn endpoint(settings: &OtlpSettings) -> Result<Endpoint, OtlpError> {
    let raw = settings.endpoint.trim();
    let invalid = |reason: String| OtlpError::InvalidEndpoint {
        endpoint: settings.endpoint.clone(),
        reason,
    };
    let url = match raw.split_once("://") {
        None => format!("http://{raw}"),
        Some((scheme, _)) if scheme.eq_ignore_ascii_case("http") => raw.to_owned(),
        Some((scheme, _)) if scheme.eq_ignore_ascii_case("https") => {
            return Err(invalid(
                "TLS is not supported; send to a collector (or a local agent) over http://"
                    .to_owned(),
            ));
        }
        Some((scheme, _)) => {
            return Err(invalid(format!(
                "unsupported scheme {scheme:?}; OTLP/gRPC is spoken over http://"
            )));
        }
    };
    let endpoint = Endpoint::from_shared(url).map_err(|err| invalid(err.to_string()))?;
    if endpoint.uri().host().is_none_or(str::is_empty) {
        return Err(invalid("no host".to_owned()));
    }
    Ok(endpoint
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(settings.export_timeout))
}

/// Whether a failed `Export` may succeed if sent again, as the OTLP specification classifies
/// gRPC codes. `RESOURCE_EXHAUSTED` is retryable there only when the collector attaches
/// `RetryInfo`, which this exporter does not read: it is treated as final.
fn retryable(code: Code) -> bool {
    match code {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => true,
        Code::Ok
        | Code::Unknown
        | Code::InvalidArgument
        | Code::NotFound
        | Code::AlreadyExists
        | Code::PermissionDenied
        | Code::ResourceExhausted
        | Code::FailedPrecondition
        | Code::Unimplemented
        | Code::Internal
        | Code::Unauthenticated => false,
    }
}

/// The background task: batches spans off the queue and sends them, one batch at a time.
struct Worker {
    spans: mpsc::Receiver<pb::Span>,
    counters: Arc<Counters>,
    endpoint: String,
    max_batch: usize,
    batch_delay: Duration,
    max_attempts: u32,
    /// The last batch failed: further failures are logged quietly until one succeeds.
    failing: bool,
}

impl Worker {
    async fn run(mut self, endpoint: Endpoint, mut stop: oneshot::Receiver<oneshot::Sender<()>>) {
        let mut client = TraceServiceClient::new(endpoint.connect_lazy());
        loop {
            let first = tokio::select! {
                // A dropped exporter (the daemon went away without a graceful shutdown) is a
                // stop nobody waits on.
                request = &mut stop => return self.finish(&mut client, request.ok()).await,
                span = self.spans.recv() => match span {
                    Some(span) => span,
                    None => return self.finish(&mut client, None).await,
                },
            };
            let mut batch = vec![first];
            let deadline = tokio::time::Instant::now() + self.batch_delay;
            let mut stopping = None;
            while batch.len() < self.max_batch {
                tokio::select! {
                    request = &mut stop => {
                        stopping = Some(request.ok());
                        break;
                    }
                    span = self.spans.recv() => match span {
                        Some(span) => batch.push(span),
                        None => break,
                    },
                    () = tokio::time::sleep_until(deadline) => break,
                }
            }
            self.send(&mut client, batch).await;
            if let Some(done) = stopping {
                return self.finish(&mut client, done).await;
            }
        }
    }

    /// Sends what is left in the queue, then says so on `done`.
    async fn finish(
        mut self,
        client: &mut TraceServiceClient<Channel>,
        done: Option<oneshot::Sender<()>>,
    ) {
        // Spans that end from now on are refused at once instead of waiting in a queue that
        // nobody reads.
        self.spans.close();
        let mut batch = Vec::new();
        while let Ok(span) = self.spans.try_recv() {
            batch.push(span);
            if batch.len() == self.max_batch {
                self.send(client, std::mem::take(&mut batch)).await;
            }
        }
        if !batch.is_empty() {
            self.send(client, batch).await;
        }
        if let Some(done) = done {
            // The caller may have stopped waiting; then there is nobody to tell.
            let _ = done.send(());
        }
    }

    /// Sends one batch, retrying transient failures; every span ends up counted as exported
    /// or failed.
    async fn send(&mut self, client: &mut TraceServiceClient<Channel>, batch: Vec<pb::Span>) {
        let mut spans = Vec::with_capacity(batch.len());
        for span in &batch {
            match mapping::span(span) {
                Ok(span) => spans.push(span),
                Err(error) => {
                    self.counters.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%error, "span left out of the OTLP export");
                }
            }
        }
        if spans.is_empty() {
            return;
        }
        let count = u64::try_from(spans.len()).unwrap_or(u64::MAX);
        let request = mapping::request(spans);
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            match client.export(request.clone()).await {
                Ok(response) => {
                    let partial = response.into_inner().partial_success.unwrap_or_default();
                    let rejected = u64::try_from(partial.rejected_spans)
                        .unwrap_or(0)
                        .min(count);
                    self.counters
                        .exported
                        .fetch_add(count - rejected, Ordering::Relaxed);
                    self.counters.failed.fetch_add(rejected, Ordering::Relaxed);
                    if rejected > 0 || !partial.error_message.is_empty() {
                        // Rejected spans must not be sent again (OTLP): they are only reported.
                        tracing::warn!(
                            endpoint = %self.endpoint,
                            rejected,
                            message = %partial.error_message,
                            "the OTLP collector rejected part of a batch"
                        );
                    }
                    if std::mem::take(&mut self.failing) {
                        tracing::info!(endpoint = %self.endpoint, "OTLP export works again");
                    }
                    return;
                }
                Err(status) if attempt < self.max_attempts && retryable(status.code()) => {
                    tracing::debug!(
                        endpoint = %self.endpoint,
                        attempt,
                        code = ?status.code(),
                        message = status.message(),
                        "OTLP export failed; retrying"
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    attempt += 1;
                }
                Err(status) => {
                    self.counters.failed.fetch_add(count, Ordering::Relaxed);
                    if std::mem::replace(&mut self.failing, true) {
                        tracing::debug!(
                            endpoint = %self.endpoint,
                            spans = count,
                            code = ?status.code(),
                            message = status.message(),
                            "OTLP export still failing; batch dropped"
                        );
                    } else {
                        tracing::warn!(
                            endpoint = %self.endpoint,
                            spans = count,
                            attempts = attempt,
                            code = ?status.code(),
                            message = status.message(),
                            "cannot export spans to the OTLP collector; they are dropped from \
                             export (they stay in the store) until it answers"
                        );
                    }
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
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

    use super::*;

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
    async fn counted(exporter: &OtlpExporter, spans: u64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while exporter.stats().exported < spans {
            assert!(Instant::now() < deadline, "{:?}", exporter.stats());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A loopback address where nothing listens.
    fn closed_port() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    }

    #[tokio::test]
    async fn spans_travel_in_batches_and_are_counted() {
        let collector = Collector::default();
        let exporter = OtlpExporter::start(settings(&collector.serve().await)).unwrap();
        for name in ["context", "model", "step"] {
            exporter.export(&span(name));
        }
        collector.wait_for(3).await;
        assert_eq!(collector.names(), ["context", "model", "step"]);
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
        let exporter = OtlpExporter::start(OtlpSettings {
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
        let exporter = OtlpExporter::start(OtlpSettings {
            batch_delay: Duration::from_secs(3600),
            ..OtlpSettings::new(collector.serve().await)
        })
        .unwrap();
        exporter.export(&span("tool"));
        exporter.export(&span("run"));
        assert!(exporter.shutdown(Duration::from_secs(10)).await);
        assert_eq!(collector.names(), ["tool", "run"]);
        exporter.export(&span("late"));
        assert_eq!(exporter.stats().dropped, 1);
        assert!(
            exporter.shutdown(Duration::from_secs(10)).await,
            "idempotent"
        );
        assert_eq!(collector.names(), ["tool", "run"]);
    }

    #[tokio::test]
    async fn transient_failures_are_retried_with_the_same_spans() {
        let collector = Collector::scripted([Err(Code::Unavailable), Err(Code::DeadlineExceeded)]);
        let exporter = OtlpExporter::start(settings(&collector.serve().await)).unwrap();
        exporter.export(&span("model"));
        collector.wait_for(1).await;
        assert_eq!(collector.calls.load(Ordering::SeqCst), 3);
        assert_eq!(collector.names(), ["model"]);
        counted(&exporter, 1).await;
        assert_eq!(exporter.stats().exported, 1);
    }

    #[tokio::test]
    async fn a_refusal_is_final_and_later_batches_still_go() {
        let collector = Collector::scripted([Err(Code::InvalidArgument)]);
        let exporter = OtlpExporter::start(settings(&collector.serve().await)).unwrap();
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
        let exporter = OtlpExporter::start(settings(&collector.serve().await)).unwrap();
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
        let exporter = OtlpExporter::start(settings(&closed_port())).unwrap();
        let started = Instant::now();
        for _ in 0..100 {
            exporter.export(&span("model"));
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
        let exporter = OtlpExporter {
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
            ("https://collector:4317", "TLS is not supported"),
            ("grpc://collector:4317", "unsupported scheme"),
            ("http://", ""),
            ("collector 4317", ""),
        ] {
            match OtlpExporter::start(OtlpSettings::new(endpoint)) {
                Err(OtlpError::InvalidEndpoint { reason: got, .. }) => {
                    assert!(got.contains(reason), "{endpoint}: {got}");
                }
                Err(other) => panic!("{endpoint}: {other}"),
                Ok(_) => panic!("{endpoint} was accepted"),
            }
        }
        assert!(OtlpExporter::start(OtlpSettings::new("127.0.0.1:4317")).is_ok());
    }

    #[test]
    fn starting_outside_a_runtime_is_an_error_not_a_panic() {
        assert!(matches!(
            OtlpExporter::start(OtlpSettings::new("http://127.0.0.1:4317")),
            Err(OtlpError::NoRuntime)
        ));
    }

    #[test]
    fn only_transient_codes_are_retried() {
        assert!(retryable(Code::Unavailable));
        assert!(retryable(Code::DeadlineExceeded));
        assert!(!retryable(Code::InvalidArgument));
        assert!(!retryable(Code::ResourceExhausted));
        assert!(!retryable(Code::Unimplemented));
    }
}
