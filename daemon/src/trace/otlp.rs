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
#[path = "otlp_tests.rs"]
mod tests;
