//! The one place where internal errors become gRPC statuses.
//!
//! The rule clients rely on (the table in `proto/API.md` lists every case): a client's
//! mistake is INVALID_ARGUMENT, NOT_FOUND, OUT_OF_RANGE, FAILED_PRECONDITION,
//! UNAUTHENTICATED or PERMISSION_DENIED, and its message starts with the request field at
//! fault (`run_id: no run `run_…``); a cap the client reached is RESOURCE_EXHAUSTED; only
//! daemon trouble that may pass (a store that cannot be reached, a daemon stopping) is
//! UNAVAILABLE, which well-behaved clients retry; damage and bugs are DATA_LOSS and INTERNAL,
//! which they do not.

use tonic::{Code, Status};

use crate::agent::AgentError;
use crate::output::KeptError;
use crate::policy::DecisionError;
use crate::profile::GrantError;
use crate::retention::RetentionError;
use crate::store::StoreError;
use crate::tools::CallError;
use crate::workspace::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// `source`, about the request field `field` (a path: `start.model.model`). The status
    /// is the source's.
    #[error("{field}: {source}")]
    Field {
        field: String,
        source: Box<ApiError>,
    },
    /// A field's value is malformed, missing or out of its bounds.
    #[error("{0}")]
    Invalid(String),
    /// An id that names nothing this caller may see.
    #[error("no {kind} `{id}`")]
    NotFound { kind: &'static str, id: String },
    /// An attach past the end of a run's log: the client cannot have seen that event.
    #[error("{after_seq} is past the run's last event, {last_seq}")]
    AfterTheEnd { after_seq: u64, last_seq: u64 },
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// The tenant may not do this; `what` says what it tried.
    #[error("tenant `{tenant}` {what}")]
    Forbidden { tenant: String, what: String },
    /// The daemon was started without something this call needs.
    #[error("{0}")]
    NotServed(&'static str),
    /// The operator's policy refuses the call; the reason names the rule.
    #[error("the policy refuses the call: {0}")]
    PolicyDenied(String),
    /// What the request was bound to (a review, say) is no longer so.
    #[error("{0}")]
    Stale(String),
    /// A request message longer than the daemon decodes; see `api::message_size`.
    #[error("the request message is {size} bytes; the limit is {limit} bytes")]
    MessageTooLarge { size: usize, limit: usize },
    /// A per-tenant cap on concurrent work.
    #[error("tenant `{tenant}` already has {max} {what} going, its limit; wait for one to finish")]
    Capacity {
        tenant: String,
        max: u32,
        what: &'static str,
    },
    #[error(transparent)]
    Call(CallError),
    #[error(transparent)]
    Agent(AgentError),
    #[error(transparent)]
    Kept(KeptError),
    /// An approval decision that does not count.
    #[error(transparent)]
    Decision(DecisionError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ApiError {
    /// This error, about request field `field`; a field error already about a field inside
    /// it gets the longer path (`start` + `model.model`).
    pub fn at(self, field: &str) -> ApiError {
        match self {
            ApiError::Field {
                field: inner,
                source,
            } => ApiError::Field {
                field: format!("{field}.{inner}"),
                source,
            },
            other => ApiError::Field {
                field: field.to_owned(),
                source: Box::new(other),
            },
        }
    }

    pub fn invalid(field: &str, reason: impl Into<String>) -> ApiError {
        ApiError::Invalid(reason.into()).at(field)
    }

    /// The status this error is, with its message.
    pub fn code(&self) -> Code {
        match self {
            ApiError::Field { source, .. } => source.code(),
            ApiError::Invalid(_) => Code::InvalidArgument,
            ApiError::NotFound { .. } => Code::NotFound,
            ApiError::AfterTheEnd { .. } => Code::OutOfRange,
            ApiError::Unauthenticated(_) => Code::Unauthenticated,
            ApiError::Forbidden { .. } | ApiError::PolicyDenied(_) => Code::PermissionDenied,
            ApiError::NotServed(_) | ApiError::Stale(_) => Code::FailedPrecondition,
            ApiError::MessageTooLarge { .. } | ApiError::Capacity { .. } => Code::ResourceExhausted,
            ApiError::Call(call) => match call {
                CallError::UnknownTool(_) => Code::NotFound,
                CallError::Workspace(workspace) => workspace_code(workspace),
                CallError::Grant(GrantError::WorkspaceRequired { .. }) => Code::InvalidArgument,
            },
            ApiError::Kept(kept) => match kept {
                KeptError::NotFound(_) => Code::NotFound,
                KeptError::OutOfRange { .. } => Code::OutOfRange,
                KeptError::Io(_) => Code::Unavailable,
                KeptError::Store(store) => store_code(store),
            },
            ApiError::Agent(agent) => match agent {
                AgentError::Invalid { .. } => Code::InvalidArgument,
                AgentError::UnknownSession(_) | AgentError::UnknownRun(_) => Code::NotFound,
                AgentError::UnknownTool(_) | AgentError::UnknownGrant(_) => Code::NotFound,
                AgentError::RunFinished(_)
                | AgentError::RunLive(_)
                | AgentError::NoCassette { .. }
                | AgentError::SessionBusy { .. }
                | AgentError::RevertConflicts(_) => Code::FailedPrecondition,
                AgentError::ToolNotAllowed { .. } => Code::PermissionDenied,
                AgentError::UnknownBlob(_) => Code::NotFound,
                AgentError::Changes(_) => Code::Internal,
                AgentError::TooManyRuns { .. } => Code::ResourceExhausted,
                AgentError::Workspace(workspace) => workspace_code(workspace),
                AgentError::Unresumable(_) => Code::Internal,
                AgentError::Decision(decision) => decision_code(decision),
                // The run's daemon stopped answering: the fleet takes its runs over within
                // a lease, and the request can be sent again then.
                AgentError::Unanswered { .. } => Code::Unavailable,
                AgentError::Store(store) => store_code(store),
            },
            ApiError::Decision(decision) => decision_code(decision),
            ApiError::Store(store) => store_code(store),
        }
    }
}

fn decision_code(decision: &DecisionError) -> Code {
    match decision {
        DecisionError::NotPending(_) => Code::NotFound,
        DecisionError::OtherRun { .. }
        | DecisionError::DigestMismatch(_)
        | DecisionError::PastDeadline(_)
        | DecisionError::NotGrantable(_) => Code::FailedPrecondition,
        DecisionError::NoDecision(_)
        | DecisionError::BadGrantPrefix { .. }
        | DecisionError::BadReason { .. } => Code::InvalidArgument,
    }
}

fn workspace_code(workspace: &WorkspaceError) -> Code {
    match workspace {
        WorkspaceError::NotAbsolute(_)
        | WorkspaceError::Unreadable { .. }
        | WorkspaceError::NotADirectory(_)
        | WorkspaceError::OutsideRoots { .. }
        | WorkspaceError::Reserved { .. } => Code::InvalidArgument,
    }
}

fn store_code(store: &StoreError) -> Code {
    match store {
        // The database could not be reached or written: a full disk, a lock held too
        // long. It may pass.
        StoreError::Open { .. } | StoreError::Io(_) => Code::Unavailable,
        // Damage does not pass by retrying.
        StoreError::Damaged { .. } | StoreError::Corrupt(_) => Code::DataLoss,
        StoreError::UnknownRun(_) => Code::NotFound,
        // Only a bug of the daemon writes out of order.
        StoreError::OutOfOrder { .. } => Code::Internal,
        // Another daemon holds the run now; asking that one (or again) succeeds.
        StoreError::Fenced { .. } => Code::Aborted,
        // The log or an earlier checkpoint failed first; the run is resumed from what the
        // store holds, and asking again succeeds.
        StoreError::Unlogged { .. } | StoreError::ConversationGap { .. } => Code::Unavailable,
    }
}

impl From<CallError> for ApiError {
    fn from(err: CallError) -> ApiError {
        match err {
            CallError::UnknownTool(_) => ApiError::Call(err).at("tool"),
            CallError::Workspace(_) | CallError::Grant(_) => ApiError::Call(err).at("workspace"),
        }
    }
}

impl From<AgentError> for ApiError {
    /// The agent's errors about a request name their field relative to the `StartRun`.
    fn from(err: AgentError) -> ApiError {
        match err {
            AgentError::Invalid { field, .. } => ApiError::Agent(err).at(field),
            AgentError::UnknownSession(_) => ApiError::Agent(err).at("session_id"),
            AgentError::UnknownGrant(_) => ApiError::Agent(err).at("grant_id"),
            AgentError::UnknownTool(_) | AgentError::ToolNotAllowed { .. } => {
                ApiError::Agent(err).at("tools")
            }
            AgentError::SessionBusy { .. } => ApiError::Agent(err).at("session_id"),
            AgentError::Workspace(_) => ApiError::Agent(err).at("workspace"),
            AgentError::UnknownBlob(_) => ApiError::Agent(err).at("digest"),
            AgentError::NoCassette { .. } => ApiError::Agent(err).at("run_id"),
            AgentError::UnknownRun(_)
            | AgentError::RunFinished(_)
            | AgentError::RunLive(_)
            | AgentError::RevertConflicts(_)
            | AgentError::Changes(_)
            | AgentError::TooManyRuns { .. }
            | AgentError::Unresumable(_)
            | AgentError::Unanswered { .. }
            | AgentError::Store(_) => ApiError::Agent(err),
            AgentError::Decision(decision) => ApiError::from(decision),
        }
    }
}

impl From<KeptError> for ApiError {
    fn from(err: KeptError) -> ApiError {
        match err {
            KeptError::NotFound(_) => ApiError::Kept(err).at("execution_id"),
            KeptError::OutOfRange { .. } => ApiError::Kept(err).at("offset"),
            KeptError::Io(_) | KeptError::Store(_) => ApiError::Kept(err),
        }
    }
}

impl From<DecisionError> for ApiError {
    fn from(err: DecisionError) -> ApiError {
        match err {
            DecisionError::NotPending(_) | DecisionError::OtherRun { .. } => {
                ApiError::Decision(err).at("approval_id")
            }
            DecisionError::DigestMismatch(_) => ApiError::Decision(err).at("digest"),
            DecisionError::NoDecision(_) | DecisionError::NotGrantable(_) => {
                ApiError::Decision(err).at("decision")
            }
            DecisionError::BadGrantPrefix { .. } => ApiError::Decision(err).at("grant_prefix"),
            DecisionError::BadReason { .. } => ApiError::Decision(err).at("reason"),
            DecisionError::PastDeadline(_) => ApiError::Decision(err),
        }
    }
}

impl From<RetentionError> for ApiError {
    fn from(err: RetentionError) -> ApiError {
        match err {
            RetentionError::Store(store) => ApiError::Store(store),
            RetentionError::Kept(kept) => ApiError::Kept(kept),
        }
    }
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Status {
        Status::new(err.code(), err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_nest_and_keep_the_source_status() {
        let err = ApiError::invalid("model", "unknown model `x`").at("start");
        assert_eq!(err.to_string(), "start.model: unknown model `x`");
        assert_eq!(err.code(), Code::InvalidArgument);
        let missing = ApiError::NotFound {
            kind: "run",
            id: "run_1".into(),
        }
        .at("run_id");
        assert_eq!(missing.to_string(), "run_id: no run `run_1`");
        assert_eq!(Status::from(missing).code(), Code::NotFound);
    }

    #[test]
    fn only_passing_store_trouble_is_unavailable() {
        let code = |store| ApiError::Store(store).code();
        assert_eq!(code(StoreError::Io("disk full".into())), Code::Unavailable);
        assert_eq!(code(StoreError::Corrupt("bad blob".into())), Code::DataLoss);
        assert_eq!(
            code(StoreError::OutOfOrder {
                run_id: "r".into(),
                seq: 3,
                last: 1
            }),
            Code::Internal
        );
        assert_eq!(
            code(StoreError::Fenced { run_id: "r".into() }),
            Code::Aborted
        );
        assert_eq!(
            code(StoreError::Unlogged {
                run_id: "r".into(),
                seq: 9,
                what: "end"
            }),
            Code::Unavailable
        );
        assert_eq!(
            code(StoreError::ConversationGap {
                run_id: "r".into(),
                from: 9
            }),
            Code::Unavailable
        );
    }

    #[test]
    fn a_command_the_fleet_did_not_answer_is_unavailable_and_says_whether_it_counted() {
        for (maybe_applied, says) in [(false, "was not applied"), (true, "may or may not")] {
            let err = ApiError::from(AgentError::Unanswered {
                run_id: "run_1".into(),
                maybe_applied,
            });
            assert_eq!(err.code(), Code::Unavailable);
            assert!(err.to_string().contains(says), "{err}");
        }
        // A decision the run's daemon refused keeps its own status and field.
        let refused = ApiError::from(AgentError::Decision(DecisionError::DigestMismatch(
            "apr_1".into(),
        )));
        assert_eq!(refused.code(), Code::FailedPrecondition);
        assert!(refused.to_string().starts_with("digest: "), "{refused}");
    }
}
