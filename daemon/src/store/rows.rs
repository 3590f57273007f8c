//! Records as every backend's columns hold them, and their decoding: what a row means is
//! written once here, and a backend only moves columns in and out of its driver's types.

use airlock_proto::v1 as pb;
use prost::Message as _;

use crate::domain::DecidedBy;
use crate::ids::{RunId, SessionId, TraceId};
use crate::store::{
    ApprovalResolution, RunRecord, RunState, SessionRecord, SessionSummary, StoreError, StoreResult,
};
use crate::wire;

pub(super) fn corrupt(err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}

/// A workspace column: empty for none.
pub(super) fn workspace_column(workspace: &Option<String>) -> &str {
    workspace.as_deref().unwrap_or("")
}

pub(super) fn workspace_of(column: String) -> Option<String> {
    (!column.is_empty()).then_some(column)
}

pub(super) fn decode<M: prost::Message + Default>(bytes: &[u8]) -> StoreResult<M> {
    M::decode(bytes).map_err(corrupt)
}

/// A run's row, as a backend's run columns hold it; decoded by [`RawRun::decode`].
pub(super) struct RawRun {
    pub(super) run_id: String,
    pub(super) session_id: String,
    pub(super) state: String,
    pub(super) start: Vec<u8>,
    pub(super) model: String,
    pub(super) workspace: String,
    pub(super) trace_id: String,
    pub(super) created_at_ms: i64,
    pub(super) finished_at_ms: Option<i64>,
    pub(super) stop_reason: Option<i32>,
    pub(super) stop_detail: String,
    pub(super) final_text: String,
    pub(super) usage: Vec<u8>,
    pub(super) steps: i64,
    pub(super) last_seq: i64,
    pub(super) tenant: String,
}

impl RawRun {
    pub(super) fn decode(self) -> StoreResult<RunRecord> {
        let usage: pb::Usage = decode(&self.usage)?;
        Ok(RunRecord {
            run_id: RunId::from_stored(self.run_id),
            session_id: SessionId::from_stored(self.session_id),
            state: RunState::parse(&self.state)
                .ok_or_else(|| corrupt(format!("unknown run state `{}`", self.state)))?,
            start: decode(&self.start)?,
            model: self.model,
            workspace: workspace_of(self.workspace),
            trace_id: TraceId::from_stored(self.trace_id),
            created_at_ms: self.created_at_ms,
            finished_at_ms: self.finished_at_ms,
            stop_reason: self
                .stop_reason
                .map(|raw| {
                    pb::StopReason::try_from(raw)
                        .ok()
                        .and_then(wire::stop_reason_from)
                        .ok_or_else(|| corrupt(format!("unknown stop reason {raw}")))
                })
                .transpose()?,
            stop_detail: self.stop_detail,
            final_text: self.final_text,
            usage: wire::usage_from(&usage),
            steps: u32::try_from(self.steps).map_err(corrupt)?,
            last_seq: u64::try_from(self.last_seq).map_err(corrupt)?,
            tenant: self.tenant,
        })
    }
}

/// A session's row and its runs' summary, as a backend's session columns hold them.
pub(super) struct RawSession {
    pub(super) session_id: String,
    pub(super) workspace: String,
    pub(super) labels: String,
    pub(super) created_at_ms: i64,
    pub(super) tenant: String,
    pub(super) settings: Option<Vec<u8>>,
    pub(super) runs: i64,
    pub(super) last_run_id: Option<String>,
    pub(super) last_active_ms: i64,
    pub(super) running: bool,
}

impl RawSession {
    pub(super) fn decode(self) -> StoreResult<SessionSummary> {
        Ok(SessionSummary {
            session: SessionRecord {
                session_id: SessionId::from_stored(self.session_id),
                workspace: workspace_of(self.workspace),
                labels: serde_json::from_str(&self.labels).map_err(corrupt)?,
                created_at_ms: self.created_at_ms,
                tenant: self.tenant,
                settings: self
                    .settings
                    .map(|bytes| decode(&bytes))
                    .transpose()?
                    .unwrap_or_default(),
            },
            runs: u32::try_from(self.runs).map_err(corrupt)?,
            last_run_id: self.last_run_id.map(RunId::from_stored),
            last_active_ms: self.last_active_ms,
            running: self.running,
        })
    }
}

/// An approval's answer, as its columns hold it: none until it was answered.
pub(super) fn resolution(
    decision: Option<i32>,
    reason: Option<String>,
    decided_by: Option<String>,
    resolved_at_ms: Option<i64>,
) -> StoreResult<Option<ApprovalResolution>> {
    let (Some(decision), Some(resolved_at_ms)) = (decision, resolved_at_ms) else {
        return Ok(None);
    };
    let decision = pb::Decision::try_from(decision)
        .ok()
        .and_then(wire::decision_from)
        .ok_or_else(|| corrupt(format!("unknown decision {decision}")))?;
    let decided_by = decided_by.unwrap_or_default();
    Ok(Some(ApprovalResolution {
        decision,
        reason: reason.unwrap_or_default(),
        decided_by: DecidedBy::parse(&decided_by)
            .ok_or_else(|| corrupt(format!("unknown approver `{decided_by}`")))?,
        resolved_at_ms,
    }))
}

/// An event and the spans that ended before it, encoded for their tables. Encoded by the
/// caller, on its own thread: the store's writer, which every run waits on, only writes.
pub(super) struct EventRow {
    pub(super) run_id: String,
    pub(super) seq: u64,
    pub(super) event: Vec<u8>,
    pub(super) spans: Vec<SpanRow>,
}

pub(super) struct SpanRow {
    pub(super) span_id: String,
    pub(super) start_unix_nano: i64,
    pub(super) span: Vec<u8>,
}

impl EventRow {
    pub(super) fn new(event: &pb::RunEvent, spans: &[pb::Span]) -> EventRow {
        EventRow {
            run_id: event.run_id.clone(),
            seq: event.seq,
            event: event.encode_to_vec(),
            spans: spans
                .iter()
                .map(|span| SpanRow {
                    span_id: span.span_id.clone(),
                    start_unix_nano: span.start_unix_nano,
                    span: span.encode_to_vec(),
                })
                .collect(),
        }
    }
}

/// A page of at most `limit` from `rows`, which a query read with one row more than the
/// page: when that row came, the cursor of the next page (made from the page's last).
pub(super) fn page<T, C>(
    mut rows: Vec<T>,
    limit: usize,
    cursor: impl FnOnce(&T) -> C,
) -> (Vec<T>, Option<C>) {
    if rows.len() <= limit {
        return (rows, None);
    }
    rows.truncate(limit);
    let next = rows.last().map(cursor);
    (rows, next)
}
