//! OTLP metrics: the registry's snapshot (Prometheus's data model, as `prometheus-client`
//! encodes it) sent to the collector every interval, under the OpenTelemetry names of
//! [`FAMILIES`](crate::metrics::FAMILIES). Counters become cumulative monotonic sums, gauges
//! gauges, histograms explicit-bucket histograms (Prometheus's cumulative bucket counts
//! become OTLP's per-bucket ones; the `+Inf` bound is implied there). A failed export is
//! retried a few times; a missed interval is no loss, since every point is cumulative and the
//! next one carries it.

use std::time::Duration;

use airlock_proto::otlp::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use airlock_proto::otlp::common::v1::KeyValue;
use airlock_proto::otlp::metrics::v1 as otlp;
use airlock_proto::otlp::resource::v1::Resource;
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model as prom;
use tokio_util::sync::CancellationToken;

use super::settings::TransportSettings;
use super::spans::{SCHEMA_URL, scope, string_attribute};
use super::transport::{Transport, TransportError};
use crate::metrics::{self, DOTTED_LABELS, Metrics};
use crate::trace::now_unix_nano;

/// Attempts per interval's export: a collector that stays away is tried again at the next
/// interval, with newer numbers.
const MAX_ATTEMPTS: u32 = 3;

/// The wait between attempts within one interval.
const RETRY_WAIT: Duration = Duration::from_millis(500);

/// The registry's snapshot as one OTLP request; `start` is when the counters started.
pub fn request(
    families: Vec<prom::MetricFamily>,
    resource: Resource,
    start_unix_nano: u64,
    now_unix_nano: u64,
) -> ExportMetricsServiceRequest {
    let metrics = families
        .into_iter()
        .filter_map(|family| metric(family, start_unix_nano, now_unix_nano))
        .collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![otlp::ResourceMetrics {
            resource: Some(resource),
            scope_metrics: vec![otlp::ScopeMetrics {
                scope: Some(scope()),
                metrics,
                schema_url: SCHEMA_URL.to_owned(),
            }],
            schema_url: SCHEMA_URL.to_owned(),
        }],
    }
}

fn attributes(labels: &[prom::LabelPair]) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|label| {
            let key = DOTTED_LABELS
                .iter()
                .find(|(prometheus, _)| *prometheus == label.name)
                .map_or(label.name.as_str(), |(_, otel)| otel);
            string_attribute(key, &label.value)
        })
        .collect()
}

/// One family in OTLP form; none for a family of a kind airlock does not record.
fn metric(family: prom::MetricFamily, start: u64, now: u64) -> Option<otlp::Metric> {
    let (name, unit) = match metrics::family(&family.name) {
        Some(names) => (names.otel.to_owned(), names.unit.to_owned()),
        None => (family.name.clone(), String::new()),
    };
    let number = |metric: &prom::Metric, value: f64| otlp::NumberDataPoint {
        attributes: attributes(&metric.label),
        start_time_unix_nano: start,
        time_unix_nano: now,
        exemplars: Vec::new(),
        flags: 0,
        value: Some(otlp::number_data_point::Value::AsDouble(value)),
    };
    let data = match prom::MetricType::try_from(family.r#type).ok()? {
        prom::MetricType::Counter => otlp::metric::Data::Sum(otlp::Sum {
            data_points: family
                .metric
                .iter()
                .filter_map(|metric| Some(number(metric, metric.counter.as_ref()?.value)))
                .collect(),
            aggregation_temporality: otlp::AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        }),
        prom::MetricType::Gauge => otlp::metric::Data::Gauge(otlp::Gauge {
            data_points: family
                .metric
                .iter()
                .filter_map(|metric| Some(number(metric, metric.gauge.as_ref()?.value)))
                .collect(),
        }),
        prom::MetricType::Histogram => otlp::metric::Data::Histogram(otlp::Histogram {
            data_points: family
                .metric
                .iter()
                .filter_map(|metric| {
                    let histogram = metric.histogram.as_ref()?;
                    let mut bounds = Vec::with_capacity(histogram.bucket.len());
                    let mut counts = Vec::with_capacity(histogram.bucket.len() + 1);
                    let mut below = 0;
                    for bucket in &histogram.bucket {
                        if bucket.upper_bound.is_infinite() {
                            continue;
                        }
                        bounds.push(bucket.upper_bound);
                        counts.push(bucket.cumulative_count.saturating_sub(below));
                        below = bucket.cumulative_count;
                    }
                    // OTLP's last count is the bucket above the last bound.
                    counts.push(histogram.sample_count.saturating_sub(below));
                    Some(otlp::HistogramDataPoint {
                        attributes: attributes(&metric.label),
                        start_time_unix_nano: start,
                        time_unix_nano: now,
                        count: histogram.sample_count,
                        sum: Some(histogram.sample_sum),
                        bucket_counts: counts,
                        explicit_bounds: bounds,
                        exemplars: Vec::new(),
                        flags: 0,
                        min: None,
                        max: None,
                    })
                })
                .collect(),
            aggregation_temporality: otlp::AggregationTemporality::Cumulative as i32,
        }),
        prom::MetricType::Summary
        | prom::MetricType::Untyped
        | prom::MetricType::GaugeHistogram => return None,
    };
    Some(otlp::Metric {
        name,
        description: family.help,
        unit,
        metadata: Vec::new(),
        data: Some(data),
    })
}

