//! The one place where internal errors become gRPC statuses.

use tonic::{Code, Status};

use crate::agent::AgentError;
use crate::output::KeptError;
use crate::store::StoreError;
use crate::tools::CallError;
use crate::workspace::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("no running execution `{0}`")]
    ExecutionNotFound(String),
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error(transparent)]
    Kept(#[from] KeptError),
    /// A request message longer than the daemon decodes; see `api::message_size`.
    #[error("the request message is {size} bytes; the limit is {limit} bytes")]
    MessageTooLarge { size: usize, limit: usize },
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Status {
        let workspace_code = |workspace: &WorkspaceError| match workspace {
            WorkspaceError::NotAbsolute(_)
            | WorkspaceError::Unreadable { .. }
            | WorkspaceError::NotADirectory(_)
            | WorkspaceError::OutsideRoots { .. }
            | WorkspaceError::Reserved { .. } => Code::InvalidArgument,
        };
        let code = match &err {
            ApiError::Call(CallError::UnknownTool(_)) => Code::NotFound,
            ApiError::Call(CallError::Workspace(workspace)) => workspace_code(workspace),
            ApiError::Call(CallError::Grant(_)) => Code::InvalidArgument,
            ApiError::ExecutionNotFound(_) => Code::NotFound,
            ApiError::MessageTooLarge { .. } => Code::ResourceExhausted,
            ApiError::Kept(kept) => match kept {
                KeptError::NotFound(_) => Code::NotFound,
                KeptError::OutOfRange { .. } => Code::OutOfRange,
                KeptError::Io(_) | KeptError::Store(_) => Code::Unavailable,
            },
            ApiError::Agent(agent) => match agent {
                AgentError::InvalidRequest(_) => Code::InvalidArgument,
                AgentError::UnknownSession(_) | AgentError::UnknownRun(_) => Code::NotFound,
                AgentError::RunFinished(_) => Code::FailedPrecondition,
                AgentError::TooManyRuns { .. } => Code::ResourceExhausted,
                AgentError::Workspace(workspace) => workspace_code(workspace),
                AgentError::Store(store) => match store {
                    StoreError::Open { .. }
                    | StoreError::Damaged { .. }
                    | StoreError::Io(_)
                    | StoreError::Corrupt(_) => Code::Unavailable,
                    StoreError::UnknownRun(_) => Code::NotFound,
                    StoreError::OutOfOrder { .. } => Code::Internal,
                },
            },
        };
        Status::new(code, err.to_string())
    }
}
