//! The schema of the PostgreSQL store, as versioned migrations: the database records its
//! version in `airlock_schema`, and a daemon applies the migrations it has not seen at start.
//! Several daemons of a fleet may start at once: the migration runs in one transaction under
//! an advisory lock, so one applies it and the others find it done. A database newer than
//! the daemon is refused, never touched.

use tokio_postgres::Client;

/// Each entry moves the schema one version forward; the index is the version it leaves.
/// Never edit a shipped entry: add one.
///
/// Version 1 is the SQLite store's schema at its version 7, in PostgreSQL's types: blobs are
/// `bytea`, times and counters `bigint`. Approvals get an identity column for the order
/// SQLite's `rowid` gives.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        labels TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        tenant TEXT NOT NULL,
        settings BYTEA
    );
    CREATE INDEX sessions_by_tenant ON sessions(tenant, created_at_ms DESC);
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        state TEXT NOT NULL,
        start BYTEA NOT NULL,
        model TEXT NOT NULL,
        workspace TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        finished_at_ms BIGINT,
        stop_reason INTEGER,
        stop_detail TEXT NOT NULL DEFAULT '',
        final_text TEXT NOT NULL DEFAULT '',
        usage BYTEA NOT NULL,
        steps BIGINT NOT NULL DEFAULT 0,
        last_seq BIGINT NOT NULL DEFAULT 0,
        tenant TEXT NOT NULL
    );
    CREATE INDEX runs_by_time ON runs(created_at_ms DESC, run_id DESC);
    CREATE INDEX runs_by_session ON runs(session_id, created_at_ms DESC);
    CREATE INDEX runs_by_tenant ON runs(tenant, created_at_ms DESC);
    CREATE INDEX runs_by_end ON runs(finished_at_ms) WHERE finished_at_ms IS NOT NULL;
    CREATE INDEX runs_unfinished ON runs(created_at_ms) WHERE state <> 'finished';
    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        seq BIGINT NOT NULL,
        event BYTEA NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE checkpoints (
        run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
        checkpoint_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        state BYTEA NOT NULL,
        created_at_ms BIGINT NOT NULL
    );
    CREATE TABLE effects (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        call_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        idempotent BOOLEAN NOT NULL,
        intent_at_ms BIGINT NOT NULL,
        result BYTEA,
        pending_changes BYTEA,
        PRIMARY KEY (run_id, call_id)
    );
    CREATE TABLE approvals (
        ordinal BIGINT GENERATED ALWAYS AS IDENTITY,
        approval_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        call_id TEXT NOT NULL,
        request BYTEA NOT NULL,
        subject TEXT NOT NULL,
        decision INTEGER,
        reason TEXT,
        decided_by TEXT,
        resolved_at_ms BIGINT
    );
    CREATE INDEX approvals_by_call ON approvals(run_id, call_id, ordinal DESC);
    CREATE TABLE session_grants (
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        grant_key TEXT NOT NULL,
        PRIMARY KEY (session_id, grant_key)
    );
    CREATE TABLE spans (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        span_id TEXT NOT NULL,
        start_unix_nano BIGINT NOT NULL,
        span BYTEA NOT NULL,
        PRIMARY KEY (run_id, span_id)
    );
    CREATE TABLE outputs (
        execution_id TEXT PRIMARY KEY,
        digest TEXT NOT NULL,
        size BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL
    );
    CREATE INDEX outputs_by_age ON outputs(created_at_ms, execution_id);
    CREATE INDEX outputs_by_digest ON outputs(digest);
    CREATE TABLE execution_owners (
        execution_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        run_id TEXT,
        started_at_ms BIGINT NOT NULL
    );
    CREATE TABLE exchanges (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        ordinal BIGINT NOT NULL,
        exchange TEXT NOT NULL,
        PRIMARY KEY (run_id, ordinal)
    );
"#,
    // 2: a fleet's leases. Each daemon (node) holds a lease it renews; each run has an owner
    // and an epoch a claim raises; each call's intent says until when the call may act.
    // Times are the server's clock (airlock_now_ms), so the daemons' clocks need not agree.
    r#"
    CREATE FUNCTION airlock_now_ms() RETURNS BIGINT LANGUAGE SQL VOLATILE
        AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
    CREATE TABLE nodes (
        node_id TEXT PRIMARY KEY,
        started_at_ms BIGINT NOT NULL,
        expires_at_ms BIGINT NOT NULL
    );
    ALTER TABLE runs ADD COLUMN owner TEXT;
    ALTER TABLE runs ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE effects ADD COLUMN timeout_ms BIGINT;
    ALTER TABLE effects ADD COLUMN deadline_at_ms BIGINT;
    CREATE INDEX effects_in_flight ON effects(run_id) WHERE result IS NULL;
