//! A tool call's result for people: one status line, then the content.

use super::names::status_name;
use super::pretty::pretty_json;
use super::units::{format_bytes, format_micros, format_millis};
use crate::proto::{ToolResult, ToolStatus};

/// One line saying how the call went, without a trailing newline:
///
/// `status: OK, duration: 12 ms, tool exit code: 0, peak memory: 1.2 MiB, cpu: 3.1 ms`
///
/// followed, when they apply, by `truncated: <shown> of <whole> bytes shown`, `signal: <n>`
/// and `retryable` (for a failure that may succeed when tried again). The exit code is the
/// tool's own, labelled so: `airlock` exits with the code of the status.
pub fn result_status_line(result: &ToolResult) -> String {
    let mut parts = vec![
        format!("status: {}", status_name(result.status)),
        format!("duration: {}", format_millis(result.duration_ms)),
    ];
    if let Some(code) = result.exit_code {
        parts.push(format!("tool exit code: {code}"));
    }
    if result.truncated {
        parts.push(format!(
            "truncated: {} of {} bytes shown",
            result.head_bytes + result.tail_bytes,
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

/// Which bytes of the whole output a cut result shows, and the command that prints the rest
/// (`airlock tools output` serves the whole output byte for byte); None for a result that was
/// not cut, or whose whole output was not kept (no execution id).
///
/// - head: `shown: bytes 0–400 of 3545; the rest: airlock tools output EXE --offset 400`
/// - tail: `shown: bytes 3145–3545 of 3545; the rest: airlock tools output EXE --length 3145`
/// - both ends: `shown: bytes 0–200 and 3345–3545 of 3545; the middle: airlock tools output
///   EXE --offset 200 --length 3145`
pub fn cut_summary(result: &ToolResult) -> Option<String> {
    if !result.truncated || result.execution_id.is_empty() {
        return None;
    }
    let (whole, head, tail) = (result.original_bytes, result.head_bytes, result.tail_bytes);
    let id = &result.execution_id;
    let tail_start = whole.saturating_sub(tail);
    Some(match (head, tail) {
        (_, 0) => format!(
            "shown: bytes 0–{head} of {whole}; the rest: airlock tools output {id} --offset {head}"
        ),
        (0, _) => format!(
            "shown: bytes {tail_start}–{whole} of {whole}; the rest: airlock tools output {id} \
             --length {tail_start}"
        ),
        _ => format!(
            "shown: bytes 0–{head} and {tail_start}–{whole} of {whole}; the middle: airlock \
             tools output {id} --offset {head} --length {}",
            tail_start.saturating_sub(head)
        ),
    })
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
            "status: OK, duration: 12 ms, tool exit code: 0, peak memory: 1.2 MiB, cpu: 3.1 ms"
        );
    }

    #[test]
    fn truncation_signal_and_retryable_are_shown_when_they_apply() {
        let result = ToolResult {
            status: ToolStatus::LimitExceeded as i32,
            content: "x".repeat(100),
            truncated: true,
            original_bytes: 5_000,
            head_bytes: 100,
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
            "status: LIMIT_EXCEEDED, duration: 2.50 s, truncated: 100 of 5000 bytes shown, \
             peak memory: 512 B, cpu: 900 µs, signal: 9, retryable"
        );
    }

    #[test]
    fn a_cut_result_names_the_bytes_shown_and_the_command_for_the_rest() {
        let cut = |head, tail| ToolResult {
            truncated: true,
            original_bytes: 3_545,
            head_bytes: head,
            tail_bytes: tail,
            execution_id: "exe_1".to_owned(),
            ..ToolResult::default()
        };
        assert_eq!(
            cut_summary(&cut(400, 0)).as_deref(),
            Some("shown: bytes 0–400 of 3545; the rest: airlock tools output exe_1 --offset 400")
        );
        assert_eq!(
            cut_summary(&cut(0, 400)).as_deref(),
            Some(
                "shown: bytes 3145–3545 of 3545; the rest: airlock tools output exe_1 --length 3145"
            )
        );
        assert_eq!(
            cut_summary(&cut(200, 200)).as_deref(),
            Some(
                "shown: bytes 0–200 and 3345–3545 of 3545; the middle: airlock tools output \
                 exe_1 --offset 200 --length 3145"
            )
        );
        assert_eq!(cut_summary(&ToolResult::default()), None);
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
