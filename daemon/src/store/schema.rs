//! The tables both backends keep, written once: each column with its type, named in each
//! dialect's words ([`Column::sql_type`]). It is the schema a database of either backend has
//! once migrated, and each backend's tests check that its migrations reach exactly it, from
//! nothing and (SQLite) from an old release's file: a column missing, extra, of another type
//! or nullability in either fails them. The migrations stay each backend's
//! (`sqlite::schema`, `postgres::schema`): a shipped migration is history a database already
//! went through, never rewritten, and the two histories differ (SQLite's grew over eight
//! versions; PostgreSQL's began at SQLite's seventh, in its own types). Only the tests use
//! the list, so it is compiled with them.
//!
//! To add a column: add it here, then a migration to each backend; their schema tests say
//! when one was forgotten.

use super::sql::Dialect;

/// A column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    Text,
    /// 32 bits: enum numbers (a stop reason, a decision).
    Int,
    /// 64 bits: times, counters, sequence numbers.
    BigInt,
    Blob,
    Bool,
}

/// One column of a table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    pub(crate) name: &'static str,
    pub(crate) ty: Type,
    pub(crate) nullable: bool,
    /// Kept by this dialect only (the fleet's owners, epochs and deadlines).
    pub(crate) only: Option<Dialect>,
}

impl Column {
    /// The type as the dialect's catalogue names it: SQLite's declared type, PostgreSQL's
    /// `information_schema` data type.
    pub(crate) fn sql_type(&self, dialect: Dialect) -> &'static str {
        match (dialect, self.ty) {
            (Dialect::Sqlite, Type::Text) => "TEXT",
            (Dialect::Sqlite, Type::Int | Type::BigInt | Type::Bool) => "INTEGER",
            (Dialect::Sqlite, Type::Blob) => "BLOB",
            (Dialect::Postgres, Type::Text) => "text",
            (Dialect::Postgres, Type::Int) => "integer",
            (Dialect::Postgres, Type::BigInt) => "bigint",
            (Dialect::Postgres, Type::Blob) => "bytea",
            (Dialect::Postgres, Type::Bool) => "boolean",
        }
    }
}

const fn col(name: &'static str, ty: Type) -> Column {
    Column {
        name,
        ty,
        nullable: false,
        only: None,
    }
}

const fn null(name: &'static str, ty: Type) -> Column {
    Column {
        name,
        ty,
        nullable: true,
        only: None,
    }
}

const fn postgres(column: Column) -> Column {
    Column {
        only: Some(Dialect::Postgres),
        ..column
    }
}

use Type::{BigInt, Blob, Bool, Int, Text};

/// A table of the store.
pub(crate) struct Table {
    pub(crate) name: &'static str,
    pub(crate) columns: &'static [Column],
    /// Kept by this dialect only (the fleet's nodes and commands).
    pub(crate) only: Option<Dialect>,
}

const fn table(name: &'static str, columns: &'static [Column]) -> Table {
    Table {
        name,
        columns,
        only: None,
    }
}

