//! The audit log's records as OTLP log records: one event per record, named by its kind
//! (`event_name = "airlock.audit.approval.decided"`), the body the record's reason, and every
//! field — tenant, sequence, actor, subject, details and both digests — as attributes, so a
//! collector's copy can be checked against the chain. Acts that refused something are `WARN`,
//! the rest `INFO`.

use airlock_proto::otlp::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use airlock_proto::otlp::common::v1::{AnyValue, any_value};
use airlock_proto::otlp::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use airlock_proto::otlp::resource::v1::Resource;

use super::batch::{Batch, BatchExporter};
use super::spans::{SCHEMA_URL, int_attribute, scope, string_attribute};
use crate::store::audit::AuditRecord;

/// One record in OTLP form.
pub fn log_record(record: &AuditRecord) -> LogRecord {
    let time = u64::try_from(record.at_ms)
        .unwrap_or(0)
        .saturating_mul(1_000_000);
    let refused = record.kind.ends_with(".refused") || record.kind.ends_with(".denied");
    let (severity, text) = if refused {
        (SeverityNumber::Warn, "WARN")
    } else {
        (SeverityNumber::Info, "INFO")
    };
    LogRecord {
        time_unix_nano: time,
        observed_time_unix_nano: time,
        severity_number: severity as i32,
        severity_text: text.to_owned(),
        body: Some(AnyValue {
            value: Some(any_value::Value::StringValue(record.reason.clone())),
        }),
        attributes: vec![
            string_attribute("airlock.tenant", &record.tenant),
            int_attribute(
                "airlock.audit.seq",
                i64::try_from(record.seq).unwrap_or(i64::MAX),
            ),
            string_attribute("airlock.audit.kind", &record.kind),
            string_attribute("airlock.audit.actor", &record.actor),
            string_attribute("airlock.audit.subject", &record.subject),
            string_attribute("airlock.audit.details", &record.details),
            string_attribute("airlock.audit.prev", &record.prev),
            string_attribute("airlock.audit.digest", &record.digest),
        ],
        dropped_attributes_count: 0,
        flags: 0,
        trace_id: Vec::new(),
        span_id: Vec::new(),
        event_name: format!("airlock.audit.{}", record.kind),
    }
}

/// Audit records, as one signal's batches.
pub struct Logs {
    pub resource: Resource,
}

impl Batch for Logs {
    type Item = AuditRecord;
    type Request = ExportLogsServiceRequest;
    type Response = ExportLogsServiceResponse;
    const NOUN: &'static str = "audit records";

    fn request(&self, items: Vec<AuditRecord>) -> (ExportLogsServiceRequest, u64) {
        let count = u64::try_from(items.len()).unwrap_or(u64::MAX);
        let request = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(self.resource.clone()),
                scope_logs: vec![ScopeLogs {
                    scope: Some(scope()),
                    log_records: items.iter().map(log_record).collect(),
                    schema_url: SCHEMA_URL.to_owned(),
                }],
                schema_url: SCHEMA_URL.to_owned(),
            }],
        };
        (request, count)
    }

    fn rejected(response: &ExportLogsServiceResponse) -> (i64, String) {
        response
            .partial_success
            .as_ref()
            .map(|partial| (partial.rejected_log_records, partial.error_message.clone()))
            .unwrap_or_default()
    }
}

/// The audit log's exporter.
pub type LogExporter = BatchExporter<Logs>;