"#,
    // 3: what the fleet's daemons tell each other. Each committed event, approval change and
    // finished run is announced on the channel `airlock` by a trigger, so no write path can
    // forget to; a notification goes out when its transaction commits, and never for one
    // rolled back. An event's notice names its run only: the server sends one notice for the
    // same words in one transaction, so a batch of a run's events costs one. Commands a client sends through one daemon for a run another executes
    // wait in `run_commands` for the run's owner to take and answer them.
    r#"
    CREATE TABLE run_commands (
        command_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        command TEXT NOT NULL,
        sent_at_ms BIGINT NOT NULL,
        taken_by TEXT,
        outcome TEXT
    );
    CREATE INDEX run_commands_untaken ON run_commands(run_id) WHERE taken_by IS NULL AND outcome IS NULL;
    CREATE INDEX approvals_unanswered ON approvals(run_id) WHERE resolved_at_ms IS NULL;
    CREATE FUNCTION airlock_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_TABLE_NAME = 'events' THEN
            PERFORM pg_notify('airlock', 'e ' || NEW.run_id);
        ELSIF TG_TABLE_NAME = 'approvals' THEN
            PERFORM pg_notify('airlock', 'a ' || NEW.approval_id);
        ELSIF TG_TABLE_NAME = 'runs' THEN
            PERFORM pg_notify('airlock', 'f ' || NEW.run_id);
        ELSIF TG_OP = 'INSERT' THEN
            PERFORM pg_notify('airlock', 'c ' || NEW.command_id || ' ' || NEW.run_id);
        ELSE
            PERFORM pg_notify('airlock', 'o ' || NEW.command_id);
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER events_notify AFTER INSERT ON events
        FOR EACH ROW EXECUTE FUNCTION airlock_notify();
    CREATE TRIGGER approvals_notify AFTER INSERT OR UPDATE ON approvals
        FOR EACH ROW EXECUTE FUNCTION airlock_notify();
    CREATE TRIGGER runs_notify AFTER UPDATE OF state ON runs
        FOR EACH ROW WHEN (NEW.state = 'finished' AND OLD.state <> 'finished')
        EXECUTE FUNCTION airlock_notify();
    CREATE TRIGGER run_commands_notify AFTER INSERT OR UPDATE OF outcome ON run_commands
        FOR EACH ROW EXECUTE FUNCTION airlock_notify();
"#,
    // 4: since when each node's lease has held without a break. After an outage of the
    // database longer than a lease every lease has lapsed, live daemons' included; a claim
    // then takes a run only from an owner that had a whole lease to renew and did not (see
    // `leases::claim`). A row a daemon of version 3 writes gets 0: it vouches as it did.
    r#"
    ALTER TABLE nodes ADD COLUMN live_since_ms BIGINT NOT NULL DEFAULT 0;
"#,
    // 5: a session grant is a visible rule: the tool it is for, the command prefix it grants
    // (none: the exact call its key names), what a person reads it as, and when it was made.
    r#"
    ALTER TABLE session_grants ADD COLUMN tool TEXT NOT NULL DEFAULT '';
    ALTER TABLE session_grants ADD COLUMN prefix TEXT;
    ALTER TABLE session_grants ADD COLUMN covers TEXT NOT NULL DEFAULT '';
    ALTER TABLE session_grants ADD COLUMN created_at_ms BIGINT NOT NULL DEFAULT 0;
"#,
    // 6: the audit log, one hash chain per tenant (see `store::audit`), and each chain's
    // head, whose row lock orders two daemons appending for one tenant.
    r#"
    CREATE TABLE audit_log (
        tenant TEXT NOT NULL,
        seq BIGINT NOT NULL,
        at_ms BIGINT NOT NULL,
        kind TEXT NOT NULL,
        actor TEXT NOT NULL,
        subject TEXT NOT NULL,
        reason TEXT NOT NULL,
        details TEXT NOT NULL,
        prev TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (tenant, seq)
    );
    CREATE INDEX audit_log_by_time ON audit_log(tenant, at_ms);
    CREATE TABLE audit_heads (
        tenant TEXT PRIMARY KEY,
        seq BIGINT NOT NULL,
        digest TEXT NOT NULL
    );
"#,
    // 7: a run's input (the task) in a column of its own, for a search of runs by it; null
    // until the daemon opening the store copies it out of `start` (`copy_out_inputs`).
    r#"
    ALTER TABLE runs ADD COLUMN input TEXT;
    CREATE INDEX runs_without_input ON runs(run_id) WHERE input IS NULL;
"#,
    // 8: a checkpoint's conversation entry by entry, so a step writes only what it added;
    // `entries` names how many are the checkpoint's (0 for one written before, whose state
    // holds its conversation). Deleted with its run, so that a daemon of the release before,
    // which does not know the table, still deletes runs in a fleet being upgraded.
    r#"
    ALTER TABLE checkpoints ADD COLUMN entries BIGINT NOT NULL DEFAULT 0;
    CREATE TABLE checkpoint_entries (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        position BIGINT NOT NULL,
        entry BYTEA NOT NULL,
        PRIMARY KEY (run_id, position)
    );
"#,
];

/// The advisory lock a migrating daemon holds (any constant the fleet agrees on: these are
/// the bytes of "airlock" and a version of the lock's meaning).
const MIGRATION_LOCK: i64 = 0x6169_726c_6f63_6b01;

/// Brings the database behind `client` to the newest schema.
pub(super) async fn migrate(client: &mut Client) -> Result<(), String> {
    migrate_to(client, MIGRATIONS.len()).await
}

