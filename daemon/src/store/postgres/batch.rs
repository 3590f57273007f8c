//! What the writer's batches are made of: writes ([`Write`]), each perhaps standing on its
//! run's claim ([`Fence`]) — the requests of the store's methods (`writer`) and its event
//! appends (`appends`), which a flight writes a run's of together.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::client::Lane;
use crate::store::rows::EventRow;
use crate::store::{StoreError, StoreResult, batched};

/// The claim a write for a run stands on: the run must still be this node's at this epoch.
#[derive(Debug, Clone)]
pub(super) struct Fence {
    pub(super) run_id: String,
    pub(super) node: String,
    pub(super) epoch: i64,
}

impl Fence {
    /// Whether `other` is the same claim: one check answers for both.
    pub(super) fn is(&self, other: &Fence) -> bool {
        self.run_id == other.run_id && self.node == other.node && self.epoch == other.epoch
    }
}

/// A write of a batch: its statements and its caller's answer once the batch is done.
pub(super) trait Write: Send {
    /// The claim the write stands on, if any.
    fn fence(&self) -> Option<&Fence>;
    /// Runs the statements, taking its turn on `lane`; whether they succeeded. Its fence is
    /// checked by the caller.
    fn run(&mut self, lane: Lane) -> BoxFuture<'_, bool>;
    /// The write's fence did not hold, or could not be checked.
    fn refuse(&mut self, error: StoreError);
    /// Answers the caller: the last run's outcome, or `failed` when the batch did not commit.
    fn answer(self: Box<Self>, failed: Option<StoreError>);
    /// The event append this write is, if it is one: a flight writes a run's together
    /// (`appends`).
    fn append(&mut self) -> Option<&mut Append> {
        None
    }
}

/// A write's caller, waiting for its answer, and the outcome of the write's last run.
pub(super) struct Reply<T> {
    outcome: Option<StoreResult<T>>,
    answer: oneshot::Sender<StoreResult<T>>,
}

impl<T> Reply<T> {
    pub(super) fn new(answer: oneshot::Sender<StoreResult<T>>) -> Reply<T> {
        Reply {
            outcome: None,
            answer,
        }
    }

    /// Keeps the outcome of a run of the write (a panic in it is its error, not the end of
    /// the store); whether it succeeded.
    pub(super) async fn keep(&mut self, run: BoxFuture<'_, StoreResult<T>>) -> bool {
        let outcome = AssertUnwindSafe(run)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(panicked()));
        let ok = outcome.is_ok();
        self.outcome = Some(outcome);
        ok
    }

    /// The write's fence did not hold, or could not be checked.
    pub(super) fn refuse(&mut self, error: StoreError) {
        self.outcome = Some(Err(error));
    }

    /// Answers the caller: the last run's outcome, or `failed` when the batch did not commit.
    pub(super) fn send(self, failed: Option<StoreError>) {
        let _ = self.answer.send(batched(failed, self.outcome));
    }
}

/// The error of a request whose work panicked.
pub(super) fn panicked() -> StoreError {
    StoreError::Io("a store request panicked; the store goes on".into())
}

/// What an append writes in the flight under way.
#[derive(Default)]
pub(super) enum Part {
    /// Its own event.
    #[default]
    Alone,
    /// Its own event and, after it, these of its run's later appends in the batch.
    Leads(Vec<Arc<EventRow>>),
    /// Nothing: an earlier append of its run writes its event.
    Carried,
}

/// The writer's write of one event (see `appends`).
pub(super) struct Append {
    pub(super) fence: Option<Fence>,
    pub(super) row: Arc<EventRow>,
    pub(super) part: Part,
    pub(super) reply: Reply<()>,
}

impl Append {
    pub(super) fn new(
        fence: Option<Fence>,
        row: Arc<EventRow>,
        answer: oneshot::Sender<StoreResult<()>>,
    ) -> Append {
        Append {
            fence,
            row,
            part: Part::Alone,
            reply: Reply::new(answer),
        }
    }
}
