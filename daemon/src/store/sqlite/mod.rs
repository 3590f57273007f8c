//! The embedded store: one SQLite file in WAL mode, migrated by the daemon on open, written
//! and read by one thread of its own ([`writer`]). Its requests are the shared queries
//! (`store::queries`), which that thread completes at once on its connection ([`sql`]).
//!
//! Durability: commits use `synchronous = NORMAL` in WAL mode, which survives any crash of
//! the daemon (the case resumption is built for) but may lose the last commits on a power
//! failure; `StoreOptions::fsync_every_commit` trades speed for that too. Group commit makes
//! either setting cost one commit per batch of writes, not per write.

mod pcache;
mod schema;
mod sql;
mod writer;

use std::path::Path;

use airlock_proto::v1 as pb;
use rusqlite::Connection;
use rusqlite::config::DbConfig;

use super::{
    ApprovalResolution, Checkpoint, Deleted, Effect, ExecutionOwner, GrantRecord, OutputRecord,
    Pending, RunCursor, RunEnd, RunFilter, RunRecord, RunState, SessionCursor, SessionRecord,
    SessionSummary, Store, StoreError, StoreResult,
};
use crate::domain::Usage;
use crate::ids::{ApprovalId, CallId, ExecutionId, RunId, SessionId};
use crate::store::audit::{AuditDraft, AuditRecord};
use crate::store::queries;
use crate::store::rows::EventRow;
use sql::{Lite, drive};
pub use writer::BeforeCommit;
use writer::Writer;

/// Statements kept prepared: every distinct statement the store runs (about forty), so the
/// run loop's writes never parse SQL again.
const STATEMENT_CACHE_CAPACITY: usize = 64;

/// The page cache of the store's connection, in KiB. SQLite's default (2 MiB) holds the
/// pages of a few hundred runs: with ten thousand waiting, every step of another run read
/// its index and table pages back from the kernel (a `pread` each), half the daemon's CPU
/// in the scale benchmark. 64 MiB holds the working set of that many runs; it is a ceiling,
/// filled only as pages are read. A cache this size is what [`pcache`] keeps commits from
/// walking.
const CACHE_KIB: u32 = 64 * 1024;

/// How the store is opened.
#[derive(Clone, Default)]
pub struct StoreOptions {
    /// fsync on every commit (`synchronous = FULL`): survives power loss, costs a disk flush
    /// per batch of writes.
    pub fsync_every_commit: bool,
    /// None, except in tests (see [`BeforeCommit`]).
    pub before_commit: Option<BeforeCommit>,
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("fsync_every_commit", &self.fsync_every_commit)
            .field("before_commit", &self.before_commit.is_some())
            .finish()
    }
}

pub struct SqliteStore {
    writer: Writer,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, checks its integrity and migrates it.
    /// A damaged file is refused, never repaired by guesswork. Blocks while it does: it runs
    /// once, as the daemon starts.
    pub fn open(path: &Path, options: &StoreOptions) -> StoreResult<SqliteStore> {
        let connection = open_connection(path, options)?;
        let writer = Writer::start(connection, options.before_commit.clone()).map_err(|err| {
            StoreError::Open {
                path: path.display().to_string(),
                message: format!("cannot start the store's thread: {err}"),
            }
        })?;
        Ok(SqliteStore { writer })
    }
}

/// Installs the store's page cache ([`pcache`]) for the process. SQLite takes its
/// configuration only before its first connection and not while another thread opens one:
/// the daemon calls this before it starts a thread; the store's open calls it too, and
/// reports an error.
pub fn install_page_cache() -> Result<(), String> {
    pcache::install()
}

