//! The statements of the PostgreSQL store, one function per request. Each takes its own
//! share of a connection ([`Conn`]) and owned arguments, so its future borrows nothing and
//! the writer can run it again (see `writer`). What the columns mean is in `store::rows`;
//! this module only moves them through tokio-postgres, every statement through the
//! connection's statement cache (preparing costs a round trip of its own).

use std::sync::Arc;

use airlock_proto::v1 as pb;
use deadpool_postgres::Object;
use prost::Message as _;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, ToSql};

use crate::domain::Usage;
use crate::ids::{ApprovalId, CallId, ExecutionId, NodeId, RunId, SessionId};
use crate::pause::{self, Point};
use crate::store::rows::{
    EventRow, RawRun, RawSession, corrupt, decode, page, resolution, workspace_column,
};
use crate::store::{
    ApprovalResolution, Checkpoint, Deleted, Effect, ExecutionOwner, OutputRecord, RunCursor,
    RunEnd, RunFilter, RunRecord, RunState, SessionCursor, SessionRecord, SessionSummary,
    StoreError, StoreResult,
};
use crate::wire;

/// A connection a request's future holds a share of: the writer's, or one from the pool.
pub(super) type Conn = Arc<Object>;

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The epoch a run is created at; each claim raises it.
pub(super) const FIRST_EPOCH: i64 = 1;

/// How much later than its intent's time plus its timeout a call may still act: the time
/// between the intent and the call's start (its sandbox made, its module instantiated) —
/// milliseconds as a rule, a second on a host under load.
const CALL_START_MARGIN_MS: i64 = 1_000;

pub(super) const RUN_COLUMNS: &str = "run_id, session_id, state, start, model, workspace, trace_id, created_at_ms, \
     finished_at_ms, stop_reason, stop_detail, final_text, usage, steps, last_seq, tenant";

/// The server's own words for an error (tokio-postgres's `Display` says only "db error").
pub(super) fn describe(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {} ({detail})", db.severity(), db.message()),
            None => format!("{}: {}", db.severity(), db.message()),
        },
        None => match std::error::Error::source(err) {
            Some(source) => format!("{err}: {source}"),
            None => err.to_string(),
        },
    }
}

pub(super) fn io(err: tokio_postgres::Error) -> StoreError {
    StoreError::Io(describe(&err))
}

