//! The SQLite store's one thread: it owns the connection, takes requests from a queue, and
//! commits every write that arrived while the previous commit ran in one transaction (group
//! commit). A write is answered only after its transaction committed, so "a client never sees
//! an event the store could lose" holds; a slow disk delays the answers and never blocks the
//! async runtime, whose tasks only wait on [`Pending`] answers.
//!
//! Reads go through the same thread, after the batch's commit: the connection holds the
//! database in exclusive locking mode (which keeps a second daemon out and spares every
//! commit the shared-memory index), so no other connection could read it, and reading after
//! the commit means a read never sees a write that is not yet durable.
//!
//! A batch first runs its writes one after the other in the transaction, which costs each
//! page it touches one write to the WAL at the commit. Should one of them fail (an event out
//! of order, a constraint), the batch is rolled back and run again with each write inside a
//! savepoint of its own: the failing one is undone alone and answered with its error, and the
//! others commit. Savepoints are not the rule because each copies every page its write
//! touches to a sub-journal first, which cost a busy daemon a fifth of its store thread.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::sql::statements_run;
use crate::store::{Pending, StoreError, StoreResult, batched};

/// Run on the store's thread before each commit: tests make it wait, standing for a slow
/// disk.
pub type BeforeCommit = std::sync::Arc<dyn Fn() + Send + Sync>;

/// The most requests one batch takes: a bound on how long the first of them waits for the
/// others' statements, far above what a busy daemon queues in one commit's time.
const MAX_BATCH: usize = 512;

/// A write of a batch: its statements, which may run twice (see the module's doc), and its
/// caller's answer once the batch is done.
trait Write: Send {
    /// Runs the statements inside the batch's transaction; whether they succeeded.
    fn run(&mut self, connection: &Connection) -> bool;
    /// Answers the caller: the last run's outcome, or `failed` when the batch did not commit.
    fn answer(self: Box<Self>, failed: Option<StoreError>);
}

struct Request<T, F> {
    work: F,
    outcome: Option<StoreResult<T>>,
    answer: oneshot::Sender<StoreResult<T>>,
}

impl<T, F> Write for Request<T, F>
where
    T: Send,
    F: Fn(&Connection) -> StoreResult<T> + Send,
{
    fn run(&mut self, connection: &Connection) -> bool {
        let outcome = guarded(|| (self.work)(connection));
        let ok = outcome.is_ok();
        self.outcome = Some(outcome);
        ok
    }

    fn answer(self: Box<Self>, failed: Option<StoreError>) {
        let _ = self.answer.send(batched(failed, self.outcome));
    }
}

enum Job {
    /// Statements for the batch's transaction.
    Write(Box<dyn Write>),
    /// A read, run after the batch's commit.
    Read(Box<dyn FnOnce(&Connection) + Send>),
}

