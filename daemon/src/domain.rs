//! The typed words of a run that the loop, the store and the API share: why a run stopped,
//! what it used, how harmful a tool is (its manifest's risk, which policies decide by) and
//! how an approval was decided. Their wire forms (`airlock.v1`) are made in `wire`, once,
//! where an event is appended or a reply is built.

use std::fmt;

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
