//! The PostgreSQL store's writer: one task owns one connection, takes writes from a queue in
//! the order they were handed over, and commits every write that arrived while the previous
//! commit ran in one transaction (group commit), as the SQLite store's writer does — a round
//! trip to the server is the commit's cost, so a busy daemon pays it per batch, not per write.
//! A write is answered only after its transaction committed.
//!
//! A batch is one flight and a `COMMIT`: two round trips, however many writes it holds. Its
//! `BEGIN`, its runs' fence checks and its writes' statements are sent together, without
//! waiting for the answers in between (tokio-postgres pipelines what is sent before it is
//! answered). Each write takes its turn ([`Turn`]): it sends its last statements together
//! (`Sql::execute_last`) and lets the next write send right behind them; a write whose
//! statements need an earlier one's answer sends them a round trip at a time and lets the
//! next go only when it ends. So the server runs the statements in the order the writes were
//! handed over — a checkpoint after the event it covers — and the contract each write keeps
//! is that nothing but an error path follows its `execute_last`. The `COMMIT` is sent once
//! every answer came back and said it may: a write that failed, or a fence that did not
//! hold, rolls the flight back.
//!
//! A run's events in one batch go as one statement, sent in the place of the first of them
//! ([`appends`]): events are the writes a run makes most, and one at a time each would
//! update the run's row once more.
//!
//! Should one write of a batch fail, the transaction is rolled back and the batch run again
//! with each write inside a savepoint of its own, one after another: the failing one is undone
//! alone and answered with its error, and the others commit.
//!
//! A write for a run this daemon owns carries a [`Fence`]: in the batch's flight, before its
//! writes, one statement per run checks that the run is still this daemon's by the epoch it
//! claimed it at, and takes the row's share lock until the commit, so no claim can slip in
//! between the check and the commit (a claim skips locked rows). A write whose run was taken
//! over is answered [`StoreError::Fenced`], alone, like any failing write.
//!
//! Reads do not queue here: they run on the pool's connections, side by side. Each waits,
//! first, until every write handed over before it was answered (a ticket the writer counts
//! up), so a read never misses a write its caller handed over earlier, as with SQLite.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::Pool;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio_postgres::types::ToSql;

use super::appends;
use super::batch::{Append, Fence, Reply, Write, panicked};
use super::client::{Conn, Lane, Turn, bounded, discard, io, no_answer_within, no_connection};
use crate::store::rows::EventRow;
use crate::store::{Pending, StoreError, StoreResult};

/// Whether a fence's run is still its node's at its epoch; locks the run's row (shared) until
/// the transaction ends.
const STILL_OWNED: &str =
    "SELECT 1 FROM runs WHERE run_id = $1 AND owner = $2 AND epoch = $3 FOR SHARE";

/// The most requests one batch takes: a bound on how long the first of them waits for the
/// others' statements, far above what a busy daemon queues in one commit's time.
const MAX_BATCH: usize = 512;

/// A write's statements, as a future made afresh each time they run (they may run twice).
pub(super) type Work<T> = Box<dyn Fn(Lane) -> BoxFuture<'static, StoreResult<T>> + Send>;

/// The claims of a batch whose fence was checked (and whose run's row is share-locked) in
/// its transaction so far: run, node and epoch.
type Checked = HashSet<(String, String, i64)>;

struct Request<T> {
    fence: Option<Fence>,
    work: Work<T>,
    reply: Reply<T>,
}

impl<T: Send + 'static> Write for Request<T> {
    fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    fn run(&mut self, lane: Lane) -> BoxFuture<'_, bool> {
        let run = (self.work)(lane);
        self.reply.keep(run).boxed()
    }

    fn refuse(&mut self, error: StoreError) {
        self.reply.refuse(error);
    }

    fn answer(self: Box<Self>, failed: Option<StoreError>) {
        self.reply.send(failed);
    }
}

/// The writes handed over (by ticket) and answered so far, for reads to wait on.
struct Tickets {
    handed: AtomicU64,
    answered: watch::Sender<u64>,
}

type Queue = mpsc::UnboundedSender<(u64, Box<dyn Write>)>;

pub(super) struct Writer {
    /// Held while a write takes its ticket and joins the queue, so tickets reach the queue
    /// in the order they are counted: "answered up to N" then means every write up to N.
    jobs: Mutex<Queue>,
    tickets: Arc<Tickets>,
    pool: Pool,
    /// How long a batch or a read may wait for the server (see [`bounded`]).
    deadline: Duration,
}

