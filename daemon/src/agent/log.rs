//! A run's event log: each event gets the next sequence number and goes to the store; once
//! the store has committed it, and only then, it goes to the run's live subscribers.
//!
//! The loop hands events over without waiting for each commit ([`RunLog::append`]): the
//! store commits them in order, in batches, while the loop goes on, and the loop waits
//! ([`RunLog::committed`]) only where it must — before a side effect, before an approver is
//! asked, at the run's end. A task of the log's own takes each commit's answer in order and
//! publishes the event, so subscribers see events in order and never one the store could
//! lose; the first failed write stops the log, and every later wait reports it.
//!
//! Streamed pieces of a model's answer ([`RunLog::stream`]) go the same way to the live
//! subscribers, in order with the events around them, but are never stored: they carry the
//! sequence number the next event will take, and a subscriber that joins later gets that
//! event, which repeats them whole.
//!
//! Every event carries the turn it belongs to ([`RunLog::start_turn`]): the log stamps it, so
//! an event recorded from outside the loop (a refused decision) belongs to the turn in
//! progress like any other.
//!
//! A subscriber asks for everything after a sequence number: it reads the stored events
//! first, then follows the live ones, skipping what it already has, so it sees every event
//! once and in order, whenever it joins, however slowly it reads (a subscriber that falls
//! behind the live buffer goes back to the store).
//!
//! In a fleet, a run another daemon executes is followed through the store: each notice of
//! one of its events ([`Notice::Event`]) sends the follower back to the store for what it has
//! not seen yet, so it gets the stored events in order and without gaps, whichever daemon
//! wrote them — streamed pieces, never stored, reach only the clients of the daemon that
//! executes the run. A follower of a run executed here that the fleet takes over (this
//! daemon lost it) goes on the same way, until the run's `RunFinished`.

use std::sync::{Arc, Mutex, PoisonError};

use airlock_proto::v1 as pb;
use tokio::sync::{broadcast, mpsc, watch};

use crate::ids::{self, RunId, StepId, TurnId};
use crate::store::{Notice, Pending, Store, StoreError};
use crate::trace::SpanSink;

/// Live events buffered per run for subscribers; one that falls further behind rereads the
/// store. The buffer is allocated whole for every live run, a waiting one included, so it
/// holds shared pointers (a few words a slot, about 10 KiB in all) rather than events: a
/// subscriber that a busy daemon does not get to for a while (a step records about eight
/// events) still finds what it missed here rather than in the store.
const LIVE_BUFFER: usize = 256;

/// Events read from the store per query while catching up.
const CATCH_UP_BATCH: usize = 512;

/// Events queued for a subscriber's connection.
const SUBSCRIBER_BUFFER: usize = 64;

/// A subscriber's events, in order, each behind a pointer — the live ones shared with the
/// run's other subscribers: a channel keeps its values inline in blocks of 32, allocated as
/// the channel is made, and a `RunEvent` takes 712 bytes (its largest kind inline), so inline
/// every follower's channel took 22 KiB before its first event, a waiting run's included.
pub type Events = mpsc::Receiver<Result<Arc<pb::RunEvent>, StoreError>>;

/// How soon a follower of a fleet's run first asks a store that failed it again, and the
/// longest it waits between two tries: soon enough that a client sees the run go on within
/// moments of the store's return, rarely enough that a daemon of many followers does not
/// hammer a store that is down.
const STORE_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(100);
const STORE_RETRY_LAST: std::time::Duration = std::time::Duration::from_secs(2);

/// How far the log got: the last sequence number committed, or why it stopped.
#[derive(Debug, Clone, PartialEq)]
enum Progress {
    Committed(u64),
    Failed(String),
}

struct Appending {
    next_seq: u64,
    /// The turn events are stamped with.
    turn_id: String,
    /// Spans that ended since the last event: written with the next one, in its
    /// transaction, so a step costs the store one write per event rather than one more per
    /// span.
    spans: Vec<pb::Span>,
}

pub struct RunLog {
    run_id: RunId,
    store: Arc<dyn Store>,
    appending: Mutex<Appending>,
    /// Each handed-over event and the store's answer, in order, for the publisher.
    published: mpsc::UnboundedSender<(Arc<pb::RunEvent>, Publish)>,
    progress: watch::Receiver<Progress>,
    live: broadcast::Sender<Arc<pb::RunEvent>>,
}