fn open_connection(path: &Path, options: &StoreOptions) -> StoreResult<Connection> {
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
    if let Err(err) = pcache::install() {
        tracing::warn!(
            "the store keeps SQLite's own page cache, which walks itself whole on some commits: {err}"
        );
    }
    let connection = Connection::open(path).map_err(open_error)?;
    // The daemon is the file's only user. Holding its lock for the daemon's lifetime spares
    // every commit the shared-memory index and its file locks, and it keeps a second daemon
    // pointed at the same state dir out (it must be set before WAL is first used to take
    // effect).
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
            "PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000; \
             PRAGMA cache_size = -{CACHE_KIB};"
        ))
        .map_err(open_error)?;
    let check: String = connection
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .map_err(|err| damaged(err.to_string()))?;
    if check != "ok" {
        return Err(damaged(format!("integrity check failed: {check}")));
    }
    schema::migrate(&connection).map_err(damaged)?;
    drive(queries::runs::copy_out_inputs(&Lite(&connection)))?;
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
    // A kept statement keeps its plan. Without the planner's stability guarantee SQLite
    // (built with STAT4, as rusqlite bundles it) marks a statement whose planning looked at
    // a bound value to be prepared again whenever that value is bound anew: the exchange's
    // insert (its `MAX(ordinal)` for the run) was parsed and planned again on every model
    // call. The store's statements are written for the indexes they use; the listings'
    // plans, which could otherwise have read their bound `LIMIT`, are checked by
    // `a_runs_listing_by_session_or_tenant_reads_that_ones_index`.
    connection
        .set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(open_error)?;
    Ok(connection)
}

impl Store for SqliteStore {
    fn create_session(&self, session: &SessionRecord) -> Pending<()> {
        let session = session.clone();
        self.writer
            .write(move |c| drive(queries::sessions::create_session(&Lite(c), &session)))
    }

    fn session(&self, session_id: &SessionId) -> Pending<Option<SessionRecord>> {
        let session_id = session_id.clone();
        self.writer
            .read(move |c| drive(queries::sessions::session(&Lite(c), &session_id)))
    }

    fn session_summary(&self, session_id: &SessionId) -> Pending<Option<SessionSummary>> {
        let session_id = session_id.clone();
        self.writer
            .read(move |c| drive(queries::sessions::session_summary(&Lite(c), &session_id)))
    }

    fn list_sessions(
        &self,
        tenant: &str,
        limit: usize,
        after: Option<&SessionCursor>,
    ) -> Pending<(Vec<SessionSummary>, Option<SessionCursor>)> {
        let (tenant, after) = (tenant.to_owned(), after.cloned());
        self.writer.read(move |c| {
            drive(queries::sessions::list_sessions(
                &Lite(c),
                &tenant,
                limit,
                after.as_ref(),
            ))
        })
    }

    fn create_run(&self, run: &RunRecord, first: &pb::RunEvent) -> Pending<()> {
        let (run, first) = (run.clone(), first.clone());
        self.writer
            .write(move |c| drive(queries::runs::create_run(&Lite(c), &run, &first, None)))
    }

    fn run(&self, run_id: &RunId) -> Pending<Option<RunRecord>> {
        let run_id = run_id.clone();
        self.writer
            .read(move |c| drive(queries::runs::run(&Lite(c), &run_id)))
    }

    fn list_runs(
        &self,
        filter: &RunFilter,
        limit: usize,
        after: Option<&RunCursor>,
    ) -> Pending<(Vec<RunRecord>, Option<RunCursor>)> {
        let (filter, after) = (filter.clone(), after.cloned());
        self.writer.read(move |c| {
            drive(queries::runs::list_runs(
                &Lite(c),
                &filter,
                limit,
                after.as_ref(),
            ))
        })
    }

    fn set_run_state(&self, run_id: &RunId, state: RunState) -> Pending<()> {
        let run_id = run_id.clone();
        self.writer
            .write(move |c| drive(queries::runs::set_run_state(&Lite(c), &run_id, state)))
    }

    fn update_progress(&self, run_id: &RunId, steps: u32, usage: &Usage) -> Pending<()> {
        let (run_id, usage) = (run_id.clone(), *usage);
        self.writer.write(move |c| {
            drive(queries::runs::update_progress(
                &Lite(c),
                &run_id,
                steps,
                &usage,
            ))
        })
    }

    fn finish_run(&self, run_id: &RunId, end: &RunEnd) -> Pending<()> {
        let (run_id, end) = (run_id.clone(), end.clone());
        self.writer
            .write(move |c| drive(queries::runs::finish_run(&Lite(c), &run_id, &end)))
    }

