//! Steering live runs: following a run's events, cancelling it, sending it input, and the
//! decisions a run's own stream sends. A run another daemon of the fleet executes is steered
//! through the store (`elsewhere`).

use std::sync::atomic::Ordering;

use airlock_proto::v1 as pb;

use super::error::AgentError;
use super::log;
use super::runtime::AgentRuntime;
use super::start::check_input;
use crate::ids::RunId;
use crate::policy::{Approver, Verdict};
use crate::store::RunCommand;

/// A run's own stream may send this many refused decisions before they stop being recorded:
/// enough to debug a client, too few to flood the log.
const MAX_RECORDED_REJECTIONS: u32 = 100;

impl AgentRuntime {
    /// Every event of a run after `after_seq`, then live ones until the run finishes.
    pub async fn follow(&self, run_id: &RunId, after_seq: u64) -> Result<log::Events, AgentError> {
        if let Some(live) = self.live_run(run_id) {
            return Ok(live.log.follow(after_seq, self.notices()));
        }
        // Subscribed before the store is read: an event committed in between is announced.
        let notices = self.notices();
        if self.shared.store.run(run_id).await?.is_none() {
            return Err(AgentError::UnknownRun(run_id.to_string()));
        }
        Ok(log::replay(
            self.shared.store.clone(),
            run_id.clone(),
            after_seq,
            notices,
        ))
    }

    pub async fn cancel(&self, run_id: &RunId, reason: &str) -> Result<(), AgentError> {
        let Some(live) = self.live_run(run_id) else {
            let command = RunCommand::Cancel {
                reason: reason.to_owned(),
            };
            return self.command_elsewhere(run_id, &command).await;
        };
        live.cancel.pull(cancel_reason(reason));
        Ok(())
    }

    /// More input from the user, read before the run's next model call: a new turn.
    pub async fn send_input(&self, run_id: &RunId, text: String) -> Result<(), AgentError> {
        check_input(&text, "input.text")?;
        let Some(live) = self.live_run(run_id) else {
            return self
                .command_elsewhere(run_id, &RunCommand::Input { text })
                .await;
        };
        live.input
            .send(text)
            .map_err(|_| AgentError::RunFinished(run_id.to_string()))
    }

    /// A decision from a run's own stream: it may only answer that run's approvals. A refused
    /// decision is recorded in the run's log, which is how that client learns of it — also
    /// when another daemon of the fleet executes the run, and applies it.
    pub async fn decide_for_run(&self, run_id: &RunId, verdict: &Verdict) {
        if self.live_run(run_id).is_none() && self.remote().is_some() {
            let command = RunCommand::Decide {
                verdict: verdict.clone(),
                from_run_stream: true,
            };
            if let Err(err) = self.command_elsewhere(run_id, &command).await {
                tracing::debug!(run = %run_id, error = %err, "a decision from a run stream was not applied");
            }
            return;
        }
        let approver = Approver::RunClient {
            run_id: run_id.clone(),
        };
        let Err(err) = self.shared.approvals.decide(verdict, &approver) else {
            return;
        };
        self.refuse_decision_for_run(run_id, &verdict.approval_id, &err.to_string());
    }

    /// Records in a run's log that a decision sent on its stream did not count, and why.
    pub fn refuse_decision_for_run(&self, run_id: &RunId, approval_id: &str, reason: &str) {
        let Some(live) = self.live_run(run_id) else {
            return;
        };
        if live.rejections.fetch_add(1, Ordering::Relaxed) >= MAX_RECORDED_REJECTIONS {
            return;
        }
        live.log.append(
            None,
            pb::run_event::Event::DecisionRejected(pb::DecisionRejected {
                approval_id: approval_id.to_owned(),
                reason: reason.to_owned(),
            }),
        );
    }
}

/// Why a run was cancelled, as its end records it.
pub(super) fn cancel_reason(reason: &str) -> String {
    if reason.trim().is_empty() {
        "cancelled by a client".to_owned()
    } else {
        format!("cancelled by a client: {}", reason.trim())
    }
}
