//! A tool call's result for people: one status line, then the content.

use super::names::status_name;
use super::pretty::pretty_json;
use super::units::{format_bytes, format_micros, format_millis};
use crate::proto::{ToolResult, ToolStatus};

/// One line saying how the call went, without a trailing newline:
///
/// `status: OK, duration: 12 ms, exit code: 0, peak memory: 1.2 MiB, cpu: 3.1 ms`
///
/// followed, when they apply, by `truncated: <shown> of <original> bytes`, `signal: <n>` and
/// `retryable` (for a failure that may succeed when tried again).
pub fn result_status_line(result: &ToolResult) -> String {
    let mut parts = vec![
        format!("status: {}", status_name(result.status)),
        format!("duration: {}", format_millis(result.duration_ms)),
    ];
    if let Some(code) = result.exit_code {
        parts.push(format!("exit code: {code}"));
    }
    if result.truncated {
        parts.push(format!(
            "truncated: {} of {} bytes",
            result.content.len(),
            result.original_bytes
        ));
    }
    if let Some(metadata) = &result.metadata {
        parts.push(format!(
            "peak memory: {}",
            format_bytes(metadata.peak_memory_bytes)
        ));
        parts.push(format!("cpu: {}", format_micros(metadata.cpu_time_us)));
        if let Some(signal) = metadata.signal {
            parts.push(format!("signal: {signal}"));
        }
    }
    if result.retryable && result.status != ToolStatus::Ok as i32 {
        parts.push("retryable".to_owned());
    }
    parts.join(", ")
}

/// The content as printed: pretty-printed when it is one JSON document (keys in their order),
/// as is otherwise. Non-empty output ends with a newline; empty content prints nothing.
pub fn result_content(content: &str) -> String {
    if content.is_empty() {
        return String::new();
    }
    let mut text = pretty_json(content).unwrap_or_else(|| content.to_owned());
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ToolResultMetadata;

    #[test]
    fn an_ok_result_shows_its_measurements() {
        let result = ToolResult {
            status: ToolStatus::Ok as i32,
            content: "{}".to_owned(),
            duration_ms: 12,
            exit_code: Some(0),
            metadata: Some(ToolResultMetadata {
                peak_memory_bytes: 1_258_291,
                cpu_time_us: 3_100,
                ..ToolResultMetadata::default()
            }),
            // Ignored for OK: there is nothing to retry.
            retryable: true,
            ..ToolResult::default()
        };
        assert_eq!(
            result_status_line(&result),
            "status: OK, duration: 12 ms, exit code: 0, peak memory: 1.2 MiB, cpu: 3.1 ms"
        );
    }

    #[test]
    fn truncation_signal_and_retryable_are_shown_when_they_apply() {
        let result = ToolResult {
            status: ToolStatus::LimitExceeded as i32,
            content: "x".repeat(100),
            truncated: true,
            original_bytes: 5_000,
            duration_ms: 2_500,
            retryable: true,
            metadata: Some(ToolResultMetadata {
                peak_memory_bytes: 512,
                cpu_time_us: 900,
                signal: Some(9),
                ..ToolResultMetadata::default()
            }),
            ..ToolResult::default()
        };
        assert_eq!(
            result_status_line(&result),
            "status: LIMIT_EXCEEDED, duration: 2.50 s, truncated: 100 of 5000 bytes, \
             peak memory: 512 B, cpu: 900 µs, signal: 9, retryable"
        );
    }

    #[test]
    fn a_bare_result_shows_status_and_duration_only() {
        let result = ToolResult {
            status: ToolStatus::InvalidArguments as i32,
            ..ToolResult::default()
        };
        assert_eq!(
            result_status_line(&result),
            "status: INVALID_ARGUMENTS, duration: 0 ms"
        );
    }

    #[test]
    fn json_content_is_pretty_printed_in_its_own_order() {
        assert_eq!(
            result_content(r#"{"z":1,"a":[true]}"#),
            "{\n  \"z\": 1,\n  \"a\": [\n    true\n  ]\n}\n"
        );
    }

    #[test]
    fn other_content_is_printed_as_is_on_whole_lines() {
        assert_eq!(result_content("plain text"), "plain text\n");
        assert_eq!(result_content("two\nlines\n"), "two\nlines\n");
        // Truncated JSON is no longer JSON: shown as it came.
        assert_eq!(result_content("{\"a\": [1, 2"), "{\"a\": [1, 2\n");
        assert_eq!(result_content(""), "");
    }
}