/// Every table of the store.
pub(crate) const TABLES: &[Table] = &[
    table(
        "sessions",
        &[
            col("session_id", Text),
            col("workspace", Text),
            col("labels", Text),
            col("created_at_ms", BigInt),
            col("tenant", Text),
            null("settings", Blob),
        ],
    ),
    table(
        "runs",
        &[
            col("run_id", Text),
            col("session_id", Text),
            col("state", Text),
            col("start", Blob),
            col("model", Text),
            col("workspace", Text),
            col("trace_id", Text),
            col("created_at_ms", BigInt),
            null("finished_at_ms", BigInt),
            null("stop_reason", Int),
            col("stop_detail", Text),
            col("final_text", Text),
            col("usage", Blob),
            col("steps", BigInt),
            col("last_seq", BigInt),
            col("tenant", Text),
            postgres(null("owner", Text)),
            postgres(col("epoch", BigInt)),
            null("input", Text),
        ],
    ),
    table(
        "events",
        &[col("run_id", Text), col("seq", BigInt), col("event", Blob)],
    ),
    table(
        "checkpoints",
        &[
            col("run_id", Text),
            col("checkpoint_id", Text),
            col("seq", BigInt),
            col("state", Blob),
            col("created_at_ms", BigInt),
            col("entries", BigInt),
        ],
    ),
    table(
        "checkpoint_entries",
        &[
            col("run_id", Text),
            col("position", BigInt),
            col("entry", Blob),
        ],
    ),
    table(
        "effects",
        &[
            col("run_id", Text),
            col("call_id", Text),
            col("tool", Text),
            col("arguments", Text),
            col("idempotent", Bool),
            col("intent_at_ms", BigInt),
            null("result", Blob),
            null("pending_changes", Blob),
            null("timeout_ms", BigInt),
            postgres(null("deadline_at_ms", BigInt)),
        ],
    ),
    table(
        "approvals",
        &[
            postgres(col("ordinal", BigInt)),
            col("approval_id", Text),
            col("run_id", Text),
            col("call_id", Text),
            col("request", Blob),
            col("subject", Text),
            null("decision", Int),
            null("reason", Text),
            null("decided_by", Text),
            null("resolved_at_ms", BigInt),
        ],
    ),
    table(
        "session_grants",
        &[
            col("session_id", Text),
            col("grant_key", Text),
            col("tool", Text),
            null("prefix", Text),
            col("covers", Text),
            col("created_at_ms", BigInt),
        ],
    ),
    table(
        "spans",
        &[
            col("run_id", Text),
            col("span_id", Text),
            col("start_unix_nano", BigInt),
            col("span", Blob),
        ],
    ),
    table(
        "outputs",
        &[
            col("execution_id", Text),
            col("digest", Text),
            col("size", BigInt),
            col("created_at_ms", BigInt),
        ],
    ),
    table(
        "execution_owners",
        &[
            col("execution_id", Text),
            col("tenant", Text),
            null("run_id", Text),
            col("started_at_ms", BigInt),
        ],
    ),
    table(
        "exchanges",
        &[
            col("run_id", Text),
            col("ordinal", BigInt),
            col("exchange", Text),
        ],
    ),
    table(
        "audit_log",
        &[
            col("tenant", Text),
            col("seq", BigInt),
            col("at_ms", BigInt),
            col("kind", Text),
            col("actor", Text),
            col("subject", Text),
            col("reason", Text),
            col("details", Text),
            col("prev", Text),
            col("digest", Text),
        ],
    ),
    table(
        "audit_heads",
        &[col("tenant", Text), col("seq", BigInt), col("digest", Text)],
    ),
    Table {
        name: "nodes",
        columns: &[
            col("node_id", Text),
            col("started_at_ms", BigInt),
            col("expires_at_ms", BigInt),
            col("live_since_ms", BigInt),
        ],
        only: Some(Dialect::Postgres),
    },
    Table {
        name: "run_commands",
        columns: &[
            col("command_id", BigInt),
            col("run_id", Text),
            col("command", Text),
            col("sent_at_ms", BigInt),
            null("taken_by", Text),
            null("outcome", Text),
        ],
        only: Some(Dialect::Postgres),
    },
];

/// A column as a catalogue reports it: its table, name, type (in the dialect's words) and
/// whether it may be null.
pub(crate) type CatalogColumn = (String, String, String, bool);

/// Every column a database of `dialect` has once migrated, sorted.
pub(crate) fn expected(dialect: Dialect) -> Vec<CatalogColumn> {
    let mut columns: Vec<CatalogColumn> = TABLES
        .iter()
        .filter(|table| table.only.is_none_or(|only| only == dialect))
        .flat_map(|table| {
            table
                .columns
                .iter()
                .filter(|column| column.only.is_none_or(|only| only == dialect))
                .map(|column| {
                    (
                        table.name.to_owned(),
                        column.name.to_owned(),
                        column.sql_type(dialect).to_owned(),
                        column.nullable,
                    )
                })
        })
        .collect();
    columns.sort();
    columns
}
