//! Runs another daemon of the fleet executes, as this daemon's clients see and steer them:
//! through the shared store's relay ([`Relay`]).
//!
//! A command (an approval's answer, a cancel, input) is kept in the store for the run's owner
//! to take and answer ([`Remote::command`]); the sender waits for the answer at most a lease,
//! the time after which the fleet takes an owner that stopped answering for dead, then
//! withdraws it, so a command is applied once or not at all, and the client is told which.
//!
//! Approval requests of runs executed elsewhere reach this daemon's consoles from the store
//! ([`Remote::watch_approvals`]): each notice of an approval's change, or of a run's end,
//! has the watcher compare what the store holds pending with what it last sent.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use airlock_proto::v1 as pb;
use tokio::sync::{broadcast, mpsc};

use super::error::AgentError;
use crate::domain::DecidedBy;
use crate::ids::RunId;
use crate::policy::{DecisionError, answered_detail};
use crate::store::{
    CommandId, CommandOutcome, CommandState, Notice, Relay, RunCommand, StoredApproval,
};

/// Changes to approvals of runs executed elsewhere queued for one console's stream.
const WATCH_BUFFER: usize = 64;

/// How often a sender looks at its command's state while it waits, besides each notice of
/// an answer: a safety net only, since answers are announced.
const COMMAND_RECHECK: Duration = Duration::from_millis(500);

pub struct Remote {
    pub(super) relay: Arc<dyn Relay>,
}

impl Remote {
    pub fn new(relay: Arc<dyn Relay>) -> Remote {
        Remote { relay }
    }

    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.relay.notices()
    }

    /// Sends `command` to the daemon executing `run_id` and waits for its answer; withdraws
    /// it when no daemon took it within a lease. A decision that did not count is the inner
    /// error.
    pub async fn command(
        &self,
        run_id: &RunId,
        command: &RunCommand,
    ) -> Result<Result<(), DecisionError>, AgentError> {
        // Subscribed before sending: the answer's notice cannot come before it.
        let mut notices = self.relay.notices();
        let id = self.relay.send_command(run_id, command).await?;
        let give_up = tokio::time::Instant::now() + self.relay.lease();
        loop {
            match self.relay.command_state(id).await? {
                Some(CommandState::Answered(outcome)) => return answered(run_id, outcome),
                Some(CommandState::Taken) | None => {}
            }
            let answered = tokio::time::timeout_at(give_up, answer_of(&mut notices, id)).await;
            if answered.is_err() {
                break;
            }
        }
        match self.relay.withdraw_command(id).await? {
            CommandState::Answered(outcome) => answered(run_id, outcome),
            CommandState::Taken => Err(AgentError::Unanswered {
                run_id: run_id.to_string(),
                maybe_applied: true,
            }),
        }
    }

    /// Every request pending for a run executed elsewhere, then every change to them, until
    /// the receiver goes.
    pub fn watch_approvals(&self) -> mpsc::Receiver<pb::ApprovalRequest> {
        let (outgoing, receiver) = mpsc::channel(WATCH_BUFFER);
        let relay = self.relay.clone();
        let mut notices = relay.notices();
        tokio::spawn(async move {
            let mut sent: HashMap<String, pb::ApprovalRequest> = HashMap::new();
            loop {
                // A failed read is tried again at the next notice.
                if let Ok(pending) = relay.remote_approvals().await {
                    let now_ms = crate::ids::now_ms();
                    let pending: HashMap<String, pb::ApprovalRequest> = pending
                        .into_iter()
                        .filter(|request| request.deadline_ms > now_ms)
                        .map(|request| (request.approval_id.clone(), request))
                        .collect();
                    let ended: Vec<String> = sent
                        .keys()
                        .filter(|id| !pending.contains_key(*id))
                        .cloned()
                        .collect();
                    for approval_id in ended {
                        let Some(request) = sent.remove(&approval_id) else {
                            continue;
                        };
                        let update = match relay.approval(&approval_id).await {
                            Ok(Some(stored)) => ended_update(stored),
                            Ok(None) => Some(withdrawn(request)),
                            // Asked again at the next notice.
                            Err(_) => {
                                sent.insert(approval_id, request);
                                None
                            }
                        };
                        if let Some(update) = update
                            && outgoing.send(update).await.is_err()
                        {
                            return;
                        }
                    }
                    for (approval_id, request) in pending {
                        if sent.contains_key(&approval_id) {
                            continue;
                        }
                        if outgoing.send(request.clone()).await.is_err() {
                            return;
                        }
                        sent.insert(approval_id, request);
                    }
                }
                // A console that went away ends the watch at once, not at the next change.
                let changed = tokio::select! {
                    changed = pending_changed(&mut notices) => changed,
                    () = outgoing.closed() => false,
                };
                if !changed {
                    return;
                }
            }
        });
        receiver
    }
}