fn seq_param(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

fn count_param(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) async fn execute(c: &Object, sql: &str, params: Params<'_>) -> StoreResult<u64> {
    let statement = c.prepare_cached(sql).await.map_err(io)?;
    c.execute(&statement, params).await.map_err(io)
}

pub(super) async fn query_opt(
    c: &Object,
    sql: &str,
    params: Params<'_>,
) -> StoreResult<Option<Row>> {
    let statement = c.prepare_cached(sql).await.map_err(io)?;
    c.query_opt(&statement, params).await.map_err(io)
}

pub(super) async fn query(c: &Object, sql: &str, params: Params<'_>) -> StoreResult<Vec<Row>> {
    let statement = c.prepare_cached(sql).await.map_err(io)?;
    c.query(&statement, params).await.map_err(io)
}

/// Column `index` of `row`; a value of another type than the schema's is a corrupt record.
pub(super) fn get<'a, T: FromSql<'a>>(row: &'a Row, index: usize) -> StoreResult<T> {
    row.try_get(index).map_err(corrupt)
}

pub(super) fn raw_run(row: &Row) -> StoreResult<RawRun> {
    Ok(RawRun {
        run_id: get(row, 0)?,
        session_id: get(row, 1)?,
        state: get(row, 2)?,
        start: get(row, 3)?,
        model: get(row, 4)?,
        workspace: get(row, 5)?,
        trace_id: get(row, 6)?,
        created_at_ms: get(row, 7)?,
        finished_at_ms: get(row, 8)?,
        stop_reason: get(row, 9)?,
        stop_detail: get(row, 10)?,
        final_text: get(row, 11)?,
        usage: get(row, 12)?,
        steps: get(row, 13)?,
        last_seq: get(row, 14)?,
        tenant: get(row, 15)?,
    })
}

fn runs(rows: &[Row]) -> StoreResult<Vec<RunRecord>> {
    rows.iter().map(|row| raw_run(row)?.decode()).collect()
}

/// The columns [`raw_session`] reads: the session's own, then its runs summed up.
const SESSION_COLUMNS: &str = "s.session_id, s.workspace, s.labels, s.created_at_ms, s.tenant, \
     s.settings, \
     (SELECT COUNT(*) FROM runs r WHERE r.session_id = s.session_id), \
     (SELECT r.run_id FROM runs r WHERE r.session_id = s.session_id \
      ORDER BY r.created_at_ms DESC, r.run_id DESC LIMIT 1), \
     COALESCE((SELECT MAX(r.created_at_ms) FROM runs r WHERE r.session_id = s.session_id), \
              s.created_at_ms) AS last_active_ms, \
     EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.session_id \
             AND r.finished_at_ms IS NULL)";

fn raw_session(row: &Row) -> StoreResult<RawSession> {
    Ok(RawSession {
        session_id: get(row, 0)?,
        workspace: get(row, 1)?,
        labels: get(row, 2)?,
        created_at_ms: get(row, 3)?,
        tenant: get(row, 4)?,
        settings: get(row, 5)?,
        runs: get(row, 6)?,
        last_run_id: get(row, 7)?,
        last_active_ms: get(row, 8)?,
        running: get(row, 9)?,
    })
}

pub(super) async fn create_session(c: Conn, session: SessionRecord) -> StoreResult<()> {
    let labels =
        serde_json::to_string(&session.labels).map_err(|e| StoreError::Io(e.to_string()))?;
    execute(
        &c,
        "INSERT INTO sessions (session_id, workspace, labels, created_at_ms, tenant, settings)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &session.session_id.as_str(),
            &workspace_column(&session.workspace),
            &labels,
            &session.created_at_ms,
            &session.tenant,
            &session.settings.encode_to_vec(),
        ],
    )
    .await
    .map(|_| ())
}

pub(super) async fn session_summary(
    c: Conn,
    session_id: SessionId,
) -> StoreResult<Option<SessionSummary>> {
    query_opt(
        &c,
        &format!("SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.session_id = $1"),
        &[&session_id.as_str()],
    )
    .await?
    .map(|row| raw_session(&row)?.decode())
    .transpose()
}

pub(super) async fn session(c: Conn, session_id: SessionId) -> StoreResult<Option<SessionRecord>> {
    Ok(session_summary(c, session_id)
        .await?
        .map(|summary| summary.session))
}

pub(super) async fn list_sessions(
    c: Conn,
    tenant: String,
    limit: usize,
    after: Option<SessionCursor>,
) -> StoreResult<(Vec<SessionSummary>, Option<SessionCursor>)> {
    let rows = query(
        &c,
        &format!(
            "SELECT * FROM (SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.tenant = $1) page
             WHERE ($2::bigint IS NULL OR last_active_ms < $2
                    OR (last_active_ms = $2 AND session_id < $3))
             ORDER BY last_active_ms DESC, session_id DESC
             LIMIT $4"
        ),
        &[
            &tenant,
            &after.as_ref().map(|cursor| cursor.last_active_ms),
            &after.as_ref().map(|cursor| cursor.session_id.as_str()),
            &count_param(limit.saturating_add(1)),
        ],
    )
    .await?;
    let sessions = rows
        .iter()
        .map(|row| raw_session(row)?.decode())
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(page(sessions, limit, |summary| SessionCursor {
        last_active_ms: summary.last_active_ms,
        session_id: summary.session.session_id.clone(),
    }))
}