    fn append_event(&self, event: &pb::RunEvent, spans: &[pb::Span]) -> Pending<()> {
        let row = EventRow::new(event, spans);
        self.writer
            .write(move |c| drive(queries::events::append_event(&Lite(c), &row)))
    }

    fn events_after(
        &self,
        run_id: &RunId,
        after_seq: u64,
        limit: usize,
    ) -> Pending<Vec<pb::RunEvent>> {
        let run_id = run_id.clone();
        self.writer.read(move |c| {
            drive(queries::events::events_after(
                &Lite(c),
                &run_id,
                after_seq,
                limit,
            ))
        })
    }

    fn unfinished_runs(&self) -> Pending<Vec<RunRecord>> {
        self.writer
            .read(|c| drive(queries::runs::unfinished_runs(&Lite(c))))
    }

    fn save_checkpoint(&self, run_id: &RunId, checkpoint: &Checkpoint) -> Pending<()> {
        let (run_id, checkpoint) = (run_id.clone(), checkpoint.clone());
        self.writer.write(move |c| {
            drive(queries::events::save_checkpoint(
                &Lite(c),
                &run_id,
                &checkpoint,
            ))
        })
    }

    fn latest_checkpoint(&self, run_id: &RunId) -> Pending<Option<Checkpoint>> {
        let run_id = run_id.clone();
        self.writer
            .read(move |c| drive(queries::events::latest_checkpoint(&Lite(c), &run_id)))
    }

    fn record_intent(&self, effect: &Effect) -> Pending<()> {
        let effect = effect.clone();
        self.writer
            .write(move |c| drive(queries::approvals::record_intent(&Lite(c), &effect)))
    }

    fn record_effect_result(
        &self,
        run_id: &RunId,
        call_id: &CallId,
        result: &pb::ToolResult,
    ) -> Pending<()> {
        let (run_id, call_id, result) = (run_id.clone(), call_id.clone(), result.clone());
        self.writer.write(move |c| {
            drive(queries::approvals::record_effect_result(
                &Lite(c),
                &run_id,
                &call_id,
                &result,
            ))
        })
    }

    fn record_pending_changes(
        &self,
        run_id: &RunId,
        call_id: &CallId,
        changes: &pb::ChangeSet,
    ) -> Pending<()> {
        let (run_id, call_id, changes) = (run_id.clone(), call_id.clone(), changes.clone());
        self.writer.write(move |c| {
            drive(queries::approvals::record_pending_changes(
                &Lite(c),
                &run_id,
                &call_id,
                &changes,
            ))
        })
    }

    fn effect(&self, run_id: &RunId, call_id: &CallId) -> Pending<Option<Effect>> {
        let (run_id, call_id) = (run_id.clone(), call_id.clone());
        self.writer
            .read(move |c| drive(queries::approvals::effect(&Lite(c), &run_id, &call_id)))
    }

    fn save_approval(&self, request: &pb::ApprovalRequest) -> Pending<()> {
        let request = request.clone();
        self.writer
            .write(move |c| drive(queries::approvals::save_approval(&Lite(c), &request)))
    }

    fn resolve_approval(
        &self,
        approval_id: &ApprovalId,
        resolution: &ApprovalResolution,
    ) -> Pending<()> {
        let (approval_id, resolution) = (approval_id.clone(), resolution.clone());
        self.writer.write(move |c| {
            drive(queries::approvals::resolve_approval(
                &Lite(c),
                &approval_id,
                &resolution,
            ))
        })
    }

    fn approval_for_call(
        &self,
        run_id: &RunId,
        call_id: &CallId,
    ) -> Pending<Option<(pb::ApprovalRequest, Option<ApprovalResolution>)>> {
        let (run_id, call_id) = (run_id.clone(), call_id.clone());
        self.writer.read(move |c| {
            drive(queries::approvals::approval_for_call(
                &Lite(c),
                &run_id,
                &call_id,
            ))
        })
    }

    fn add_session_grant(&self, grant: &GrantRecord) -> Pending<()> {
        let grant = grant.clone();
        self.writer
            .write(move |c| drive(queries::sessions::add_session_grant(&Lite(c), &grant)))
    }

