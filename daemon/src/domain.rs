//! The typed words of a run that the loop, the store and the API share: why a run stopped,
//! what it used, how harmful a tool is (its manifest's risk, which policies decide by), how an
//! approval was decided (and a decision as a client sent it, and why one did not count), whose
//! a tool execution is and where its kept output lies. Their wire forms (`airlock.v1`) are
//! made here, once, for the log, the store and the API (`wire` passes them on with the rest of
//! the wire forms).

use std::fmt;

use airlock_proto::v1 as pb;

use crate::ids::{ExecutionId, RunId};

/// The tenant of the token the daemon creates in its state dir, with every right: its
/// operator.
pub const DEFAULT_TENANT: &str = "default";

/// Why a run stopped. A stop always says why (DESIGN: "decide to continue").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The model gave its final answer.
    Final,
    MaxSteps,
    /// A budget other than steps: tokens, wall time, tool calls.
    BudgetExhausted,
    /// The same call failed too often.
    RepeatedErrors,
    Cancelled,
    /// A denied call ended the run (`stop_on_denial`).
    PermissionDenied,
    /// The model provider failed, or the run could not be resumed.
    ModelError,
    /// The run went round in circles: the same call with the same result again and again, or
    /// steps that changed and observed nothing new.
    NoProgress,
}

impl StopReason {
    /// The name the trace and the logs use (`FINAL`, `MAX_STEPS`, …).
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Final => "FINAL",
            StopReason::MaxSteps => "MAX_STEPS",
            StopReason::BudgetExhausted => "BUDGET_EXHAUSTED",
            StopReason::RepeatedErrors => "REPEATED_ERRORS",
            StopReason::Cancelled => "CANCELLED",
            StopReason::PermissionDenied => "PERMISSION_DENIED",
            StopReason::ModelError => "MODEL_ERROR",
            StopReason::NoProgress => "NO_PROGRESS",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a run used so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub model_calls: u32,
    pub tool_calls: u32,
}

impl Usage {
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// An approver's answer to one approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run this call, this once.
    ApproveOnce,
    /// Run it, and the same call for the rest of the session.
    ApproveSession,
    Deny,
}

impl Decision {
    pub fn approves(self) -> bool {
        matches!(self, Decision::ApproveOnce | Decision::ApproveSession)
    }
}

/// Who decided an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecidedBy {
    /// The client driving the run, on the run's own stream.
    RunClient,
    /// An approver console (`Agent.Approvals`).
    Console,
    /// The run's approval policy, without asking.
    Policy,
    /// Nobody answered by the deadline.
    Deadline,
    /// An earlier "approve for the session" of the same call.
    SessionGrant,
}

impl DecidedBy {
    /// The words events and the store carry (`decided_by`).
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::RunClient => "run client",
            DecidedBy::Console => "approver",
            DecidedBy::Policy => "policy",
            DecidedBy::Deadline => "deadline",
            DecidedBy::SessionGrant => "session grant",
        }
    }

    /// The inverse of [`DecidedBy::as_str`], for what the store kept.
    pub fn parse(text: &str) -> Option<DecidedBy> {
        [
            DecidedBy::RunClient,
            DecidedBy::Console,
            DecidedBy::Policy,
            DecidedBy::Deadline,
            DecidedBy::SessionGrant,
        ]
        .into_iter()
        .find(|by| by.as_str() == text)
    }
}

impl fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A decision as a client sent it, decoded once where it arrived.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub approval_id: String,
    /// None when the client named no decision (`UNSPECIFIED`): refused.
    pub decision: Option<Decision>,
    /// For a denial: what the model is told.
    pub reason: String,
    /// The digest of the request it answers; empty when the client sent none.
    pub digest: String,
    /// For "approve for the session" of a command line: grant every command starting with
    /// these words, not only this exact call. Absent from the relayed form when empty, so a
    /// daemon of the release before reads the decisions of one that has it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grant_prefix: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionError {
    #[error("no pending approval `{0}`: it does not exist, was already answered, or expired")]
    NotPending(String),
    #[error(
        "approval `{approval_id}` belongs to another run; this stream answers for run `{run_id}` only"
    )]
    OtherRun { approval_id: String, run_id: String },
    #[error("the decision's digest does not match approval `{0}`: it answers a different call")]
    DigestMismatch(String),
    #[error("approval `{0}` is past its deadline")]
    PastDeadline(String),
    #[error(
        "the decision for `{0}` names no decision: approve once, approve for the session, or deny"
    )]
    NoDecision(String),
    #[error(
        "approval `{0}` cannot be granted for the session: a rule of the operator's always asks \
         for it (approve it once, or deny it)"
    )]
    NotGrantable(String),
    #[error(
        "the grant prefix {prefix:?} of approval `{approval_id}` is not the start of a command \
         it asks about, or the decision does not approve for the session"
    )]
    BadGrantPrefix {
        approval_id: String,
        prefix: Vec<String>,
    },
    #[error(
        "the reason given for approval `{approval_id}` {why}: a reason is a sentence or two of \
         text for the run's log, the audit log and the people notified"
    )]
    BadReason { approval_id: String, why: String },
}

