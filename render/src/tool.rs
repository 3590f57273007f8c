//! The detail view of `airlock tools show`: every field of one tool, then its input schema.

use super::names::{risk_name, tool_kind_name, truncate_mode_name};
use super::pretty::pretty_json;
use super::units::{format_bytes, format_millis};
use crate::proto::ToolInfo;

/// Width of the label column, the longest label plus room to breathe.
const LABEL_WIDTH: usize = "description:".len() + 2;

/// Every field of `tool` as `label: value` lines, then `input schema:` and the schema
/// pretty-printed (as written, when it is not JSON). Ends with a newline.
pub fn tool_details(tool: &ToolInfo) -> String {
    let mut out = String::new();
    field(&mut out, "name", &tool.name);
    field(&mut out, "version", &tool.version);
    field(&mut out, "description", tool.description.trim_end());
    field(&mut out, "risk", &risk_name(tool.risk));
    field(&mut out, "engine", &tool.engine);
    field(&mut out, "kind", &tool_kind_name(tool.kind));
    field(&mut out, "profile", &tool.profile);
    field(&mut out, "digest", &tool.module_digest);
    let timeout = match tool.timeout_ms {
        0 => String::new(),
        millis => format_millis(millis),
    };
    field(&mut out, "timeout", &timeout);
    field(
        &mut out,
        "idempotent",
        if tool.idempotent { "yes" } else { "no" },
    );
    let output = match &tool.output {
        Some(policy) => format!(
            "max {} bytes ({}), truncate {}",
            policy.max_bytes,
            format_bytes(policy.max_bytes),
            truncate_mode_name(policy.truncate)
        ),
        None => "not limited".to_owned(),
    };
    field(&mut out, "output", &output);
    out.push_str("input schema:\n");
    let schema = pretty_json(&tool.input_schema_json)
        .unwrap_or_else(|| tool.input_schema_json.trim_end().to_owned());
    out.push_str(&schema);
    out.push('\n');
    out
}

/// One `label: value` line; the lines of a multi-line value line up under its first line.
pub(super) fn field(out: &mut String, label: &str, value: &str) {
    let label = format!("{label}:");
    let value = if value.is_empty() { "-" } else { value };
    for (index, line) in value.lines().enumerate() {
        let label = if index == 0 { label.as_str() } else { "" };
        let line = format!("{label:<LABEL_WIDTH$}{line}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{OutputPolicy, Risk, ToolKind, TruncateMode};

    #[test]
    fn every_field_and_the_pretty_schema_are_shown() {
        let tool = ToolInfo {
            needs_workspace: true,
            name: "read_file".to_owned(),
            version: "0.1.0".to_owned(),
            description: "Reads a text file\nfrom the workspace.\n".to_owned(),
            input_schema_json: r#"{"type":"object","required":["path"]}"#.to_owned(),
            risk: Risk::ReadOnly as i32,
            engine: "wasm".to_owned(),
            profile: "readonly".to_owned(),
            module_digest: "ab".repeat(32),
            timeout_ms: 10_000,
            idempotent: true,
            output: Some(OutputPolicy {
                max_bytes: 65_536,
                truncate: TruncateMode::HeadTail as i32,
            }),
            mcp_server: String::new(),
            mcp_tool: String::new(),
            kind: ToolKind::WasmModule as i32,
        };
        let expected = format!(
            "name:         read_file\n\
             version:      0.1.0\n\
             description:  Reads a text file\n\
             \x20             from the workspace.\n\
             risk:         read_only\n\
             engine:       wasm\n\
             kind:         wasm module\n\
             profile:      readonly\n\
             digest:       {}\n\
             timeout:      10.00 s\n\
             idempotent:   yes\n\
             output:       max 65536 bytes (64.0 KiB), truncate head_tail\n\
             input schema:\n\
             {{\n  \"type\": \"object\",\n  \"required\": [\n    \"path\"\n  ]\n}}\n",
            "ab".repeat(32)
        );
        assert_eq!(tool_details(&tool), expected);
    }

    #[test]
    fn empty_fields_and_a_schema_that_is_not_json_are_shown_as_they_are() {
        let tool = ToolInfo {
            name: "bare".to_owned(),
            input_schema_json: "not json\n".to_owned(),
            ..ToolInfo::default()
        };
        let details = tool_details(&tool);
        assert!(details.contains("\nversion:      -\n"), "{details}");
        assert!(details.contains("\ntimeout:      -\n"), "{details}");
        assert!(details.contains("\nidempotent:   no\n"), "{details}");
        assert!(
            details.contains("\noutput:       not limited\n"),
            "{details}"
        );
        assert!(details.ends_with("input schema:\nnot json\n"), "{details}");
    }
}
