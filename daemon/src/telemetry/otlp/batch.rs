//! The batching exporter of spans and log records: what a run or an act hands over goes to
//! the collector off the caller's path.
//!
//! A run never waits for a collector. [`BatchExporter::push`] only puts the item on a bounded
//! queue, and drops it (counted, with a warning) when the queue is full. A background task
//! takes items off the queue in batches — a batch goes when it is full or when its first item
//! has waited [`BatchSettings::batch_delay`] — and sends them, retrying transient failures
//! with backoff (or after the wait the collector asked for). A collector that is down or slow
//! costs exports, never a run's time. On graceful shutdown, [`BatchExporter::shutdown`] sends
//! what is still queued, for a bounded time. The store keeps every span and audit record
//! whatever happens here: export is a copy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};

#[cfg(test)]
use super::settings::Signal;
use super::settings::TransportSettings;
use super::transport::{Transport, TransportError};

/// Items waiting to be sent: the OpenTelemetry SDKs' default. A run records a few spans per
/// step, so this holds minutes of a busy daemon's spans while the collector is briefly away,
/// at a few hundred bytes each.
pub const DEFAULT_QUEUE_CAPACITY: usize = 2048;

/// Items per `Export` request: the SDKs' default, which keeps a request well under the 4 MiB
/// message limit collectors apply by default.
pub const DEFAULT_MAX_BATCH: usize = 512;

/// How long an item waits for its batch to fill: short enough that a trace shows up in the
/// backend while the run is watched, long enough that a step's spans travel together.
pub const DEFAULT_BATCH_DELAY: Duration = Duration::from_secs(1);

/// Attempts per batch before it is given up. With the backoff below, a batch is retried for
/// about a second and a half against a collector that refuses connections.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;

/// The wait before the first retry; it doubles with each further one, up to [`MAX_BACKOFF`].
/// One daemon sends one batch at a time, so there is no herd to spread with jitter.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The longest wait a collector's `Retry-After` is obeyed for: longer, and the batch would
/// hold the queue while it fills and drops.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// Where to send, and how to batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    pub transport: TransportSettings,
    pub queue_capacity: usize,
    pub max_batch: usize,
    pub batch_delay: Duration,
    pub max_attempts: u32,
}

impl OtlpSettings {
    /// The defaults above, sending spans to `endpoint` over plain gRPC.
    #[cfg(test)]
    pub fn new(endpoint: impl Into<String>) -> OtlpSettings {
        OtlpSettings::with_transport(TransportSettings::grpc(Signal::Traces, endpoint))
    }

    /// The defaults above, sending with `transport`.
    pub fn with_transport(transport: TransportSettings) -> OtlpSettings {
        OtlpSettings {
            transport,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            max_batch: DEFAULT_MAX_BATCH,
            batch_delay: DEFAULT_BATCH_DELAY,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("the OTLP exporter must be started inside a Tokio runtime")]
    NoRuntime,
}

/// What one signal's batches are made of, and how the collector's answer counts them.
pub trait Batch: Send + Sync + 'static {
    type Item: Send + 'static;
    type Request: prost::Message + Clone + Send + Sync + 'static;
    type Response: prost::Message + Default + Send + Sync + 'static;
    /// What the items are called in logs: "spans", "log records".
    const NOUN: &'static str;

    /// The request carrying `items`, and how many of them it carries (those that cannot be
    /// put in OTLP form are left out, and logged).
    fn request(&self, items: Vec<Self::Item>) -> (Self::Request, u64);

    /// How many items the collector rejected, and why.
    fn rejected(response: &Self::Response) -> (i64, String);
}

/// What became of the items handed to an exporter so far.
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

/// Sends one signal's items to an OTLP collector; see the module documentation.
pub struct BatchExporter<B: Batch> {
    queue: mpsc::Sender<B::Item>,
    counters: Arc<Counters>,
    /// Taken by the first [`BatchExporter::shutdown`]; the worker answers on the enclosed
    /// sender once it has sent what was queued.
    stop: Mutex<Option<oneshot::Sender<oneshot::Sender<()>>>>,
    endpoint: String,
}

