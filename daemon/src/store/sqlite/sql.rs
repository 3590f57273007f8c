//! The shared queries' connection on SQLite ([`Lite`]), and how the writer's thread runs
//! them ([`drive`]).
//!
//! Every call of [`Lite`] does its work before it returns: its futures are ready on their
//! first poll, so a query's future, made of nothing but such calls, completes in one poll on
//! the writer's thread — no reactor, no executor, and the async runtime never waits on
//! SQLite.

use std::cell::Cell;
use std::future::Future;

use futures::FutureExt as _;
use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::store::sql::{Arg, Dialect, Row, Sql, Value};
use crate::store::{StoreError, StoreResult};

thread_local! {
    /// Statements run on this thread since [`statements_run`] last took the count.
    static STATEMENTS: Cell<usize> = const { Cell::new(0) };
}

fn count_statement() {
    STATEMENTS.with(|count| count.set(count.get() + 1));
}

/// The statements run on this thread since the last call (the writer's thread: a batch's,
/// when taken before and after it).
pub(super) fn statements_run() -> usize {
    STATEMENTS.with(|count| count.replace(0))
}

/// The writer's connection, as the shared queries see it.
pub(super) struct Lite<'a>(pub(super) &'a Connection);

/// Runs a shared query to its end on this thread.
pub(super) fn drive<T>(query: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
    query.now_or_never().unwrap_or_else(|| {
        Err(StoreError::Io(
            "a SQLite query waited, which it never does".into(),
        ))
    })
}

fn io(err: rusqlite::Error) -> StoreError {
    StoreError::Io(err.to_string())
}

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Arg::Null => ToSqlOutput::Owned(rusqlite::types::Value::Null),
            Arg::Int(number) => ToSqlOutput::Owned(rusqlite::types::Value::Integer(number)),
            Arg::Bool(flag) => ToSqlOutput::Owned(rusqlite::types::Value::Integer(flag.into())),
            Arg::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Arg::Blob(bytes) => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
            Arg::Texts(_) | Arg::Ints(_) | Arg::Blobs(_) => {
                return Err(rusqlite::Error::ToSqlConversionFailure(
                    "SQLite binds no arrays".into(),
                ));
            }
        })
    }
}

fn value(column: ValueRef<'_>) -> StoreResult<Value> {
    Ok(match column {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(number) => Value::Int(number),
        ValueRef::Text(text) => Value::Text(
            std::str::from_utf8(text)
                .map_err(|err| StoreError::Corrupt(err.to_string()))?
                .to_owned(),
        ),
        ValueRef::Blob(bytes) => Value::Blob(bytes.to_vec()),
        ValueRef::Real(number) => {
            return Err(StoreError::Corrupt(format!(
                "a real number ({number}) where the schema has none"
            )));
        }
    })
}

impl Sql for Lite<'_> {
    const DIALECT: Dialect = Dialect::Sqlite;

    /// Every statement goes through the connection's statement cache: parsing and planning
    /// a statement cost more than the small writes the run loop makes for every event.
    async fn execute(&self, sql: &str, args: &[Arg<'_>]) -> StoreResult<u64> {
        count_statement();
        let sql = Self::DIALECT.render(sql);
        let mut statement = self.0.prepare_cached(&sql).map_err(io)?;
        let changed = statement
            .execute(rusqlite::params_from_iter(args))
            .map_err(io)?;
        Ok(changed as u64)
    }

    async fn query(&self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Vec<Row>> {
        count_statement();
        let sql = Self::DIALECT.render(sql);
        let mut statement = self.0.prepare_cached(&sql).map_err(io)?;
        let columns = statement.column_count();
        let mut rows = statement
            .query(rusqlite::params_from_iter(args))
            .map_err(io)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(io)? {
            let values = (0..columns)
                .map(|index| value(row.get_ref(index).map_err(io)?))
                .collect::<StoreResult<Vec<_>>>()?;
            out.push(Row(values));
        }
        Ok(out)
    }
}