pub(super) struct Writer {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Moves `connection` to a thread of its own. `before_commit` runs before each commit
    /// (tests use it to stand for a slow disk).
    pub(super) fn start(
        connection: Connection,
        before_commit: Option<BeforeCommit>,
    ) -> std::io::Result<Writer> {
        let (jobs, queue) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("airlock-store".into())
            .spawn(move || serve(connection, queue, before_commit))?;
        Ok(Writer {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Runs `work` in the next batch's transaction (once, or twice when another write of
    /// the batch fails); answers after the commit.
    pub(super) fn write<T: Send + 'static>(
        &self,
        work: impl Fn(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> Pending<T> {
        let (answer, pending) = Pending::channel();
        let job = Job::Write(Box::new(Request {
            work,
            outcome: None,
            answer,
        }));
        self.submit(job, pending)
    }

    /// Runs `work` after the next batch's commit and answers at once.
    pub(super) fn read<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> Pending<T> {
        let (sender, pending) = Pending::channel();
        let job = Job::Read(Box::new(move |connection| {
            let _ = sender.send(guarded(|| work(connection)));
        }));
        self.submit(job, pending)
    }

    fn submit<T>(&self, job: Job, pending: Pending<T>) -> Pending<T> {
        match &self.jobs {
            Some(jobs) if jobs.send(job).is_ok() => pending,
            _ => Pending::ready(Err(StoreError::Io("the store has stopped".into()))),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // The thread drains what is queued, commits it, and ends.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A panic inside a request's work is that request's error, not the end of the store.
fn guarded<T>(work: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| {
        Err(StoreError::Io(
            "a store request panicked; the store goes on".into(),
        ))
    })
}

fn serve(connection: Connection, queue: Receiver<Job>, before_commit: Option<BeforeCommit>) {
    while let Ok(first) = queue.recv() {
        let mut writes = Vec::new();
        let mut reads = Vec::new();
        let mut take = |job| match job {
            Job::Write(write) => writes.push(write),
            Job::Read(read) => reads.push(read),
        };
        take(first);
        for _ in 1..MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => take(job),
                Err(_) => break,
            }
        }
        if !writes.is_empty() {
            let started = std::time::Instant::now();
            statements_run();
            let failed = commit_batch(&connection, &mut writes, before_commit.as_ref()).err();
            let metrics = crate::metrics::global();
            metrics.store_commit("sqlite", started.elapsed());
            metrics.store_commit_statements("sqlite", statements_run());
            for write in writes {
                write.answer(failed.clone());
            }
        }
        for read in reads {
            read(&connection);
        }
    }
}

/// Commits the batch: all of it at once, or — when a write failed — the others without it.
/// An error only when nothing of the batch was committed.
fn commit_batch(
    connection: &Connection,
    writes: &mut [Box<dyn Write>],
    before_commit: Option<&BeforeCommit>,
) -> StoreResult<()> {
    statement(connection, "BEGIN IMMEDIATE")?;
    if !writes.iter_mut().all(|write| write.run(connection)) {
        statement(connection, "ROLLBACK")?;
        statement(connection, "BEGIN IMMEDIATE")?;
        if let Err(error) = run_apart(connection, writes) {
            let _ = statement(connection, "ROLLBACK");
            return Err(error);
        }
    }
    if let Some(before_commit) = before_commit {
        before_commit();
    }
    statement(connection, "COMMIT").inspect_err(|_| {
        let _ = statement(connection, "ROLLBACK");
    })
}

/// Runs each write in a savepoint of its own, undoing only those that fail.
fn run_apart(connection: &Connection, writes: &mut [Box<dyn Write>]) -> StoreResult<()> {
    for write in writes {
        statement(connection, "SAVEPOINT job")?;
        if !write.run(connection) {
            statement(connection, "ROLLBACK TO job")?;
        }
        statement(connection, "RELEASE job")?;
    }
    Ok(())
}

/// One of the batch's own statements, prepared once for the connection's life.
fn statement(connection: &Connection, sql: &str) -> StoreResult<()> {
    connection
        .prepare_cached(sql)
        .and_then(|mut statement| statement.execute([]))
        .map(|_| ())
        .map_err(|err| StoreError::Io(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> Writer {
        // As the daemon does before its first connection.
        crate::store::install_page_cache().expect("page cache");
        let connection = Connection::open_in_memory().expect("memory");
        connection
            .execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)")
            .expect("table");
        Writer::start(connection, None).expect("thread")
    }

    fn insert(k: i64) -> impl Fn(&Connection) -> StoreResult<()> + Send + 'static {
        move |c| {
            c.execute("INSERT INTO t (k) VALUES (?1)", [k])
                .map(|_| ())
                .map_err(|e| StoreError::Io(e.to_string()))
        }
    }

    fn count(c: &Connection) -> StoreResult<i64> {
        c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .map_err(|e| StoreError::Io(e.to_string()))
    }

    #[tokio::test]
    async fn a_failed_write_is_undone_alone_and_the_others_commit() {
        let writer = writer();
        let first = writer.write(insert(1));
        let duplicate = writer.write(insert(1));
        let second = writer.write(insert(2));
        assert!(first.await.is_ok());
        assert!(duplicate.await.is_err());
        assert!(second.await.is_ok());
        assert_eq!(writer.read(count).await.expect("count"), 2);
    }

    /// Writes queued behind a read form one batch: the failing one is undone alone.
    #[tokio::test]
    async fn in_one_batch_a_failed_write_is_undone_alone_and_the_others_commit() {
        let writer = writer();
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let held = writer.read(move |_| {
            let _ = hold.recv();
            Ok(())
        });
        let first = writer.write(insert(1));
        let duplicate = writer.write(insert(1));
        let second = writer.write(insert(2));
        release.send(()).expect("release the read");
        held.await.expect("the read");
        assert!(first.await.is_ok());
        assert!(duplicate.await.is_err());
        assert!(second.await.is_ok());
        assert_eq!(writer.read(count).await.expect("count"), 2);
    }

    #[tokio::test]
    async fn a_panicking_request_fails_alone() {
        let writer = writer();
        let panics = writer.write(|_| -> StoreResult<()> { panic!("a bug in a query") });
        let fine = writer.write(insert(3));
        assert!(panics.await.is_err());
        assert!(fine.await.is_ok());
        assert_eq!(writer.read(count).await.expect("count"), 1);
    }

    #[tokio::test]
    async fn writes_queued_together_share_one_commit_and_answer_in_order() {
        let writer = writer();
        let pending: Vec<_> = (10..110).map(|k| writer.write(insert(k))).collect();
        for answer in pending {
            answer.await.expect("committed");
        }
        assert_eq!(writer.read(count).await.expect("count"), 100);
    }
}
