//! The little a query of the store needs of a database, so each query is written once
//! (`store::queries`) for both backends: run a statement, read rows of typed columns.
//!
//! A statement is written in PostgreSQL's words — parameters `$1`, `$2`…, a cast after a
//! parameter where PostgreSQL must be told its type (`$2::bigint IS NULL`) — and
//! [`Dialect::render`] turns it into SQLite's (`?1`, no casts). Everything else the two
//! dialects differ in is asked of [`Dialect`], here and nowhere else: which column orders
//! approvals, which tables hold a run's records, whether a list binds as one array, whether
//! runs carry an owner and calls a deadline (a fleet's leases).
//!
//! The interface is async so PostgreSQL can await the network; SQLite's executor answers
//! every call at once, so the same futures complete on their first poll on the SQLite
//! writer's thread (see `sqlite::sql`), with no reactor or executor behind them.

use std::borrow::Cow;

use super::{StoreError, StoreResult};

/// A parameter of a statement, borrowed from the request it belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Null,
    Int(i64),
    Bool(bool),
    Text(&'a str),
    Blob(&'a [u8]),
    /// A list of texts, bound as one array (only where [`Dialect::binds_arrays`]).
    Texts(&'a [String]),
    /// A list of integers, bound as one array (only where [`Dialect::binds_arrays`]).
    Ints(&'a [i64]),
    /// A list of byte strings, bound as one array (only where [`Dialect::binds_arrays`]).
    Blobs(&'a [&'a [u8]]),
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Arg::Int(value)
    }
}

impl From<i32> for Arg<'_> {
    fn from(value: i32) -> Self {
        Arg::Int(i64::from(value))
    }
}

impl From<bool> for Arg<'_> {
    fn from(value: bool) -> Self {
        Arg::Bool(value)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(value: &'a str) -> Self {
        Arg::Text(value)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(value: &'a String) -> Self {
        Arg::Text(value)
    }
}

impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(value: &'a [u8]) -> Self {
        Arg::Blob(value)
    }
}

impl<'a> From<&'a Vec<u8>> for Arg<'a> {
    fn from(value: &'a Vec<u8>) -> Self {
        Arg::Blob(value)
    }
}

impl<'a, T: Into<Arg<'a>>> From<Option<T>> for Arg<'a> {
    fn from(value: Option<T>) -> Self {
        value.map_or(Arg::Null, Into::into)
    }
}

/// A statement's parameters: `args![a, b]` is `&[Arg::from(a), Arg::from(b)]`.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        &[$($crate::store::sql::Arg::from($arg)),*]
    };
}
pub(crate) use args;

/// A column's value as a row holds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Value {
    #[default]
    Null,
    Int(i64),
    Bool(bool),
    Text(String),
    Blob(Vec<u8>),
}

/// A row a query returned; its columns are taken out by index, typed ([`Row::get`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Row(pub(crate) Vec<Value>);

impl Row {
    /// Column `index`, moved out of the row; a value of another type than the schema's (or
    /// a column taken twice) is a corrupt record.
    pub(crate) fn get<T: FromValue>(&mut self, index: usize) -> StoreResult<T> {
        let value = self
            .0
            .get_mut(index)
            .map(std::mem::take)
            .ok_or_else(|| corrupt(format!("a row without column {index}")))?;
        T::from_value(value)
    }
}

/// A column's Rust type.
pub(crate) trait FromValue: Sized {
    fn from_value(value: Value) -> StoreResult<Self>;
}

fn mismatch(wanted: &str, value: &Value) -> StoreError {
    corrupt(format!("a column holds {value:?} where {wanted} belongs"))
}

impl FromValue for i64 {
    fn from_value(value: Value) -> StoreResult<Self> {
        match value {
            Value::Int(number) => Ok(number),
            other => Err(mismatch("an integer", &other)),
        }
    }
}

impl FromValue for i32 {
    fn from_value(value: Value) -> StoreResult<Self> {
        i32::try_from(i64::from_value(value)?).map_err(corrupt)
    }
}

impl FromValue for u64 {
    fn from_value(value: Value) -> StoreResult<Self> {
        u64::try_from(i64::from_value(value)?).map_err(corrupt)
    }
}

