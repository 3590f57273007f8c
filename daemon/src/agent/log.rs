//! A run's event log: each event gets the next sequence number, is written to the store, and
//! only then goes to the run's live subscribers.
//!
//! A subscriber asks for everything after a sequence number: it reads the stored events
//! first, then follows the live ones, skipping what it already has, so it sees every event
//! once and in order, whenever it joins, however slowly it reads (a subscriber that falls
//! behind the live buffer goes back to the store).

use std::sync::{Arc, Mutex, PoisonError};

use airlock_proto::v1 as pb;
use tokio::sync::{broadcast, mpsc};

use crate::ids;
use crate::store::{Store, StoreError};

/// Live events buffered per run for subscribers; one that falls further behind rereads the
/// store.
const LIVE_BUFFER: usize = 256;

/// Events read from the store per query while catching up.
const CATCH_UP_BATCH: usize = 512;

/// Events queued for a subscriber's connection.
const SUBSCRIBER_BUFFER: usize = 64;

pub struct RunLog {
    run_id: String,
    store: Arc<dyn Store>,
    next_seq: Mutex<u64>,
    /// Spans that ended since the last event: written with the next one, in its transaction,
    /// so a step costs the store one commit per event rather than one more per span.
    pending_spans: Mutex<Vec<pb::Span>>,
    live: broadcast::Sender<pb::RunEvent>,
    /// Why the log stopped taking events, when the store failed; followers end with it.
    failure: Arc<Mutex<Option<String>>>,
}

impl RunLog {
    /// The log of a run whose last recorded event is `last_seq`.
    pub fn new(run_id: String, store: Arc<dyn Store>, last_seq: u64) -> RunLog {
        RunLog {
            run_id,
            store,
            next_seq: Mutex::new(last_seq + 1),
            pending_spans: Mutex::default(),
            live: broadcast::channel(LIVE_BUFFER).0,
            failure: Arc::default(),
        }
    }

    /// Marks the log as broken: its followers end with `reason` instead of a last event.
    pub fn fail(&self, reason: String) {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The sequence number of the last recorded event.
    pub fn last_seq(&self) -> u64 {
        *self.next_seq.lock().unwrap_or_else(PoisonError::into_inner) - 1
    }

    /// Records an event and hands it to live subscribers.
    pub fn append(
        &self,
        step_id: &str,
        event: pb::run_event::Event,
    ) -> Result<pb::RunEvent, StoreError> {
        let mut next = self.next_seq.lock().unwrap_or_else(PoisonError::into_inner);
        let event = pb::RunEvent {
            run_id: self.run_id.clone(),
            seq: *next,
            step_id: step_id.to_owned(),
            time_ms: ids::now_ms(),
            event: Some(event),
        };
        let spans = std::mem::take(
            &mut *self
                .pending_spans
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if let Err(err) = self.store.append_event(&event, &spans) {
            // Kept for the next attempt, in order, ahead of any span that ends meanwhile.
            let mut pending = self
                .pending_spans
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            pending.splice(0..0, spans);
            return Err(err);
        }
        *next += 1;
        // Nobody listening is fine: the event is in the store.
        let _ = self.live.send(event.clone());
        Ok(event)
    }

    /// Keeps an ended span until the next event is recorded. A run's last spans end before
    /// its `run_finished` event; spans of a step a crash interrupts are lost with the step,
    /// which the resumed run does again.
    pub fn record_span(&self, span: pb::Span) {
        self.pending_spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(span);
    }

    /// Every event after `after_seq`, then the live ones, until the log closes (the run
    /// finished and its log was dropped).
    pub fn follow(
        self: &Arc<Self>,
        after_seq: u64,
    ) -> mpsc::Receiver<Result<pb::RunEvent, StoreError>> {
        follow(
            self.store.clone(),
            self.run_id.clone(),
            after_seq,
            Some((self.live.subscribe(), self.failure.clone())),
        )
    }
}

/// The events of a run no longer live: what the store has after `after_seq`.
pub fn replay(
    store: Arc<dyn Store>,
    run_id: String,
    after_seq: u64,
) -> mpsc::Receiver<Result<pb::RunEvent, StoreError>> {
    follow(store, run_id, after_seq, None)
}

type Live = (
    broadcast::Receiver<pb::RunEvent>,
    Arc<Mutex<Option<String>>>,
);

fn follow(
    store: Arc<dyn Store>,
    run_id: String,
    after_seq: u64,
    mut live: Option<Live>,
) -> mpsc::Receiver<Result<pb::RunEvent, StoreError>> {
    let (sender, receiver) = mpsc::channel(SUBSCRIBER_BUFFER);
    tokio::spawn(async move {
        let mut cursor = after_seq;
        // Reads stored events after the cursor; false when the subscriber went away.
        let catch_up = |start: u64| {
            let store = store.clone();
            let run_id = run_id.clone();
            let sender = sender.clone();
            async move {
                let mut at = start;
                loop {
                    let batch = match store.events_after(&run_id, at, CATCH_UP_BATCH) {
                        Ok(batch) => batch,
                        Err(err) => {
                            let _ = sender.send(Err(err)).await;
                            return (at, false);
                        }
                    };
                    let done = batch.len() < CATCH_UP_BATCH;
                    for event in batch {
                        at = event.seq;
                        if sender.send(Ok(event)).await.is_err() {
                            return (at, false);
                        }
                    }
                    if done {
                        return (at, true);
                    }
                }
            }
        };
        let (at, open) = catch_up(cursor).await;
        cursor = at;
        if !open {
            return;
        }
        let Some((live, failure)) = live.as_mut() else {
            return;
        };
        loop {
            match live.recv().await {
                Ok(event) if event.seq <= cursor => {}
                Ok(event) if event.seq == cursor + 1 => {
                    cursor = event.seq;
                    if sender.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
                // A gap (the subscriber lagged) or the end of the run: the store has the rest.
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    let (at, open) = catch_up(cursor).await;
                    cursor = at;
                    if !open {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => {
                    let _ = catch_up(cursor).await;
                    let failure = failure
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    if let Some(reason) = failure {
                        let _ = sender.send(Err(StoreError::Io(reason))).await;
                    }
                    return;
                }
            }
        }
    });
    receiver
}
