//! Records as every backend's columns hold them, and their decoding: what a row means is
//! written once here, for the shared queries and the fleet's own statements alike.

use airlock_proto::v1 as pb;
use prost::Message as _;

use super::sql::Row;
use super::{
    ApprovalResolution, OutputRecord, RunRecord, RunState, SessionRecord, SessionSummary,
    StoreResult,
};
use crate::domain;
use crate::domain::DecidedBy;
use crate::ids::{ExecutionId, RunId, SessionId, TraceId};

pub(super) use super::sql::corrupt;

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

/// The columns [`run`] reads, in its order.
pub(super) const RUN_COLUMNS: &str = "run_id, session_id, state, start, model, workspace, trace_id, created_at_ms, \
     finished_at_ms, stop_reason, stop_detail, final_text, usage, steps, last_seq, tenant";

/// A run from a row of [`RUN_COLUMNS`].
pub(super) fn run(row: &mut Row) -> StoreResult<RunRecord> {
    let state: String = row.get(2)?;
    let usage: pb::Usage = decode(&row.get::<Vec<u8>>(12)?)?;
    Ok(RunRecord {
        run_id: RunId::from_stored(row.get::<String>(0)?),
        session_id: SessionId::from_stored(row.get::<String>(1)?),
        state: RunState::parse(&state)
            .ok_or_else(|| corrupt(format!("unknown run state `{state}`")))?,
        start: decode(&row.get::<Vec<u8>>(3)?)?,
        model: row.get(4)?,
        workspace: workspace_of(row.get(5)?),
        trace_id: TraceId::from_stored(row.get::<String>(6)?),
        created_at_ms: row.get(7)?,
        finished_at_ms: row.get(8)?,
        stop_reason: row
            .get::<Option<i32>>(9)?
            .map(|raw| {
                pb::StopReason::try_from(raw)
                    .ok()
                    .and_then(domain::stop_reason_from)
                    .ok_or_else(|| corrupt(format!("unknown stop reason {raw}")))
            })
            .transpose()?,
        stop_detail: row.get(10)?,
        final_text: row.get(11)?,
        usage: domain::usage_from(&usage),
        steps: u32::try_from(row.get::<i64>(13)?).map_err(corrupt)?,
        last_seq: row.get(14)?,
        tenant: row.get(15)?,
    })
}

/// The columns [`session_summary`] reads: the session's own, then its runs summed up.
pub(super) const SESSION_COLUMNS: &str = "s.session_id, s.workspace, s.labels, s.created_at_ms, s.tenant, \
     s.settings, \
     (SELECT COUNT(*) FROM runs r WHERE r.session_id = s.session_id), \
     (SELECT r.run_id FROM runs r WHERE r.session_id = s.session_id \
      ORDER BY r.created_at_ms DESC, r.run_id DESC LIMIT 1), \
     COALESCE((SELECT MAX(r.created_at_ms) FROM runs r WHERE r.session_id = s.session_id), \
              s.created_at_ms) AS last_active_ms, \
     EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.session_id \
             AND r.finished_at_ms IS NULL)";

/// A session and its runs' summary from a row of [`SESSION_COLUMNS`].
pub(super) fn session_summary(row: &mut Row) -> StoreResult<SessionSummary> {
    Ok(SessionSummary {
        session: SessionRecord {
            session_id: SessionId::from_stored(row.get::<String>(0)?),
            workspace: workspace_of(row.get(1)?),
            labels: serde_json::from_str(&row.get::<String>(2)?).map_err(corrupt)?,
            created_at_ms: row.get(3)?,
            tenant: row.get(4)?,
            settings: row
                .get::<Option<Vec<u8>>>(5)?
                .map(|bytes| decode(&bytes))
                .transpose()?
                .unwrap_or_default(),
        },
        runs: u32::try_from(row.get::<i64>(6)?).map_err(corrupt)?,
        last_run_id: row.get::<Option<String>>(7)?.map(RunId::from_stored),
        last_active_ms: row.get(8)?,
        running: row.get(9)?,
    })
}

/// The columns [`output`] reads, of `outputs o`.
pub(super) const OUTPUT_COLUMNS: &str = "o.execution_id, o.digest, o.size, o.created_at_ms";

/// A kept output from a row of [`OUTPUT_COLUMNS`].
pub(super) fn output(row: &mut Row) -> StoreResult<OutputRecord> {
    Ok(OutputRecord {
        execution_id: ExecutionId::from_stored(row.get::<String>(0)?),
        digest: row.get(1)?,
        size: row.get(2)?,
        created_at_ms: row.get(3)?,
    })
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
        .and_then(domain::decision_from)
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