/// Sends the registry's numbers every `interval` until `stop`, and once more then.
pub struct MetricsExporter {
    transport: Transport,
    resource: Resource,
    interval: Duration,
    start_unix_nano: u64,
}

impl MetricsExporter {
    /// Checks the settings; [`MetricsExporter::run`] sends.
    pub fn new(
        settings: &TransportSettings,
        resource: Resource,
        interval: Duration,
    ) -> Result<MetricsExporter, TransportError> {
        Ok(MetricsExporter {
            transport: Transport::new(settings)?,
            resource,
            interval,
            start_unix_nano: u64::try_from(now_unix_nano()).unwrap_or(0),
        })
    }

    /// Exports every interval until `stop` is cancelled, then a last time.
    pub async fn run(self, metrics: &'static Metrics, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate: skip it, there is nothing to say yet.
        ticks.tick().await;
        let mut failing = false;
        loop {
            let last = tokio::select! {
                () = stop.cancelled() => true,
                _ = ticks.tick() => false,
            };
            self.send(metrics, &mut failing).await;
            if last {
                return;
            }
        }
    }

    async fn send(&self, metrics: &Metrics, failing: &mut bool) {
        let families = match metrics.snapshot() {
            Ok(families) => families,
            Err(error) => {
                tracing::warn!(%error, "cannot read the metrics registry");
                return;
            }
        };
        let now = u64::try_from(now_unix_nano()).unwrap_or(0);
        let request = request(families, self.resource.clone(), self.start_unix_nano, now);
        let endpoint = self.transport.endpoint();
        for attempt in 1..=MAX_ATTEMPTS {
            match self
                .transport
                .export::<_, ExportMetricsServiceResponse>(&request)
                .await
            {
                Ok(response) => {
                    if let Some(partial) = response.partial_success
                        && (partial.rejected_data_points > 0 || !partial.error_message.is_empty())
                    {
                        tracing::warn!(
                            endpoint,
                            rejected = partial.rejected_data_points,
                            message = super::transport::cut_message(&partial.error_message),
                            "the OTLP collector rejected some metric points"
                        );
                    }
                    if std::mem::take(failing) {
                        tracing::info!(endpoint, "OTLP export of metrics works again");
                    }
                    return;
                }
                Err(failure) if failure.retryable && attempt < MAX_ATTEMPTS => {
                    tokio::time::sleep(
                        failure.retry_after.unwrap_or(RETRY_WAIT).min(self.interval),
                    )
                    .await;
                }
                Err(failure) => {
                    if !std::mem::replace(failing, true) {
                        tracing::warn!(
                            endpoint,
                            message = %failure.message,
                            "cannot export metrics to the OTLP collector; trying again next interval"
                        );
                    }
                    return;
                }
            }
        }
    }
}
