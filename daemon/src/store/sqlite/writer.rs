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
//! Each write of a batch runs inside a savepoint: one that fails (an event out of order, a
//! constraint) is rolled back alone and answered with its error, and the others commit.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use rusqlite::Connection;

use super::BeforeCommit;
use crate::store::{Pending, StoreError, StoreResult};

/// The most requests one batch takes: a bound on how long the first of them waits for the
/// others' statements, far above what a busy daemon queues in one commit's time.
const MAX_BATCH: usize = 512;

/// What a write leaves to do once its batch is committed: answer its caller.
struct Completion {
    /// Whether the write's own statements succeeded (its savepoint is kept).
    ok: bool,
    answer: Box<dyn FnOnce(Option<StoreError>) + Send>,
}

/// A write: given the connection inside the batch's transaction it runs its statements;
/// given none (the batch could not run) it only produces the completion that fails.
type WriteJob = Box<dyn FnOnce(Option<&Connection>) -> Completion + Send>;

enum Job {
    /// Statements for the batch's transaction.
    Write(WriteJob),
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

    /// Runs `work` in the next batch's transaction; answers after the commit.
    pub(super) fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> Pending<T> {
        let (sender, pending) = Pending::channel();
        let job = Job::Write(Box::new(move |connection: Option<&Connection>| {
            let outcome = match connection {
                Some(connection) => guarded(|| work(connection)),
                None => Err(StoreError::Io("the write's transaction did not run".into())),
            };
            Completion {
                ok: outcome.is_ok(),
                answer: Box::new(move |commit_error| {
                    let _ = sender.send(match commit_error {
                        Some(error) => Err(error),
                        None => outcome,
                    });
                }),
            }
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
            commit_batch(&connection, writes, before_commit.as_ref());
        }
        for read in reads {
            read(&connection);
        }
    }
}

fn commit_batch(
    connection: &Connection,
    writes: Vec<WriteJob>,
    before_commit: Option<&BeforeCommit>,
) {
    let io = |err: rusqlite::Error| StoreError::Io(err.to_string());
    if let Err(error) = connection.execute_batch("BEGIN IMMEDIATE").map_err(io) {
        abort(connection, &error, Vec::new(), writes);
        return;
    }
    let mut completions: Vec<Completion> = Vec::with_capacity(writes.len());
    let mut queue = writes.into_iter();
    while let Some(write) = queue.next() {
        if let Err(error) = connection.execute_batch("SAVEPOINT job").map_err(io) {
            abort(
                connection,
                &error,
                completions,
                std::iter::once(write).chain(queue),
            );
            return;
        }
        let completion = write(Some(connection));
        let close = if completion.ok {
            "RELEASE job"
        } else {
            "ROLLBACK TO job; RELEASE job"
        };
        completions.push(completion);
        if let Err(error) = connection.execute_batch(close).map_err(io) {
            abort(connection, &error, completions, queue);
            return;
        }
    }
    if let Some(before_commit) = before_commit {
        before_commit();
    }
    let error = match connection.execute_batch("COMMIT").map_err(io) {
        Ok(()) => None,
        Err(error) => {
            let _ = connection.execute_batch("ROLLBACK");
            Some(error)
        }
    };
    for completion in completions {
        (completion.answer)(error.clone());
    }
}

/// Rolls the batch back and answers every write of it, run or not, with `error`.
fn abort(
    connection: &Connection,
    error: &StoreError,
    done: Vec<Completion>,
    rest: impl IntoIterator<Item = WriteJob>,
) {
    let _ = connection.execute_batch("ROLLBACK");
    for completion in done {
        (completion.answer)(Some(error.clone()));
    }
    for write in rest {
        (write(None).answer)(Some(error.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> Writer {
        let connection = Connection::open_in_memory().expect("memory");
        connection
            .execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)")
            .expect("table");
        Writer::start(connection, None).expect("thread")
    }

    fn insert(k: i64) -> impl FnOnce(&Connection) -> StoreResult<()> + Send + 'static {
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