    fn session_grants(&self, session_id: &SessionId) -> Pending<Vec<GrantRecord>> {
        let session_id = session_id.clone();
        self.writer
            .read(move |c| drive(queries::sessions::session_grants(&Lite(c), &session_id)))
    }

    fn revoke_session_grant(&self, session_id: &SessionId, grant_key: &str) -> Pending<bool> {
        let (session_id, grant_key) = (session_id.clone(), grant_key.to_owned());
        self.writer.write(move |c| {
            drive(queries::sessions::revoke_session_grant(
                &Lite(c),
                &session_id,
                &grant_key,
            ))
        })
    }

    fn spans(&self, run_id: &RunId) -> Pending<Vec<pb::Span>> {
        let run_id = run_id.clone();
        self.writer
            .read(move |c| drive(queries::events::spans(&Lite(c), &run_id)))
    }

    fn record_exchange(&self, run_id: &RunId, exchange: &str) -> Pending<()> {
        let (run_id, exchange) = (run_id.clone(), exchange.to_owned());
        self.writer.write(move |c| {
            drive(queries::events::record_exchange(
                &Lite(c),
                &run_id,
                &exchange,
            ))
        })
    }

    fn exchanges(&self, run_id: &RunId) -> Pending<Vec<String>> {
        let run_id = run_id.clone();
        self.writer
            .read(move |c| drive(queries::events::exchanges(&Lite(c), &run_id)))
    }

    fn record_output(&self, output: &OutputRecord) -> Pending<()> {
        let output = output.clone();
        self.writer
            .write(move |c| drive(queries::outputs::record_output(&Lite(c), &output)))
    }

    fn output(&self, execution_id: &ExecutionId) -> Pending<Option<OutputRecord>> {
        let execution_id = execution_id.clone();
        self.writer
            .read(move |c| drive(queries::outputs::output(&Lite(c), &execution_id)))
    }

    fn oldest_outputs(&self, limit: usize) -> Pending<Vec<OutputRecord>> {
        self.writer
            .read(move |c| drive(queries::outputs::oldest_outputs(&Lite(c), limit)))
    }

    fn outputs_before(&self, before_ms: i64, limit: usize) -> Pending<Vec<OutputRecord>> {
        self.writer
            .read(move |c| drive(queries::outputs::outputs_before(&Lite(c), before_ms, limit)))
    }

    fn remove_output(&self, execution_id: &ExecutionId) -> Pending<()> {
        let execution_id = execution_id.clone();
        self.writer
            .write(move |c| drive(queries::outputs::remove_output(&Lite(c), &execution_id)))
    }

    fn output_references(&self, digest: &str) -> Pending<u64> {
        let digest = digest.to_owned();
        self.writer
            .read(move |c| drive(queries::outputs::output_references(&Lite(c), &digest)))
    }

    fn record_execution_owner(
        &self,
        execution_id: &ExecutionId,
        owner: &ExecutionOwner,
    ) -> Pending<()> {
        let (execution_id, owner) = (execution_id.clone(), owner.clone());
        self.writer.write(move |c| {
            drive(queries::outputs::record_execution_owner(
                &Lite(c),
                &execution_id,
                &owner,
            ))
        })
    }

    fn execution_owner(&self, execution_id: &ExecutionId) -> Pending<Option<String>> {
        let execution_id = execution_id.clone();
        self.writer
            .read(move |c| drive(queries::outputs::execution_owner(&Lite(c), &execution_id)))
    }

    fn delete_finished_runs(&self, before_ms: i64, limit: usize) -> Pending<Deleted> {
        self.writer.write(move |c| {
            drive(queries::runs::delete_finished_runs(
                &Lite(c),
                before_ms,
                limit,
            ))
        })
    }

    fn append_audit(&self, draft: &AuditDraft) -> Pending<AuditRecord> {
        let draft = draft.clone();
        self.writer
            .write(move |c| drive(queries::audit::append(&Lite(c), &draft)))
    }

    fn audit_records(
        &self,
        tenant: &str,
        after_seq: u64,
        since_ms: i64,
        limit: usize,
    ) -> Pending<Vec<AuditRecord>> {
        let tenant = tenant.to_owned();
        self.writer.read(move |c| {
            drive(queries::audit::records(
                &Lite(c),
                &tenant,
                after_seq,
                since_ms,
                limit,
            ))
        })
    }

