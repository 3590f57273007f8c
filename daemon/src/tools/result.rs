//! The normalised result of one tool call, whatever engine ran it.

use std::time::Duration;

use crate::egress::Contact;
use crate::engine::EngineKind;
use crate::ids::ExecutionId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    Ok,
    ToolError,
    InvalidArguments,
    Denied,
    Timeout,
    Cancelled,
    LimitExceeded,
    SandboxError,
    OutcomeUnknown,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "OK",
            ToolStatus::ToolError => "TOOL_ERROR",
            ToolStatus::InvalidArguments => "INVALID_ARGUMENTS",
            ToolStatus::Denied => "DENIED",
            ToolStatus::Timeout => "TIMEOUT",
            ToolStatus::Cancelled => "CANCELLED",
            ToolStatus::LimitExceeded => "LIMIT_EXCEEDED",
            ToolStatus::SandboxError => "SANDBOX_ERROR",
            ToolStatus::OutcomeUnknown => "OUTCOME_UNKNOWN",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultMetadata {
    pub peak_memory_bytes: u64,
    pub cpu_time: Duration,
    pub module_digest: String,
    pub engine: Option<EngineKind>,
    pub profile: String,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub signal: Option<i32>,
    /// Every host the call contacted or tried to, with bytes and refusals; empty when the
    /// profile has no network.
    pub network: Vec<Contact>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub status: ToolStatus,
    pub content: String,
    pub truncated: bool,
    /// Size of the whole output `content` was cut from (see `output::Shaped`).
    pub original_bytes: u64,
    pub head_bytes: u64,
    pub tail_bytes: u64,
    pub duration: Duration,
    pub retryable: bool,
    pub exit_code: Option<i32>,
    pub error_message: String,
    pub metadata: ResultMetadata,
    /// None for a call refused before it ran.
    pub execution_id: Option<ExecutionId>,
    /// What the call changed in its workspace, when it could write it and changed anything.
    pub changes: Option<Box<crate::changes::ChangeSet>>,
}

impl ToolResult {
    /// A result for a call that never ran.
    pub fn refused(status: ToolStatus, message: impl Into<String>) -> ToolResult {
        ToolResult {
            status,
            content: String::new(),
            truncated: false,
            original_bytes: 0,
            head_bytes: 0,
            tail_bytes: 0,
            duration: Duration::ZERO,
            retryable: false,
            exit_code: None,
            changes: None,
            error_message: message.into(),
            metadata: ResultMetadata::default(),
            execution_id: None,
        }
    }
}
