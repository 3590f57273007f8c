//! The PostgreSQL store's connections: the shared queries' connection ([`Pg`]), whose
//! parameters and columns are converted by the types the server gives each statement, and
//! the few helpers the fleet's own statements (leases, the relay) use. Every statement goes
//! through the connection's statement cache (preparing costs a round trip of its own).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use deadpool_postgres::{Object, Pool};
use futures::future::BoxFuture;
use tokio::sync::oneshot;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use crate::store::rows::corrupt;
use crate::store::sql::{self, Arg, Dialect, Sql, Value};
use crate::store::{StoreError, StoreResult};

/// A connection a request's future holds a share of: the writer's, or one from the pool.
pub(super) type Conn = Arc<Object>;

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

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

/// Why the pool handed out no connection, in the server's own words when it refused one (a
/// missing database, a wrong password: deadpool's `Display` says only "db error" for
/// either). The words never hold the password: the server does not repeat it.
pub(super) fn pool_error(err: &deadpool_postgres::PoolError) -> String {
    use deadpool_postgres::PoolError;
    match err {
        PoolError::Backend(err) => describe(err),
        PoolError::Timeout(_) => "the database did not answer in time".into(),
        PoolError::PostCreateHook(hook) => hook.to_string(),
        PoolError::Closed | PoolError::NoRuntimeSpecified => err.to_string(),
    }
}

/// [`pool_error`] as a store error, for a request that found no connection.
pub(super) fn no_connection(err: &deadpool_postgres::PoolError) -> StoreError {
    StoreError::Io(format!(
        "no connection to the database: {}",
        pool_error(err)
    ))
}

/// Why a request failed whose answer did not come within `deadline`.
pub(super) fn no_answer_within(deadline: Duration) -> StoreError {
    StoreError::Io(format!(
        "the database did not answer within {} s",
        deadline.as_secs_f32()
    ))
}

/// Closes a connection whose request got no answer in time, rather than hand it out again:
/// a frozen server's connection would hold every request given it, and a server that wakes
/// up ends the transaction left open on it when it reads the close.
pub(super) fn discard(connection: Conn) {
    // Shared only while a request's future still runs on it; the timed-out one was dropped.
    if let Ok(object) = Arc::try_unwrap(connection) {
        drop(Object::take(object));
    }
}

/// Runs `work` on a connection of `pool`, the wait for a connection included, bounded by
/// `deadline`: a server that takes requests and never answers them (frozen, or behind a
/// link that lost its way without a reset) fails the request, as one that is down does.
pub(super) async fn bounded<T>(
    pool: &Pool,
    deadline: Duration,
    work: impl FnOnce(Conn) -> BoxFuture<'static, StoreResult<T>>,
) -> StoreResult<T> {
    let until = tokio::time::Instant::now() + deadline;
    let connection = match tokio::time::timeout_at(until, pool.get()).await {
        Ok(Ok(connection)) => Arc::new(connection),
        Ok(Err(err)) => return Err(no_connection(&err)),
        Err(_) => return Err(no_answer_within(deadline)),
    };
    match tokio::time::timeout_at(until, work(connection.clone())).await {
        Ok(outcome) => outcome,
        Err(_) => {
            discard(connection);
            Err(no_answer_within(deadline))
        }
    }
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

/// A write's place in its batch's flight (see `writer`): the statements of a batch's writes
/// go to the server in the order the writes were handed over, each write's as soon as the
/// one before it sent its last statements ([`Sql::execute_last`]) — or finished, when it
/// had none. A write waits for its turn before its first statement and passes it on after
/// its last; a dropped turn is passed on once the turn before it was.
///
/// A statement after a write's last ones could reach the server behind the next write's: it
/// marks the turn late, and the batch runs again one write at a time. A write
/// on its way to an error (the only one that may do so) fails the flight anyway.
#[derive(Default)]
pub(super) struct Turn {
    /// Answered (or dropped) when the write before this one has sent its last statements.
    before: Mutex<Option<oneshot::Receiver<()>>>,
    /// This write's word to the one after it.
    after: Mutex<Option<oneshot::Sender<()>>>,
    /// Whether the write passed its turn on, and then whether it ran a statement after
    /// that; none for a request with no batch to take turns in.
    late: Option<(AtomicBool, Arc<AtomicBool>)>,
}

impl Turn {
    /// Turns for `count` writes in a row, the first of which need not wait, and for each
    /// whether it turned out late.
    pub(super) fn chain(count: usize) -> (Vec<Turn>, Vec<Arc<AtomicBool>>) {
        let lates: Vec<Arc<AtomicBool>> = (0..count).map(|_| Arc::default()).collect();
        let turns: Vec<Turn> = lates
            .iter()
            .map(|late| Turn {
                before: Mutex::default(),
                after: Mutex::default(),
                late: Some((AtomicBool::new(false), late.clone())),
            })
            .collect();
        for pair in turns.windows(2) {
            let (after, before) = oneshot::channel();
            *pair[0].after.lock().unwrap_or_else(PoisonError::into_inner) = Some(after);
            *pair[1]
                .before
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(before);
        }
        (turns, lates)
    }

    /// Waits until the write before this one has sent its last statements (at once when
    /// there is none, or it already did); a statement after the write's last marks it late.
    async fn wait(&self) {
        if let Some((passed, late)) = &self.late
            && passed.load(Ordering::Relaxed)
        {
            late.store(true, Ordering::Relaxed);
        }
        let before = self
            .before
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(before) = before {
            // Dropped (the write ended without a last statement) is passed on too.
            let _ = before.await;
        }
    }

    /// Lets the next write send its statements.
    fn pass(&self) {
        if let Some((passed, _)) = &self.late {
            passed.store(true, Ordering::Relaxed);
        }
        let after = self
            .after
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(after) = after {
            let _ = after.send(());
        }
    }
}

impl Drop for Turn {
    /// A write that ends without passing its turn on (one with no statements of its own, or
    /// one that failed before its last) passes it on once the write before it did: at once,
    /// the next write could send its statements ahead of that one's.
    fn drop(&mut self) {
        let before = self
            .before
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let after = self
            .after
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // Without a write after it, or once the one before it passed, dropping `after` is
        // the word; outside a runtime there is no flight to keep in order.
        if let (Some(before), Some(after)) = (before, after)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = before.await;
                let _ = after.send(());
            });
        }
    }
}

