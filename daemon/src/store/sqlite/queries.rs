//! The statements of the SQLite store, one function per request, each given the writer's
//! connection (inside a batch's transaction for writes). Records are typed here and nowhere
//! else: ids, stop reasons, decisions and usage go in and out of their column forms.

use airlock_proto::v1 as pb;
use prost::Message as _;
use rusqlite::{Connection, OptionalExtension, Params, Row, params};

use crate::domain::Usage;
use crate::ids::{ApprovalId, CallId, ExecutionId, RunId, SessionId};
use crate::store::rows::{
    EventRow, RawRun, RawSession, corrupt, decode, page, resolution, workspace_column,
};
use crate::store::{
    ApprovalResolution, Checkpoint, Deleted, Effect, ExecutionOwner, OutputRecord, RunCursor,
    RunEnd, RunFilter, RunRecord, RunState, SessionCursor, SessionRecord, SessionSummary,
    StoreError, StoreResult,
};
use crate::wire;

const RUN_COLUMNS: &str = "run_id, session_id, state, start, model, workspace, trace_id, created_at_ms, \
     finished_at_ms, stop_reason, stop_detail, final_text, usage, steps, last_seq, tenant";

fn io(err: rusqlite::Error) -> StoreError {
    StoreError::Io(err.to_string())
}