/// A call's full output, kept when the caller saw only part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRecord {
    pub execution_id: ExecutionId,
    /// sha256 of the content, lowercase hex: the name of its blob.
    pub digest: String,
    pub size: u64,
    pub created_at_ms: i64,
}

/// Whose a tool execution is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionOwner {
    pub tenant: String,
    /// The run that made the call; none for a direct `ExecuteTool`.
    pub run_id: Option<RunId>,
    pub started_at_ms: i64,
}

// Their wire forms (`airlock.v1`), made once here for the log, the store and the API.

pub fn stop_reason(reason: StopReason) -> pb::StopReason {
    match reason {
        StopReason::Final => pb::StopReason::Final,
        StopReason::MaxSteps => pb::StopReason::MaxSteps,
        StopReason::BudgetExhausted => pb::StopReason::BudgetExhausted,
        StopReason::RepeatedErrors => pb::StopReason::RepeatedErrors,
        StopReason::Cancelled => pb::StopReason::Cancelled,
        StopReason::PermissionDenied => pb::StopReason::PermissionDenied,
        StopReason::ModelError => pb::StopReason::ModelError,
        StopReason::NoProgress => pb::StopReason::NoProgress,
    }
}

/// The domain reason of a wire one; none for `UNSPECIFIED`.
pub fn stop_reason_from(reason: pb::StopReason) -> Option<StopReason> {
    match reason {
        pb::StopReason::Unspecified => None,
        pb::StopReason::Final => Some(StopReason::Final),
        pb::StopReason::MaxSteps => Some(StopReason::MaxSteps),
        pb::StopReason::BudgetExhausted => Some(StopReason::BudgetExhausted),
        pb::StopReason::RepeatedErrors => Some(StopReason::RepeatedErrors),
        pb::StopReason::Cancelled => Some(StopReason::Cancelled),
        pb::StopReason::PermissionDenied => Some(StopReason::PermissionDenied),
        pb::StopReason::ModelError => Some(StopReason::ModelError),
        pb::StopReason::NoProgress => Some(StopReason::NoProgress),
    }
}

pub fn usage(usage: &Usage) -> pb::Usage {
    pb::Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        model_calls: usage.model_calls,
        tool_calls: usage.tool_calls,
    }
}

pub fn usage_from(usage: &pb::Usage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        model_calls: usage.model_calls,
        tool_calls: usage.tool_calls,
    }
}

pub fn decision(decision: Decision) -> pb::Decision {
    match decision {
        Decision::ApproveOnce => pb::Decision::ApproveOnce,
        Decision::ApproveSession => pb::Decision::ApproveSession,
        Decision::Deny => pb::Decision::Deny,
    }
}

/// The domain decision of a wire one; none for `UNSPECIFIED` (a decision that decides
/// nothing).
pub fn decision_from(decision: pb::Decision) -> Option<Decision> {
    match decision {
        pb::Decision::Unspecified => None,
        pb::Decision::ApproveOnce => Some(Decision::ApproveOnce),
        pb::Decision::ApproveSession => Some(Decision::ApproveSession),
        pb::Decision::Deny => Some(Decision::Deny),
    }
}

/// How much harm a tool can do, in order: each level is worse than the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    ReadOnly,
    Write,
    Network,
    Install,
    Exec,
    Destructive,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::ReadOnly => "read_only",
            Risk::Write => "write",
            Risk::Network => "network",
            Risk::Install => "install",
            Risk::Exec => "exec",
            Risk::Destructive => "destructive",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_decided_round_trips_through_its_words() {
        for by in [
            DecidedBy::RunClient,
            DecidedBy::Console,
            DecidedBy::Policy,
            DecidedBy::Deadline,
            DecidedBy::SessionGrant,
        ] {
            assert_eq!(DecidedBy::parse(by.as_str()), Some(by));
        }
        assert_eq!(DecidedBy::parse("someone"), None);
    }
}
