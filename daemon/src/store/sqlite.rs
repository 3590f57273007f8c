//! The embedded store: one SQLite file in WAL mode, migrated by the daemon on open.
//!
//! Durability: commits use `synchronous = NORMAL` in WAL mode, which survives any crash of
//! the daemon (the case resumption is built for) but may lose the last commits on a power
//! failure; `StoreOptions::fsync_every_commit` trades speed for that too.
//! One connection behind a mutex: statements are short, and serialising them makes the
//! per-run sequence check race-free.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use airlock_proto::v1 as pb;
use prost::Message as _;
use rusqlite::{Connection, OptionalExtension, Params, Row, params};

use super::{
    ApprovalResolution, Checkpoint, Effect, OutputRecord, RunCursor, RunEnd, RunFilter, RunRecord,
    RunState, SessionRecord, Store, StoreError, StoreResult,
};

/// Each entry moves the schema one version forward; the index is the version it leaves.
/// Never edit a shipped entry: add one.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, runs, the event log.
    r#"
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        labels TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    );
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        state TEXT NOT NULL,
        start BLOB NOT NULL,
        model TEXT NOT NULL,
        workspace TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        finished_at_ms INTEGER,
        stop_reason INTEGER,
        stop_detail TEXT NOT NULL DEFAULT '',
        final_text TEXT NOT NULL DEFAULT '',
        usage BLOB NOT NULL,
        steps INTEGER NOT NULL DEFAULT 0,
        last_seq INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX runs_by_time ON runs(created_at_ms DESC, run_id DESC);
    CREATE INDEX runs_by_session ON runs(session_id, created_at_ms DESC);
    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        seq INTEGER NOT NULL,
        event BLOB NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    "#,
    // 2: what resumption and tracing need: checkpoints, the effect journal, approvals and
    // session grants, spans, kept outputs.
    r#"
    CREATE TABLE checkpoints (
        run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
        checkpoint_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        state BLOB NOT NULL,
        created_at_ms INTEGER NOT NULL
    );
    CREATE TABLE effects (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        call_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        idempotent INTEGER NOT NULL,
        intent_at_ms INTEGER NOT NULL,
        result BLOB,
        PRIMARY KEY (run_id, call_id)
    ) WITHOUT ROWID;
    CREATE TABLE approvals (
        approval_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        call_id TEXT NOT NULL,
        request BLOB NOT NULL,
        decision INTEGER,
        reason TEXT,
        decided_by TEXT,
        resolved_at_ms INTEGER
    );
    CREATE INDEX approvals_by_call ON approvals(run_id, call_id);
    CREATE TABLE session_grants (
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        grant_key TEXT NOT NULL,
        PRIMARY KEY (session_id, grant_key)
    ) WITHOUT ROWID;
    CREATE TABLE spans (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        span_id TEXT NOT NULL,
        start_unix_nano INTEGER NOT NULL,
        span BLOB NOT NULL,
        PRIMARY KEY (run_id, span_id)
    ) WITHOUT ROWID;
    CREATE TABLE outputs (
        execution_id TEXT PRIMARY KEY,
        digest TEXT NOT NULL,
        size INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL
    );
    CREATE INDEX outputs_by_age ON outputs(created_at_ms, execution_id);
    CREATE INDEX outputs_by_digest ON outputs(digest);
    "#,
    // 3: the tenant that owns each session, run and tool execution. Rows written before
    // tenants existed belong to `default`, the only tenant there was.
    r#"
    ALTER TABLE sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
    ALTER TABLE runs ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
    CREATE INDEX runs_by_tenant ON runs(tenant, created_at_ms DESC);
    CREATE TABLE execution_owners (
        execution_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL
    ) WITHOUT ROWID;
    "#,
];

/// Statements kept prepared: every distinct statement the store runs (about forty), so the
/// run loop's writes never parse SQL again.
const STATEMENT_CACHE_CAPACITY: usize = 64;

/// How the store is opened.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// fsync on every commit (`synchronous = FULL`): survives power loss, costs a disk flush
    /// per event.
    pub fsync_every_commit: bool,
}