impl Writer {
    /// Starts the writer's task on the current runtime; its connection comes from `pool`,
    /// as do the reads'. A batch or a read the server has not answered within `deadline`
    /// fails, and its connection is closed.
    pub(super) fn start(pool: Pool, deadline: Duration) -> Writer {
        let (jobs, queue) = mpsc::unbounded_channel();
        let tickets = Arc::new(Tickets {
            handed: AtomicU64::new(0),
            answered: watch::Sender::new(0),
        });
        tokio::spawn(serve(pool.clone(), queue, tickets.clone(), deadline));
        Writer {
            jobs: Mutex::new(jobs),
            tickets,
            pool,
            deadline,
        }
    }

    /// Runs `work` in the next batch's transaction (once, or twice when another write of the
    /// batch fails), if `fence` holds; answers after the commit.
    pub(super) fn write<T: Send + 'static>(
        &self,
        fence: Option<Fence>,
        work: impl Fn(Lane) -> BoxFuture<'static, StoreResult<T>> + Send + 'static,
    ) -> Pending<T> {
        let (answer, pending) = Pending::channel();
        let request = Box::new(Request {
            fence,
            work: Box::new(work),
            reply: Reply::new(answer),
        });
        self.hand_over(request, pending)
    }

    /// Appends `row` in the next batch's transaction, if `fence` holds, together with the
    /// run's other events in that batch ([`appends`]); answers after the commit.
    pub(super) fn append(&self, fence: Option<Fence>, row: Arc<EventRow>) -> Pending<()> {
        let (answer, pending) = Pending::channel();
        self.hand_over(Box::new(Append::new(fence, row, answer)), pending)
    }

    /// Queues `write` with the next ticket; `pending` is its caller's answer.
    fn hand_over<T>(&self, write: Box<dyn Write>, pending: Pending<T>) -> Pending<T> {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        let ticket = self.tickets.handed.fetch_add(1, Ordering::SeqCst) + 1;
        match jobs.send((ticket, write)) {
            Ok(()) => pending,
            Err(_) => Pending::ready(Err(StoreError::Io("the store has stopped".into()))),
        }
    }

    /// Runs `work` on a connection of the pool once every write handed over before it was
    /// answered.
    pub(super) fn read<T: Send + 'static>(
        &self,
        work: impl FnOnce(Conn) -> BoxFuture<'static, StoreResult<T>> + Send + 'static,
    ) -> Pending<T> {
        let (answer, pending) = Pending::channel();
        let ticket = self.tickets.handed.load(Ordering::SeqCst);
        let mut answered = self.tickets.answered.subscribe();
        let (pool, deadline) = (self.pool.clone(), self.deadline);
        tokio::spawn(async move {
            if answered.wait_for(|done| *done >= ticket).await.is_err() {
                let _ = answer.send(Err(StoreError::Io("the store has stopped".into())));
                return;
            }
            let outcome = bounded(&pool, deadline, |c| guarded(work(c)).boxed()).await;
            let _ = answer.send(outcome);
        });
        pending
    }
}

impl Writer {
    /// Runs `work` in a transaction of its own on a pooled connection, apart from the
    /// writer's batches, after the writes handed before it: what takes a row lock there (an
    /// audit chain's head row, which orders two daemons appending for one tenant) holds it
    /// for that transaction's few statements, not for a batch of every run's writes — so
    /// appends of a fleet for one tenant take turns without holding up anyone's run, and two
    /// of them can never wait on each other's batches. A lock held past `lock_timeout` (a
    /// stuck peer) fails this request alone.
    pub(super) fn transaction<T: Send + 'static>(
        &self,
        work: impl FnOnce(Conn) -> BoxFuture<'static, StoreResult<T>> + Send + 'static,
    ) -> Pending<T> {
        self.read(move |c| {
            async move {
                statement(&c, "BEGIN; SET LOCAL lock_timeout = '5s'").await?;
                match work(c.clone()).await {
                    Ok(value) => {
                        statement(&c, "COMMIT").await?;
                        Ok(value)
                    }
                    Err(error) => {
                        let _ = statement(&c, "ROLLBACK").await;
                        Err(error)
                    }
                }
            }
            .boxed()
        })
    }
}

/// A panic inside a read's work is that read's error, not the end of the store.
async fn guarded<T>(work: BoxFuture<'static, StoreResult<T>>) -> StoreResult<T> {
    AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .unwrap_or_else(|_| Err(panicked()))
}