/// Records a run owned by `node`, at the first epoch.
pub(super) async fn create_run(
    c: Conn,
    run: RunRecord,
    first: pb::RunEvent,
    node: NodeId,
) -> StoreResult<()> {
    if first.run_id != run.run_id.as_str() || first.seq != 1 {
        return Err(StoreError::OutOfOrder {
            run_id: first.run_id.clone(),
            seq: first.seq,
            last: 0,
        });
    }
    execute(
        &c,
        &format!(
            "INSERT INTO runs ({RUN_COLUMNS}, owner, epoch)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, {FIRST_EPOCH})"
        ),
        &[
            &run.run_id.as_str(),
            &run.session_id.as_str(),
            &run.state.as_str(),
            &run.start.encode_to_vec(),
            &run.model,
            &workspace_column(&run.workspace),
            &run.trace_id.as_str(),
            &run.created_at_ms,
            &run.finished_at_ms,
            &run.stop_reason.map(|r| wire::stop_reason(r) as i32),
            &run.stop_detail,
            &run.final_text,
            &wire::usage(&run.usage).encode_to_vec(),
            &i64::from(run.steps),
            &seq_param(first.seq),
            &run.tenant,
            &node.as_str(),
        ],
    )
    .await?;
    execute(
        &c,
        "INSERT INTO events (run_id, seq, event) VALUES ($1, $2, $3)",
        &[&first.run_id, &seq_param(first.seq), &first.encode_to_vec()],
    )
    .await
    .map(|_| ())
}

pub(super) async fn run(c: Conn, run_id: RunId) -> StoreResult<Option<RunRecord>> {
    query_opt(
        &c,
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1"),
        &[&run_id.as_str()],
    )
    .await?
    .map(|row| raw_run(&row)?.decode())
    .transpose()
}

pub(super) async fn list_runs(
    c: Conn,
    filter: RunFilter,
    limit: usize,
    after: Option<RunCursor>,
) -> StoreResult<(Vec<RunRecord>, Option<RunCursor>)> {
    let rows = query(
        &c,
        &format!(
            "SELECT {RUN_COLUMNS} FROM runs
             WHERE ($1::text IS NULL OR session_id = $1)
               AND ($2::text IS NULL OR state = $2)
               AND ($3::bigint IS NULL OR created_at_ms < $3
                    OR (created_at_ms = $3 AND run_id < $4))
               AND ($6::text IS NULL OR tenant = $6)
             ORDER BY created_at_ms DESC, run_id DESC
             LIMIT $5"
        ),
        &[
            &filter.session_id.as_ref().map(SessionId::as_str),
            &filter.state.map(RunState::as_str),
            &after.as_ref().map(|cursor| cursor.created_at_ms),
            &after.as_ref().map(|cursor| cursor.run_id.as_str()),
            &count_param(limit.saturating_add(1)),
            &filter.tenant,
        ],
    )
    .await?;
    Ok(page(runs(&rows)?, limit, |run| RunCursor {
        created_at_ms: run.created_at_ms,
        run_id: run.run_id.clone(),
    }))
}

pub(super) async fn set_run_state(c: Conn, run_id: RunId, state: RunState) -> StoreResult<()> {
    let changed = execute(
        &c,
        "UPDATE runs SET state = $2 WHERE run_id = $1",
        &[&run_id.as_str(), &state.as_str()],
    )
    .await?;
    if changed == 0 {
        return Err(StoreError::UnknownRun(run_id.to_string()));
    }
    Ok(())
}

pub(super) async fn update_progress(
    c: Conn,
    run_id: RunId,
    steps: u32,
    usage: Usage,
) -> StoreResult<()> {
    execute(
        &c,
        "UPDATE runs SET steps = $2, usage = $3 WHERE run_id = $1",
        &[
            &run_id.as_str(),
            &i64::from(steps),
            &wire::usage(&usage).encode_to_vec(),
        ],
    )
    .await
    .map(|_| ())
}

pub(super) async fn finish_run(c: Conn, run_id: RunId, end: RunEnd) -> StoreResult<()> {
    execute(
        &c,
        "UPDATE runs SET state = 'finished', stop_reason = $2, stop_detail = $3, final_text = $4,
         finished_at_ms = $5 WHERE run_id = $1",
        &[
            &run_id.as_str(),
            &(wire::stop_reason(end.stop_reason) as i32),
            &end.stop_detail,
            &end.final_text,
            &end.finished_at_ms,
        ],
    )
    .await
    .map(|_| ())
}

