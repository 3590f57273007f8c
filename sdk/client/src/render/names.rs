//! The names enum values are printed with: those of the manifest (`read_only`, `head`) for a
//! tool's properties, those of the API (`OK`, `TOOL_ERROR`) for statuses.
//!
//! A value this client does not know, from a newer daemon, is printed with its number rather
//! than guessed at.

use std::borrow::Cow;

use crate::proto::{Risk, ToolStatus, TruncateMode};

/// `read_only`, `write`, `network`, `install` or `destructive`, as in `tool.toml`.
pub fn risk_name(raw: i32) -> Cow<'static, str> {
    match Risk::try_from(raw) {
        Ok(Risk::Unspecified) => Cow::Borrowed("unspecified"),
        Ok(Risk::ReadOnly) => Cow::Borrowed("read_only"),
        Ok(Risk::Write) => Cow::Borrowed("write"),
        Ok(Risk::Network) => Cow::Borrowed("network"),
        Ok(Risk::Install) => Cow::Borrowed("install"),
        Ok(Risk::Destructive) => Cow::Borrowed("destructive"),
        Err(_) => Cow::Owned(format!("risk({raw})")),
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
    fn unknown_values_show_their_number() {
        assert_eq!(status_name(99), "STATUS_99");
        assert_eq!(risk_name(-3), "risk(-3)");
        assert_eq!(truncate_mode_name(7), "truncate(7)");
    }
}