/// Brings the database behind `client` to schema version `target` (no further), as the
/// daemon that knew `target` versions did; refuses a database newer than that.
pub(super) async fn migrate_to(client: &mut Client, target: usize) -> Result<(), String> {
    let failed = |err: tokio_postgres::Error| super::client::describe(&err);
    let transaction = client.transaction().await.map_err(failed)?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(failed)?;
    transaction
        .batch_execute("CREATE TABLE IF NOT EXISTS airlock_schema (version INTEGER NOT NULL)")
        .await
        .map_err(failed)?;
    let version: i32 = transaction
        .query_opt("SELECT version FROM airlock_schema", &[])
        .await
        .map_err(failed)?
        .map_or(0, |row| row.get(0));
    let target = target.min(MIGRATIONS.len());
    let known = i32::try_from(target).unwrap_or(i32::MAX);
    if version > known {
        return Err(format!(
            "schema version {version} is newer than this daemon knows ({known}); refusing to \
             touch it: a newer airlockd migrated this database, and this one cannot serve it \
             (upgrade it to the fleet's version)"
        ));
    }
    for (index, migration) in MIGRATIONS
        .iter()
        .enumerate()
        .take(target)
        .skip(usize::try_from(version).unwrap_or(0))
    {
        transaction.batch_execute(migration).await.map_err(|err| {
            format!(
                "migration to schema version {} failed: {}",
                index + 1,
                failed(err)
            )
        })?;
    }
    if version < known {
        transaction
            .execute("DELETE FROM airlock_schema", &[])
            .await
            .map_err(failed)?;
        transaction
            .execute(
                "INSERT INTO airlock_schema (version) VALUES ($1)",
                &[&known],
            )
            .await
            .map_err(failed)?;
    }
    transaction.commit().await.map_err(failed)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::store::postgres::{PostgresStore, testing};

    /// The schemas of released versions, kept for ever: `version N`, then a line per column.
    fn released() -> Vec<PathBuf> {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&fixtures)
            .expect("tests/fixtures")
            .filter_map(|entry| Some(entry.ok()?.path().join("postgres-schema.txt")))
            .filter(|path| path.exists())
            .collect();
        found.sort();
        found
    }

    /// The database's columns, as a fixture lists them.
    async fn catalog(client: &Client) -> Vec<String> {
        client
            .query(
                "SELECT table_name::text || ' ' || column_name::text || ' ' || data_type::text
                        || ' ' || is_nullable::text
                 FROM information_schema.columns
                 WHERE table_schema = 'public' AND table_name <> 'airlock_schema'
                 ORDER BY table_name, column_name",
                &[],
            )
            .await
            .expect("catalog")
            .iter()
            .map(|row| row.get(0))
            .collect()
    }

    #[tokio::test]
    async fn each_released_schema_is_still_what_its_migrations_make_and_this_daemon_opens_it() {
        let fixtures = released();
        assert!(
            !fixtures.is_empty(),
            "no released schema under tests/fixtures"
        );
        for fixture in fixtures {
            let text = std::fs::read_to_string(&fixture).expect("read");
            let mut lines = text.lines().filter(|line| !line.starts_with('#'));
            let version: usize = lines
                .next()
                .and_then(|line| line.strip_prefix("version "))
                .and_then(|number| number.parse().ok())
                .unwrap_or_else(|| panic!("{}: no `version N` line", fixture.display()));
            let columns: Vec<String> = lines.map(str::to_owned).collect();
            let url = testing::fresh_database().await;
            let (mut client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connects");
            let driver = tokio::spawn(connection);
            // Shipped migrations are never edited: up to the release's version they make
            // exactly what the release made.
            migrate_to(&mut client, version).await.expect("migrates");
            let made = catalog(&client).await;
            assert!(
                made == columns,
                "{}: the migrations up to version {version} no longer make the released \
                 schema; what they make:\nversion {version}\n{}",
                fixture.display(),
                made.join("\n")
            );
            // A daemon of this version opens a database the release left, and takes it on.
            drop(
                PostgresStore::connect(&url, std::time::Duration::from_secs(5))
                    .await
                    .expect("this daemon opens the released schema"),
            );
            let now: i32 = client
                .query_one("SELECT version FROM airlock_schema", &[])
                .await
                .expect("version")
                .get(0);
            assert_eq!(usize::try_from(now).expect("positive"), MIGRATIONS.len());
            drop(client);
            let _ = driver.await;
        }
    }

    #[tokio::test]
    async fn a_daemon_of_a_release_refuses_a_database_a_later_one_migrated_naming_both() {
        let url = testing::fresh_database().await;
        let (mut client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connects");
        let driver = tokio::spawn(connection);
        migrate(&mut client).await.expect("migrates");
        let older = MIGRATIONS.len() - 1;
        let refused = migrate_to(&mut client, older)
            .await
            .expect_err("an older daemon took a newer database");
        assert!(
            refused.contains(&format!("schema version {}", MIGRATIONS.len()))
                && refused.contains(&format!("({older})")),
            "{refused}"
        );
        drop(client);
        let _ = driver.await;
    }
}
