//! Observations: what the model reads after each proposed call. Always a JSON object with a
//! `status` (the `ToolStatus` name), for results and for refusals alike, so the model can
//! tell an answer from an error without parsing prose.

use serde_json::{Value, json};

use crate::tools::{ToolResult, ToolStatus};

/// An observation and whether it reports an error.
pub struct Observation {
    pub content: String,
    pub is_error: bool,
    /// Whether the call changed its workspace (what the progress detector counts as progress).
    pub changed: bool,
}

pub fn of_result(result: &ToolResult) -> Observation {
    let mut body = json!({ "status": result.status.as_str() });
    match result.status {
        ToolStatus::Ok => {
            // JSON results are embedded as values; anything else (a cut result, plain
            // text) as a string.
            body["content"] = serde_json::from_str::<Value>(&result.content)
                .unwrap_or_else(|_| Value::String(result.content.clone()));
        }
        ToolStatus::ToolError
        | ToolStatus::InvalidArguments
        | ToolStatus::Denied
        | ToolStatus::Timeout
        | ToolStatus::Cancelled
        | ToolStatus::LimitExceeded
        | ToolStatus::SandboxError
        | ToolStatus::OutcomeUnknown => {
            body["error"] = Value::String(result.error_message.clone());
            body["retryable"] = Value::Bool(result.retryable);
            if !result.content.is_empty() {
                body["partial_output"] = Value::String(result.content.clone());
            }
        }
    }
    if result.truncated {
        body["truncated"] = Value::Bool(true);
        body["original_bytes"] = json!(result.original_bytes);
        // Where the whole output is kept (`airlock tools output ID`): a summary of this
        // observation keeps the pointer, so what was cut is never lost without trace.
        if let Some(execution_id) = &result.execution_id {
            body[FULL_OUTPUT] = Value::String(execution_id.to_string());
        }
    }
    Observation {
        content: body.to_string(),
        is_error: result.status != ToolStatus::Ok,
        changed: result.changes.as_ref().is_some_and(|set| !set.is_empty()),
    }
}

/// The field of a cut observation that names the execution whose whole output is kept.
pub const FULL_OUTPUT: &str = "full_output";

/// A call refused before anything ran, for `status` and `reason`.
pub fn refused(status: ToolStatus, reason: &str) -> Observation {
    Observation {
        content: json!({ "status": status.as_str(), "error": reason }).to_string(),
        is_error: true,
        changed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_results_embed_json_content_and_errors_carry_the_message() {
        let mut result = ToolResult::refused(ToolStatus::Ok, "");
        result.content = r#"{"lines": 3}"#.into();
        let ok = of_result(&result);
        assert!(!ok.is_error);
        assert_eq!(
            serde_json::from_str::<Value>(&ok.content).expect("json"),
            json!({"status": "OK", "content": {"lines": 3}})
        );
        let error = of_result(&ToolResult::refused(ToolStatus::Timeout, "too slow"));
        assert!(error.is_error);
        let value: Value = serde_json::from_str(&error.content).expect("json");
        assert_eq!(value["status"], "TIMEOUT");
        assert_eq!(value["error"], "too slow");
    }

    #[test]
    fn truncated_content_is_a_string_and_says_so() {
        let mut result = ToolResult::refused(ToolStatus::Ok, "");
        result.content = r#"{"lines": "aaa"#.into();
        result.truncated = true;
        result.original_bytes = 5000;
        let value: Value = serde_json::from_str(&of_result(&result).content).expect("json");
        assert_eq!(value["content"], r#"{"lines": "aaa"#);
        assert_eq!(value["original_bytes"], 5000);
    }
}