/// The connection a write of the writer's batch runs on, with the write's turn in its
/// batch (none for a write run alone) and the batch's count of statements.
pub(super) struct Lane {
    pub(super) conn: Conn,
    pub(super) turn: Turn,
    pub(super) statements: Arc<AtomicUsize>,
}

impl Lane {
    /// Takes the write's turn and passes it on, sending nothing: for a write whose statement
    /// an earlier write of its batch sends.
    pub(super) async fn pass(&self) {
        self.turn.wait().await;
        self.turn.pass();
    }
}

/// What the shared queries run on: a request's connection, as [`Pg`].
pub(super) trait OnPg {
    fn pg(&self) -> Pg<'_>;
}

impl OnPg for Lane {
    fn pg(&self) -> Pg<'_> {
        Pg {
            conn: &self.conn,
            turn: &self.turn,
            statements: Some(&self.statements),
        }
    }
}

impl OnPg for Conn {
    fn pg(&self) -> Pg<'_> {
        Pg::alone(self)
    }
}

/// A connection of the store, as the shared queries see it.
pub(super) struct Pg<'a> {
    conn: &'a Object,
    turn: &'a Turn,
    /// Where a write counts its statements (none for a read).
    statements: Option<&'a AtomicUsize>,
}

/// The turn of a request with no batch to take turns in.
static NO_TURN: Turn = Turn {
    before: Mutex::new(None),
    after: Mutex::new(None),
    late: None,
};