fn seq_param(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

fn count_param(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Runs `sql` through the connection's statement cache: parsing and planning a statement
/// cost more than the small writes the run loop makes for every event.
fn execute(connection: &Connection, sql: &str, params: impl Params) -> StoreResult<usize> {
    connection
        .prepare_cached(sql)
        .and_then(|mut statement| statement.execute(params))
        .map_err(io)
}

/// [`execute`] for a statement that returns at most one row.
fn query_row<T>(
    connection: &Connection,
    sql: &str,
    params: impl Params,
    map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Option<T>> {
    connection
        .prepare_cached(sql)
        .and_then(|mut statement| statement.query_row(params, map).optional())
        .map_err(io)
}

/// [`execute`] for a statement that returns rows.
fn query_rows<T>(
    connection: &Connection,
    sql: &str,
    params: impl Params,
    map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Vec<T>> {
    let mut statement = connection.prepare_cached(sql).map_err(io)?;
    let rows = statement.query_map(params, map).map_err(io)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(io)
}

fn raw_run(row: &Row<'_>) -> rusqlite::Result<RawRun> {
    Ok(RawRun {
        run_id: row.get(0)?,
        session_id: row.get(1)?,
        state: row.get(2)?,
        start: row.get(3)?,
        model: row.get(4)?,
        workspace: row.get(5)?,
        trace_id: row.get(6)?,
        created_at_ms: row.get(7)?,
        finished_at_ms: row.get(8)?,
        stop_reason: row.get(9)?,
        stop_detail: row.get(10)?,
        final_text: row.get(11)?,
        usage: row.get(12)?,
        steps: row.get(13)?,
        last_seq: row.get(14)?,
        tenant: row.get(15)?,
    })
}

pub(super) fn create_session(c: &Connection, session: &SessionRecord) -> StoreResult<()> {
    let labels =
        serde_json::to_string(&session.labels).map_err(|e| StoreError::Io(e.to_string()))?;
    execute(
        c,
        "INSERT INTO sessions (session_id, workspace, labels, created_at_ms, tenant, settings)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            session.session_id.as_str(),
            workspace_column(&session.workspace),
            labels,
            session.created_at_ms,
            session.tenant,
            session.settings.encode_to_vec(),
        ],
    )
    .map(|_| ())
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

fn raw_session(row: &Row<'_>) -> rusqlite::Result<RawSession> {
    Ok(RawSession {
        session_id: row.get(0)?,
        workspace: row.get(1)?,
        labels: row.get(2)?,
        created_at_ms: row.get(3)?,
        tenant: row.get(4)?,
        settings: row.get(5)?,
        runs: row.get(6)?,
        last_run_id: row.get(7)?,
        last_active_ms: row.get(8)?,
        running: row.get(9)?,
    })
}

pub(super) fn session_summary(
    c: &Connection,
    session_id: &SessionId,
) -> StoreResult<Option<SessionSummary>> {
    query_row(
        c,
        &format!("SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.session_id = ?1"),
        params![session_id.as_str()],
        raw_session,
    )?
    .map(RawSession::decode)
    .transpose()
}

pub(super) fn session(
    c: &Connection,
    session_id: &SessionId,
) -> StoreResult<Option<SessionRecord>> {
    Ok(session_summary(c, session_id)?.map(|summary| summary.session))
}

pub(super) fn list_sessions(
    c: &Connection,
    tenant: &str,
    limit: usize,
    after: Option<&SessionCursor>,
) -> StoreResult<(Vec<SessionSummary>, Option<SessionCursor>)> {
    let rows = query_rows(
        c,
        &format!(
            "SELECT {SESSION_COLUMNS} FROM sessions s
             WHERE s.tenant = ?1
               AND (?2 IS NULL OR last_active_ms < ?2
                    OR (last_active_ms = ?2 AND s.session_id < ?3))
             ORDER BY last_active_ms DESC, s.session_id DESC
             LIMIT ?4"
        ),
        params![
            tenant,
            after.map(|cursor| cursor.last_active_ms),
            after.map(|cursor| cursor.session_id.as_str()),
            count_param(limit.saturating_add(1)),
        ],
        raw_session,
    )?;
    let sessions = rows
        .into_iter()
        .map(RawSession::decode)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(page(sessions, limit, |summary| SessionCursor {
        last_active_ms: summary.last_active_ms,
        session_id: summary.session.session_id.clone(),
    }))
}

pub(super) fn create_run(c: &Connection, run: &RunRecord, first: &pb::RunEvent) -> StoreResult<()> {
    if first.run_id != run.run_id.as_str() || first.seq != 1 {
        return Err(StoreError::OutOfOrder {
            run_id: first.run_id.clone(),
            seq: first.seq,
            last: 0,
        });
    }
    execute(
        c,
        &format!(
            "INSERT INTO runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
        ),
        params![
            run.run_id.as_str(),
            run.session_id.as_str(),
            run.state.as_str(),
            run.start.encode_to_vec(),
            run.model,
            workspace_column(&run.workspace),
            run.trace_id.as_str(),
            run.created_at_ms,
            run.finished_at_ms,
            run.stop_reason.map(|r| wire::stop_reason(r) as i32),
            run.stop_detail,
            run.final_text,
            wire::usage(&run.usage).encode_to_vec(),
            i64::from(run.steps),
            seq_param(first.seq),
            run.tenant,
        ],
    )?;
    execute(
        c,
        "INSERT INTO events (run_id, seq, event) VALUES (?1, ?2, ?3)",
        params![first.run_id, seq_param(first.seq), first.encode_to_vec()],
    )
    .map(|_| ())
}

pub(super) fn run(c: &Connection, run_id: &RunId) -> StoreResult<Option<RunRecord>> {
    query_row(
        c,
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1"),
        params![run_id.as_str()],
        raw_run,
    )?
    .map(RawRun::decode)
    .transpose()
}

pub(super) fn list_runs(
    c: &Connection,
    filter: &RunFilter,
    limit: usize,
    after: Option<&RunCursor>,
) -> StoreResult<(Vec<RunRecord>, Option<RunCursor>)> {
    let rows = query_rows(
        c,
        &format!(
            "SELECT {RUN_COLUMNS} FROM runs
             WHERE (?1 IS NULL OR session_id = ?1)
               AND (?2 IS NULL OR state = ?2)
               AND (?3 IS NULL OR created_at_ms < ?3 OR (created_at_ms = ?3 AND run_id < ?4))
               AND (?6 IS NULL OR tenant = ?6)
             ORDER BY created_at_ms DESC, run_id DESC
             LIMIT ?5"
        ),
        params![
            filter.session_id.as_ref().map(SessionId::as_str),
            filter.state.map(RunState::as_str),
            after.map(|cursor| cursor.created_at_ms),
            after.map(|cursor| cursor.run_id.as_str()),
            count_param(limit.saturating_add(1)),
            filter.tenant,
        ],
        raw_run,
    )?;
    let runs = rows
        .into_iter()
        .map(RawRun::decode)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(page(runs, limit, |run| RunCursor {
        created_at_ms: run.created_at_ms,
        run_id: run.run_id.clone(),
    }))
}

pub(super) fn set_run_state(c: &Connection, run_id: &RunId, state: RunState) -> StoreResult<()> {
    let changed = execute(
        c,
        "UPDATE runs SET state = ?2 WHERE run_id = ?1",
        params![run_id.as_str(), state.as_str()],
    )?;
    if changed == 0 {
        return Err(StoreError::UnknownRun(run_id.to_string()));
    }
    Ok(())
}

pub(super) fn update_progress(
    c: &Connection,
    run_id: &RunId,
    steps: u32,
    usage: &Usage,
) -> StoreResult<()> {
    execute(
        c,
        "UPDATE runs SET steps = ?2, usage = ?3 WHERE run_id = ?1",
        params![
            run_id.as_str(),
            i64::from(steps),
            wire::usage(usage).encode_to_vec()
        ],
    )
    .map(|_| ())
}

pub(super) fn finish_run(c: &Connection, run_id: &RunId, end: &RunEnd) -> StoreResult<()> {
    execute(
        c,
        "UPDATE runs SET state = 'finished', stop_reason = ?2, stop_detail = ?3, final_text = ?4, finished_at_ms = ?5 WHERE run_id = ?1",
        params![
            run_id.as_str(),
            wire::stop_reason(end.stop_reason) as i32,
            end.stop_detail,
            end.final_text,
            end.finished_at_ms
        ],
    )
    .map(|_| ())
}

pub(super) fn append_event(c: &Connection, row: &EventRow) -> StoreResult<()> {
    // Takes the sequence number only if it is the next one: one statement for the check and
    // the update, which every event pays.
    let taken = execute(
        c,
        "UPDATE runs SET last_seq = ?2 WHERE run_id = ?1 AND last_seq = ?2 - 1",
        params![row.run_id, seq_param(row.seq)],
    )?;
    if taken == 0 {
        let last: Option<i64> = query_row(
            c,
            "SELECT last_seq FROM runs WHERE run_id = ?1",
            params![row.run_id],
            |row| row.get(0),
        )?;
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
        c,
        "INSERT INTO events (run_id, seq, event) VALUES (?1, ?2, ?3)",
        params![row.run_id, seq_param(row.seq), row.event],
    )?;
    for span in &row.spans {
        execute(
            c,
            "INSERT OR REPLACE INTO spans (run_id, span_id, start_unix_nano, span) VALUES (?1, ?2, ?3, ?4)",
            params![row.run_id, span.span_id, span.start_unix_nano, span.span],
        )?;
    }
    Ok(())
}

pub(super) fn events_after(
    c: &Connection,
    run_id: &RunId,
    after_seq: u64,
    limit: usize,
) -> StoreResult<Vec<pb::RunEvent>> {
    query_rows(
        c,
        "SELECT event FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        params![run_id.as_str(), seq_param(after_seq), count_param(limit)],
        |row| row.get::<_, Vec<u8>>(0),
    )?
    .iter()
    .map(|blob| decode(blob))
    .collect()
}

pub(super) fn unfinished_runs(c: &Connection) -> StoreResult<Vec<RunRecord>> {
    query_rows(
        c,
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE state != 'finished' ORDER BY created_at_ms"),
        [],
        raw_run,
    )?
    .into_iter()
    .map(RawRun::decode)
    .collect()
}

pub(super) fn save_checkpoint(
    c: &Connection,
    run_id: &RunId,
    checkpoint: &Checkpoint,
) -> StoreResult<()> {
    execute(
        c,
        "INSERT INTO checkpoints (run_id, checkpoint_id, seq, state, created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (run_id) DO UPDATE SET checkpoint_id = ?2, seq = ?3, state = ?4, created_at_ms = ?5",
        params![
            run_id.as_str(),
            checkpoint.checkpoint_id,
            seq_param(checkpoint.seq),
            checkpoint.state,
            checkpoint.created_at_ms
        ],
    )
    .map(|_| ())
}

pub(super) fn latest_checkpoint(c: &Connection, run_id: &RunId) -> StoreResult<Option<Checkpoint>> {
    query_row(
        c,
        "SELECT checkpoint_id, seq, state, created_at_ms FROM checkpoints WHERE run_id = ?1",
        params![run_id.as_str()],
        |row| {
            Ok(Checkpoint {
                checkpoint_id: row.get(0)?,
                seq: u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
                state: row.get(2)?,
                created_at_ms: row.get(3)?,
            })
        },
    )
}

pub(super) fn record_intent(c: &Connection, effect: &Effect) -> StoreResult<()> {
    execute(
        c,
        "INSERT INTO effects (run_id, call_id, tool, arguments, idempotent, intent_at_ms, timeout_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            effect.run_id.as_str(),
            effect.call_id.as_str(),
            effect.tool,
            effect.arguments,
            effect.idempotent,
            effect.intent_at_ms,
            effect.timeout_ms.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
        ],
    )
    .map(|_| ())
}

pub(super) fn record_effect_result(
    c: &Connection,
    run_id: &RunId,
    call_id: &CallId,
    result: &pb::ToolResult,
) -> StoreResult<()> {
    let changed = execute(
        c,
        "UPDATE effects SET result = ?3 WHERE run_id = ?1 AND call_id = ?2",
        params![run_id.as_str(), call_id.as_str(), result.encode_to_vec()],
    )?;
    if changed == 0 {
        return Err(StoreError::Io(format!(
            "no intent recorded for call {call_id} of run {run_id}"
        )));
    }
    Ok(())
}

pub(super) fn record_pending_changes(
    c: &Connection,
    run_id: &RunId,
    call_id: &CallId,
    changes: &pb::ChangeSet,
) -> StoreResult<()> {
    let changed = execute(
        c,
        "UPDATE effects SET pending_changes = ?3 WHERE run_id = ?1 AND call_id = ?2",
        params![run_id.as_str(), call_id.as_str(), changes.encode_to_vec()],
    )?;
    if changed == 0 {
        return Err(StoreError::Io(format!(
            "no intent recorded for call {call_id} of run {run_id}"
        )));
    }
    Ok(())
}

pub(super) fn effect(
    c: &Connection,
    run_id: &RunId,
    call_id: &CallId,
) -> StoreResult<Option<Effect>> {
    let row = query_row(
        c,
        "SELECT tool, arguments, idempotent, intent_at_ms, result, pending_changes, timeout_ms FROM effects WHERE run_id = ?1 AND call_id = ?2",
        params![run_id.as_str(), call_id.as_str()],
        |row| {
            Ok((
                (
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, bool>(2)?,
                    row.get::<_, i64>(3)?,
                ),
                row.get::<_, Option<Vec<u8>>>(4)?,
                row.get::<_, Option<Vec<u8>>>(5)?,
                row.get::<_, Option<i64>>(6)?,
            ))
        },
    )?;
    row.map(
        |((tool, arguments, idempotent, intent_at_ms), result, pending, timeout_ms)| {
            Ok(Effect {
                run_id: run_id.clone(),
                call_id: call_id.clone(),
                tool,
                arguments,
                idempotent,
                intent_at_ms,
                timeout_ms: timeout_ms
                    .map(|ms| u64::try_from(ms).map_err(corrupt))
                    .transpose()?,
                result: result.map(|bytes| decode(&bytes)).transpose()?,
                pending_changes: pending.map(|bytes| decode(&bytes)).transpose()?,
            })
        },
    )
    .transpose()
}

pub(super) fn save_approval(c: &Connection, request: &pb::ApprovalRequest) -> StoreResult<()> {
    let subject = if request.network.is_some() {
        "connection"
    } else {
        "call"
    };
    execute(
        c,
        "INSERT INTO approvals (approval_id, run_id, call_id, request, subject) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            request.approval_id,
            request.run_id,
            request.call_id,
            request.encode_to_vec(),
            subject
        ],
    )
    .map(|_| ())
}

pub(super) fn resolve_approval(
    c: &Connection,
    approval_id: &ApprovalId,
    resolution: &ApprovalResolution,
) -> StoreResult<()> {
    execute(
        c,
        "UPDATE approvals SET decision = ?2, reason = ?3, decided_by = ?4, resolved_at_ms = ?5 WHERE approval_id = ?1",
        params![
            approval_id.as_str(),
            wire::decision(resolution.decision) as i32,
            resolution.reason,
            resolution.decided_by.as_str(),
            resolution.resolved_at_ms
        ],
    )
    .map(|_| ())
}

pub(super) fn approval_for_call(
    c: &Connection,
    run_id: &RunId,
    call_id: &CallId,
) -> StoreResult<Option<(pb::ApprovalRequest, Option<ApprovalResolution>)>> {
    let row = query_row(
        c,
        "SELECT request, decision, reason, decided_by, resolved_at_ms FROM approvals
         WHERE run_id = ?1 AND call_id = ?2 AND subject = 'call' ORDER BY rowid DESC LIMIT 1",
        params![run_id.as_str(), call_id.as_str()],
        |row| {
            Ok((
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, Option<i32>>(1)?,
                row.get::<_, Option<String>>(2)?,
                row.get::<_, Option<String>>(3)?,
                row.get::<_, Option<i64>>(4)?,
            ))
        },
    )?;
    row.map(|(request, decision, reason, decided_by, resolved_at_ms)| {
        Ok((
            decode(&request)?,
            resolution(decision, reason, decided_by, resolved_at_ms)?,
        ))
    })
    .transpose()
}

pub(super) fn add_session_grant(
    c: &Connection,
    session_id: &SessionId,
    grant_key: &str,
) -> StoreResult<()> {
    execute(
        c,
        "INSERT OR IGNORE INTO session_grants (session_id, grant_key) VALUES (?1, ?2)",
        params![session_id.as_str(), grant_key],
    )
    .map(|_| ())
}

pub(super) fn session_grants(c: &Connection) -> StoreResult<Vec<String>> {
    query_rows(c, "SELECT grant_key FROM session_grants", [], |row| {
        row.get(0)
    })
}

pub(super) fn spans(c: &Connection, run_id: &RunId) -> StoreResult<Vec<pb::Span>> {
    query_rows(
        c,
        "SELECT span FROM spans WHERE run_id = ?1 ORDER BY start_unix_nano, span_id",
        params![run_id.as_str()],
        |row| row.get::<_, Vec<u8>>(0),
    )?
    .iter()
    .map(|blob| decode(blob))
    .collect()
}

pub(super) fn record_exchange(c: &Connection, run_id: &RunId, exchange: &str) -> StoreResult<()> {
    execute(
        c,
        "INSERT INTO exchanges (run_id, ordinal, exchange)
         VALUES (?1, (SELECT COUNT(*) FROM exchanges WHERE run_id = ?1), ?2)",
        params![run_id.as_str(), exchange],
    )?;
    Ok(())
}

pub(super) fn exchanges(c: &Connection, run_id: &RunId) -> StoreResult<Vec<String>> {
    query_rows(
        c,
        "SELECT exchange FROM exchanges WHERE run_id = ?1 ORDER BY ordinal",
        params![run_id.as_str()],
        |row| row.get(0),
    )
}

fn output_from_row(row: &Row<'_>) -> rusqlite::Result<OutputRecord> {
    Ok(OutputRecord {
        execution_id: ExecutionId::from_stored(row.get::<_, String>(0)?),
        digest: row.get(1)?,
        size: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
        created_at_ms: row.get(3)?,
    })
}

pub(super) fn record_output(c: &Connection, output: &OutputRecord) -> StoreResult<()> {
    execute(
        c,
        "INSERT OR REPLACE INTO outputs (execution_id, digest, size, created_at_ms) VALUES (?1, ?2, ?3, ?4)",
        params![
            output.execution_id.as_str(),
            output.digest,
            i64::try_from(output.size).unwrap_or(i64::MAX),
            output.created_at_ms
        ],
    )
    .map(|_| ())
}

pub(super) fn output(
    c: &Connection,
    execution_id: &ExecutionId,
) -> StoreResult<Option<OutputRecord>> {
    query_row(
        c,
        "SELECT execution_id, digest, size, created_at_ms FROM outputs WHERE execution_id = ?1",
        params![execution_id.as_str()],
        output_from_row,
    )
}

pub(super) fn oldest_outputs(c: &Connection, limit: usize) -> StoreResult<Vec<OutputRecord>> {
    query_rows(
        c,
        "SELECT execution_id, digest, size, created_at_ms FROM outputs
         ORDER BY created_at_ms, execution_id LIMIT ?1",
        params![count_param(limit)],
        output_from_row,
    )
}

pub(super) fn outputs_before(
    c: &Connection,
    before_ms: i64,
    limit: usize,
) -> StoreResult<Vec<OutputRecord>> {
    query_rows(
        c,
        "SELECT o.execution_id, o.digest, o.size, o.created_at_ms FROM outputs o
         LEFT JOIN execution_owners e ON e.execution_id = o.execution_id
         LEFT JOIN runs r ON r.run_id = e.run_id
         WHERE o.created_at_ms < ?1 AND (r.run_id IS NULL OR r.state = 'finished')
         ORDER BY o.created_at_ms, o.execution_id LIMIT ?2",
        params![before_ms, count_param(limit)],
        output_from_row,
    )
}

pub(super) fn remove_output(c: &Connection, execution_id: &ExecutionId) -> StoreResult<()> {
    execute(
        c,
        "DELETE FROM outputs WHERE execution_id = ?1",
        params![execution_id.as_str()],
    )
    .map(|_| ())
}

pub(super) fn output_references(c: &Connection, digest: &str) -> StoreResult<u64> {
    let count: Option<i64> = query_row(
        c,
        "SELECT COUNT(*) FROM outputs WHERE digest = ?1",
        params![digest],
        |row| row.get(0),
    )?;
    Ok(count.and_then(|n| u64::try_from(n).ok()).unwrap_or(0))
}

pub(super) fn record_execution_owner(
    c: &Connection,
    execution_id: &ExecutionId,
    owner: &ExecutionOwner,
) -> StoreResult<()> {
    execute(
        c,
        "INSERT OR IGNORE INTO execution_owners (execution_id, tenant, run_id, started_at_ms)
         VALUES (?1, ?2, ?3, ?4)",
        params![
            execution_id.as_str(),
            owner.tenant,
            owner.run_id.as_ref().map(RunId::as_str),
            owner.started_at_ms
        ],
    )
    .map(|_| ())
}

pub(super) fn forget_executions(c: &Connection, before_ms: i64) -> StoreResult<u64> {
    // An owner goes only with its output: a kept output without one would read as the
    // default tenant's.
    execute(
        c,
        "DELETE FROM execution_owners WHERE started_at_ms < ?1
         AND execution_id NOT IN (SELECT execution_id FROM outputs)
         AND (run_id IS NULL OR run_id NOT IN (SELECT run_id FROM runs WHERE state != 'finished'))",
        params![before_ms],
    )
    .map(|rows| rows as u64)
}

pub(super) fn execution_owner(
    c: &Connection,
    execution_id: &ExecutionId,
) -> StoreResult<Option<String>> {
    query_row(
        c,
        "SELECT tenant FROM execution_owners WHERE execution_id = ?1",
        params![execution_id.as_str()],
        |row| row.get(0),
    )
}

pub(super) fn delete_finished_runs(
    c: &Connection,
    before_ms: i64,
    limit: usize,
) -> StoreResult<Deleted> {
    let runs: Vec<String> = query_rows(
        c,
        "SELECT run_id FROM runs WHERE state = 'finished' AND finished_at_ms < ?1
         ORDER BY finished_at_ms LIMIT ?2",
        params![before_ms, count_param(limit)],
        |row| row.get(0),
    )?;
    for run_id in &runs {
        for table in [
            "events",
            "checkpoints",
            "effects",
            "approvals",
            "spans",
            "exchanges",
        ] {
            execute(
                c,
                &format!("DELETE FROM {table} WHERE run_id = ?1"),
                params![run_id],
            )?;
        }
        execute(c, "DELETE FROM runs WHERE run_id = ?1", params![run_id])?;
    }
    // Sessions as old, with no run left, go too (and their "always" approvals).
    let empty = "SELECT session_id FROM sessions WHERE created_at_ms < ?1
                 AND session_id NOT IN (SELECT session_id FROM runs)";
    execute(
        c,
        &format!("DELETE FROM session_grants WHERE session_id IN ({empty})"),
        params![before_ms],
    )?;
    let sessions = execute(
        c,
        &format!("DELETE FROM sessions WHERE session_id IN ({empty})"),
        params![before_ms],
    )?;
    Ok(Deleted {
        runs: runs.len() as u64,
        sessions: sessions as u64,
    })
}