pub struct SqliteStore {
    connection: Mutex<Connection>,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, checks its integrity and migrates it.
    /// A damaged file is refused, never repaired by guesswork.
    pub fn open(path: &Path, options: &StoreOptions) -> StoreResult<SqliteStore> {
        let display = path.display().to_string();
        let open_error = |err: rusqlite::Error| StoreError::Open {
            path: display.clone(),
            message: err.to_string(),
        };
        let damaged = |message: String| StoreError::Damaged {
            path: display.clone(),
            message,
        };
        let in_use = || StoreError::Open {
            path: display.clone(),
            message: "another process (another airlockd on the same state dir?) holds it".into(),
        };
        let connection = Connection::open(path).map_err(open_error)?;
        // The daemon is the file's only user. Holding its lock for the daemon's lifetime
        // spares every commit the shared-memory index and its file locks, and it keeps a
        // second daemon pointed at the same state dir out (it must be set before WAL is
        // first used to take effect).
        connection
            .execute_batch("PRAGMA locking_mode = EXCLUSIVE")
            .map_err(open_error)?;
        // A file that is not a database fails on its first read; report it as damaged.
        let mode: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|err| match err.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                    in_use()
                }
                _ => damaged(err.to_string()),
            })?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(damaged(format!(
                "cannot switch to WAL (journal mode {mode})"
            )));
        }
        let synchronous = if options.fsync_every_commit {
            "FULL"
        } else {
            "NORMAL"
        };
        connection
            .execute_batch(&format!(
                "PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;"
            ))
            .map_err(open_error)?;
        let check: String = connection
            .query_row("PRAGMA quick_check", [], |row| row.get(0))
            .map_err(|err| damaged(err.to_string()))?;
        if check != "ok" {
            return Err(damaged(format!("integrity check failed: {check}")));
        }
        migrate(&connection).map_err(damaged)?;
        // An empty write takes the exclusive lock now, and exclusive mode keeps it: a second
        // daemon is refused at its start rather than at its first event.
        connection
            .execute_batch("BEGIN EXCLUSIVE; COMMIT;")
            .map_err(|err| match err.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                    in_use()
                }
                _ => open_error(err),
            })?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        Ok(SqliteStore {
            connection: Mutex::new(connection),
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn with<T>(&self, work: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        let mut connection = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        work(&mut connection).map_err(|err| StoreError::Io(err.to_string()))
    }
}

fn migrate(connection: &Connection) -> Result<(), String> {
    let version: i64 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|err| err.to_string())?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(format!(
            "schema version {version} is newer than this daemon knows ({known}); refusing to touch it"
        ));
    }
    for (index, migration) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(version).unwrap_or(0))
    {
        let next = index + 1;
        connection
            .execute_batch(&format!(
                "BEGIN; {migration}; PRAGMA user_version = {next}; COMMIT;"
            ))
            .map_err(|err| {
                let _ = connection.execute_batch("ROLLBACK");
                format!("migration to schema version {next} failed: {err}")
            })?;
    }
    Ok(())
}

const RUN_COLUMNS: &str = "run_id, session_id, state, start, model, workspace, trace_id, created_at_ms, \
     finished_at_ms, stop_reason, stop_detail, final_text, usage, steps, last_seq, tenant";

fn run_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<RunRecord, String>> {
    let state: String = row.get(2)?;
    let start: Vec<u8> = row.get(3)?;
    let usage: Vec<u8> = row.get(12)?;
    let stop_reason: Option<i32> = row.get(9)?;
    let steps: i64 = row.get(13)?;
    let last_seq: i64 = row.get(14)?;
    let decoded = (|| {
        Ok(RunRecord {
            run_id: row.get(0).map_err(|e| e.to_string())?,
            session_id: row.get(1).map_err(|e| e.to_string())?,
            state: RunState::parse(&state).ok_or_else(|| format!("unknown run state `{state}`"))?,
            start: pb::StartRun::decode(start.as_slice()).map_err(|e| e.to_string())?,
            model: row.get(4).map_err(|e| e.to_string())?,
            workspace: row.get(5).map_err(|e| e.to_string())?,
            trace_id: row.get(6).map_err(|e| e.to_string())?,
            created_at_ms: row.get(7).map_err(|e| e.to_string())?,
            finished_at_ms: row.get(8).map_err(|e| e.to_string())?,
            stop_reason: stop_reason
                .map(|reason| pb::StopReason::try_from(reason).map_err(|e| e.to_string()))
                .transpose()?,
            stop_detail: row.get(10).map_err(|e| e.to_string())?,
            final_text: row.get(11).map_err(|e| e.to_string())?,
            usage: pb::Usage::decode(usage.as_slice()).map_err(|e| e.to_string())?,
            steps: u32::try_from(steps).map_err(|e| e.to_string())?,
            last_seq: u64::try_from(last_seq).map_err(|e| e.to_string())?,
            tenant: row.get(15).map_err(|e| e.to_string())?,
        })
    })();
    Ok(decoded)
}

