//! The schema of the SQLite store, as versioned migrations: the database records its version
//! (`PRAGMA user_version`) and the daemon applies each migration it has not seen, in one
//! transaction each. A database newer than the daemon is refused, never touched.

use rusqlite::Connection;

/// Each entry moves the schema one version forward; the index is the version it leaves.
/// Never edit a shipped entry: add one.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // 4: approvals of every subject (a call, a network connection); for retention, finished
    // runs found by age, and each execution's run and start (rows from before have neither:
    // they count as old, and as no run's).
    r#"
    ALTER TABLE approvals ADD COLUMN subject TEXT NOT NULL DEFAULT 'call';
    CREATE INDEX runs_by_end ON runs(finished_at_ms) WHERE finished_at_ms IS NOT NULL;
    ALTER TABLE execution_owners ADD COLUMN run_id TEXT;
    ALTER TABLE execution_owners ADD COLUMN started_at_ms INTEGER NOT NULL DEFAULT 0;
    "#,
    // 5: a call's change set, journaled before it is applied to the workspace.
    r#"
    ALTER TABLE effects ADD COLUMN pending_changes BLOB;
    "#,
    // 6: what a session's runs inherit (an encoded `SessionSettings`; sessions from before
    // have none, which is the daemon's defaults), and a tenant's sessions listed by activity.
    r#"
    ALTER TABLE sessions ADD COLUMN settings BLOB;
    CREATE INDEX sessions_by_tenant ON sessions(tenant, created_at_ms DESC);
    "#,
    // 7: each model call's wire exchange, in order, for the run's cassette.
    r#"
    CREATE TABLE exchanges (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        ordinal INTEGER NOT NULL,
        exchange TEXT NOT NULL,
        PRIMARY KEY (run_id, ordinal)
    ) WITHOUT ROWID;
    "#,
    // 8: how long each call may run (a fleet's takeover waits that long; the column is kept
    // here too so a store's records read the same from either backend).
    r#"
    ALTER TABLE effects ADD COLUMN timeout_ms INTEGER;
    "#,
    // 9: a session grant is a visible rule: the tool it is for, the command prefix it grants
    // (none: the exact call its key names), what a person reads it as, and when it was made.
    // Grants from before are exact calls with nothing to show but their key.
    r#"
    ALTER TABLE session_grants ADD COLUMN tool TEXT NOT NULL DEFAULT '';
    ALTER TABLE session_grants ADD COLUMN prefix TEXT;
    ALTER TABLE session_grants ADD COLUMN covers TEXT NOT NULL DEFAULT '';
    ALTER TABLE session_grants ADD COLUMN created_at_ms INTEGER NOT NULL DEFAULT 0;
    "#,
    // 10: the audit log, one hash chain per tenant (see `store::audit`), and each chain's
    // head: its last sequence number and digest, updated with every record.
    r#"
    CREATE TABLE audit_log (
        tenant TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        actor TEXT NOT NULL,
        subject TEXT NOT NULL,
        reason TEXT NOT NULL,
        details TEXT NOT NULL,
        prev TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (tenant, seq)
    ) WITHOUT ROWID;
    CREATE INDEX audit_log_by_time ON audit_log(tenant, at_ms);
    CREATE TABLE audit_heads (
        tenant TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        digest TEXT NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 11: a run's input (the task) in a column of its own, for a search of runs by it; null
    // until the daemon opening the store copies it out of `start` (`copy_out_inputs`).
    r#"
    ALTER TABLE runs ADD COLUMN input TEXT;
    CREATE INDEX runs_without_input ON runs(run_id) WHERE input IS NULL;
    "#,
    // 12: a checkpoint's conversation entry by entry, so a step writes only what it added;
    // `entries` names how many are the checkpoint's (0 for one written before, whose state
    // holds its conversation). Deleted with its run, so that a daemon of the release before,
    // which does not know the table, still deletes runs in a fleet being upgraded.
    r#"
    ALTER TABLE checkpoints ADD COLUMN entries INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE checkpoint_entries (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        entry BLOB NOT NULL,
        PRIMARY KEY (run_id, position)
    ) WITHOUT ROWID;
    "#,
];

/// Brings the database at `connection` to the newest schema.
pub(super) fn migrate(connection: &Connection) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::migrate;
    use crate::store::schema::{CatalogColumn, expected};
    use crate::store::sql::Dialect;

    /// Every column of the database's tables, as `PRAGMA table_info` reports them (a key
    /// column is never null, whatever SQLite's rowid tables allow).
    fn catalog(connection: &Connection) -> Vec<CatalogColumn> {
        let mut tables = connection
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
            )
            .expect("tables");
        let names: Vec<String> = tables
            .query_map([], |row| row.get(0))
            .expect("tables")
            .collect::<Result<_, _>>()
            .expect("tables");
        let mut columns = Vec::new();
        for table in names {
            let mut info = connection
                .prepare(&format!("PRAGMA table_info({table})"))
                .expect("info");
            let rows = info
                .query_map([], |row| {
                    Ok((
                        table.clone(),
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, i64>(3)? == 0 && row.get::<_, i64>(5)? == 0,
                    ))
                })
                .expect("info");
            columns.extend(rows.map(|row| row.expect("column")));
        }
        columns.sort();
        columns
    }

    #[test]
    fn the_migrations_reach_the_shared_table_list_from_nothing_and_from_an_old_release() {
        // As the daemon does before its first connection.
        crate::store::install_page_cache().expect("page cache");
        let fresh = Connection::open_in_memory().expect("memory");
        migrate(&fresh).expect("migrates");
        assert_eq!(catalog(&fresh), expected(Dialect::Sqlite));
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("airlock.db");
        std::fs::write(&path, include_bytes!("fixtures/schema-v3.db")).expect("fixture");
        let old = Connection::open(&path).expect("opens");
        migrate(&old).expect("migrates");
        assert_eq!(catalog(&old), expected(Dialect::Sqlite));
    }
}
