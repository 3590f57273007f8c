//! The one place where internal errors become gRPC statuses.

use tonic::{Code, Status};

use crate::tools::CallError;
use crate::workspace::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("no running execution `{0}`")]
    ExecutionNotFound(String),
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Status {
        let code = match &err {
            ApiError::Call(CallError::UnknownTool(_)) => Code::NotFound,
            ApiError::Call(CallError::Workspace(workspace)) => match workspace {
                WorkspaceError::NotAbsolute(_)
                | WorkspaceError::Unreadable { .. }
                | WorkspaceError::NotADirectory(_)
                | WorkspaceError::OutsideRoots { .. } => Code::InvalidArgument,
            },
            ApiError::Call(CallError::Grant(_)) => Code::InvalidArgument,
            ApiError::ExecutionNotFound(_) => Code::NotFound,
        };
        Status::new(code, err.to_string())
    }
}
