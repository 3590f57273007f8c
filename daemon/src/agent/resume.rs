//! Resuming runs a previous daemon (or another daemon of the fleet) left unfinished: each
//! from its last checkpoint and what its log holds past it; a run that cannot be resumed is
//! finished with the reason.

use std::collections::HashSet;
use std::sync::Arc;

use airlock_proto::v1 as pb;

use super::context;
use super::error::AgentError;
use super::launch::{Missing, Point};
use super::log::RunLog;
use super::provider;
use super::run::{CallEvent, LoopState};
use super::runtime::AgentRuntime;
use crate::domain::StopReason;
use crate::ids::{self, TurnId};
use crate::store::{RunEnd, RunRecord, RunState};
use crate::wire;

/// Events read from the store per query while a resumed run reads its log.
const RESUME_BATCH: usize = 512;

impl AgentRuntime {
    /// Takes up every run a previous daemon left unfinished, each from its last checkpoint.
    /// Returns how many were resumed.
    pub async fn resume_unfinished(&self) -> Result<usize, AgentError> {
        let mut resumed = 0;
        for record in self.shared.store.unfinished_runs().await? {
            if self.take_over(&record).await? {
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    /// Takes up one run another daemon (or this one's previous life) left unfinished, from
    /// its last checkpoint; false when its log shows it had finished. A run that cannot be
    /// resumed is finished with the reason; a store that fails on the way (or a run another
    /// daemon of the fleet took meanwhile) is the caller's error, and the run stays as it is.
    pub async fn take_over(&self, record: &RunRecord) -> Result<bool, AgentError> {
        match self.resume(record).await {
            Ok(resumed) => Ok(resumed),
            Err(err @ AgentError::Store(_)) => Err(err),
            Err(err) => {
                tracing::error!(run = %record.run_id, error = %err, "cannot resume run; finishing it");
                self.give_up(record, &err).await?;
                Ok(false)
            }
        }
    }

    /// Ends a run that cannot be resumed, saying why.
    pub(super) async fn give_up(
        &self,
        record: &RunRecord,
        err: &AgentError,
    ) -> Result<(), AgentError> {
        // The last event's turn is the one the run ends in.
        let turn_id = self
            .shared
            .store
            .events_after(&record.run_id, record.last_seq.saturating_sub(1), 1)
            .await?
            .first()
            .filter(|event| !event.turn_id.is_empty())
            .map_or_else(TurnId::new, |event| {
                TurnId::from_stored(event.turn_id.clone())
            });
        let log = RunLog::new(
            record.run_id.clone(),
            self.shared.store.clone(),
            record.last_seq,
            &turn_id,
            self.shared.run_changes.clone(),
        );
        let detail = format!("the run could not be resumed after a restart: {err}");
        let last_seq = log.append(
            None,
            pb::run_event::Event::RunFinished(pb::RunFinished {
                reason: pb::StopReason::ModelError as i32,
                final_text: String::new(),
                usage: Some(wire::usage(&record.usage)),
                detail: detail.clone(),
                steps: record.steps,
            }),
        );
        log.committed().await?;
        self.shared
            .store
            .finish_run(
                &record.run_id,
                &RunEnd {
                    stop_reason: StopReason::ModelError,
                    stop_detail: detail,
                    final_text: String::new(),
                    finished_at_ms: ids::now_ms(),
                    last_seq,
                },
            )
            .await?;
        Ok(())
    }

    /// Resumes one run; false when its log shows it had already finished.
    pub(super) async fn resume(&self, record: &RunRecord) -> Result<bool, AgentError> {
        let store = &self.shared.store;
        let (mut state, checkpoint_id, checkpoint_seq) =
            match store.latest_checkpoint(&record.run_id).await? {
                Some(checkpoint) => (
                    LoopState::decode(&checkpoint.state, &checkpoint.entries)
                        .map_err(AgentError::Unresumable)?,
                    checkpoint.checkpoint_id,
                    checkpoint.seq,
                ),
                None => (LoopState::start(&record.start.input), String::new(), 0),
            };
        let Some(past) = self
            .read_past_checkpoint(record, checkpoint_seq, &mut state)
            .await?
        else {
            return Ok(false);
        };
        let session = store
            .session(&record.session_id)
            .await?
            .ok_or_else(|| AgentError::UnknownSession(record.session_id.to_string()))?;
        let resolved = self
            .resolve(&record.start, Missing::Skip)
            .map_err(|err| AgentError::Unresumable(err.to_string()))?;
        drop(store.set_run_state(&record.run_id, RunState::Running));
        let turn_id = state.turn_id.get_or_insert_with(TurnId::new).clone();
        let log = Arc::new(RunLog::new(
            record.run_id.clone(),
            store.clone(),
            past.last_seq,
            &turn_id,
            self.shared.run_changes.clone(),
        ));
        let pending_calls = state.pending.as_ref().map_or(0, |pending| {
            pending.calls.len().saturating_sub(pending.next)
        });
        log.append(
            None,
            pb::run_event::Event::RunResumed(pb::RunResumed {
                checkpoint_id,
                checkpoint_seq,
                pending_calls: u32::try_from(pending_calls).unwrap_or(u32::MAX),
            }),
        );
        log.committed().await?;
        tracing::info!(run = %record.run_id, pending_calls, "resuming run");
        let point = Point {
            state,
            log,
            recorded: past.recorded,
        };
        self.launch(record, session, resolved, point, None)?;
        Ok(true)
    }

    /// Reads what the log holds past the checkpoint at `after` into `state` (input the
    /// checkpoint does not have yet, the turn it started) and the events not to record twice;
    /// none when the log shows the run's end, which it then records as the run's.
    async fn read_past_checkpoint(
        &self,
        record: &RunRecord,
        mut after: u64,
        state: &mut LoopState,
    ) -> Result<Option<PastCheckpoint>, AgentError> {
        let store = &self.shared.store;
        let mut recorded = HashSet::new();
        loop {
            let batch = store
                .events_after(&record.run_id, after, RESUME_BATCH)
                .await?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for event in &batch {
                match &event.event {
                    Some(pb::run_event::Event::RunFinished(finished)) => {
                        self.record_end(record, finished, event).await?;
                        return Ok(None);
                    }
                    Some(pb::run_event::Event::UserInput(input)) => {
                        state.conversation.push(context::Entry {
                            message: provider::Message::User {
                                text: input.text.clone(),
                            },
                            source: event.step_id.clone(),
                            part: context::Part::Run,
                            counted: context::Counted::default(),
                        });
                    }
                    Some(event) => {
                        if let Some(key) = CallEvent::of(event) {
                            recorded.insert(key);
                        }
                    }
                    None => {}
                }
                if !event.turn_id.is_empty() {
                    state.turn_id = Some(TurnId::from_stored(event.turn_id.clone()));
                }
            }
        }
        Ok(Some(PastCheckpoint {
            recorded,
            last_seq: after,
        }))
    }

    /// Records the end a run's log shows (in `event`) as the run's.
    async fn record_end(
        &self,
        record: &RunRecord,
        finished: &pb::RunFinished,
        event: &pb::RunEvent,
    ) -> Result<(), AgentError> {
        let reason = pb::StopReason::try_from(finished.reason)
            .ok()
            .and_then(wire::stop_reason_from)
            .unwrap_or(StopReason::ModelError);
        self.shared
            .store
            .finish_run(
                &record.run_id,
                &RunEnd {
                    stop_reason: reason,
                    stop_detail: finished.detail.clone(),
                    final_text: finished.final_text.clone(),
                    finished_at_ms: event.time_ms,
                    last_seq: event.seq,
                },
            )
            .await?;
        Ok(())
    }
}

/// What a run's log holds past its checkpoint, besides what goes into its state.
struct PastCheckpoint {
    /// The call events already recorded, not to record twice.
    recorded: HashSet<(CallEvent, ids::CallId)>,
    /// The sequence number of the log's last event.
    last_seq: u64,
}
