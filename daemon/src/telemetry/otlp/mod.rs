//! OTLP export of the three signals, each to the collector its settings name: spans as runs
//! end them ([`spans`]), the metrics registry every interval ([`metrics`]), the audit log's
//! records as they are written ([`logs`]). One transport ([`transport`]) speaks gRPC or
//! HTTP/protobuf with TLS and headers for all three; [`settings`] reads where they go from
//! `[otlp]` and the `OTEL_EXPORTER_OTLP_*` environment.

pub mod batch;
pub mod logs;
pub mod metrics;
pub mod settings;
pub mod spans;
pub mod transport;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use batch::{ExportStats, OtlpError, OtlpSettings};
pub use logs::LogExporter;
pub use settings::OtlpConfig;
pub use spans::SpanExporter;

/// The exporters a daemon started, by signal.
#[derive(Default)]
pub struct Exporters {
    pub spans: Option<Arc<SpanExporter>>,
    pub logs: Option<Arc<LogExporter>>,
    /// Stops the metrics task, which then sends a last time.
    metrics: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl Exporters {
    /// Starts an exporter for each configured signal; metrics only when they are recorded.
    pub fn start(config: &OtlpConfig, record_metrics: bool) -> Result<Exporters, OtlpError> {
        let resource = spans::resource(&config.resource);
        let mut exporters = Exporters::default();
        if let Some(transport) = &config.traces {
            let exporter = SpanExporter::start(
                OtlpSettings::with_transport(transport.clone()),
                spans::Spans {
                    resource: resource.clone(),
                },
            )?;
            tracing::info!(endpoint = %exporter.endpoint(), protocol = transport.protocol.as_str(), "exporting traces over OTLP");
            exporters.spans = Some(exporter);
        }
        if let Some(transport) = &config.logs {
            let exporter = LogExporter::start(
                OtlpSettings::with_transport(transport.clone()),
                logs::Logs {
                    resource: resource.clone(),
                },
            )?;
            tracing::info!(endpoint = %exporter.endpoint(), protocol = transport.protocol.as_str(), "exporting the audit log over OTLP");
            exporters.logs = Some(exporter);
        }
        if let Some(transport) = config.metrics.as_ref().filter(|_| record_metrics) {
            let runtime =
                tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
            let _entered = runtime.enter();
            let exporter =
                metrics::MetricsExporter::new(transport, resource, config.metrics_interval)?;
            tracing::info!(
                endpoint = %transport::shown(&transport.endpoint),
                protocol = transport.protocol.as_str(),
                interval = ?config.metrics_interval,
                "exporting metrics over OTLP"
            );
            let stop = CancellationToken::new();
            let task = runtime.spawn(exporter.run(crate::metrics::global(), stop.clone()));
            exporters.metrics = Some((stop, task));
        }
        Ok(exporters)
    }

    /// Sends what is queued, for at most `timeout` per signal, and logs what became of it.
    pub async fn shutdown(&self, timeout: Duration) {
        if let Some(spans) = &self.spans {
            spans.shutdown(timeout).await;
            log_stats("spans", spans.endpoint(), spans.stats());
        }
        if let Some(logs) = &self.logs {
            logs.shutdown(timeout).await;
            log_stats("log records", logs.endpoint(), logs.stats());
        }
        if let Some((stop, task)) = &self.metrics {
            stop.cancel();
            let _ = tokio::time::timeout(timeout, async {
                while !task.is_finished() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await;
        }
    }
}

fn log_stats(what: &str, endpoint: &str, stats: ExportStats) {
    tracing::info!(
        endpoint,
        exported = stats.exported,
        dropped = stats.dropped,
        failed = stats.failed,
        "{what} sent to the OTLP collector while serving"
    );
}