impl<B: Batch> BatchExporter<B> {
    /// Checks the settings and starts the background task that sends. Connecting is left to
    /// the first batch: a collector that is not up yet is no reason to refuse to start.
    pub fn start(settings: OtlpSettings, batch: B) -> Result<Arc<BatchExporter<B>>, OtlpError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
        // The gRPC channel spawns its connection task, which needs the runtime.
        let _entered = runtime.enter();
        let transport = Transport::new(&settings.transport)?;
        let (queue, items) = mpsc::channel(settings.queue_capacity.max(1));
        let (stop, stop_requests) = oneshot::channel();
        let counters = Arc::new(Counters::default());
        let worker = Worker {
            items,
            batch,
            counters: counters.clone(),
            transport,
            max_batch: settings.max_batch.max(1),
            batch_delay: settings.batch_delay,
            max_attempts: settings.max_attempts.max(1),
            failing: false,
        };
        runtime.spawn(worker.run(stop_requests));
        Ok(Arc::new(BatchExporter {
            queue,
            counters,
            stop: Mutex::new(Some(stop)),
            endpoint: super::transport::shown(&settings.transport.endpoint),
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

    /// Queues `item`; never blocks. A full queue drops it, counted.
    pub fn push(&self, item: B::Item) {
        match self.queue.try_send(item) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // One warning per doubling: a collector that stays away is reported without
                // one log line per item.
                if dropped.is_power_of_two() {
                    tracing::warn!(
                        endpoint = %self.endpoint,
                        dropped,
                        "the OTLP export queue is full (the collector is slow or down); {} are \
                         dropped from export (they stay in the store)",
                        B::NOUN
                    );
                }
            }
            // After shutdown: nothing is exported any more, and that was asked for.
            Err(TrySendError::Closed(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sends what is queued and stops the exporter; items that come later are dropped. Waits
    /// at most `timeout` (the collector may be down) and says whether everything was sent in
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
                    "the OTLP collector did not take the last {} in time; they are lost",
                    B::NOUN
                );
                false
            }
        }
    }
}

/// The background task: batches items off the queue and sends them, one batch at a time.
struct Worker<B: Batch> {
    items: mpsc::Receiver<B::Item>,
    batch: B,
    counters: Arc<Counters>,
    transport: Transport,
    max_batch: usize,
    batch_delay: Duration,
    max_attempts: u32,
    /// The last batch failed: further failures are logged quietly until one succeeds.
    failing: bool,
}

impl<B: Batch> Worker<B> {
    async fn run(mut self, mut stop: oneshot::Receiver<oneshot::Sender<()>>) {
        loop {
            let first = tokio::select! {
                // A dropped exporter (the daemon went away without a graceful shutdown) is a
                // stop nobody waits on.
                request = &mut stop => return self.finish(request.ok()).await,
                item = self.items.recv() => match item {
                    Some(item) => item,
                    None => return self.finish(None).await,
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
                    item = self.items.recv() => match item {
                        Some(item) => batch.push(item),
                        None => break,
                    },
                    () = tokio::time::sleep_until(deadline) => break,
                }
            }
            self.send(batch).await;
            if let Some(done) = stopping {
                return self.finish(done).await;
            }
        }
    }

    /// Sends what is left in the queue, then says so on `done`.
    async fn finish(mut self, done: Option<oneshot::Sender<()>>) {
        // Items that come from now on are refused at once instead of waiting in a queue
        // that nobody reads.
        self.items.close();
        let mut batch = Vec::new();
        while let Ok(item) = self.items.try_recv() {
            batch.push(item);
            if batch.len() == self.max_batch {
                self.send(std::mem::take(&mut batch)).await;
            }
        }
        if !batch.is_empty() {
            self.send(batch).await;
        }
        if let Some(done) = done {
            // The caller may have stopped waiting; then there is nobody to tell.
            let _ = done.send(());
        }
    }

    /// Sends one batch, retrying transient failures; every item ends up counted as exported
    /// or failed.
    async fn send(&mut self, batch: Vec<B::Item>) {
        let given = u64::try_from(batch.len()).unwrap_or(u64::MAX);
        let (request, count) = self.batch.request(batch);
        self.counters
            .failed
            .fetch_add(given.saturating_sub(count), Ordering::Relaxed);
        if count == 0 {
            return;
        }
        let endpoint = self.transport.endpoint().to_owned();
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            match self
                .transport
                .export::<B::Request, B::Response>(&request)
                .await
            {
                Ok(response) => {
                    let (rejected, message) = B::rejected(&response);
                    let rejected = u64::try_from(rejected).unwrap_or(0).min(count);
                    self.counters
                        .exported
                        .fetch_add(count - rejected, Ordering::Relaxed);
                    self.counters.failed.fetch_add(rejected, Ordering::Relaxed);
                    if rejected > 0 || !message.is_empty() {
                        // Rejected items must not be sent again (OTLP): they are only reported.
                        tracing::warn!(
                            %endpoint,
                            rejected,
                            message = super::transport::cut_message(&message),
                            "the OTLP collector rejected part of a batch of {}",
                            B::NOUN
                        );
                    }
                    if std::mem::take(&mut self.failing) {
                        tracing::info!(%endpoint, "OTLP export of {} works again", B::NOUN);
                    }
                    return;
                }
                Err(failure) if attempt < self.max_attempts && failure.retryable => {
                    tracing::debug!(
                        %endpoint,
                        attempt,
                        message = %failure.message,
                        "OTLP export failed; retrying"
                    );
                    let wait = failure
                        .retry_after
                        .map_or(backoff, |asked| asked.min(MAX_RETRY_AFTER));
                    tokio::time::sleep(wait).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    attempt += 1;
                }
                Err(failure) => {
                    self.counters.failed.fetch_add(count, Ordering::Relaxed);
                    if std::mem::replace(&mut self.failing, true) {
                        tracing::debug!(
                            %endpoint,
                            count,
                            message = %failure.message,
                            "OTLP export still failing; batch of {} dropped",
                            B::NOUN
                        );
                    } else {
                        tracing::warn!(
                            %endpoint,
                            count,
                            attempts = attempt,
                            message = %failure.message,
                            "cannot export {} to the OTLP collector; they are dropped from \
                             export (they stay in the store) until it answers",
                            B::NOUN
                        );
                    }
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
