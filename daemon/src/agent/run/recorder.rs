//! Step 7, "record": everything a run leaves behind goes through its recorder — the events
//! of its log, the spans of its trace, its checkpoints and its progress. Events and spans are
//! handed to the store without waiting for each commit; [`Recorder::committed`] is where the
//! loop waits, before anything that must not happen unrecorded.
//!
//! A resumed run replays its steps from a checkpoint, and some of its per-call events are
//! already in the log: those are recorded once ([`Recorder::emit_once`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use airlock_proto::v1 as pb;
use pb::run_event::Event;

use super::super::log::RunLog;
use super::budget::Stop;
use super::state::Snapshot;
use crate::domain::{StopReason, Usage};
use crate::ids::{self, CallId, CheckpointId, RunId, StepId};
use crate::store::{Checkpoint, Pending, RunEnd, Store, StoreError};
use crate::trace::{RunTrace, Span};
use crate::wire;

/// The events recorded once per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallEvent {
    Proposed,
    Rejected,
    ApprovalRequested,
    ApprovalResolved,
    Finished,
}

impl CallEvent {
    /// The kind and call of a per-call event. A connection's approval is not one: a call may
    /// have many, and each is recorded as it happens.
    pub fn of(event: &Event) -> Option<(CallEvent, CallId)> {
        let (kind, call_id) = match event {
            Event::ToolCallProposed(e) => (CallEvent::Proposed, &e.call_id),
            Event::ToolCallRejected(e) => (CallEvent::Rejected, &e.call_id),
            Event::ApprovalRequested(e) => {
                let request = e.request.as_ref().filter(|r| r.network.is_none())?;
                (CallEvent::ApprovalRequested, &request.call_id)
            }
            Event::ApprovalResolved(e) if e.network.is_none() => {
                (CallEvent::ApprovalResolved, &e.call_id)
            }
            Event::ToolFinished(e) => (CallEvent::Finished, &e.call_id),
            _ => return None,
        };
        Some((kind, CallId::from_stored(call_id.clone())))
    }
}

pub struct Recorder {
    log: Arc<RunLog>,
    trace: RunTrace,
    store: Arc<dyn Store>,
    run_id: RunId,
    /// Per-call events already in the log when the run was resumed.
    recorded: HashSet<(CallEvent, CallId)>,
    created_at_ms: i64,
    /// What the last checkpoint handed to the store holds of the conversation as it is now:
    /// the next checkpoint keeps that one's first entries and writes the rest.
    saved: Arc<Mutex<SavedConversation>>,
}

/// The checkpoint a run's next one goes on from, and how many of the conversation's first
/// entries it holds as they are now. None when the run starts or resumes here (its first
/// checkpoint writes the whole conversation, in this version's form) and after a checkpoint
/// failed; the count is lowered when the conversation changes other than at its end.
#[derive(Debug, Default)]
struct SavedConversation {
    checkpoint_id: Option<String>,
    entries: usize,
}

/// Which of the conversation's entries a checkpoint writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entries {
    /// Those after the entries the last checkpoint holds.
    Added,
    /// Every one.
    Whole,
}

impl Recorder {
    pub fn new(
        log: Arc<RunLog>,
        trace: RunTrace,
        store: Arc<dyn Store>,
        recorded: HashSet<(CallEvent, CallId)>,
        created_at_ms: i64,
    ) -> Recorder {
        Recorder {
            run_id: log.run_id().clone(),
            log,
            trace,
            store,
            recorded,
            created_at_ms,
            saved: Arc::default(),
        }
    }

    pub fn log(&self) -> &Arc<RunLog> {
        &self.log
    }

    /// Hands an event to the log.
    pub fn emit(&self, step: Option<&StepId>, event: Event) {
        self.log.append(step, event);
    }

    /// [`Recorder::emit`], unless a resumed run already has this call's event.
    pub fn emit_once(&self, step: Option<&StepId>, event: Event) {
        if let Some(key) = CallEvent::of(&event)
            && self.recorded.contains(&key)
        {
            return;
        }
        self.emit(step, event);
    }

    /// Whether the log had this call's event when the run was resumed.
    pub fn recorded_before(&self, kind: CallEvent, call_id: &CallId) -> bool {
        self.recorded.contains(&(kind, call_id.clone()))
    }

    /// Waits until everything recorded so far is committed.
    pub async fn committed(&self) -> Result<(), StoreError> {
        self.log.committed().await
    }