/// Where every run's log says that its run changed (an event was committed): what a live
/// list of runs (WatchRuns) listens to. Cloning shares the channel.
#[derive(Clone)]
pub struct RunChanges(broadcast::Sender<RunId>);

/// Changes a slow listener may fall behind by before it is told it lagged (and lists again).
const CHANGES_BUFFER: usize = 1024;

impl Default for RunChanges {
    fn default() -> RunChanges {
        RunChanges(broadcast::channel(CHANGES_BUFFER).0)
    }
}

impl RunChanges {
    pub fn subscribe(&self) -> broadcast::Receiver<RunId> {
        self.0.subscribe()
    }

    pub(super) fn changed(&self, run_id: &RunId) {
        // Nobody listening is fine.
        if self.0.receiver_count() > 0 {
            let _ = self.0.send(run_id.clone());
        }
    }
}

impl RunLog {
    /// The log of a run whose last recorded event is `last_seq`, in turn `turn_id`; starts its
    /// publisher (so it must be made inside the runtime), which tells `changes` of each
    /// committed event.
    pub fn new(
        run_id: RunId,
        store: Arc<dyn Store>,
        last_seq: u64,
        turn_id: &TurnId,
        changes: RunChanges,
    ) -> RunLog {
        let (published, queue) = mpsc::unbounded_channel();
        let (progress_sender, progress) = watch::channel(Progress::Committed(last_seq));
        let live = broadcast::channel(LIVE_BUFFER).0;
        tokio::spawn(publish(
            run_id.clone(),
            queue,
            progress_sender,
            live.clone(),
            changes,
        ));
        RunLog {
            run_id,
            store,
            appending: Mutex::new(Appending {
                next_seq: last_seq + 1,
                turn_id: turn_id.to_string(),
                spans: Vec::new(),
            }),
            published,
            progress,
            live,
        }
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The sequence number of the last event handed over.
    pub fn last_seq(&self) -> u64 {
        self.appending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_seq
            - 1
    }

    /// Starts a new turn: this event and every later one belong to it.
    pub fn start_turn(&self, turn_id: &TurnId) {
        self.appending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .turn_id = turn_id.to_string();
    }

    /// Hands an event (with the spans that ended since the last one) to the store. It
    /// reaches subscribers once committed; a failure shows at the next [`RunLog::committed`].
    pub fn append(&self, step_id: Option<&StepId>, event: pb::run_event::Event) -> u64 {
        let mut appending = self
            .appending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let event = self.event(&appending, step_id, event, false);
        let seq = event.seq;
        let spans = std::mem::take(&mut appending.spans);
        let pending = self.store.append_event(&event, &spans);
        appending.next_seq += 1;
        // Under the lock, so the publisher gets the answers in sequence order.
        self.publish(event, Publish::Committed(pending));
        seq
    }

    /// Sends a streamed piece (a delta) to the live subscribers, after every event handed
    /// over before it, without storing it.
    pub fn stream(&self, step_id: Option<&StepId>, event: pb::run_event::Event) {
        let appending = self
            .appending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let event = self.event(&appending, step_id, event, true);
        self.publish(event, Publish::Delta);
    }

    fn event(
        &self,
        appending: &Appending,
        step_id: Option<&StepId>,
        event: pb::run_event::Event,
        delta: bool,
    ) -> pb::RunEvent {
        pb::RunEvent {
            run_id: self.run_id.to_string(),
            seq: appending.next_seq,
            step_id: step_id.map(StepId::to_string).unwrap_or_default(),
            time_ms: ids::now_ms(),
            turn_id: appending.turn_id.clone(),
            delta,
            event: Some(event),
        }
    }

    /// Queues `event` for the publisher, shared: a queue of events inline would take 23 KiB
    /// a run before its first (see [`Events`]), and the live subscribers share it anyway.
    fn publish(&self, event: pb::RunEvent, publish: Publish) {
        if self.published.send((Arc::new(event), publish)).is_err() {
            tracing::error!(run = %self.run_id, "the run log's publisher is gone");
        }
    }

    /// Waits until every event handed over so far is committed; the store's error if one
    /// was not (the log then takes nothing more that could be seen).
    pub async fn committed(&self) -> Result<(), StoreError> {
        let target = self.last_seq();
        let mut progress = self.progress.clone();
        let reached = progress
            .wait_for(|progress| match progress {
                Progress::Committed(seq) => *seq >= target,
                Progress::Failed(_) => true,
            })
            .await
            .map_err(|_| StoreError::Io("the run log's publisher is gone".into()))?
            .clone();
        match reached {
            Progress::Committed(_) => Ok(()),
            Progress::Failed(reason) => Err(StoreError::Io(reason)),
        }
    }

    /// Every event after `after_seq`, then the live ones, until the log closes (the run
    /// finished and its log was dropped) — or, given the fleet's `notices`, until the run
    /// finishes wherever it goes on.
    pub fn follow(
        self: &Arc<Self>,
        after_seq: u64,
        notices: Option<broadcast::Receiver<Notice>>,
    ) -> Events {
        let live = self.live.subscribe();
        // What was committed before the subscription is read from the store; everything after
        // comes live — streamed pieces included, which the store never has. (An event
        // published between the subscription and this read shows as a gap, which the
        // follower fills from the store.)
        let committed = match &*self.progress.borrow() {
            Progress::Committed(seq) => Some(*seq),
            Progress::Failed(_) => None,
        };
        follow(
            self.store.clone(),
            self.run_id.clone(),
            after_seq,
            Some((live, self.progress.clone(), committed)),
            notices,
        )
    }
}

impl SpanSink for RunLog {
    /// Keeps an ended span until the next event is recorded. A run's last spans end before
    /// its `run_finished` event; spans of a step a crash interrupts are lost with the step,
    /// which the resumed run does again.
    fn export(&self, span: &pb::Span) {
        self.appending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .spans
            .push(span.clone());
    }
}

/// What the publisher does with an event handed to it.
enum Publish {
    /// Publishes it once the store has committed it (the store's answer).
    Committed(Pending<()>),
    /// Publishes it as soon as everything before it is published: a delta, never stored.
    Delta,
}

/// Takes the store's answers in sequence order and publishes each committed event, and each
/// delta in its place among them; stops publishing at the first failure, which it records
/// for [`RunLog::committed`] and for the subscribers.
async fn publish(
    run_id: RunId,
    mut queue: mpsc::UnboundedReceiver<(Arc<pb::RunEvent>, Publish)>,
    progress: watch::Sender<Progress>,
    live: broadcast::Sender<Arc<pb::RunEvent>>,
    changes: RunChanges,
) {
    let mut failed = false;
    while let Some((event, publish)) = queue.recv().await {
        let answer = match publish {
            Publish::Committed(answer) => answer,
            Publish::Delta => {
                if !failed && live.receiver_count() > 0 {
                    let _ = live.send(event);
                }
                continue;
            }
        };
        let outcome = answer.await;
        if failed {
            continue;
        }
        match outcome {
            Ok(()) => {
                let seq = event.seq;
                // Nobody listening is fine: the event is in the store.
                if live.receiver_count() > 0 {
                    let _ = live.send(event);
                }
                progress.send_replace(Progress::Committed(seq));
                changes.changed(&run_id);
            }
            Err(error) => {
                failed = true;
                let reason = format!(
                    "the run stopped because its log cannot be written ({error}); nothing more \
                     was run here, and the run goes on from its log once the store works again \
                     (in a fleet, on the daemon that takes it; alone, when the daemon restarts)"
                );
                progress.send_replace(Progress::Failed(reason));
            }
        }
    }
}

/// The events of a run not live here: what the store has after `after_seq` — and, given the
/// fleet's `notices`, every event the fleet commits for it until it finishes.
pub fn replay(
    store: Arc<dyn Store>,
    run_id: RunId,
    after_seq: u64,
    notices: Option<broadcast::Receiver<Notice>>,
) -> Events {
    follow(store, run_id, after_seq, None, notices)
}

fn is_finish(event: &pb::RunEvent) -> bool {
    matches!(event.event, Some(pb::run_event::Event::RunFinished(_)))
}

/// A live subscription, its log's progress, and the last event committed when it was made.
type Live = (
    broadcast::Receiver<Arc<pb::RunEvent>>,
    watch::Receiver<Progress>,
    Option<u64>,
);

fn follow(
    store: Arc<dyn Store>,
    run_id: RunId,
    after_seq: u64,
    mut live: Option<Live>,
    notices: Option<broadcast::Receiver<Notice>>,
) -> Events {
    let (sender, receiver) = mpsc::channel(SUBSCRIBER_BUFFER);
    tokio::spawn(async move {
        let mut cursor = after_seq;
        let mut finished = false;
        // Reads stored events after the cursor (up to `until`, if given); false when the
        // subscriber went away, and whether the run's last event was among them.
        // In a fleet the run goes on wherever the store lets it, so a store that does not
        // answer now is waited for rather than ending the subscriber's stream; alone, a
        // daemon whose store fails has nothing more to tell.
        let patient = notices.is_some();
        let catch_up = |start: u64, until: Option<u64>| {
            let store = store.clone();
            let run_id = run_id.clone();
            let sender = sender.clone();
            async move {
                let mut at = start;
                let mut finished = false;
                let mut retry = STORE_RETRY_FIRST;
                loop {
                    if until.is_some_and(|until| at >= until) {
                        return (at, true, finished);
                    }
                    let batch = match store.events_after(&run_id, at, CATCH_UP_BATCH).await {
                        Ok(batch) => batch,
                        Err(err) if patient => {
                            tracing::debug!(run = %run_id, error = %err, "a follower waits for the store");
                            tokio::select! {
                                () = tokio::time::sleep(retry) => {}
                                () = sender.closed() => return (at, false, finished),
                            }
                            retry = (retry * 2).min(STORE_RETRY_LAST);
                            continue;
                        }
                        Err(err) => {
                            let _ = sender.send(Err(err)).await;
                            return (at, false, finished);
                        }
                    };
                    let done = batch.len() < CATCH_UP_BATCH;
                    for event in batch
                        .into_iter()
                        .take_while(|event| until.is_none_or(|until| event.seq <= until))
                    {
                        at = event.seq;
                        finished |= is_finish(&event);
                        if sender.send(Ok(Arc::new(event))).await.is_err() {
                            return (at, false, finished);
                        }
                    }
                    if done {
                        return (at, true, finished);
                    }
                }
            }
        };
        let until = live.as_ref().and_then(|(_, _, committed)| *committed);
        let (at, open, done) = catch_up(cursor, until).await;
        (cursor, finished) = (at, finished || done);
        if !open {
            return;
        }
        if let Some((live, progress, _)) = live.as_mut() {
            loop {
                match live.recv().await {
                    // A delta leads up to the event after the cursor: it is passed on only
                    // while the subscriber is caught up, and moves no cursor (that event
                    // repeats it).
                    Ok(event) if event.delta => {
                        if event.seq == cursor + 1 && sender.send(Ok(event)).await.is_err() {
                            return;
                        }
                    }
                    Ok(event) if event.seq <= cursor => {}
                    Ok(event) if event.seq == cursor + 1 => {
                        cursor = event.seq;
                        finished |= is_finish(&event);
                        if sender.send(Ok(event)).await.is_err() {
                            return;
                        }
                    }
                    // A gap (the subscriber lagged) or the end of the run: the store has the
                    // rest.
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        let (at, open, done) = catch_up(cursor, None).await;
                        (cursor, finished) = (at, finished || done);
                        if !open {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => {
                        let (at, open, done) = catch_up(cursor, None).await;
                        (cursor, finished) = (at, finished || done);
                        let failure = match &*progress.borrow() {
                            Progress::Failed(reason) => Some(reason.clone()),
                            Progress::Committed(_) => None,
                        };
                        match failure {
                            _ if !open => return,
                            // The fleet takes the run on from its last committed event.
                            Some(_) if notices.is_some() => break,
                            Some(reason) => {
                                let _ = sender.send(Err(StoreError::Io(reason))).await;
                                return;
                            }
                            None => break,
                        }
                    }
                }
            }
        }
        // Executed elsewhere (now, or from here on): the store has each event the fleet's
        // notices tell of.
        let Some(mut notices) = notices else {
            return;
        };
        while !finished {
            // A subscriber that went away ends the follow at once, not at the run's next event.
            let notice = tokio::select! {
                notice = notices.recv() => notice,
                () = sender.closed() => return,
            };
            match notice {
                Ok(Notice::Event { run_id: of }) if of == run_id => {}
                Ok(Notice::Missed) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            }
            let (at, open, done) = catch_up(cursor, None).await;
            (cursor, finished) = (at, done);
            if !open {
                return;
            }
        }
    });
    receiver
}
