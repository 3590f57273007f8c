//! The OTLP exporters ([`otlp`]) that carry traces, the metrics registry
//! ([`crate::metrics`]) and the audit log's records to an OpenTelemetry collector.

pub mod audit_log;
pub mod otlp;
