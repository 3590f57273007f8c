//! Observations: what the model reads after each proposed call. Always a JSON object with a
//! `status` (the `ToolStatus` name), for results and for refusals alike, so the model can
//! tell an answer from an error without parsing prose.

use serde_json::{Value, json};

use airlock_proto::v1 as pb;

use crate::tools::ToolStatus;

/// An observation and whether it reports an error.
pub struct Observation {
    pub content: String,
    pub is_error: bool,
}

pub fn of_result(result: &pb::ToolResult) -> Observation {
    let status = pb::ToolStatus::try_from(result.status).unwrap_or(pb::ToolStatus::Unspecified);
    let name = status.as_str_name().trim_start_matches("TOOL_STATUS_");
    let mut body = json!({ "status": name });
    match status {
        pb::ToolStatus::Ok => {
            // JSON results are embedded as values; anything else (a cut result, plain
            // text) as a string.
            body["content"] = serde_json::from_str::<Value>(&result.content)
                .unwrap_or_else(|_| Value::String(result.content.clone()));
        }
        pb::ToolStatus::Unspecified
        | pb::ToolStatus::ToolError
        | pb::ToolStatus::InvalidArguments
        | pb::ToolStatus::Denied
        | pb::ToolStatus::Timeout
        | pb::ToolStatus::Cancelled
        | pb::ToolStatus::LimitExceeded
        | pb::ToolStatus::SandboxError
        | pb::ToolStatus::OutcomeUnknown => {
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
    }
    Observation {
        content: body.to_string(),
        is_error: status != pb::ToolStatus::Ok,
    }
}

/// A call refused before anything ran, for `status` and `reason`.
pub fn refused(status: ToolStatus, reason: &str) -> Observation {
    Observation {
        content: json!({ "status": status.as_str(), "error": reason }).to_string(),
        is_error: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolResult;
    use crate::wire;

    #[test]
    fn ok_results_embed_json_content_and_errors_carry_the_message() {
        let mut result = ToolResult::refused(ToolStatus::Ok, "");
        result.content = r#"{"lines": 3}"#.into();
        let ok = of_result(&wire::tool_result(result));
        assert!(!ok.is_error);
        assert_eq!(
            serde_json::from_str::<Value>(&ok.content).expect("json"),
            json!({"status": "OK", "content": {"lines": 3}})
        );
        let error = of_result(&wire::tool_result(ToolResult::refused(
            ToolStatus::Timeout,
            "too slow",
        )));
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
        let value: Value =
            serde_json::from_str(&of_result(&wire::tool_result(result)).content).expect("json");
        assert_eq!(value["content"], r#"{"lines": "aaa"#);
        assert_eq!(value["original_bytes"], 5000);
    }
}