impl FromValue for bool {
    /// SQLite keeps a boolean as an integer.
    fn from_value(value: Value) -> StoreResult<Self> {
        match value {
            Value::Bool(flag) => Ok(flag),
            Value::Int(number) => Ok(number != 0),
            other => Err(mismatch("a boolean", &other)),
        }
    }
}

impl FromValue for String {
    fn from_value(value: Value) -> StoreResult<Self> {
        match value {
            Value::Text(text) => Ok(text),
            other => Err(mismatch("a text", &other)),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: Value) -> StoreResult<Self> {
        match value {
            Value::Blob(bytes) => Ok(bytes),
            other => Err(mismatch("a blob", &other)),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: Value) -> StoreResult<Self> {
        match value {
            Value::Null => Ok(None),
            value => T::from_value(value).map(Some),
        }
    }
}

pub(crate) fn corrupt(err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}

/// The SQL a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `sql`, written in PostgreSQL's words, in this dialect's.
    pub(crate) fn render(self, sql: &str) -> Cow<'_, str> {
        match self {
            Dialect::Postgres => Cow::Borrowed(sql),
            Dialect::Sqlite if !sql.contains('$') => Cow::Borrowed(sql),
            Dialect::Sqlite => Cow::Owned(sqlite_parameters(sql)),
        }
    }

    /// Whether runs carry their owner and epoch, and calls the deadline a takeover waits
    /// for: the store several daemons share (`Leases`).
    pub(crate) fn leases(self) -> bool {
        self == Dialect::Postgres
    }

    /// The column approvals are ordered by as they were kept: SQLite's `rowid`, an identity
    /// column in PostgreSQL.
    pub(crate) fn approval_order(self) -> &'static str {
        match self {
            Dialect::Sqlite => "rowid",
            Dialect::Postgres => "ordinal",
        }
    }

    /// The tables of a run's records, `runs` itself last (the others refer to it).
    pub(crate) fn run_tables(self) -> &'static [&'static str] {
        match self {
            Dialect::Sqlite => &[
                "events",
                "checkpoint_entries",
                "checkpoints",
                "effects",
                "approvals",
                "spans",
                "exchanges",
                "runs",
            ],
            Dialect::Postgres => &[
                "events",
                "checkpoint_entries",
                "checkpoints",
                "effects",
                "approvals",
                "spans",
                "exchanges",
                "run_commands",
                "runs",
            ],
        }
    }

    /// Whether a list binds as one parameter ([`Arg::Texts`], `= ANY($1)`).
    pub(crate) fn binds_arrays(self) -> bool {
        self == Dialect::Postgres
    }
}

/// `$n` as `?n`, and the casts PostgreSQL needs after a parameter (`$2::bigint`) left out.
///
/// Runs for every statement on SQLite's one thread (before the statement cache, whose key is
/// the rendered text), so it copies the text between parameters whole, finding each `$`
/// with `str::find` (a `memchr`): a character at a time, it was 3% of a busy store thread's
/// time (`perf`, section 3). `$`, digits, `:` and the cast's letters are ASCII, so every
/// index it slices at is a character boundary.
fn sqlite_parameters(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(dollar) = rest.find('$') {
        let after = &rest[dollar + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            out.push_str(&rest[..=dollar]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..dollar]);
        out.push('?');
        out.push_str(&after[..digits]);
        rest = &after[digits..];
        if let Some(cast) = rest.strip_prefix("::") {
            let name = cast
                .bytes()
                .take_while(|byte| byte.is_ascii_alphanumeric() || *byte == b'_')
                .count();
            rest = &cast[name..];
        }
    }
    out.push_str(rest);
    out
}

/// A statement and its parameters.
pub(crate) type Statement<'a> = (&'a str, &'a [Arg<'a>]);

/// A connection a query runs on: inside the writer's transaction for a write.
#[allow(async_fn_in_trait)]
pub(crate) trait Sql {
    const DIALECT: Dialect;