pub(super) async fn append_event(c: Conn, row: Arc<EventRow>) -> StoreResult<()> {
    // Takes the sequence number only if it is the next one: one statement for the check and
    // the update, which every event pays.
    let taken = execute(
        &c,
        "UPDATE runs SET last_seq = $2::bigint WHERE run_id = $1 AND last_seq = $2::bigint - 1",
        &[&row.run_id, &seq_param(row.seq)],
    )
    .await?;
    if taken == 0 {
        let last: Option<i64> = query_opt(
            &c,
            "SELECT last_seq FROM runs WHERE run_id = $1",
            &[&row.run_id],
        )
        .await?
        .map(|found| get(&found, 0))
        .transpose()?;
        return Err(match last {
            None => StoreError::UnknownRun(row.run_id.clone()),
            Some(last) => StoreError::OutOfOrder {
                run_id: row.run_id.clone(),
                seq: row.seq,
                last: u64::try_from(last).unwrap_or(0),
            },
        });
    }
    execute(
        &c,
        "INSERT INTO events (run_id, seq, event) VALUES ($1, $2, $3)",
        &[&row.run_id, &seq_param(row.seq), &row.event],
    )
    .await?;
    for span in &row.spans {
        execute(
            &c,
            "INSERT INTO spans (run_id, span_id, start_unix_nano, span) VALUES ($1, $2, $3, $4)
             ON CONFLICT (run_id, span_id)
             DO UPDATE SET start_unix_nano = EXCLUDED.start_unix_nano, span = EXCLUDED.span",
            &[
                &row.run_id,
                &span.span_id,
                &span.start_unix_nano,
                &span.span,
            ],
        )
        .await?;
    }
    // Inside the batch's transaction: a kill here loses the whole batch, which no client has
    // seen (events are published after their commit).
    pause::reached(Point::StoreCommit);
    Ok(())
}

pub(super) async fn events_after(
    c: Conn,
    run_id: RunId,
    after_seq: u64,
    limit: usize,
) -> StoreResult<Vec<pb::RunEvent>> {
    query(
        &c,
        "SELECT event FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        &[&run_id.as_str(), &seq_param(after_seq), &count_param(limit)],
    )
    .await?
    .iter()
    .map(|row| decode(get::<&[u8]>(row, 0)?))
    .collect()
}

pub(super) async fn unfinished_runs(c: Conn) -> StoreResult<Vec<RunRecord>> {
    let rows = query(
        &c,
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE state <> 'finished' ORDER BY created_at_ms"),
        &[],
    )
    .await?;
    runs(&rows)
}

pub(super) async fn save_checkpoint(
    c: Conn,
    run_id: RunId,
    checkpoint: Checkpoint,
) -> StoreResult<()> {
    execute(
        &c,
        "INSERT INTO checkpoints (run_id, checkpoint_id, seq, state, created_at_ms)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (run_id) DO UPDATE SET checkpoint_id = $2, seq = $3, state = $4,
         created_at_ms = $5",
        &[
            &run_id.as_str(),
            &checkpoint.checkpoint_id,
            &seq_param(checkpoint.seq),
            &checkpoint.state,
            &checkpoint.created_at_ms,
        ],
    )
    .await
    .map(|_| ())
}

pub(super) async fn latest_checkpoint(c: Conn, run_id: RunId) -> StoreResult<Option<Checkpoint>> {
    query_opt(
        &c,
        "SELECT checkpoint_id, seq, state, created_at_ms FROM checkpoints WHERE run_id = $1",
        &[&run_id.as_str()],
    )
    .await?
    .map(|row| {
        Ok(Checkpoint {
            checkpoint_id: get(&row, 0)?,
            seq: u64::try_from(get::<i64>(&row, 1)?).map_err(corrupt)?,
            state: get(&row, 2)?,
            created_at_ms: get(&row, 3)?,
        })
    })
    .transpose()
}

pub(super) async fn record_intent(c: Conn, effect: Effect) -> StoreResult<()> {
    execute(
        &c,
        "INSERT INTO effects (run_id, call_id, tool, arguments, idempotent, intent_at_ms,
                              timeout_ms, deadline_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, airlock_now_ms() + $7 + $8)",
        &[
            &effect.run_id.as_str(),
            &effect.call_id.as_str(),
            &effect.tool,
            &effect.arguments,
            &effect.idempotent,
            &effect.intent_at_ms,
            &effect
                .timeout_ms
                .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX / 2)),
            &CALL_START_MARGIN_MS,
        ],
    )
    .await
    .map(|_| ())
}

