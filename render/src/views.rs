//! The JSON that `--json` prints: the API's messages with enum values by name, a tool's schema
//! as a JSON value (not a string holding JSON), and fields in the API's order.
//!
//! The shape follows the proto field names, so a script written against `--json` reads the
//! same words as one written against the gRPC API.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;

use super::names::{risk_name, status_name, tool_kind_name, truncate_mode_name};
use super::pretty::pretty_json;
use crate::proto::{OutputPolicy, ToolInfo, ToolResult, ToolResultMetadata};

/// `{"tools": [...]}`, each tool as [`tool_json`] prints it. Ends with a newline.
pub fn tools_json(tools: &[ToolInfo]) -> String {
    #[derive(Serialize)]
    struct ToolsView<'a> {
        tools: Vec<ToolView<'a>>,
    }
    to_json(&ToolsView {
        tools: tools.iter().map(ToolView::from).collect(),
    })
}

/// One tool as a JSON object. Ends with a newline.
pub fn tool_json(tool: &ToolInfo) -> String {
    to_json(&ToolView::from(tool))
}

/// A tool call's whole result as one JSON object; `content` stays the string the tool
/// produced. Ends with a newline.
pub fn result_json(result: &ToolResult) -> String {
    to_json(&ResultView::from(result))
}

/// Serialized compactly, then re-indented: `to_string_pretty` would print an embedded schema
/// verbatim, on its own indentation, in the middle of the pretty document.
pub(super) fn to_json(view: &impl Serialize) -> String {
    #[expect(
        clippy::expect_used,
        reason = "the views hold only strings, integers, booleans and already-validated raw \
                  JSON, which always serialize"
    )]
    let compact = serde_json::to_string(view).expect("views always serialize");
    let mut text = pretty_json(&compact).unwrap_or(compact);
    text.push('\n');
    text
}

#[derive(Serialize)]
struct ToolView<'a> {
    name: &'a str,
    version: &'a str,
    description: &'a str,
    input_schema: Schema<'a>,
    risk: Cow<'static, str>,
    engine: &'a str,
    kind: Cow<'static, str>,
    profile: &'a str,
    module_digest: &'a str,
    timeout_ms: u64,
    idempotent: bool,
    output: Option<OutputView>,
}

/// The schema as the daemon sent it; a schema that is not JSON (which a correct daemon never
/// serves) is kept as a string rather than dropped.
#[derive(Serialize)]
#[serde(untagged)]
enum Schema<'a> {
    Json(&'a RawValue),
    Text(&'a str),
}

#[derive(Serialize)]
struct OutputView {
    max_bytes: u64,
    truncate: Cow<'static, str>,
}

impl<'a> From<&'a ToolInfo> for ToolView<'a> {
    fn from(tool: &'a ToolInfo) -> Self {
        let input_schema = match serde_json::from_str::<&RawValue>(&tool.input_schema_json) {
            Ok(raw) => Schema::Json(raw),
            Err(_) => Schema::Text(&tool.input_schema_json),
        };
        Self {
            name: &tool.name,
            version: &tool.version,
            description: &tool.description,
            input_schema,
            risk: risk_name(tool.risk),
            engine: &tool.engine,
            kind: tool_kind_name(tool.kind),
            profile: &tool.profile,
            module_digest: &tool.module_digest,
            timeout_ms: tool.timeout_ms,
            idempotent: tool.idempotent,
            output: tool.output.as_ref().map(OutputView::from),
        }
    }
}

impl From<&OutputPolicy> for OutputView {
    fn from(policy: &OutputPolicy) -> Self {
        Self {
            max_bytes: policy.max_bytes,
            truncate: truncate_mode_name(policy.truncate),
        }
    }
}

#[derive(Serialize)]
pub(super) struct ResultView<'a> {
    execution_id: &'a str,
    status: Cow<'static, str>,
    content: &'a str,
    truncated: bool,
    original_bytes: u64,
    head_bytes: u64,
    tail_bytes: u64,
    duration_ms: u64,
    retryable: bool,
    exit_code: Option<i32>,
    error_message: &'a str,
    metadata: Option<MetadataView<'a>>,
    /// What the call changed in its workspace, when it could write there.
    #[serde(skip_serializing_if = "Option::is_none")]
    changes: Option<Vec<super::changes::ChangeView<'a>>>,
}

#[derive(Serialize)]
struct MetadataView<'a> {
    peak_memory_bytes: u64,
    cpu_time_us: u64,
    module_digest: &'a str,
    engine: &'a str,
    profile: &'a str,
    stdout_bytes: u64,
    stderr_bytes: u64,
    signal: Option<i32>,
}

impl<'a> From<&'a ToolResult> for ResultView<'a> {
    fn from(result: &'a ToolResult) -> Self {
        Self {
            changes: result.changes.as_ref().map(|set| {
                set.changes
                    .iter()
                    .map(super::changes::ChangeView::from)
                    .collect()
            }),
            execution_id: &result.execution_id,
            status: status_name(result.status),
            content: &result.content,
            truncated: result.truncated,
            original_bytes: result.original_bytes,
            head_bytes: result.head_bytes,
            tail_bytes: result.tail_bytes,
            duration_ms: result.duration_ms,
            retryable: result.retryable,
            exit_code: result.exit_code,
            error_message: &result.error_message,
            metadata: result.metadata.as_ref().map(MetadataView::from),
        }
    }
}