async fn serve(
    pool: Pool,
    mut queue: mpsc::UnboundedReceiver<(u64, Box<dyn Write>)>,
    tickets: Arc<Tickets>,
    deadline: Duration,
) {
    let mut connection: Option<Conn> = None;
    let mut batch = Vec::new();
    let statements = Arc::new(AtomicUsize::new(0));
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let last = batch.last().map_or(0, |(ticket, _)| *ticket);
        let mut writes: Vec<Box<dyn Write>> = batch.drain(..).map(|(_, write)| write).collect();
        let committing = async {
            let client = writer_connection(&pool, &mut connection).await?;
            let started = std::time::Instant::now();
            statements.store(0, Ordering::Relaxed);
            let committed = commit_batch(&client, &statements, &mut writes).await;
            let metrics = crate::metrics::global();
            metrics.store_commit("postgres", started.elapsed());
            metrics.store_commit_statements("postgres", statements.swap(0, Ordering::Relaxed));
            committed
        };
        // A batch the server never answers is failed, and its connection closed: the
        // server, should it wake up, rolls the open transaction back when it reads the close
        // — or, had the COMMIT reached it, commits it, as after any commit whose answer was
        // lost. Either way the batch's runs are given back, and resumed from what the store
        // holds.
        let failed = match tokio::time::timeout(deadline, committing).await {
            Ok(Ok(())) => None,
            // Nothing of the batch committed, and its connection may still be inside the
            // batch's transaction (a `ROLLBACK` that failed), which the next batch's `BEGIN`
            // would join: a new connection is taken instead.
            Ok(Err(error)) => {
                if let Some(spent) = connection.take() {
                    discard(spent);
                }
                Some(error)
            }
            Err(_) => {
                if let Some(stuck) = connection.take() {
                    discard(stuck);
                }
                Some(no_answer_within(deadline))
            }
        };
        for write in writes {
            write.answer(failed.clone());
        }
        tickets.answered.send_replace(last);
    }
}

/// The writer's connection: the one it has, or a new one from the pool when that one broke
/// (a restarted server, a dropped link).
async fn writer_connection(pool: &Pool, connection: &mut Option<Conn>) -> StoreResult<Conn> {
    if let Some(client) = connection
        && !client.is_closed()
    {
        return Ok(client.clone());
    }
    let client = Arc::new(pool.get().await.map_err(|err| no_connection(&err))?);
    *connection = Some(client.clone());
    Ok(client)
}

/// Commits the batch: all of it at once, or — when a write failed — the others without it.
/// An error only when nothing of the batch was committed.
///
/// All at once is two round trips: `BEGIN`, each run's fence check and every write's
/// statements go to the server together ([`fly`]), and `COMMIT` once their answers say it
/// may. Without a failure that is the whole cost of a commit, however many writes and runs
/// the batch holds.
async fn commit_batch(
    client: &Conn,
    statements: &Arc<AtomicUsize>,
    writes: &mut [Box<dyn Write>],
) -> StoreResult<()> {
    if !fly(client, statements, writes).await? {
        statement(client, "ROLLBACK").await?;
        statement(client, "BEGIN").await?;
        if let Err(error) = run_apart(client, statements, writes).await {
            let _ = statement(client, "ROLLBACK").await;
            return Err(error);
        }
    }
    match statement(client, "COMMIT").await {
        Ok(()) => Ok(()),
        Err(error) => {
            let _ = statement(client, "ROLLBACK").await;
            Err(error)
        }
    }
}