/// Sets one column of a call's journal entry; an error when no intent was recorded for it.
async fn update_effect(
    c: Conn,
    sql: &str,
    run_id: RunId,
    call_id: CallId,
    value: Vec<u8>,
) -> StoreResult<()> {
    let changed = execute(&c, sql, &[&run_id.as_str(), &call_id.as_str(), &value]).await?;
    if changed == 0 {
        return Err(StoreError::Io(format!(
            "no intent recorded for call {call_id} of run {run_id}"
        )));
    }
    Ok(())
}

pub(super) async fn record_effect_result(
    c: Conn,
    run_id: RunId,
    call_id: CallId,
    result: pb::ToolResult,
) -> StoreResult<()> {
    update_effect(
        c,
        "UPDATE effects SET result = $3 WHERE run_id = $1 AND call_id = $2",
        run_id,
        call_id,
        result.encode_to_vec(),
    )
    .await
}

pub(super) async fn record_pending_changes(
    c: Conn,
    run_id: RunId,
    call_id: CallId,
    changes: pb::ChangeSet,
) -> StoreResult<()> {
    update_effect(
        c,
        "UPDATE effects SET pending_changes = $3 WHERE run_id = $1 AND call_id = $2",
        run_id,
        call_id,
        changes.encode_to_vec(),
    )
    .await
}

pub(super) async fn effect(c: Conn, run_id: RunId, call_id: CallId) -> StoreResult<Option<Effect>> {
    let Some(row) = query_opt(
        &c,
        "SELECT tool, arguments, idempotent, intent_at_ms, result, pending_changes, timeout_ms
         FROM effects WHERE run_id = $1 AND call_id = $2",
        &[&run_id.as_str(), &call_id.as_str()],
    )
    .await?
    else {
        return Ok(None);
    };
    Ok(Some(Effect {
        tool: get(&row, 0)?,
        arguments: get(&row, 1)?,
        idempotent: get(&row, 2)?,
        intent_at_ms: get(&row, 3)?,
        timeout_ms: get::<Option<i64>>(&row, 6)?
            .map(|ms| u64::try_from(ms).map_err(corrupt))
            .transpose()?,
        result: get::<Option<&[u8]>>(&row, 4)?.map(decode).transpose()?,
        pending_changes: get::<Option<&[u8]>>(&row, 5)?.map(decode).transpose()?,
        run_id,
        call_id,
    }))
}

pub(super) async fn save_approval(c: Conn, request: pb::ApprovalRequest) -> StoreResult<()> {
    let subject = if request.network.is_some() {
        "connection"
    } else {
        "call"
    };
    execute(
        &c,
        "INSERT INTO approvals (approval_id, run_id, call_id, request, subject)
         VALUES ($1, $2, $3, $4, $5)",
        &[
            &request.approval_id,
            &request.run_id,
            &request.call_id,
            &request.encode_to_vec(),
            &subject,
        ],
    )
    .await
    .map(|_| ())
}

pub(super) async fn resolve_approval(
    c: Conn,
    approval_id: ApprovalId,
    resolution: ApprovalResolution,
) -> StoreResult<()> {
    execute(
        &c,
        "UPDATE approvals SET decision = $2, reason = $3, decided_by = $4, resolved_at_ms = $5
         WHERE approval_id = $1",
        &[
            &approval_id.as_str(),
            &(wire::decision(resolution.decision) as i32),
            &resolution.reason,
            &resolution.decided_by.as_str(),
            &resolution.resolved_at_ms,
        ],
    )
    .await
    .map(|_| ())
}

pub(super) async fn approval_for_call(
    c: Conn,
    run_id: RunId,
    call_id: CallId,
) -> StoreResult<Option<(pb::ApprovalRequest, Option<ApprovalResolution>)>> {
    query_opt(
        &c,
        "SELECT request, decision, reason, decided_by, resolved_at_ms FROM approvals
         WHERE run_id = $1 AND call_id = $2 AND subject = 'call' ORDER BY ordinal DESC LIMIT 1",
        &[&run_id.as_str(), &call_id.as_str()],
    )
    .await?
    .map(|row| {
        Ok((
            decode(get::<&[u8]>(&row, 0)?)?,
            resolution(get(&row, 1)?, get(&row, 2)?, get(&row, 3)?, get(&row, 4)?)?,
        ))
    })
    .transpose()
}