    /// A span under `parent` (the root's id, or a step's); it ends when dropped.
    pub fn span(&self, name: &'static str, parent: &str) -> Span {
        self.trace.start(name, parent)
    }

    pub fn root_id(&self) -> &str {
        self.trace.root_id()
    }

    /// Saves the loop's state, covering the log up to its last event: where a restarted
    /// daemon goes on from. Handed to the store after the events it covers; the store's
    /// answer is returned for the one caller that must wait for it (the run's last).
    pub fn checkpoint(&self, entries: Entries, state: Snapshot<'_>) -> Pending<()> {
        let checkpoint_id = CheckpointId::new().into_string();
        let length = state.conversation.len();
        let (from, base) = {
            let mut saved = self.saved.lock().unwrap_or_else(PoisonError::into_inner);
            let kept = match (entries, saved.checkpoint_id.take()) {
                (Entries::Added, Some(base)) => (saved.entries.min(length), Some(base)),
                _ => (0, None),
            };
            *saved = SavedConversation {
                checkpoint_id: Some(checkpoint_id.clone()),
                entries: length,
            };
            kept
        };
        let encoded = state.encode(from);
        let checkpoint = Checkpoint {
            checkpoint_id,
            seq: self.log.last_seq(),
            state: encoded.state,
            created_at_ms: ids::now_ms(),
            entries_from: from as u64,
            entries_base: base,
            entries: encoded.entries,
        };
        // Otherwise its outcome shows at the next commit the loop waits for: a failed write
        // fails the batch's others, or the log's next event. Watched here too, so that after
        // a failed one the next checkpoint writes the whole conversation again (one going on
        // from the failed one would be refused by the store).
        let saving = self.store.save_checkpoint(&self.run_id, &checkpoint);
        let (answer, pending) = Pending::channel();
        let saved = Arc::clone(&self.saved);
        tokio::spawn(async move {
            let outcome = saving.await;
            if outcome.is_err() {
                *saved.lock().unwrap_or_else(PoisonError::into_inner) =
                    SavedConversation::default();
            }
            // The caller may not wait for the answer.
            drop(answer.send(outcome));
        });
        pending
    }

    /// The conversation changed from entry `from` on, not only at its end (a compaction):
    /// the next checkpoint writes it from there.
    pub fn conversation_changed_from(&self, from: usize) {
        let mut saved = self.saved.lock().unwrap_or_else(PoisonError::into_inner);
        saved.entries = saved.entries.min(from);
    }

    /// The run's steps and usage, for its record.
    pub fn progress(&self, steps: u32, usage: &Usage) {
        drop(self.store.update_progress(&self.run_id, steps, usage));
    }