fn decode<M: prost::Message + Default>(bytes: &[u8]) -> StoreResult<M> {
    M::decode(bytes).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn output_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<OutputRecord> {
    Ok(OutputRecord {
        execution_id: row.get(0)?,
        digest: row.get(1)?,
        size: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
        created_at_ms: row.get(3)?,
    })
}

fn seq_param(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// Runs `sql` through the connection's statement cache: parsing and planning a statement
/// cost more than the small writes the run loop makes for every event.
fn execute(connection: &Connection, sql: &str, params: impl Params) -> rusqlite::Result<usize> {
    connection.prepare_cached(sql)?.execute(params)
}

/// [`execute`] for a statement that returns one row.
fn query_row<T>(
    connection: &Connection,
    sql: &str,
    params: impl Params,
    map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    connection.prepare_cached(sql)?.query_row(params, map)
}

impl Store for SqliteStore {
    fn create_session(&self, session: &SessionRecord) -> StoreResult<()> {
        let labels =
            serde_json::to_string(&session.labels).map_err(|e| StoreError::Io(e.to_string()))?;
        self.with(|c| {
            execute(
                c,
                "INSERT INTO sessions (session_id, workspace, labels, created_at_ms, tenant) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![session.session_id, session.workspace, labels, session.created_at_ms, session.tenant],
            )
            .map(|_| ())
        })
    }

    fn session(&self, session_id: &str) -> StoreResult<Option<SessionRecord>> {
        let row = self.with(|c| {
            query_row(
                c,
                "SELECT session_id, workspace, labels, created_at_ms, tenant FROM sessions WHERE session_id = ?1",
                params![session_id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, i64>(3)?,
                        row.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()
        })?;
        row.map(|(session_id, workspace, labels, created_at_ms, tenant)| {
            Ok(SessionRecord {
                session_id,
                workspace,
                labels: serde_json::from_str(&labels)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                created_at_ms,
                tenant,
            })
        })
        .transpose()
    }

    fn create_run(&self, run: &RunRecord, first: &pb::RunEvent) -> StoreResult<()> {
        if first.run_id != run.run_id || first.seq != 1 {
            return Err(StoreError::OutOfOrder {
                run_id: first.run_id.clone(),
                seq: first.seq,
                last: 0,
            });
        }
        let mut connection = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let io = |err: rusqlite::Error| StoreError::Io(err.to_string());
        let transaction = connection.transaction().map_err(io)?;
        execute(
            &transaction,
            &format!("INSERT INTO runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"),
            params![
                run.run_id,
                run.session_id,
                run.state.as_str(),
                run.start.encode_to_vec(),
                run.model,
                run.workspace,
                run.trace_id,
                run.created_at_ms,
                run.finished_at_ms,
                run.stop_reason.map(|r| r as i32),
                run.stop_detail,
                run.final_text,
                run.usage.encode_to_vec(),
                i64::from(run.steps),
                seq_param(first.seq),
                run.tenant,
            ],
        )
        .map_err(io)?;
        execute(
            &transaction,
            "INSERT INTO events (run_id, seq, event) VALUES (?1, ?2, ?3)",
            params![first.run_id, seq_param(first.seq), first.encode_to_vec()],
        )
        .map_err(io)?;
        transaction.commit().map_err(io)
    }

    fn run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        let row = self.with(|c| {
            query_row(
                c,
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1"),
                params![run_id],
                run_from_row,
            )
            .optional()
        })?;
        row.map(|decoded| decoded.map_err(StoreError::Corrupt))
            .transpose()
    }

    fn list_runs(
        &self,
        filter: &RunFilter,
        limit: usize,
        after: Option<&RunCursor>,
    ) -> StoreResult<(Vec<RunRecord>, Option<RunCursor>)> {
        let limit_plus_one = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let rows = self.with(|c| {
            let mut statement = c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs
                 WHERE (?1 IS NULL OR session_id = ?1)
                   AND (?2 IS NULL OR state = ?2)
                   AND (?3 IS NULL OR created_at_ms < ?3 OR (created_at_ms = ?3 AND run_id < ?4))
                   AND (?6 IS NULL OR tenant = ?6)
                 ORDER BY created_at_ms DESC, run_id DESC
                 LIMIT ?5"
            ))?;
            let rows = statement.query_map(
                params![
                    filter.session_id,
                    filter.state.map(RunState::as_str),
                    after.map(|cursor| cursor.created_at_ms),
                    after.map(|cursor| cursor.run_id.clone()),
                    limit_plus_one,
                    filter.tenant,
                ],
                run_from_row,
            )?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        let mut runs = rows
            .into_iter()
            .map(|decoded| decoded.map_err(StoreError::Corrupt))
            .collect::<StoreResult<Vec<_>>>()?;
        let next = if runs.len() > limit {
            runs.truncate(limit);
            runs.last().map(|run| RunCursor {
                created_at_ms: run.created_at_ms,
                run_id: run.run_id.clone(),
            })
        } else {
            None
        };
        Ok((runs, next))
    }

    fn set_run_state(&self, run_id: &str, state: RunState) -> StoreResult<()> {
        let changed = self.with(|c| {
            execute(
                c,
                "UPDATE runs SET state = ?2 WHERE run_id = ?1",
                params![run_id, state.as_str()],
            )
        })?;
        if changed == 0 {
            return Err(StoreError::UnknownRun(run_id.to_owned()));
        }
        Ok(())
    }

    fn update_progress(&self, run_id: &str, steps: u32, usage: &pb::Usage) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "UPDATE runs SET steps = ?2, usage = ?3 WHERE run_id = ?1",
                params![run_id, i64::from(steps), usage.encode_to_vec()],
            )
            .map(|_| ())
        })
    }

    fn finish_run(&self, run_id: &str, end: &RunEnd) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "UPDATE runs SET state = 'finished', stop_reason = ?2, stop_detail = ?3, final_text = ?4, finished_at_ms = ?5 WHERE run_id = ?1",
                params![run_id, end.stop_reason as i32, end.stop_detail, end.final_text, end.finished_at_ms],
            )
            .map(|_| ())
        })
    }

    fn append_event(&self, event: &pb::RunEvent, spans: &[pb::Span]) -> StoreResult<()> {
        let mut connection = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let io = |err: rusqlite::Error| StoreError::Io(err.to_string());
        let transaction = connection.transaction().map_err(io)?;
        let last: Option<i64> = query_row(
            &transaction,
            "SELECT last_seq FROM runs WHERE run_id = ?1",
            params![event.run_id],
            |row| row.get(0),
        )
        .optional()
        .map_err(io)?;
        let Some(last) = last else {
            return Err(StoreError::UnknownRun(event.run_id.clone()));
        };
        let last = u64::try_from(last).unwrap_or(0);
        if event.seq != last + 1 {
            return Err(StoreError::OutOfOrder {
                run_id: event.run_id.clone(),
                seq: event.seq,
                last,
            });
        }
        execute(
            &transaction,
            "INSERT INTO events (run_id, seq, event) VALUES (?1, ?2, ?3)",
            params![event.run_id, seq_param(event.seq), event.encode_to_vec()],
        )
        .map_err(io)?;
        execute(
            &transaction,
            "UPDATE runs SET last_seq = ?2 WHERE run_id = ?1",
            params![event.run_id, seq_param(event.seq)],
        )
        .map_err(io)?;
        for span in spans {
            execute(
                &transaction,
                "INSERT OR REPLACE INTO spans (run_id, span_id, start_unix_nano, span) VALUES (?1, ?2, ?3, ?4)",
                params![event.run_id, span.span_id, span.start_unix_nano, span.encode_to_vec()],
            )
            .map_err(io)?;
        }
        crate::pause::reached(crate::pause::Point::StoreCommit);
        transaction.commit().map_err(io)
    }

    fn events_after(
        &self,
        run_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<pb::RunEvent>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let blobs = self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT event FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )?;
            let rows = statement
                .query_map(params![run_id, seq_param(after_seq), limit], |row| {
                    row.get::<_, Vec<u8>>(0)
                })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        blobs
            .iter()
            .map(|blob| {
                pb::RunEvent::decode(blob.as_slice())
                    .map_err(|e| StoreError::Corrupt(e.to_string()))
            })
            .collect()
    }

    fn unfinished_runs(&self) -> StoreResult<Vec<RunRecord>> {
        let rows = self.with(|c| {
            let mut statement = c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE state != 'finished' ORDER BY created_at_ms"
            ))?;
            let rows = statement.query_map([], run_from_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .map(|decoded| decoded.map_err(StoreError::Corrupt))
            .collect()
    }

    fn save_checkpoint(&self, run_id: &str, checkpoint: &Checkpoint) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "INSERT INTO checkpoints (run_id, checkpoint_id, seq, state, created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (run_id) DO UPDATE SET checkpoint_id = ?2, seq = ?3, state = ?4, created_at_ms = ?5",
                params![run_id, checkpoint.checkpoint_id, seq_param(checkpoint.seq), checkpoint.state, checkpoint.created_at_ms],
            )
            .map(|_| ())
        })
    }

    fn latest_checkpoint(&self, run_id: &str) -> StoreResult<Option<Checkpoint>> {
        self.with(|c| {
            query_row(
                c,
                "SELECT checkpoint_id, seq, state, created_at_ms FROM checkpoints WHERE run_id = ?1",
                params![run_id],
                |row| {
                    Ok(Checkpoint {
                        checkpoint_id: row.get(0)?,
                        seq: u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
                        state: row.get(2)?,
                        created_at_ms: row.get(3)?,
                    })
                },
            )
            .optional()
        })
    }

    fn record_intent(&self, effect: &Effect) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "INSERT INTO effects (run_id, call_id, tool, arguments, idempotent, intent_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![effect.run_id, effect.call_id, effect.tool, effect.arguments, effect.idempotent, effect.intent_at_ms],
            )
            .map(|_| ())
        })
    }

    fn record_effect_result(
        &self,
        run_id: &str,
        call_id: &str,
        result: &pb::ToolResult,
    ) -> StoreResult<()> {
        let changed = self.with(|c| {
            execute(
                c,
                "UPDATE effects SET result = ?3 WHERE run_id = ?1 AND call_id = ?2",
                params![run_id, call_id, result.encode_to_vec()],
            )
        })?;
        if changed == 0 {
            return Err(StoreError::Io(format!(
                "no intent recorded for call {call_id} of run {run_id}"
            )));
        }
        Ok(())
    }

    fn effect(&self, run_id: &str, call_id: &str) -> StoreResult<Option<Effect>> {
        let row = self.with(|c| {
            query_row(
                c,
                "SELECT tool, arguments, idempotent, intent_at_ms, result FROM effects WHERE run_id = ?1 AND call_id = ?2",
                params![run_id, call_id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, bool>(2)?,
                        row.get::<_, i64>(3)?,
                        row.get::<_, Option<Vec<u8>>>(4)?,
                    ))
                },
            )
            .optional()
        })?;
        row.map(|(tool, arguments, idempotent, intent_at_ms, result)| {
            Ok(Effect {
                run_id: run_id.to_owned(),
                call_id: call_id.to_owned(),
                tool,
                arguments,
                idempotent,
                intent_at_ms,
                result: result.map(|bytes| decode(&bytes)).transpose()?,
            })
        })
        .transpose()
    }

    fn save_approval(&self, request: &pb::ApprovalRequest) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "INSERT INTO approvals (approval_id, run_id, call_id, request) VALUES (?1, ?2, ?3, ?4)",
                params![request.approval_id, request.run_id, request.call_id, request.encode_to_vec()],
            )
            .map(|_| ())
        })
    }

    fn resolve_approval(
        &self,
        approval_id: &str,
        resolution: &ApprovalResolution,
    ) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "UPDATE approvals SET decision = ?2, reason = ?3, decided_by = ?4, resolved_at_ms = ?5 WHERE approval_id = ?1",
                params![approval_id, resolution.decision as i32, resolution.reason, resolution.decided_by, resolution.resolved_at_ms],
            )
            .map(|_| ())
        })
    }

    fn approval_for_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> StoreResult<Option<(pb::ApprovalRequest, Option<ApprovalResolution>)>> {
        let row = self.with(|c| {
            query_row(
                c,
                "SELECT request, decision, reason, decided_by, resolved_at_ms FROM approvals
                 WHERE run_id = ?1 AND call_id = ?2 ORDER BY rowid DESC LIMIT 1",
                params![run_id, call_id],
                |row| {
                    Ok((
                        row.get::<_, Vec<u8>>(0)?,
                        row.get::<_, Option<i32>>(1)?,
                        row.get::<_, Option<String>>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, Option<i64>>(4)?,
                    ))
                },
            )
            .optional()
        })?;
        row.map(|(request, decision, reason, decided_by, resolved_at_ms)| {
            let request: pb::ApprovalRequest = decode(&request)?;
            let resolution = match (decision, resolved_at_ms) {
                (Some(decision), Some(resolved_at_ms)) => Some(ApprovalResolution {
                    decision: pb::Decision::try_from(decision)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    reason: reason.unwrap_or_default(),
                    decided_by: decided_by.unwrap_or_default(),
                    resolved_at_ms,
                }),
                _ => None,
            };
            Ok((request, resolution))
        })
        .transpose()
    }

    fn add_session_grant(&self, session_id: &str, grant_key: &str) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "INSERT OR IGNORE INTO session_grants (session_id, grant_key) VALUES (?1, ?2)",
                params![session_id, grant_key],
            )
            .map(|_| ())
        })
    }

    fn session_grants(&self) -> StoreResult<Vec<String>> {
        self.with(|c| {
            let mut statement = c.prepare_cached("SELECT grant_key FROM session_grants")?;
            let rows = statement.query_map([], |row| row.get(0))?;
            rows.collect()
        })
    }

    fn spans(&self, run_id: &str) -> StoreResult<Vec<pb::Span>> {
        let blobs = self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT span FROM spans WHERE run_id = ?1 ORDER BY start_unix_nano, span_id",
            )?;
            let rows = statement.query_map(params![run_id], |row| row.get::<_, Vec<u8>>(0))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        blobs.iter().map(|blob| decode(blob)).collect()
    }

    fn record_output(&self, output: &OutputRecord) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "INSERT OR REPLACE INTO outputs (execution_id, digest, size, created_at_ms) VALUES (?1, ?2, ?3, ?4)",
                params![output.execution_id, output.digest, i64::try_from(output.size).unwrap_or(i64::MAX), output.created_at_ms],
            )
            .map(|_| ())
        })
    }

    fn output(&self, execution_id: &str) -> StoreResult<Option<OutputRecord>> {
        self.with(|c| {
            query_row(
                c,
                "SELECT execution_id, digest, size, created_at_ms FROM outputs WHERE execution_id = ?1",
                params![execution_id],
                output_from_row,
            )
            .optional()
        })
    }

    fn oldest_outputs(&self, limit: usize) -> StoreResult<Vec<OutputRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT execution_id, digest, size, created_at_ms FROM outputs ORDER BY created_at_ms, execution_id LIMIT ?1",
            )?;
            let rows = statement.query_map(params![limit], output_from_row)?;
            rows.collect()
        })
    }

    fn remove_output(&self, execution_id: &str) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "DELETE FROM outputs WHERE execution_id = ?1",
                params![execution_id],
            )
            .map(|_| ())
        })
    }

    fn record_execution_owner(&self, execution_id: &str, tenant: &str) -> StoreResult<()> {
        self.with(|c| {
            execute(
                c,
                "INSERT OR IGNORE INTO execution_owners (execution_id, tenant) VALUES (?1, ?2)",
                params![execution_id, tenant],
            )
            .map(|_| ())
        })
    }

    fn execution_owner(&self, execution_id: &str) -> StoreResult<Option<String>> {
        self.with(|c| {
            query_row(
                c,
                "SELECT tenant FROM execution_owners WHERE execution_id = ?1",
                params![execution_id],
                |row| row.get(0),
            )
            .optional()
        })
    }

    fn output_references(&self, digest: &str) -> StoreResult<u64> {
        let count: i64 = self.with(|c| {
            query_row(
                c,
                "SELECT COUNT(*) FROM outputs WHERE digest = ?1",
                params![digest],
                |row| row.get(0),
            )
        })?;
        Ok(u64::try_from(count).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> SqliteStore {
        SqliteStore::open(&dir.join("airlock.db"), &StoreOptions::default()).expect("opens")
    }

    fn session(id: &str) -> SessionRecord {
        SessionRecord {
            session_id: id.into(),
            workspace: "/srv/ws".into(),
            labels: [("team".to_owned(), "core".to_owned())].into(),
            created_at_ms: 1,
            tenant: "default".into(),
        }
    }

    fn run(id: &str, session: &str, created_at_ms: i64) -> RunRecord {
        RunRecord {
            run_id: id.into(),
            session_id: session.into(),
            state: RunState::Running,
            start: pb::StartRun {
                input: format!("task of {id}"),
                ..Default::default()
            },
            model: "scripted".into(),
            workspace: String::new(),
            trace_id: "t".into(),
            created_at_ms,
            finished_at_ms: None,
            stop_reason: None,
            stop_detail: String::new(),
            final_text: String::new(),
            usage: pb::Usage::default(),
            steps: 0,
            last_seq: 0,
            tenant: "default".into(),
        }
    }

    fn event(run_id: &str, seq: u64) -> pb::RunEvent {
        pb::RunEvent {
            run_id: run_id.into(),
            seq,
            step_id: String::new(),
            time_ms: 7,
            event: Some(pb::run_event::Event::ModelText(pb::ModelText {
                text: format!("event {seq}"),
            })),
        }
    }

    #[test]
    fn sessions_runs_and_events_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store(dir.path());
        store.create_session(&session("s1")).expect("session");
        assert_eq!(store.session("s1").expect("read"), Some(session("s1")));
        store
            .create_run(&run("r1", "s1", 10), &event("r1", 1))
            .expect("run");
        for seq in 2..=3 {
            store.append_event(&event("r1", seq), &[]).expect("append");
        }
        let events = store.events_after("r1", 1, 100).expect("read");
        assert_eq!(events, vec![event("r1", 2), event("r1", 3)]);
        let record = store.run("r1").expect("read").expect("exists");
        assert_eq!(record.last_seq, 3);
        assert_eq!(record.start.input, "task of r1");
        store
            .finish_run(
                "r1",
                &RunEnd {
                    stop_reason: pb::StopReason::Final,
                    stop_detail: String::new(),
                    final_text: "done".into(),
                    finished_at_ms: 20,
                },
            )
            .expect("finish");
        let record = store.run("r1").expect("read").expect("exists");
        assert_eq!(record.state, RunState::Finished);
        assert_eq!(record.stop_reason, Some(pb::StopReason::Final));
    }

    #[test]
    fn the_log_refuses_gaps_and_duplicates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store(dir.path());
        store.create_session(&session("s1")).expect("session");
        store
            .create_run(&run("r1", "s1", 10), &event("r1", 1))
            .expect("run");
        assert!(matches!(
            store.append_event(&event("r1", 1), &[]),
            Err(StoreError::OutOfOrder { .. })
        ));
        assert!(matches!(
            store.append_event(&event("r1", 3), &[]),
            Err(StoreError::OutOfOrder { .. })
        ));
        assert!(matches!(
            store.append_event(&event("r2", 1), &[]),
            Err(StoreError::UnknownRun(_))
        ));
    }

    #[test]
    fn runs_page_newest_first_with_filters() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store(dir.path());
        store.create_session(&session("s1")).expect("session");
        store.create_session(&session("s2")).expect("session");
        for i in 0..5 {
            let id = format!("r{i}");
            store
                .create_run(&run(&id, "s1", i), &event(&id, 1))
                .expect("run");
        }
        store
            .create_run(&run("other", "s2", 100), &event("other", 1))
            .expect("run");
        let filter = RunFilter {
            session_id: Some("s1".into()),
            state: None,
            tenant: None,
        };
        let (first, token) = store.list_runs(&filter, 2, None).expect("page");
        assert_eq!(
            first.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
            ["r4", "r3"]
        );
        let (second, token) = store.list_runs(&filter, 2, token.as_ref()).expect("page");
        assert_eq!(
            second.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
            ["r2", "r1"]
        );
        let (third, token) = store.list_runs(&filter, 2, token.as_ref()).expect("page");
        assert_eq!(
            third.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
            ["r0"]
        );
        assert!(token.is_none());
        let (all, _) = store
            .list_runs(&RunFilter::default(), 10, None)
            .expect("all");
        assert_eq!(all[0].run_id, "other");
    }

    #[test]
    fn reopening_keeps_everything_and_does_not_migrate_twice() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = store(dir.path());
            store.create_session(&session("s1")).expect("session");
        }
        let store = store(dir.path());
        assert!(store.session("s1").expect("read").is_some());
    }

    /// A store written by a daemon of schema version 2, before tenants: its runs, events,
    /// checkpoint and kept output, inserted with that version's columns.
    fn version_2_store(path: &Path) {
        let connection = Connection::open(path).expect("open");
        connection
            .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .expect("wal");
        for (index, migration) in MIGRATIONS[..2].iter().enumerate() {
            connection
                .execute_batch(&format!(
                    "BEGIN; {migration}; PRAGMA user_version = {}; COMMIT;",
                    index + 1
                ))
                .expect("migrate to 2");
        }
        connection
            .execute(
                "INSERT INTO sessions (session_id, workspace, labels, created_at_ms) \
                 VALUES ('s1', '/srv/ws', '{}', 1)",
                [],
            )
            .expect("session");
        let usage = pb::Usage {
            input_tokens: 12,
            ..Default::default()
        }
        .encode_to_vec();
        for (run_id, state, finished_at_ms, stop_reason, final_text) in [
            (
                "r_done",
                "finished",
                Some(20),
                Some(pb::StopReason::Final as i32),
                "all done",
            ),
            ("r_live", "running", None, None, ""),
        ] {
            let start = pb::StartRun {
                input: format!("task of {run_id}"),
                ..Default::default()
            }
            .encode_to_vec();
            connection
                .execute(
                    "INSERT INTO runs (run_id, session_id, state, start, model, workspace, \
                     trace_id, created_at_ms, finished_at_ms, stop_reason, final_text, usage, \
                     steps, last_seq) \
                     VALUES (?1, 's1', ?2, ?3, 'scripted', '/srv/ws', 't', 10, ?4, ?5, ?6, ?7, 1, 2)",
                    params![run_id, state, start, finished_at_ms, stop_reason, final_text, usage],
                )
                .expect("run");
            for seq in 1..=2u64 {
                connection
                    .execute(
                        "INSERT INTO events (run_id, seq, event) VALUES (?1, ?2, ?3)",
                        params![run_id, seq_param(seq), event(run_id, seq).encode_to_vec()],
                    )
                    .expect("event");
            }
        }
        connection
            .execute(
                "INSERT INTO checkpoints (run_id, checkpoint_id, seq, state, created_at_ms) \
                 VALUES ('r_live', 'ckp_1', 2, x'010203', 15)",
                [],
            )
            .expect("checkpoint");
        connection
            .execute(
                "INSERT INTO outputs (execution_id, digest, size, created_at_ms) \
                 VALUES ('exec_old', 'd1', 10, 5)",
                [],
            )
            .expect("output");
    }

    #[test]
    fn a_version_2_store_is_upgraded_to_3_and_its_runs_belong_to_default() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("airlock.db");
        version_2_store(&path);
        let store = SqliteStore::open(&path, &StoreOptions::default()).expect("upgraded");
        let version: i64 = store
            .with(|c| c.query_row("PRAGMA user_version", [], |row| row.get(0)))
            .expect("version");
        assert_eq!(version, 3);

        let done = store.run("r_done").expect("read").expect("kept");
        assert_eq!(done.tenant, "default");
        assert_eq!(done.state, RunState::Finished);
        assert_eq!(done.stop_reason, Some(pb::StopReason::Final));
        assert_eq!(done.final_text, "all done");
        assert_eq!(done.start.input, "task of r_done");
        assert_eq!(done.usage.input_tokens, 12);
        assert_eq!(
            store.events_after("r_done", 0, 10).expect("events"),
            vec![event("r_done", 1), event("r_done", 2)]
        );
        let unfinished = store.unfinished_runs().expect("unfinished");
        assert_eq!(
            unfinished
                .iter()
                .map(|run| (run.run_id.as_str(), run.tenant.as_str()))
                .collect::<Vec<_>>(),
            [("r_live", "default")]
        );
        assert_eq!(
            store
                .latest_checkpoint("r_live")
                .expect("checkpoint")
                .map(|c| c.checkpoint_id),
            Some("ckp_1".to_owned())
        );
        assert_eq!(
            store.session("s1").expect("read").expect("kept").tenant,
            "default"
        );
        assert!(store.output("exec_old").expect("read").is_some());

        // Tenant filters see the old runs as `default`'s, and only as its.
        let of = |tenant: &str| {
            let filter = RunFilter {
                session_id: None,
                state: None,
                tenant: Some(tenant.to_owned()),
            };
            let (runs, _) = store.list_runs(&filter, 10, None).expect("list");
            let mut ids: Vec<String> = runs.into_iter().map(|run| run.run_id).collect();
            ids.sort();
            ids
        };
        assert_eq!(of("default"), ["r_done", "r_live"]);
        assert!(of("alice").is_empty());
        // The upgraded store takes new runs of other tenants, and the log goes on.
        let mut alices = run("r_alice", "s1", 30);
        alices.tenant = "alice".into();
        store
            .create_run(&alices, &event("r_alice", 1))
            .expect("new run");
        assert_eq!(of("alice"), ["r_alice"]);
        store
            .append_event(&event("r_live", 3), &[])
            .expect("append");
        drop(store);
        let reopened = SqliteStore::open(&path, &StoreOptions::default()).expect("reopened");
        assert_eq!(
            reopened
                .run("r_live")
                .expect("read")
                .expect("kept")
                .last_seq,
            3
        );
    }

    #[test]
    fn a_file_that_is_not_a_database_is_refused_with_its_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("airlock.db");
        std::fs::write(&path, vec![0x42u8; 8192]).expect("write");
        let err = SqliteStore::open(&path, &StoreOptions::default())
            .err()
            .expect("refused");
        assert!(matches!(err, StoreError::Damaged { .. }), "{err}");
        assert!(err.to_string().contains("airlock.db"), "{err}");
    }

    #[test]
    fn a_store_in_use_is_refused_until_its_owner_closes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("airlock.db");
        let owner = SqliteStore::open(&path, &StoreOptions::default()).expect("opens");
        let err = SqliteStore::open(&path, &StoreOptions::default())
            .err()
            .expect("a second opener is refused");
        assert!(matches!(err, StoreError::Open { .. }), "{err}");
        assert!(err.to_string().contains("another process"), "{err}");
        drop(owner);
        SqliteStore::open(&path, &StoreOptions::default()).expect("free again");
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("airlock.db");
        {
            let connection = Connection::open(&path).expect("open");
            connection
                .execute_batch("PRAGMA user_version = 99")
                .expect("set");
        }
        let err = SqliteStore::open(&path, &StoreOptions::default())
            .err()
            .expect("refused");
        assert!(err.to_string().contains("newer"), "{err}");
    }

    #[test]
    fn checkpoints_effects_approvals_and_grants_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store(dir.path());
        store.create_session(&session("s1")).expect("session");
        store
            .create_run(&run("r1", "s1", 10), &event("r1", 1))
            .expect("run");
        assert_eq!(store.unfinished_runs().expect("list").len(), 1);

        let checkpoint = |seq| Checkpoint {
            checkpoint_id: format!("ckp_{seq}"),
            seq,
            state: vec![1, 2, 3],
            created_at_ms: 5,
        };
        store.save_checkpoint("r1", &checkpoint(3)).expect("save");
        store
            .save_checkpoint("r1", &checkpoint(7))
            .expect("replace");
        assert_eq!(
            store.latest_checkpoint("r1").expect("read"),
            Some(checkpoint(7))
        );

        let effect = Effect {
            run_id: "r1".into(),
            call_id: "c1".into(),
            tool: "write_file".into(),
            arguments: "{}".into(),
            idempotent: false,
            intent_at_ms: 9,
            result: None,
        };
        store.record_intent(&effect).expect("intent");
        assert!(store.record_intent(&effect).is_err(), "one intent per call");
        assert_eq!(
            store.effect("r1", "c1").expect("read"),
            Some(effect.clone())
        );
        let result = pb::ToolResult {
            status: pb::ToolStatus::Ok as i32,
            ..Default::default()
        };
        store
            .record_effect_result("r1", "c1", &result)
            .expect("result");
        assert_eq!(
            store
                .effect("r1", "c1")
                .expect("read")
                .expect("some")
                .result,
            Some(result)
        );
        assert!(
            store
                .record_effect_result("r1", "c2", &pb::ToolResult::default())
                .is_err()
        );

        let request = pb::ApprovalRequest {
            approval_id: "a1".into(),
            run_id: "r1".into(),
            call_id: "c1".into(),
            ..Default::default()
        };
        store.save_approval(&request).expect("save");
        assert_eq!(
            store.approval_for_call("r1", "c1").expect("read"),
            Some((request.clone(), None))
        );
        let resolution = ApprovalResolution {
            decision: pb::Decision::Deny,
            reason: "no".into(),
            decided_by: "approver".into(),
            resolved_at_ms: 11,
        };
        store.resolve_approval("a1", &resolution).expect("resolve");
        assert_eq!(
            store.approval_for_call("r1", "c1").expect("read"),
            Some((request, Some(resolution)))
        );

        store.add_session_grant("s1", "k1").expect("grant");
        store.add_session_grant("s1", "k1").expect("idempotent");
        assert_eq!(store.session_grants().expect("read"), vec!["k1".to_owned()]);
    }

    #[test]
    fn spans_and_outputs_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store(dir.path());
        store.create_session(&session("s1")).expect("session");
        store
            .create_run(&run("r1", "s1", 10), &event("r1", 1))
            .expect("run");
        let span = |id: &str, start| pb::Span {
            span_id: id.into(),
            start_unix_nano: start,
            ..Default::default()
        };
        // Spans ride with the event after them, in its transaction.
        store
            .append_event(&event("r1", 2), &[span("b", 2)])
            .expect("event with a span");
        store
            .append_event(&event("r1", 3), &[span("a", 1), span("c", 3)])
            .expect("event with spans");
        let ids: Vec<String> = store
            .spans("r1")
            .expect("read")
            .into_iter()
            .map(|s| s.span_id)
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        // An event refused (out of order) takes its spans with it: no span without its event.
        assert!(
            store
                .append_event(&event("r1", 9), &[span("d", 4)])
                .is_err()
        );
        assert_eq!(store.spans("r1").expect("read").len(), 3);

        let output = |id: &str, at| OutputRecord {
            execution_id: id.into(),
            digest: "d1".into(),
            size: 10,
            created_at_ms: at,
        };
        store.record_output(&output("e2", 2)).expect("record");
        store.record_output(&output("e1", 1)).expect("record");
        assert_eq!(store.output("e1").expect("read"), Some(output("e1", 1)));
        assert_eq!(store.output_references("d1").expect("count"), 2);
        assert_eq!(
            store.oldest_outputs(1).expect("oldest"),
            vec![output("e1", 1)]
        );
        store.remove_output("e1").expect("remove");
        assert_eq!(store.output_references("d1").expect("count"), 1);
    }
}
