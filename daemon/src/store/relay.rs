//! What a shared store carries between the daemons of a fleet as it happens: a notice for
//! each committed event, approval change and finished run, and the commands a client sends
//! through one daemon for a run another executes (an approval's answer, a cancel, input).
//!
//! A notice says only *that* something changed, never what: the store stays the one source
//! of truth, and a daemon that missed notices (its listening connection broke) is told so
//! ([`Notice::Missed`]) and rereads. So a client attached to any daemon sees a run's events in
//! sequence order without gaps, and the daemon executing the run applies each command at most
//! once: a command is taken by one daemon in one statement, and a sender that gets no answer
//! in time withdraws it, so a late owner cannot apply what its sender already gave up on.

use std::time::Duration;

use airlock_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::{ApprovalResolution, Pending};
use crate::domain::{DecisionError, Verdict};
use crate::ids::RunId;

/// A change another daemon (or this one) committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Events of the run were committed (one notice for all of one transaction's).
    Event { run_id: RunId },
    /// An approval request was kept or answered.
    Approval { approval_id: String },
    /// The run finished.
    Finished { run_id: RunId },
    /// A command was sent for the run.
    Command { command: CommandId, run_id: RunId },
    /// A command was answered (or withdrawn).
    Answered { command: CommandId },
    /// Notices may have been missed (the listening connection broke, or a listener fell
    /// behind): whatever a listener follows, it rereads.
    Missed,
}

/// A command's number in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommandId(pub i64);

impl std::fmt::Display for CommandId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "command {}", self.0)
    }
}

/// What a client asked of a run that another daemon executes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RunCommand {
    /// An approval's answer, from an approver console or from the run's own stream (which
    /// may answer that run's requests only, and learns of a refusal from the run's log).
    Decide {
        verdict: Verdict,
        from_run_stream: bool,
    },
    Cancel {
        reason: String,
    },
    Input {
        text: String,
    },
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum CommandOutcome {
    Applied,
    /// A decision that did not count, and why.
    Refused {
        error: DecisionError,
    },
    /// The run had finished.
    RunFinished,
    /// No daemon took it in time, and its sender withdrew it: it will never be applied.
    Withdrawn,
}

/// Where a command stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandState {
    Answered(CommandOutcome),
    /// A daemon took it and has not answered yet: it may or may not have been applied.
    Taken,
}

/// An approval request as the fleet's store has it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredApproval {
    pub request: pb::ApprovalRequest,
    /// How it was answered, once it was.
    pub resolution: Option<ApprovalResolution>,
    /// Whether its run has finished (an unanswered request of a finished run was withdrawn).
    pub run_finished: bool,
    /// Whether this daemon owns its run.
    pub owned_here: bool,
}

/// The relay of a store that several daemons share.
pub trait Relay: Send + Sync {
    /// Every notice from now on, from every daemon of the fleet (this one's included), each
    /// sent once the transaction it tells of committed, in commit order.
    fn notices(&self) -> broadcast::Receiver<Notice>;
    /// How long a daemon may stay silent and still own its runs: how long a sender waits
    /// for its command to be taken.
    fn lease(&self) -> Duration;
    /// The approval requests not answered yet whose run is unfinished and owned by another
    /// daemon (or by none, between a daemon's death and a takeover).
    fn remote_approvals(&self) -> Pending<Vec<pb::ApprovalRequest>>;
    fn approval(&self, approval_id: &str) -> Pending<Option<StoredApproval>>;
    /// Keeps a command for `run_id` and tells the fleet.
    fn send_command(&self, run_id: &RunId, command: &RunCommand) -> Pending<CommandId>;
    /// Takes a command for this daemon to apply: none when another daemon took it or its
    /// sender withdrew it.
    fn take_command(&self, command: CommandId) -> Pending<Option<(RunId, RunCommand)>>;
    /// Commands for runs this daemon owns that no daemon took (their notices were missed).
    fn untaken_commands(&self) -> Pending<Vec<(CommandId, RunId)>>;
    /// Records how a command this daemon took ended, and tells the fleet.
    fn answer_command(&self, command: CommandId, outcome: &CommandOutcome) -> Pending<()>;
    /// Where a command stands; none while no daemon took it.
    fn command_state(&self, command: CommandId) -> Pending<Option<CommandState>>;
    /// Withdraws a command no daemon took; where it stands when one did.
    fn withdraw_command(&self, command: CommandId) -> Pending<CommandState>;
}
