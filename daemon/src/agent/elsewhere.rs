//! The runtime as a node of a fleet: runs another daemon executes, followed and steered
//! through the store's relay ([`Remote`]), and the commands this daemon applies to its own
//! runs for the others.

use std::sync::Arc;

use airlock_proto::v1 as pb;
use tokio::sync::{broadcast, mpsc};

use super::error::AgentError;
use super::remote::{HandedOver, Remote};
use super::runtime::AgentRuntime;
use super::steer::cancel_reason;
use crate::ids::RunId;
use crate::policy::{Approver, DecisionError, Verdict};
use crate::store::{CommandOutcome, Notice, Relay, RunCommand};

/// The runtime as a node of a fleet.
impl AgentRuntime {
    /// Makes this runtime a node of a fleet: runs other daemons execute are followed and
    /// steered through `relay`.
    pub fn join_fleet(&self, relay: Arc<dyn Relay>) {
        if self.shared.remote.set(Remote::new(relay)).is_err() {
            tracing::warn!("the runtime joined a fleet twice; the first relay stays");
        }
    }

    pub(super) fn remote(&self) -> Option<&Remote> {
        self.shared.remote.get()
    }

    /// The fleet's notices, from now on; none outside a fleet.
    pub(super) fn notices(&self) -> Option<broadcast::Receiver<Notice>> {
        self.remote().map(Remote::notices)
    }

    /// Sends `command` to the daemon of the fleet that executes `run_id`, not live here.
    pub(super) async fn command_elsewhere(
        &self,
        run_id: &RunId,
        command: &RunCommand,
    ) -> Result<(), AgentError> {
        let run = self.shared.store.run(run_id).await?;
        let Some(run) = run else {
            return Err(AgentError::UnknownRun(run_id.to_string()));
        };
        match self.remote() {
            Some(remote) if run.finished_at_ms.is_none() => {
                Ok(remote.command(run_id, command).await??)
            }
            _ => Err(AgentError::RunFinished(run_id.to_string())),
        }
    }

    /// A request pending now that a console may answer: this daemon's, or one of a run
    /// another daemon of the fleet executes.
    pub async fn pending_approval(&self, approval_id: &str) -> Option<pb::ApprovalRequest> {
        if let Some(request) = self.shared.approvals.pending(approval_id) {
            return Some(request);
        }
        let stored = self.remote()?.relay.approval(approval_id).await.ok()??;
        let pending = stored.resolution.is_none()
            && !stored.run_finished
            && !stored.owned_here
            && stored.request.deadline_ms > crate::ids::now_ms();
        pending.then_some(stored.request)
    }

    /// A decision from an approver console, for any run; a run another daemon of the fleet
    /// executes gets it from that daemon.
    pub async fn decide(&self, verdict: &Verdict) -> Result<(), AgentError> {
        if self
            .shared
            .approvals
            .pending(&verdict.approval_id)
            .is_some()
        {
            return Ok(self.shared.approvals.decide(verdict, &Approver::Console)?);
        }
        let request = match self.pending_approval(&verdict.approval_id).await {
            Some(request) => request,
            None => return Err(DecisionError::NotPending(verdict.approval_id.clone()).into()),
        };
        let run_id = RunId::from_stored(&request.run_id);
        let command = RunCommand::Decide {
            verdict: verdict.clone(),
            from_run_stream: false,
        };
        self.command_elsewhere(&run_id, &command).await
    }

    /// Applies a command another daemon of the fleet sent for a run this one executes; none
    /// when the run is not live here.
    pub fn apply(&self, run_id: &RunId, command: RunCommand) -> Option<CommandOutcome> {
        let live = self.live_run(run_id)?;
        Some(match command {
            RunCommand::Decide {
                verdict,
                from_run_stream,
            } => {
                let approver = if from_run_stream {
                    Approver::RunClient {
                        run_id: run_id.clone(),
                    }
                } else {
                    Approver::Console
                };
                match self.shared.approvals.decide(&verdict, &approver) {
                    Ok(()) => CommandOutcome::Applied,
                    Err(error) => {
                        if from_run_stream {
                            self.refuse_decision_for_run(
                                run_id,
                                &verdict.approval_id,
                                &error.to_string(),
                            );
                        }
                        CommandOutcome::Refused { error }
                    }
                }
            }
            RunCommand::Cancel { reason } => {
                live.cancel.pull(cancel_reason(&reason));
                CommandOutcome::Applied
            }
            RunCommand::Input { text } => match live.input.send(text) {
                Ok(()) => CommandOutcome::Applied,
                Err(_) => CommandOutcome::RunFinished,
            },
        })
    }

    /// Stops a run this daemon executes that another daemon of the fleet took over (this
    /// one could not renew its lease in time: frozen, starved, cut off from the store). Its
    /// writes are refused from now on, so its loop ends without recording anything, and its
    /// clients follow the run where it goes on; the approvals it waited for are handed over,
    /// their consoles told how each stands there.
    pub async fn lose(&self, run_id: &RunId) {
        let Some(live) = self.live_run(run_id) else {
            return;
        };
        tracing::warn!(
            run = %run_id,
            "the run was taken over by another daemon while this one could not renew its \
             lease; stopping it here without writing"
        );
        if let Some(remote) = self.remote() {
            let approvals = &self.shared.approvals;
            for approval_id in approvals.pending_of(run_id) {
                let Some(shown) = approvals.hand_over(&approval_id) else {
                    continue;
                };
                match remote.handed_over(&approval_id).await {
                    HandedOver::Ended(update) => approvals.tell(*update),
                    HandedOver::PendingThere => {}
                    HandedOver::Unknown => {
                        let mut update = shown;
                        update.state = pb::ApprovalState::Resolved as i32;
                        update.detail = "withdrawn here: another daemon took its run over".into();
                        approvals.tell(update);
                    }
                }
            }
        }
        live.cancel
            .pull("taken over by another daemon of the fleet".into());
    }

    /// Whether this daemon executes `run_id` now.
    pub fn is_live(&self, run_id: &RunId) -> bool {
        self.live_run(run_id).is_some()
    }

    /// Tells live lists of runs that a run another daemon executes changed.
    pub fn changed_elsewhere(&self, run_id: &RunId) {
        if !self.is_live(run_id) {
            self.shared.run_changes.changed(run_id);
        }
    }

    /// Approval requests of runs other daemons of the fleet execute, then each change to
    /// them; none outside a fleet.
    pub fn watch_remote_approvals(&self) -> Option<mpsc::Receiver<pb::ApprovalRequest>> {
        self.remote().map(Remote::watch_approvals)
    }
}
