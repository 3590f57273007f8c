//! The daemon's audit log: the [`AuditSink`] that puts each act in its tenant's chain in the
//! store (`store::audit`), then hands the record as placed to the OTLP logs exporter.
//!
//! What an act carries comes in part from tools and clients (a tool's name, a refused host,
//! a hosted server's listing), so every field is bounded before it is stored: a record's size
//! never follows theirs.

use std::sync::Arc;

use crate::audit::{Act, AuditSink};
use crate::ids;
use crate::store::Store;
use crate::store::audit::AuditDraft;

use super::otlp::LogExporter;

/// The longest actor, subject or reason a record keeps (bytes).
const MAX_FIELD_BYTES: usize = 1024;

/// The longest details document a record keeps (bytes); a longer one is replaced by a note
/// of its size.
const MAX_DETAILS_BYTES: usize = 16 * 1024;

/// `text` cut to `max` bytes on a character boundary, marked when cut, its control
/// characters (but tab and newline) replaced: PostgreSQL's text refuses NUL, and a record a
/// store refuses would be an act left out of the log by whoever chose the bytes.
fn bounded(text: String, max: usize) -> String {
    let mut text: String = text
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                char::REPLACEMENT_CHARACTER
            } else {
                c
            }
        })
        .collect();
    if text.len() > max {
        let mut end = max - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

pub struct AuditLog {
    store: Arc<dyn Store>,
    exporter: Option<Arc<LogExporter>>,
    runtime: tokio::runtime::Handle,
}

impl AuditLog {
    /// Must be made inside the daemon's runtime: commits are awaited on it.
    pub fn new(
        store: Arc<dyn Store>,
        exporter: Option<Arc<LogExporter>>,
        runtime: tokio::runtime::Handle,
    ) -> AuditLog {
        AuditLog {
            store,
            exporter,
            runtime,
        }
    }
}

/// The stored form of `act`, every field bounded.
pub fn draft(act: Act, at_ms: i64) -> AuditDraft {
    let details = act.details.to_string();
    let details = if details.len() > MAX_DETAILS_BYTES {
        serde_json::json!({ "truncated_from_bytes": details.len() }).to_string()
    } else {
        details
    };
    AuditDraft {
        tenant: bounded(act.tenant, MAX_FIELD_BYTES),
        at_ms,
        kind: act.kind.to_owned(),
        actor: bounded(act.actor, MAX_FIELD_BYTES),
        subject: bounded(act.subject, MAX_FIELD_BYTES),
        reason: bounded(act.reason, MAX_FIELD_BYTES),
        details,
    }
}

impl AuditSink for AuditLog {
    fn record(&self, act: Act) {
        let draft = draft(act, ids::now_ms());
        // The store has the record in order once this returns; its commit is awaited apart.
        let committed = self.store.append_audit(&draft);
        let exporter = self.exporter.clone();
        self.runtime.spawn(async move {
            match committed.await {
                Ok(record) => {
                    if let Some(exporter) = exporter {
                        exporter.push(record);
                    }
                }
                Err(error) => tracing::error!(
                    %error,
                    tenant = %draft.tenant,
                    kind = %draft.kind,
                    "an audit record could not be stored"
                ),
            }
        });
    }
}
