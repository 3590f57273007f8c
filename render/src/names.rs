//! The names enum values are printed with: those of the manifest (`read_only`, `head`) for a
//! tool's properties, those of the API without their prefix (`OK`, `TOOL_ERROR`, `FINAL`,
//! `APPROVE_ONCE`) for everything else.
//!
//! A value this client does not know, from a newer daemon, is printed with its number rather
//! than guessed at.

use std::borrow::Cow;

use crate::proto::{
    ApprovalPolicy, ApprovalState, ContextDisposition, Decision, OutputStream, Risk, RunState,
    SpanStatus, StopReason, ToolKind, ToolStatus, TruncateMode,
};

/// `read_only`, `write`, `network`, `install`, `exec` or `destructive`, as in `tool.toml`.
pub fn risk_name(raw: i32) -> Cow<'static, str> {
    match Risk::try_from(raw) {
        Ok(Risk::Unspecified) => Cow::Borrowed("unspecified"),
        Ok(Risk::ReadOnly) => Cow::Borrowed("read_only"),
        Ok(Risk::Write) => Cow::Borrowed("write"),
        Ok(Risk::Network) => Cow::Borrowed("network"),
        Ok(Risk::Install) => Cow::Borrowed("install"),
        Ok(Risk::Exec) => Cow::Borrowed("exec"),
        Ok(Risk::Destructive) => Cow::Borrowed("destructive"),
        Err(_) => Cow::Owned(format!("risk({raw})")),
    }
}

/// What a tool's code is, as sdk/ABI.md names the kinds.
pub fn tool_kind_name(raw: i32) -> Cow<'static, str> {
    match ToolKind::try_from(raw) {
        Ok(ToolKind::Unspecified) => Cow::Borrowed("unspecified"),
        Ok(ToolKind::WasmModule) => Cow::Borrowed("wasm module"),
        Ok(ToolKind::WasmCommand) => Cow::Borrowed("wasm command component"),
        Ok(ToolKind::WasmComponent) => Cow::Borrowed("wasm typed component"),
        Ok(ToolKind::Program) => Cow::Borrowed("program"),
        Ok(ToolKind::Mcp) => Cow::Borrowed("mcp tool"),
        Err(_) => Cow::Owned(format!("kind({raw})")),
    }
}

/// `head`, `tail` or `head_tail`, as in `tool.toml`.
pub fn truncate_mode_name(raw: i32) -> Cow<'static, str> {
    match TruncateMode::try_from(raw) {
        Ok(TruncateMode::Unspecified) => Cow::Borrowed("unspecified"),
        Ok(TruncateMode::Head) => Cow::Borrowed("head"),
        Ok(TruncateMode::Tail) => Cow::Borrowed("tail"),
        Ok(TruncateMode::HeadTail) => Cow::Borrowed("head_tail"),
        Err(_) => Cow::Owned(format!("truncate({raw})")),
    }
}

/// `OK`, `TOOL_ERROR`, … : the API's names without the `TOOL_STATUS_` prefix.
pub fn status_name(raw: i32) -> Cow<'static, str> {
    match ToolStatus::try_from(raw) {
        Ok(ToolStatus::Unspecified) => Cow::Borrowed("UNSPECIFIED"),
        Ok(ToolStatus::Ok) => Cow::Borrowed("OK"),
        Ok(ToolStatus::ToolError) => Cow::Borrowed("TOOL_ERROR"),
        Ok(ToolStatus::InvalidArguments) => Cow::Borrowed("INVALID_ARGUMENTS"),
        Ok(ToolStatus::Denied) => Cow::Borrowed("DENIED"),
        Ok(ToolStatus::Timeout) => Cow::Borrowed("TIMEOUT"),
        Ok(ToolStatus::Cancelled) => Cow::Borrowed("CANCELLED"),
        Ok(ToolStatus::LimitExceeded) => Cow::Borrowed("LIMIT_EXCEEDED"),
        Ok(ToolStatus::SandboxError) => Cow::Borrowed("SANDBOX_ERROR"),
        Ok(ToolStatus::OutcomeUnknown) => Cow::Borrowed("OUTCOME_UNKNOWN"),
        Err(_) => Cow::Owned(format!("STATUS_{raw}")),
    }
}

/// `OK` or `ERROR`: how a span of a trace ended.
pub fn span_status_name(raw: i32) -> Cow<'static, str> {
    api_name(raw, "SPAN_STATUS_", SpanStatus::as_str_name)
}

/// `FINAL`, `MAX_STEPS`, … : why a run stopped.
pub fn stop_reason_name(raw: i32) -> Cow<'static, str> {
    api_name(raw, "STOP_REASON_", StopReason::as_str_name)
}