/// Opens the batch's transaction and runs it in one flight: `BEGIN`, then each run's fence
/// check, then the writes' statements, each write's as soon as the one before it sent its
/// last ([`Turn`]). Whether every fence held and every write succeeded; an error only when
/// the server did not take the flight (whose connection [`serve`] then gives up).
///
/// What could not be sent ahead still runs in order, a round trip at a time: a statement
/// the connection has not prepared yet, or a write whose statements depend on earlier ones'
/// answers (those hold their turn until they end).
async fn fly(
    client: &Conn,
    statements: &Arc<AtomicUsize>,
    writes: &mut [Box<dyn Write>],
) -> StoreResult<bool> {
    let check = client.prepare_cached(STILL_OWNED).await.map_err(io)?;
    appends::merge(writes);
    let mut fences: Vec<Fence> = Vec::new();
    for fence in writes.iter().filter_map(|write| write.fence()) {
        if !fences.iter().any(|held| held.is(fence)) {
            fences.push(fence.clone());
        }
    }
    let params: Vec<[&(dyn ToSql + Sync); 3]> = fences
        .iter()
        .map(|fence| [&fence.run_id as _, &fence.node as _, &fence.epoch as _])
        .collect();
    let checks =
        futures::future::join_all(params.iter().map(|params| client.query_opt(&check, params)));
    let (turns, lates) = Turn::chain(writes.len());
    let runs = futures::future::join_all(writes.iter_mut().zip(turns).map(|(write, turn)| {
        write.run(Lane {
            conn: client.clone(),
            turn,
            statements: statements.clone(),
        })
    }));
    // A statement is sent when its future is first polled, and `join!` polls in this order:
    // `BEGIN` first. All of them are polled until the last answer: the connection hands the
    // answers over in the order it sent the statements, and waits for a slow taker.
    let (begun, checked, runs) = futures::join!(statement(client, "BEGIN"), checks, runs);
    // Should `BEGIN` fail while the server took the rest (it fails only with its connection,
    // which the rest then fails with), the writes would have run without a transaction.
    begun?;
    let held: Vec<StoreResult<bool>> = checked
        .into_iter()
        .map(|answer| answer.map(|row| row.is_some()).map_err(io))
        .collect();
    // A write that ran a statement after its last ones (one on its way to an error, or one
    // that broke `execute_last`'s contract) may have run it behind the next write's: all of
    // them run again, one at a time.
    let mut all =
        runs.into_iter().all(|ok| ok) && !lates.iter().any(|late| late.load(Ordering::Relaxed));
    for write in writes.iter_mut() {
        let Some(fence) = write.fence() else { continue };
        let at = fences
            .iter()
            .position(|held| held.is(fence))
            .unwrap_or_default();
        let refused = match &held[at] {
            Ok(true) => continue,
            Ok(false) => StoreError::Fenced {
                run_id: fence.run_id.clone(),
            },
            Err(error) => error.clone(),
        };
        write.refuse(refused);
        all = false;
    }
    Ok(all)
}

/// Runs each write in a savepoint of its own, one after another, undoing only those that
/// fail.
async fn run_apart(
    client: &Conn,
    statements: &Arc<AtomicUsize>,
    writes: &mut [Box<dyn Write>],
) -> StoreResult<()> {
    appends::unmerge(writes);
    let mut checked = Checked::new();
    for write in writes {
        statement(client, "SAVEPOINT job").await?;
        let lane = Lane {
            conn: client.clone(),
            turn: Turn::default(),
            statements: statements.clone(),
        };
        if !run_fenced(lane, write.as_mut(), &mut checked).await {
            statement(client, "ROLLBACK TO SAVEPOINT job").await?;
            // The rollback released the row locks the undone write's checks took.
            checked.clear();
        }
        statement(client, "RELEASE SAVEPOINT job").await?;
    }
    Ok(())
}

/// Runs a write alone, after its fence's check when this transaction has not made it yet;
/// whether both succeeded.
async fn run_fenced(lane: Lane, write: &mut dyn Write, checked: &mut Checked) -> bool {
    if let Some(fence) = write.fence() {
        let claim = (fence.run_id.clone(), fence.node.clone(), fence.epoch);
        if checked.contains(&claim) {
            return write.run(lane).await;
        }
        match still_owned(&lane.conn, fence).await {
            Ok(true) => {
                checked.insert(claim);
            }
            Ok(false) => {
                write.refuse(StoreError::Fenced { run_id: claim.0 });
                return false;
            }
            Err(error) => {
                write.refuse(error);
                return false;
            }
        }
    }
    write.run(lane).await
}

/// One of the batch's own statements (no parameters: the simple protocol, one round trip).
async fn statement(client: &Conn, sql: &str) -> StoreResult<()> {
    client.batch_execute(sql).await.map_err(io)
}

/// Whether the fence's run is still its node's at its epoch; locks the run's row (shared)
/// until the transaction ends, so no claim takes the run before the commit.
async fn still_owned(client: &Conn, fence: &Fence) -> StoreResult<bool> {
    let statement = client.prepare_cached(STILL_OWNED).await.map_err(io)?;
    let row = client
        .query_opt(&statement, &[&fence.run_id, &fence.node, &fence.epoch])
        .await
        .map_err(io)?;
    Ok(row.is_some())
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
