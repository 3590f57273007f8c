//! What the agent runtime's operations fail with; the API edge maps each to its status.

use crate::policy::DecisionError;
use crate::store::StoreError;
use crate::workspace::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A field of the request that starts a run (a path inside `StartRun`) is wrong.
    #[error("{reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("no session `{0}`")]
    UnknownSession(String),
    #[error("no run `{0}`")]
    UnknownRun(String),
    #[error("no tool named `{0}`")]
    UnknownTool(String),
    /// A session grant id that names none of the session's grants (or more than one).
    #[error("{0}")]
    UnknownGrant(String),
    /// A recorded run the daemon cannot take up again (its checkpoint does not decode).
    #[error("{0}")]
    Unresumable(String),
    #[error("run `{0}` has finished")]
    RunFinished(String),
    #[error(
        "tenant `{tenant}` already has {max} runs going, its limit; wait for one to finish or cancel one"
    )]
    TooManyRuns { tenant: String, max: u32 },
    #[error("run `{0}` is still going; cancel it or wait for it to finish first")]
    RunLive(String),
    #[error("run `{run_id}` has no cassette: {reason}")]
    NoCassette { run_id: String, reason: String },
    #[error(
        "session `{session_id}` has run `{run_id}` going; send it input, or wait for it to \
         finish, then start the next run"
    )]
    SessionBusy { session_id: String, run_id: String },
    #[error("tenant `{tenant}` may not use tool `{tool}`")]
    ToolNotAllowed { tenant: String, tool: String },
    #[error("no content `{0}` among the run's changes (or the blob store no longer keeps it)")]
    UnknownBlob(String),
    /// A revert would overwrite changes made since by something other than the run.
    #[error("{0}; revert with force (`airlock revert --force`) to overwrite them anyway")]
    RevertConflicts(String),
    /// The change-set store failed (reading a blob, copying or reverting a workspace).
    #[error("{0}")]
    Changes(String),
    /// An approval's answer that did not count.
    #[error(transparent)]
    Decision(#[from] DecisionError),
    /// The daemon of the fleet that executes the run did not answer a command in time.
    #[error(
        "the daemon executing run `{run_id}` did not answer within its lease, so the request {}; \
         try again once another daemon took the run over",
        if *.maybe_applied { "may or may not have been applied" } else { "was not applied" }
    )]
    Unanswered { run_id: String, maybe_applied: bool },
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Store(#[from] StoreError),
}