pub(super) async fn add_session_grant(
    c: Conn,
    session_id: SessionId,
    grant_key: String,
) -> StoreResult<()> {
    execute(
        &c,
        "INSERT INTO session_grants (session_id, grant_key) VALUES ($1, $2)
         ON CONFLICT DO NOTHING",
        &[&session_id.as_str(), &grant_key],
    )
    .await
    .map(|_| ())
}

pub(super) async fn session_grants(c: Conn) -> StoreResult<Vec<String>> {
    query(&c, "SELECT grant_key FROM session_grants", &[])
        .await?
        .iter()
        .map(|row| get(row, 0))
        .collect()
}

pub(super) async fn spans(c: Conn, run_id: RunId) -> StoreResult<Vec<pb::Span>> {
    query(
        &c,
        "SELECT span FROM spans WHERE run_id = $1 ORDER BY start_unix_nano, span_id",
        &[&run_id.as_str()],
    )
    .await?
    .iter()
    .map(|row| decode(get::<&[u8]>(row, 0)?))
    .collect()
}

pub(super) async fn record_exchange(c: Conn, run_id: RunId, exchange: String) -> StoreResult<()> {
    execute(
        &c,
        "INSERT INTO exchanges (run_id, ordinal, exchange)
         VALUES ($1, (SELECT COUNT(*) FROM exchanges WHERE run_id = $1), $2)",
        &[&run_id.as_str(), &exchange],
    )
    .await
    .map(|_| ())
}

pub(super) async fn exchanges(c: Conn, run_id: RunId) -> StoreResult<Vec<String>> {
    query(
        &c,
        "SELECT exchange FROM exchanges WHERE run_id = $1 ORDER BY ordinal",
        &[&run_id.as_str()],
    )
    .await?
    .iter()
    .map(|row| get(row, 0))
    .collect()
}

const OUTPUT_COLUMNS: &str = "o.execution_id, o.digest, o.size, o.created_at_ms";

fn outputs(rows: &[Row]) -> StoreResult<Vec<OutputRecord>> {
    rows.iter()
        .map(|row| {
            Ok(OutputRecord {
                execution_id: ExecutionId::from_stored(get::<String>(row, 0)?),
                digest: get(row, 1)?,
                size: u64::try_from(get::<i64>(row, 2)?).map_err(corrupt)?,
                created_at_ms: get(row, 3)?,
            })
        })
        .collect()
}

pub(super) async fn record_output(c: Conn, output: OutputRecord) -> StoreResult<()> {
    execute(
        &c,
        "INSERT INTO outputs (execution_id, digest, size, created_at_ms) VALUES ($1, $2, $3, $4)
         ON CONFLICT (execution_id) DO UPDATE SET digest = EXCLUDED.digest,
         size = EXCLUDED.size, created_at_ms = EXCLUDED.created_at_ms",
        &[
            &output.execution_id.as_str(),
            &output.digest,
            &i64::try_from(output.size).unwrap_or(i64::MAX),
            &output.created_at_ms,
        ],
    )
    .await
    .map(|_| ())
}

pub(super) async fn output(
    c: Conn,
    execution_id: ExecutionId,
) -> StoreResult<Option<OutputRecord>> {
    let rows = query(
        &c,
        &format!("SELECT {OUTPUT_COLUMNS} FROM outputs o WHERE o.execution_id = $1"),
        &[&execution_id.as_str()],
    )
    .await?;
    Ok(outputs(&rows)?.pop())
}

pub(super) async fn oldest_outputs(c: Conn, limit: usize) -> StoreResult<Vec<OutputRecord>> {
    let rows = query(
        &c,
        &format!(
            "SELECT {OUTPUT_COLUMNS} FROM outputs o
             ORDER BY o.created_at_ms, o.execution_id LIMIT $1"
        ),
        &[&count_param(limit)],
    )
    .await?;
    outputs(&rows)
}