impl<'a> From<&'a ToolResultMetadata> for MetadataView<'a> {
    fn from(metadata: &'a ToolResultMetadata) -> Self {
        Self {
            peak_memory_bytes: metadata.peak_memory_bytes,
            cpu_time_us: metadata.cpu_time_us,
            module_digest: &metadata.module_digest,
            engine: &metadata.engine,
            profile: &metadata.profile,
            stdout_bytes: metadata.stdout_bytes,
            stderr_bytes: metadata.stderr_bytes,
            signal: metadata.signal,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::proto::{Risk, ToolKind, ToolStatus, TruncateMode};

    fn read_file() -> ToolInfo {
        ToolInfo {
            needs_workspace: false,
            name: "read_file".to_owned(),
            version: "0.1.0".to_owned(),
            description: "Reads a file.".to_owned(),
            input_schema_json: r#"{"type":"object","properties":{"path":{"type":"string"}}}"#
                .to_owned(),
            risk: Risk::ReadOnly as i32,
            engine: "wasm".to_owned(),
            profile: "readonly".to_owned(),
            module_digest: "ab".repeat(32),
            timeout_ms: 10_000,
            idempotent: true,
            output: Some(OutputPolicy {
                max_bytes: 65_536,
                truncate: TruncateMode::Head as i32,
            }),
            mcp_server: String::new(),
            mcp_tool: String::new(),
            kind: ToolKind::WasmModule as i32,
        }
    }

    #[test]
    fn a_tool_has_named_enums_and_an_embedded_schema() -> anyhow::Result<()> {
        let value: Value = serde_json::from_str(&tool_json(&read_file()))?;
        assert_eq!(
            value,
            json!({
                "name": "read_file",
                "version": "0.1.0",
                "description": "Reads a file.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                "risk": "read_only",
                "engine": "wasm",
                "kind": "wasm module",
                "profile": "readonly",
                "module_digest": "ab".repeat(32),
                "timeout_ms": 10_000,
                "idempotent": true,
                "output": {"max_bytes": 65_536, "truncate": "head"},
            })
        );
        Ok(())
    }

    #[test]
    fn fields_and_schema_keep_their_order_and_the_text_is_indented() {
        let text = tool_json(&read_file());
        assert!(
            text.starts_with("{\n  \"name\": \"read_file\",\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  \"input_schema\": {\n    \"type\": \"object\",\n    \"properties\": {\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("}\n"), "{text}");
    }

    #[test]
    fn a_list_wraps_the_tools() -> anyhow::Result<()> {
        let value: Value = serde_json::from_str(&tools_json(&[read_file(), read_file()]))?;
        let Some(tools) = value["tools"].as_array() else {
            panic!("no tools array in {value}");
        };
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[1]["name"], "read_file");
        let empty: Value = serde_json::from_str(&tools_json(&[]))?;
        assert_eq!(empty, json!({"tools": []}));
        Ok(())
    }

    #[test]
    fn a_schema_that_is_not_json_is_kept_as_a_string() -> anyhow::Result<()> {
        let tool = ToolInfo {
            input_schema_json: "{oops".to_owned(),
            ..read_file()
        };
        let value: Value = serde_json::from_str(&tool_json(&tool))?;
        assert_eq!(value["input_schema"], "{oops");
        Ok(())
    }

    #[test]
    fn a_result_is_one_object_with_every_field() -> anyhow::Result<()> {
        let result = ToolResult {
            status: ToolStatus::ToolError as i32,
            content: String::new(),
            truncated: false,
            original_bytes: 0,
            head_bytes: 0,
            tail_bytes: 0,
            duration_ms: 7,
            retryable: true,
            exit_code: Some(3),
            error_message: "no such file: a.txt".to_owned(),
            metadata: Some(ToolResultMetadata {
                peak_memory_bytes: 1_048_576,
                cpu_time_us: 1_500,
                module_digest: "cd".repeat(32),
                engine: "wasm".to_owned(),
                profile: "readonly".to_owned(),
                stdout_bytes: 64,
                stderr_bytes: 0,
                signal: None,
                network: Vec::new(),
            }),
            execution_id: "ex-1".to_owned(),
            changes: None,
        };
        let value: Value = serde_json::from_str(&result_json(&result))?;
        assert_eq!(
            value,
            json!({
                "execution_id": "ex-1",
                "status": "TOOL_ERROR",
                "content": "",
                "truncated": false,
                "original_bytes": 0,
                "head_bytes": 0,
                "tail_bytes": 0,
                "duration_ms": 7,
                "retryable": true,
                "exit_code": 3,
                "error_message": "no such file: a.txt",
                "metadata": {
                    "peak_memory_bytes": 1_048_576,
                    "cpu_time_us": 1_500,
                    "module_digest": "cd".repeat(32),
                    "engine": "wasm",
                    "profile": "readonly",
                    "stdout_bytes": 64,
                    "stderr_bytes": 0,
                    "signal": null,
                },
            })
        );
        Ok(())
    }

    #[test]
    fn json_content_stays_a_string() -> anyhow::Result<()> {
        let result = ToolResult {
            status: ToolStatus::Ok as i32,
            content: r#"{"lines":3}"#.to_owned(),
            ..ToolResult::default()
        };
        let value: Value = serde_json::from_str(&result_json(&result))?;
        assert_eq!(value["content"], r#"{"lines":3}"#);
        assert_eq!(value["metadata"], Value::Null);
        assert_eq!(value["exit_code"], Value::Null);
        Ok(())
    }
}
