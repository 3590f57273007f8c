//! `[metrics]`, `[otlp]` and `[audit]`: what the daemon tells operators about itself, and
//! where. The file's values win over the `OTEL_EXPORTER_OTLP_*` environment, which fills in
//! what the file leaves unset. `[otlp]`'s own types are the exporter's
//! (`telemetry::otlp::settings`), re-exported here.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

pub use crate::telemetry::otlp::settings::{HeaderValue, OtlpFile, OtlpProtocol};

/// `[metrics]`: the Prometheus endpoint, off unless `listen` is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsFile {
    /// Where `GET /metrics` is served, on an address of its own (never the API's).
    pub listen: Option<SocketAddr>,
    /// A file holding the bearer token scrapes must send. Required when `listen` is not a
    /// loopback address: metrics name tenants and tools.
    pub token_file: Option<PathBuf>,
    /// Whether anything is recorded at all (default true); off also stops OTLP metrics.
    pub record: Option<bool>,
}

/// `[audit]`: the tamper-evident log of security-relevant acts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditFile {
    /// Whether acts are recorded (default true).
    pub enabled: Option<bool>,
}