pub(super) async fn outputs_before(
    c: Conn,
    before_ms: i64,
    limit: usize,
) -> StoreResult<Vec<OutputRecord>> {
    let rows = query(
        &c,
        &format!(
            "SELECT {OUTPUT_COLUMNS} FROM outputs o
             LEFT JOIN execution_owners e ON e.execution_id = o.execution_id
             LEFT JOIN runs r ON r.run_id = e.run_id
             WHERE o.created_at_ms < $1 AND (r.run_id IS NULL OR r.state = 'finished')
             ORDER BY o.created_at_ms, o.execution_id LIMIT $2"
        ),
        &[&before_ms, &count_param(limit)],
    )
    .await?;
    outputs(&rows)
}

pub(super) async fn remove_output(c: Conn, execution_id: ExecutionId) -> StoreResult<()> {
    execute(
        &c,
        "DELETE FROM outputs WHERE execution_id = $1",
        &[&execution_id.as_str()],
    )
    .await
    .map(|_| ())
}

pub(super) async fn output_references(c: Conn, digest: String) -> StoreResult<u64> {
    let row = query_opt(
        &c,
        "SELECT COUNT(*) FROM outputs WHERE digest = $1",
        &[&digest],
    )
    .await?;
    row.map_or(Ok(0), |row| {
        u64::try_from(get::<i64>(&row, 0)?).map_err(corrupt)
    })
}

pub(super) async fn record_execution_owner(
    c: Conn,
    execution_id: ExecutionId,
    owner: ExecutionOwner,
) -> StoreResult<()> {
    execute(
        &c,
        "INSERT INTO execution_owners (execution_id, tenant, run_id, started_at_ms)
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        &[
            &execution_id.as_str(),
            &owner.tenant,
            &owner.run_id.as_ref().map(RunId::as_str),
            &owner.started_at_ms,
        ],
    )
    .await
    .map(|_| ())
}

pub(super) async fn forget_executions(c: Conn, before_ms: i64) -> StoreResult<u64> {
    // An owner goes only with its output: a kept output without one would read as the
    // default tenant's.
    execute(
        &c,
        "DELETE FROM execution_owners WHERE started_at_ms < $1
         AND execution_id NOT IN (SELECT execution_id FROM outputs)
         AND (run_id IS NULL OR run_id NOT IN (SELECT run_id FROM runs WHERE state <> 'finished'))",
        &[&before_ms],
    )
    .await
}

pub(super) async fn execution_owner(
    c: Conn,
    execution_id: ExecutionId,
) -> StoreResult<Option<String>> {
    query_opt(
        &c,
        "SELECT tenant FROM execution_owners WHERE execution_id = $1",
        &[&execution_id.as_str()],
    )
    .await?
    .map(|row| get(&row, 0))
    .transpose()
}

pub(super) async fn delete_finished_runs(
    c: Conn,
    before_ms: i64,
    limit: usize,
) -> StoreResult<Deleted> {
    let runs: Vec<String> = query(
        &c,
        "SELECT run_id FROM runs WHERE state = 'finished' AND finished_at_ms < $1
         ORDER BY finished_at_ms LIMIT $2",
        &[&before_ms, &count_param(limit)],
    )
    .await?
    .iter()
    .map(|row| get(row, 0))
    .collect::<StoreResult<_>>()?;
    // One statement per table for the whole page of runs, the run rows last (the others
    // refer to them).
    for table in [
        "events",
        "checkpoints",
        "effects",
        "approvals",
        "spans",
        "exchanges",
        "run_commands",
        "runs",
    ] {
        execute(
            &c,
            &format!("DELETE FROM {table} WHERE run_id = ANY($1)"),
            &[&runs],
        )
        .await?;
    }
    // Sessions as old, with no run left, go too (and their "always" approvals).
    let empty = "SELECT session_id FROM sessions WHERE created_at_ms < $1
                 AND session_id NOT IN (SELECT session_id FROM runs)";
    execute(
        &c,
        &format!("DELETE FROM session_grants WHERE session_id IN ({empty})"),
        &[&before_ms],
    )
    .await?;
    let sessions = execute(
        &c,
        &format!("DELETE FROM sessions WHERE session_id IN ({empty})"),
        &[&before_ms],
    )
    .await?;
    Ok(Deleted {
        runs: runs.len() as u64,
        sessions,
    })
}