    /// Runs a statement; how many rows it changed.
    async fn execute(&self, sql: &str, args: &[Arg<'_>]) -> StoreResult<u64>;

    /// Runs a statement that returns rows.
    async fn query(&self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Vec<Row>>;

    /// Runs a write's last statements, in order: how many rows each changed, or the first
    /// failing one's error. PostgreSQL sends them together, and lets the batch's next write
    /// send its own right behind them, before their answers come back (see
    /// `postgres::writer`): a write may run statements after these only on its way to an
    /// error, which undoes the batch and runs each of its writes again, one after another.
    async fn execute_last(&self, statements: &[Statement<'_>]) -> StoreResult<Vec<u64>> {
        let mut changed = Vec::with_capacity(statements.len());
        for (sql, args) in statements {
            changed.push(self.execute(sql, args).await?);
        }
        Ok(changed)
    }

    /// [`Sql::execute_last`] of one statement: a write's only one, or its last.
    async fn execute_last_one(&self, sql: &str, args: &[Arg<'_>]) -> StoreResult<u64> {
        let changed = self.execute_last(&[(sql, args)]).await?;
        Ok(changed.first().copied().unwrap_or_default())
    }

    /// [`Sql::query`] for a statement that returns at most one row.
    async fn query_opt(&self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Option<Row>> {
        Ok(self.query(sql, args).await?.into_iter().next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_gets_numbered_question_marks_and_no_casts() {
        assert_eq!(
            Dialect::Sqlite.render(
                "UPDATE runs SET last_seq = $2::bigint WHERE run_id = $1 AND last_seq = $2::bigint - 1"
            ),
            "UPDATE runs SET last_seq = ?2 WHERE run_id = ?1 AND last_seq = ?2 - 1"
        );
        assert_eq!(
            Dialect::Sqlite.render("WHERE ($12::text IS NULL OR x = $12) LIMIT $3"),
            "WHERE (?12 IS NULL OR x = ?12) LIMIT ?3"
        );
        assert_eq!(Dialect::Sqlite.render("SELECT 1"), "SELECT 1");
        let sql = "SELECT $1::text";
        assert_eq!(Dialect::Postgres.render(sql), sql);
    }

    /// The rewrite `sqlite_parameters` replaced, a character at a time: the oracle the search
    /// below holds the faster one to.
    fn char_by_char(sql: &str) -> String {
        let mut out = String::with_capacity(sql.len());
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '$' || !chars.peek().is_some_and(char::is_ascii_digit) {
                out.push(c);
                continue;
            }
            out.push('?');
            while let Some(digit) = chars.next_if(char::is_ascii_digit) {
                out.push(digit);
            }
            let mut ahead = chars.clone();
            if ahead.next() == Some(':') && ahead.next() == Some(':') {
                chars = ahead;
                while chars
                    .next_if(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .is_some()
                {}
            }
        }
        out
    }

    /// Texts drawn from the pieces a parameter's rewrite turns on — `$`, digits, `:`, cast
    /// names, multi-byte characters (which the faster rewrite must never slice into) — agree
    /// with the character-at-a-time rewrite.
    #[test]
    fn the_rewrite_agrees_with_a_character_at_a_time_one() {
        const PIECES: &[&str] = &[
            "$",
            "$1",
            "$12",
            "$3::bigint",
            "::",
            ":",
            "::text[]",
            "$9::",
            "$$",
            "1",
            "_x",
            "bigint",
            " ",
            "é",
            "€$",
            "日本",
            "'$2'",
            "--",
            "(",
            ")",
            ",",
        ];
        let mut random = crate::test_random::Xorshift(0x5EED_5A1E);
        for _ in 0..20_000 {
            let sql: String = (0..random.below(12))
                .map(|_| PIECES[random.below(PIECES.len())])
                .collect();
            assert_eq!(sqlite_parameters(&sql), char_by_char(&sql), "for {sql:?}");
        }
        for sql in ["", "$", "x$", "$1", "$1::", "$1::int8 ", "a $10::text[] b"] {
            assert_eq!(sqlite_parameters(sql), char_by_char(sql), "for {sql:?}");
        }
    }

    #[test]
    fn a_column_of_another_type_is_corrupt() {
        let mut row = Row(vec![Value::Text("x".into()), Value::Int(1), Value::Null]);
        assert!(matches!(row.get::<i64>(0), Err(StoreError::Corrupt(_))));
        assert!(row.get::<bool>(1).expect("an integer is a boolean"));
        assert_eq!(row.get::<Option<String>>(2).expect("null"), None);
        assert!(row.get::<i64>(3).is_err());
    }
}