/// `APPROVE_ONCE`, `APPROVE_SESSION` or `DENY`.
pub fn decision_name(raw: i32) -> Cow<'static, str> {
    api_name(raw, "DECISION_", Decision::as_str_name)
}

/// `ALWAYS`, `RISKY`, `NEVER` or `AUTO`.
pub fn policy_name(raw: i32) -> Cow<'static, str> {
    api_name(raw, "APPROVAL_POLICY_", ApprovalPolicy::as_str_name)
}

/// `RUNNING`, `WAITING_FOR_APPROVAL` or `FINISHED`.
pub fn run_state_name(raw: i32) -> Cow<'static, str> {
    api_name(raw, "RUN_STATE_", RunState::as_str_name)
}

/// `PENDING`, `RESOLVED`, `EXPIRED` or `DECISION_REJECTED`.
pub fn approval_state_name(raw: i32) -> Cow<'static, str> {
    api_name(raw, "APPROVAL_STATE_", ApprovalState::as_str_name)
}

/// `INCLUDED`, `SUMMARISED` or `DROPPED`: what the context builder did with an item.
pub fn disposition_name(raw: i32) -> Cow<'static, str> {
    api_name(raw, "CONTEXT_DISPOSITION_", ContextDisposition::as_str_name)
}

/// `STDOUT` or `STDERR`.
pub fn output_stream_name(raw: i32) -> Cow<'static, str> {
    api_name(raw, "OUTPUT_STREAM_", OutputStream::as_str_name)
}

/// The API's name of an enum value without the enum's prefix; for a value this client does
/// not know, the prefix and the number (`STOP_REASON_42`).
fn api_name<E: TryFrom<i32>>(
    raw: i32,
    prefix: &'static str,
    as_str_name: fn(&E) -> &'static str,
) -> Cow<'static, str> {
    match E::try_from(raw) {
        Ok(value) => {
            let full = as_str_name(&value);
            Cow::Borrowed(full.strip_prefix(prefix).unwrap_or(full))
        }
        Err(_) => Cow::Owned(format!("{prefix}{raw}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_are_the_api_names_without_prefix() {
        for raw in 0..=9 {
            let Ok(status) = ToolStatus::try_from(raw) else {
                panic!("status {raw} is defined");
            };
            let api_name = status.as_str_name();
            assert_eq!(
                Some(status_name(raw).as_ref()),
                api_name.strip_prefix("TOOL_STATUS_"),
                "{api_name}"
            );
        }
    }

    #[test]
    fn risk_and_truncate_names_are_the_manifest_names() {
        for raw in 0..=5 {
            let Ok(risk) = Risk::try_from(raw) else {
                panic!("risk {raw} is defined");
            };
            let expected = risk
                .as_str_name()
                .trim_start_matches("RISK_")
                .to_lowercase();
            assert_eq!(risk_name(raw), expected);
        }
        for raw in 0..=3 {
            let Ok(mode) = TruncateMode::try_from(raw) else {
                panic!("truncate mode {raw} is defined");
            };
            let expected = mode
                .as_str_name()
                .trim_start_matches("TRUNCATE_MODE_")
                .to_lowercase();
            assert_eq!(truncate_mode_name(raw), expected);
        }
    }

    #[test]
    fn agent_enums_use_the_api_names_without_prefix() {
        assert_eq!(stop_reason_name(StopReason::Final as i32), "FINAL");
        assert_eq!(
            stop_reason_name(StopReason::PermissionDenied as i32),
            "PERMISSION_DENIED"
        );
        assert_eq!(
            decision_name(Decision::ApproveSession as i32),
            "APPROVE_SESSION"
        );
        assert_eq!(policy_name(ApprovalPolicy::Risky as i32), "RISKY");
        assert_eq!(
            run_state_name(RunState::WaitingForApproval as i32),
            "WAITING_FOR_APPROVAL"
        );
        assert_eq!(
            approval_state_name(ApprovalState::DecisionRejected as i32),
            "DECISION_REJECTED"
        );
        assert_eq!(
            disposition_name(ContextDisposition::Summarised as i32),
            "SUMMARISED"
        );
        assert_eq!(output_stream_name(OutputStream::Stderr as i32), "STDERR");
    }

    #[test]
    fn unknown_values_show_their_number() {
        assert_eq!(stop_reason_name(42), "STOP_REASON_42");
        assert_eq!(decision_name(-1), "DECISION_-1");
        assert_eq!(status_name(99), "STATUS_99");
        assert_eq!(risk_name(-3), "risk(-3)");
        assert_eq!(truncate_mode_name(7), "truncate(7)");
    }
}