/// How a request of a run this daemon lost to another stands where the run went on.
pub enum HandedOver {
    /// Answered or expired there: what its approvers are told.
    Ended(Box<pb::ApprovalRequest>),
    /// Still pending there: the fleet's watch of remote approvals shows it.
    PendingThere,
    /// The store could not say.
    Unknown,
}

impl Remote {
    /// How the request `approval_id` of a run this daemon lost stands in the store.
    pub async fn handed_over(&self, approval_id: &str) -> HandedOver {
        let Ok(Some(stored)) = self.relay.approval(approval_id).await else {
            return HandedOver::Unknown;
        };
        if stored.resolution.is_none() && stored.request.deadline_ms > crate::ids::now_ms() {
            return HandedOver::PendingThere;
        }
        ended_update(stored).map_or(HandedOver::PendingThere, |update| {
            HandedOver::Ended(Box::new(update))
        })
    }
}

fn answered(
    run_id: &RunId,
    outcome: CommandOutcome,
) -> Result<Result<(), DecisionError>, AgentError> {
    match outcome {
        CommandOutcome::Applied => Ok(Ok(())),
        CommandOutcome::Refused { error } => Ok(Err(error)),
        CommandOutcome::RunFinished => Err(AgentError::RunFinished(run_id.to_string())),
        CommandOutcome::Withdrawn => Err(AgentError::Unanswered {
            run_id: run_id.to_string(),
            maybe_applied: false,
        }),
    }
}

/// Waits for the notice that `id` was answered (or that notices were missed).
async fn answer_of(notices: &mut broadcast::Receiver<Notice>, id: CommandId) {
    loop {
        let notice = tokio::time::timeout(COMMAND_RECHECK, notices.recv()).await;
        match notice {
            Ok(Ok(Notice::Answered { command })) if command == id => return,
            Ok(Ok(Notice::Missed) | Err(broadcast::error::RecvError::Lagged(_))) | Err(_) => {
                return;
            }
            Ok(Ok(_)) => {}
            // The store went: the next read of the command's state says so.
            Ok(Err(broadcast::error::RecvError::Closed)) => {
                return std::future::pending().await;
            }
        }
    }
}

/// Waits for a notice that may change which approvals are pending; false once notices end.
async fn pending_changed(notices: &mut broadcast::Receiver<Notice>) -> bool {
    loop {
        match notices.recv().await {
            Ok(Notice::Approval { .. } | Notice::Finished { .. } | Notice::Missed)
            | Err(broadcast::error::RecvError::Lagged(_)) => return true,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Closed) => return false,
        }
    }
}

/// What a console is told of a request that is no longer pending elsewhere: how it ended;
/// nothing when this daemon now executes its run (its own broker tells of it).
fn ended_update(stored: StoredApproval) -> Option<pb::ApprovalRequest> {
    let mut update = stored.request;
    match stored.resolution {
        Some(resolution) if resolution.decided_by == DecidedBy::Deadline => {
            update.state = pb::ApprovalState::Expired as i32;
            update.detail = "no answer by the deadline".into();
            Some(update)
        }
        Some(resolution) => {
            update.state = pb::ApprovalState::Resolved as i32;
            update.detail = answered_detail(resolution.decision, resolution.decided_by);
            Some(update)
        }
        None if stored.owned_here && !stored.run_finished => None,
        None if update.deadline_ms <= crate::ids::now_ms() => {
            update.state = pb::ApprovalState::Expired as i32;
            update.detail = "no answer by the deadline".into();
            Some(update)
        }
        None => Some(withdrawn(update)),
    }
}

fn withdrawn(mut request: pb::ApprovalRequest) -> pb::ApprovalRequest {
    request.state = pb::ApprovalState::Resolved as i32;
    request.detail = "withdrawn: the run no longer waits for it".into();
    request
}