    /// Records how the run ended: its root span, its last event and its record; waits until
    /// all of it is committed.
    pub async fn finish(&self, stop: &Stop, steps: u32, usage: &Usage) -> Result<(), StoreError> {
        {
            let mut root = self.trace.root(
                self.run_id.as_str(),
                self.created_at_ms.saturating_mul(1_000_000),
            );
            root.set("stop_reason", stop.reason.name());
            crate::metrics::global().run_finished(stop.reason.name());
            root.set("steps", steps);
            root.set("input_tokens", usage.input_tokens);
            root.set("output_tokens", usage.output_tokens);
            root.set("model_calls", usage.model_calls);
            root.set("tool_calls", usage.tool_calls);
            if stop.reason != StopReason::Final && !stop.detail.is_empty() {
                root.fail(stop.detail.clone());
            }
        }
        self.progress(steps, usage);
        let last_seq = self.log.append(
            None,
            Event::RunFinished(pb::RunFinished {
                reason: wire::stop_reason(stop.reason) as i32,
                final_text: stop.final_text.clone(),
                usage: Some(wire::usage(usage)),
                detail: stop.detail.clone(),
                steps,
            }),
        );
        let ended = self.store.finish_run(
            &self.run_id,
            &RunEnd {
                stop_reason: stop.reason,
                stop_detail: stop.detail.clone(),
                final_text: stop.final_text.clone(),
                finished_at_ms: ids::now_ms(),
                last_seq,
            },
        );
        self.committed().await?;
        ended.await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::super::testing::{Follower, Harness, StalledDisk, kinds};
    use super::*;
    use crate::agent::AgentSettings;
    use crate::store::{RunRecord, RunState};
    use crate::trace::Tracer;

    struct Recorded {
        harness: Harness,
        run: RunRecord,
        recorder: Recorder,
    }

    async fn recorder(harness: Harness, recorded: HashSet<(CallEvent, CallId)>) -> Recorded {
        let run = crate::store::recorded_run(harness.store.as_ref(), "default", 1).await;
        let log = Arc::new(RunLog::new(
            run.run_id.clone(),
            harness.store.clone(),
            1,
            &crate::ids::TurnId::new(),
            Default::default(),
        ));
        let trace = RunTrace::new(
            Arc::new(Tracer::new(None)),
            log.clone(),
            run.run_id.as_str(),
            run.trace_id.as_str(),
        );
        let recorder = Recorder::new(log, trace, harness.store.clone(), recorded, 1);
        Recorded {
            harness,
            run,
            recorder,
        }
    }

    fn text(text: &str) -> Event {
        Event::ModelText(pb::ModelText { text: text.into() })
    }

    #[tokio::test]
    async fn followers_see_an_event_only_once_it_is_committed() {
        let disk = Arc::new(StalledDisk::default());
        let Recorded {
            harness,
            run,
            recorder,
        } = recorder(
            Harness::build(disk.options(), AgentSettings::default()),
            HashSet::new(),
        )
        .await;
        let mut follower = Follower::of(recorder.log().follow(1, None));
        disk.set_closed(true);
        recorder.emit(None, text("held"));
        disk.stalled().await;
        assert!(
            tokio::time::timeout(Duration::from_millis(100), follower.next())
                .await
                .is_err(),
            "an event was shown before its commit"
        );
        disk.set_closed(false);
        let shown = follower.next().await.expect("the event, once committed");
        assert_eq!(shown.seq, 2);
        let stored = harness
            .store
            .events_after(&run.run_id, 1, 10)
            .await
            .expect("read");
        assert_eq!(stored, [shown]);
    }

    #[tokio::test]
    async fn a_resumed_run_records_each_call_event_once() {
        let call_id = CallId::new();
        let proposed = Event::ToolCallProposed(pb::ToolCallProposed {
            call_id: call_id.to_string(),
            tool: "noop".into(),
            ..Default::default()
        });
        let Recorded {
            harness,
            run,
            recorder,
        } = recorder(
            Harness::new(),
            HashSet::from([(CallEvent::Proposed, call_id.clone())]),
        )
        .await;
        recorder.emit_once(None, proposed);
        recorder.emit_once(
            None,
            Event::ToolFinished(pb::ToolFinished {
                call_id: call_id.to_string(),
                tool: "noop".into(),
                ..Default::default()
            }),
        );
        recorder.committed().await.expect("committed");
        let stored = harness
            .store
            .events_after(&run.run_id, 1, 10)
            .await
            .expect("read");
        assert_eq!(kinds(&stored), ["tool_finished"]);
    }

    #[tokio::test]
    async fn spans_end_when_dropped_and_the_end_is_recorded_everywhere() {
        let Recorded {
            harness,
            run,
            recorder,
        } = recorder(Harness::new(), HashSet::new()).await;
        {
            let mut span = recorder.span("model", recorder.root_id());
            span.set("model", "scripted");
        }
        let stop = Stop {
            reason: StopReason::MaxSteps,
            detail: "7 steps".into(),
            final_text: String::new(),
        };
        let usage = Usage {
            model_calls: 7,
            ..Usage::default()
        };
        recorder.finish(&stop, 7, &usage).await.expect("finished");

        let spans = harness.store.spans(&run.run_id).await.expect("spans");
        let model = spans
            .iter()
            .find(|span| span.name == "model")
            .expect("model");
        assert!(model.end_unix_nano > 0);
        assert_eq!(model.parent_span_id, recorder.root_id());
        let root = spans.iter().find(|span| span.name == "run").expect("root");
        assert!(
            root.attributes
                .iter()
                .any(|a| a.key == "stop_reason" && a.value == "MAX_STEPS"),
            "{root:?}"
        );
        let record = harness
            .store
            .run(&run.run_id)
            .await
            .expect("read")
            .expect("the run");
        assert_eq!(record.state, RunState::Finished);
        assert_eq!(record.stop_reason, Some(StopReason::MaxSteps));
        assert_eq!(record.steps, 7);
        assert_eq!(record.usage.model_calls, 7);
        let log = harness
            .store
            .events_after(&run.run_id, 1, 10)
            .await
            .expect("read");
        assert_eq!(kinds(&log), ["run_finished"]);
    }
}