impl<'a> Pg<'a> {
    /// A connection a request has to itself.
    pub(super) fn alone(conn: &'a Object) -> Pg<'a> {
        Pg {
            conn,
            turn: &NO_TURN,
            statements: None,
        }
    }

    /// Counts `statements` toward the batch's, for a write.
    fn count(&self, statements: usize) {
        if let Some(counted) = self.statements {
            counted.fetch_add(statements, Ordering::Relaxed);
        }
    }
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// A parameter goes as the type the server expects in its place: an integer as the
/// column's width, a null as whatever it stands for.
impl ToSql for Arg<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match *self {
            Arg::Null => Ok(IsNull::Yes),
            Arg::Int(number) => match *ty {
                Type::INT2 => i16::try_from(number)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(number)?.to_sql(ty, out),
                Type::INT8 => number.to_sql(ty, out),
                _ => Err(format!("an integer where the server expects {ty}").into()),
            },
            Arg::Bool(flag) if <bool as ToSql>::accepts(ty) => flag.to_sql(ty, out),
            Arg::Text(text) if <&str as ToSql>::accepts(ty) => text.to_sql(ty, out),
            Arg::Blob(bytes) if <&[u8] as ToSql>::accepts(ty) => bytes.to_sql(ty, out),
            Arg::Texts(texts) if <&[String] as ToSql>::accepts(ty) => texts.to_sql(ty, out),
            Arg::Ints(ints) if <&[i64] as ToSql>::accepts(ty) => ints.to_sql(ty, out),
            Arg::Blobs(blobs) if <&[&[u8]] as ToSql>::accepts(ty) => blobs.to_sql(ty, out),
            other => Err(format!("{other:?} where the server expects {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        // Checked by `to_sql`, which knows the value.
        true
    }

    to_sql_checked!();
}

/// Column `index` of `row` as a [`Value`], by the column's type.
fn value(row: &Row, index: usize) -> StoreResult<Value> {
    fn take<'a, T: FromSql<'a>>(row: &'a Row, index: usize) -> StoreResult<Option<T>> {
        row.try_get(index).map_err(corrupt)
    }
    let ty = row.columns()[index].type_();
    let value = match *ty {
        Type::INT2 => take::<i16>(row, index)?.map(|n| Value::Int(n.into())),
        Type::INT4 => take::<i32>(row, index)?.map(|n| Value::Int(n.into())),
        Type::INT8 => take::<i64>(row, index)?.map(Value::Int),
        Type::BOOL => take::<bool>(row, index)?.map(Value::Bool),
        Type::BYTEA => take::<Vec<u8>>(row, index)?.map(Value::Blob),
        _ if <String as FromSql>::accepts(ty) => take::<String>(row, index)?.map(Value::Text),
        _ => {
            return Err(corrupt(format!(
                "a column of type {ty}, which the store never uses"
            )));
        }
    };
    Ok(value.unwrap_or(Value::Null))
}

/// A row of the server's as the shared queries read it.
pub(super) fn row(row: &Row) -> StoreResult<sql::Row> {
    (0..row.len())
        .map(|index| value(row, index))
        .collect::<StoreResult<Vec<_>>>()
        .map(sql::Row)
}

fn params<'a>(args: &'a [Arg<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    args.iter().map(|arg| arg as &(dyn ToSql + Sync)).collect()
}

impl Sql for Pg<'_> {
    const DIALECT: Dialect = Dialect::Postgres;

    async fn execute(&self, sql: &str, args: &[Arg<'_>]) -> StoreResult<u64> {
        self.count(1);
        self.turn.wait().await;
        execute(self.conn, sql, &params(args)).await
    }

    async fn query(&self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Vec<sql::Row>> {
        self.count(1);
        self.turn.wait().await;
        query(self.conn, sql, &params(args))
            .await?
            .iter()
            .map(row)
            .collect()
    }

    /// Prepares the statements (a round trip each the first time a connection sees one),
    /// waits for the turn, sends them all, passes the turn on, then reads their answers.
    async fn execute_last(&self, statements: &[sql::Statement<'_>]) -> StoreResult<Vec<u64>> {
        self.count(statements.len());
        let mut prepared = Vec::with_capacity(statements.len());
        for (sql, _) in statements {
            prepared.push(self.conn.prepare_cached(sql).await.map_err(io)?);
        }
        let bound: Vec<_> = statements.iter().map(|(_, args)| params(args)).collect();
        self.turn.wait().await;
        // tokio-postgres sends a statement when its future is first polled, and reads the
        // answers in the order it sent them.
        let mut flight: Vec<_> = prepared
            .iter()
            .zip(&bound)
            .map(|(statement, params)| Box::pin(self.conn.execute(statement, params)))
            .collect();
        let mut sent = Vec::with_capacity(flight.len());
        for statement in &mut flight {
            sent.push(futures::poll!(statement.as_mut()));
        }
        self.turn.pass();
        let mut changed = Vec::with_capacity(flight.len());
        let mut failed = None;
        for (statement, first) in flight.into_iter().zip(sent) {
            let answer = match first {
                Poll::Ready(answer) => answer,
                Poll::Pending => statement.await,
            };
            match answer {
                Ok(rows) => changed.push(rows),
                // The server skips what follows a failed statement in a transaction; the
                // first error is the one that says why.
                Err(err) => {
                    failed.get_or_insert(err);
                }
            }
        }
        match failed {
            None => Ok(changed),
            Some(err) => Err(io(err)),
        }
    }
}