    fn audit_head(&self, tenant: &str) -> Pending<Option<(u64, String)>> {
        let tenant = tenant.to_owned();
        self.writer
            .read(move |c| drive(queries::audit::head(&Lite(c), &tenant)))
    }

    fn audit_tenants(&self) -> Pending<Vec<String>> {
        self.writer
            .read(move |c| drive(queries::audit::tenants(&Lite(c))))
    }

    fn cut_audit(&self, tenant: &str, before_ms: i64) -> Pending<u64> {
        let tenant = tenant.to_owned();
        self.writer
            .write(move |c| drive(queries::audit::cut(&Lite(c), &tenant, before_ms)))
    }

    fn forget_executions(&self, before_ms: i64) -> Pending<u64> {
        self.writer
            .write(move |c| drive(queries::outputs::forget_executions(&Lite(c), before_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance;

    fn open(dir: &Path) -> SqliteStore {
        SqliteStore::open(&dir.join("airlock.db"), &StoreOptions::default()).expect("opens")
    }

    #[tokio::test]
    async fn the_sqlite_store_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().expect("tempdir");
        conformance(&open(dir.path())).await;
    }

    #[tokio::test]
    async fn a_database_of_the_previous_release_is_upgraded_and_kept() {
        // airlock.db as the release before this schema wrote it (schema version 3): one
        // finished run of three steps, with an approval granted for the session.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("airlock.db");
        std::fs::write(&path, include_bytes!("fixtures/schema-v3.db")).expect("fixture");
        let store = SqliteStore::open(&path, &StoreOptions::default()).expect("upgraded");
        let (runs, _) = store
            .list_runs(&RunFilter::default(), 10, None)
            .await
            .expect("list");
        assert_eq!(runs.len(), 1);
        let run = &runs[0];
        assert_eq!(run.state, RunState::Finished);
        assert_eq!(run.stop_reason, Some(crate::domain::StopReason::Final));
        assert_eq!(run.steps, 3);
        assert_eq!(run.tenant, "default");
        assert_eq!(run.start.input, "copy notes");
        // Its input was copied out of `start` for searches as the store opened.
        let searched = RunFilter {
            text: Some("COPY".into()),
            ..RunFilter::default()
        };
        let (found, _) = store.list_runs(&searched, 10, None).await.expect("search");
        assert_eq!(found.len(), 1, "the old run is found by its task");
        let events = store
            .events_after(&run.run_id, 0, 100)
            .await
            .expect("events");
        assert_eq!(events.len() as u64, run.last_seq);
        assert_eq!(store.spans(&run.run_id).await.expect("spans").len(), 16);
        let grants = store.session_grants(&run.session_id).await.expect("grants");
        assert_eq!(grants.len(), 1);
        // A grant kept before grants were rules is an exact call's, with nothing else known.
        assert_eq!(
            (grants[0].tool.as_str(), grants[0].prefix.as_ref()),
            ("", None)
        );
        // The approval was for the call itself; the new column says so.
        let approved = events
            .iter()
            .find_map(|event| match &event.event {
                Some(pb::run_event::Event::ApprovalRequested(requested)) => {
                    requested.request.clone()
                }
                _ => None,
            })
            .expect("an approval in the log");
        let (request, resolution) = store
            .approval_for_call(&run.run_id, &CallId::from_stored(approved.call_id.clone()))
            .await
            .expect("read")
            .expect("kept");
        assert_eq!(request.approval_id, approved.approval_id);
        assert!(resolution.is_some_and(|r| r.decision.approves()));
        drop(store);
        // And the upgrade is done once: the reopened file is at the new version.
        let connection = Connection::open(&path).expect("reopen");
        let version: i64 = connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("version");
        assert_eq!(version, schema::MIGRATIONS.len() as i64);
    }

    #[tokio::test]
    async fn a_database_newer_than_the_daemon_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("airlock.db");
        pcache::install().expect("page cache");
        let connection = Connection::open(&path).expect("create");
        connection
            .execute_batch("PRAGMA user_version = 99")
            .expect("version");
        drop(connection);
        let Err(error) = SqliteStore::open(&path, &StoreOptions::default()) else {
            panic!("a newer schema was opened");
        };
        assert!(
            error.to_string().contains("newer than this daemon"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_second_daemon_on_the_same_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _first = open(dir.path());
        let Err(error) =
            SqliteStore::open(&dir.path().join("airlock.db"), &StoreOptions::default())
        else {
            panic!("the file was opened twice");
        };
        assert!(error.to_string().contains("another process"), "{error}");
    }

    #[test]
    fn a_kept_statement_is_not_prepared_again_for_each_binding() {
        let dir = tempfile::tempdir().expect("tempdir");
        let connection = open_connection(&dir.path().join("airlock.db"), &StoreOptions::default())
            .expect("opens");
        // The exchange's insert reads the run's last ordinal so: a plan that once looked at
        // the bound run id.
        let sql = "SELECT COALESCE((SELECT MAX(ordinal) + 1 FROM exchanges WHERE run_id = ?1), 0)";
        for run in 0..20 {
            let mut statement = connection.prepare_cached(sql).expect("prepares");
            let next: i64 = statement
                .query_row([format!("run_{run}")], |row| row.get(0))
                .expect("reads");
            assert_eq!(next, 0);
        }
        let statement = connection.prepare_cached(sql).expect("prepares");
        assert_eq!(
            statement.get_status(rusqlite::StatementStatus::RePrepare),
            0,
            "prepared again on a binding"
        );
    }

    #[test]
    fn a_runs_listing_by_session_or_tenant_reads_that_ones_index() {
        let dir = tempfile::tempdir().expect("tempdir");
        let connection = open_connection(&dir.path().join("airlock.db"), &StoreOptions::default())
            .expect("opens");
        let session = Some(SessionId::new());
        let tenant = Some("tenant".to_owned());
        let cases = [
            (
                RunFilter {
                    session_id: session.clone(),
                    ..RunFilter::default()
                },
                &["runs_by_session"][..],
            ),
            (
                RunFilter {
                    tenant: tenant.clone(),
                    ..RunFilter::default()
                },
                &["runs_by_tenant"],
            ),
            (
                RunFilter {
                    session_id: session,
                    tenant,
                    text: Some("fix".into()),
                    ..RunFilter::default()
                },
                &["runs_by_session", "runs_by_tenant"],
            ),
            // No index of their own: the walk in order that stops at the page's end, not a
            // sort of every run.
            (
                RunFilter {
                    state: Some(RunState::Finished),
                    ..RunFilter::default()
                },
                &["runs_by_time"],
            ),
            (
                RunFilter {
                    text: Some("fix".into()),
                    ..RunFilter::default()
                },
                &["runs_by_time"],
            ),
            (RunFilter::default(), &["runs_by_time"]),
        ];
        let cursor = RunCursor {
            created_at_ms: 7,
            run_id: RunId::new(),
        };
        for (filter, indexes) in cases {
            for after in [None, Some(&cursor)] {
                let pattern = filter.like_pattern();
                let (sql, _) =
                    crate::store::queries::runs::listing(&filter, pattern.as_deref(), 10, after);
                let explain = format!(
                    "EXPLAIN QUERY PLAN {}",
                    crate::store::sql::Dialect::Sqlite.render(&sql)
                );
                let mut statement = connection.prepare(&explain).expect("explains");
                // Unbound: the plan is made before any value is seen (the guarantee above).
                let unbound =
                    std::iter::repeat_n(rusqlite::types::Null, statement.parameter_count());
                let plan: Vec<String> = statement
                    .query_map(rusqlite::params_from_iter(unbound), |row| row.get(3))
                    .expect("a plan")
                    .collect::<Result<_, _>>()
                    .expect("a plan");
                assert!(
                    plan.iter().any(|step| {
                        indexes.iter().any(|index| {
                            step.contains(&format!("USING INDEX {index} "))
                                || step.ends_with(&format!("USING INDEX {index}"))
                        })
                    }),
                    "{filter:?}, after {after:?}: {plan:?}"
                );
            }
        }
    }
}
