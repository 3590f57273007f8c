//! How the MCP endpoint words what it tells a client about a call: a finished call's result,
//! and a refused call's (its gRPC status's name and the reason). The call handler and the
//! in-band approvals (`mrtr`) both answer with these; the approval question itself is
//! `airlock-mcp-bridge`'s, shared with `airlock mcp`.

use rmcp::model::{CallToolResult, ContentBlock};

use crate::api::error::ApiError;
use crate::tools::{ToolResult, ToolStatus};

/// A refusal of the admission, as a failed call's result: the status's name and the reason
/// (`DENIED: tenant `a` may not use this workspace: …`).
pub(super) fn refusal(err: ApiError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(refusal_text(err))])
}

/// The text of [`refusal`].
pub(super) fn refusal_text(err: ApiError) -> String {
    let status = tonic::Status::from(err);
    let word = match status.code() {
        tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => "DENIED",
        tonic::Code::InvalidArgument | tonic::Code::OutOfRange => "INVALID_ARGUMENTS",
        tonic::Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        tonic::Code::NotFound => "NOT_FOUND",
        tonic::Code::FailedPrecondition | tonic::Code::Aborted => "FAILED_PRECONDITION",
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => "UNAVAILABLE",
        tonic::Code::Cancelled => "CANCELLED",
        tonic::Code::AlreadyExists => "ALREADY_EXISTS",
        tonic::Code::Ok
        | tonic::Code::Unknown
        | tonic::Code::Unimplemented
        | tonic::Code::Internal
        | tonic::Code::DataLoss => "INTERNAL",
    };
    format!("{word}: {}", status.message())
}

/// A finished call as MCP's result. A hosted server's result that is not all text (images,
/// audio, embedded resources: its engine writes the blocks as a JSON array) is served as the
/// blocks it was, when it came through whole; anything else is text.
pub(super) fn answer(result: ToolResult, hosted: bool) -> CallToolResult {
    if result.status == ToolStatus::Ok {
        if hosted
            && !result.truncated
            && let Ok(blocks) = serde_json::from_str::<Vec<ContentBlock>>(&result.content)
            && blocks.iter().any(|block| block.as_text().is_none())
        {
            return CallToolResult::success(blocks);
        }
        return CallToolResult::success(vec![ContentBlock::text(result.content)]);
    }
    let message = if result.error_message.is_empty() {
        result.content
    } else {
        result.error_message
    };
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {message}",
        result.status.as_str()
    ))])
}
