//! Previews for approvers: what a call would do, shown before anyone agrees to it.
//!
//! A tool that implements preview mode is called with `"preview": true` under a read-only
//! view of its profile — the engine, not the tool's promise, guarantees that a preview
//! changes nothing — and its answer (a diff, for a file write) is the preview. Network tools
//! show the hosts their profile lets them reach, `exec` tools the command line and where it
//! runs; anything else shows its arguments.

use airlock_proto::v1 as pb;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::profile::{GUEST_WORKSPACE, NetworkPolicy};
use crate::tools::{CallRequest, Executor, Risk, Tool, ToolStatus};

/// An approver reads a preview; past this, it is cut.
const MAX_PREVIEW_BYTES: usize = 64 * 1024;

pub async fn preview(
    executor: &Executor,
    tool: &Tool,
    arguments: &Value,
    workspace: Option<&str>,
    cancel: CancellationToken,
) -> pb::Preview {
    if tool.manifest.preview {
        return from_preview_mode(executor, tool, arguments, workspace, cancel).await;
    }
    if tool.manifest.risk == Risk::Exec
        && let Some(preview) = command_preview(arguments)
    {
        return preview;
    }
    if tool.manifest.risk == Risk::Network {
        let text = match &tool.profile.network {
            NetworkPolicy::None => "no network is granted to this tool's profile".to_owned(),
            NetworkPolicy::AllowList { allow, deny, .. } => {
                let mut lines: Vec<String> = allow.iter().map(|p| format!("allow {p}")).collect();
                lines.extend(deny.iter().map(|p| format!("deny {p}")));
                lines.join("\n")
            }
        };
        return cut("domains", text, String::new());
    }
    arguments_preview(arguments, String::new())
}

async fn from_preview_mode(
    executor: &Executor,
    tool: &Tool,
    arguments: &Value,
    workspace: Option<&str>,
    cancel: CancellationToken,
) -> pb::Preview {
    let mut preview_arguments = arguments.clone();
    if let Value::Object(map) = &mut preview_arguments {
        map.insert("preview".into(), Value::Bool(true));
    }
    let call = match executor.prepare(CallRequest {
        tool: tool.name().to_owned(),
        arguments_json: preview_arguments.to_string(),
        workspace: workspace.map(str::to_owned),
        timeout: None,
        read_only: true,
        // A preview never reaches a hosted server: `preview` is refused for MCP manifests.
        tenant: None,
        in_run: true,
        ignores: None,
    }) {
        Ok(call) => call,
        Err(err) => return arguments_preview(arguments, format!("no preview: {err}")),
    };
    // The preview's own events are not part of the run; only its result is.
    let (events, _ignored) = mpsc::unbounded_channel();
    let result = executor.run(call, events, cancel).await;
    if result.status != ToolStatus::Ok {
        return arguments_preview(
            arguments,
            format!(
                "the preview failed ({}): {}",
                result.status.as_str(),
                result.error_message
            ),
        );
    }
    // A write tool answers with a diff; show it as such when it does.
    match serde_json::from_str::<Value>(&result.content) {
        Ok(Value::Object(map)) if map.get("diff").is_some_and(Value::is_string) => {
            let diff = map.get("diff").and_then(Value::as_str).unwrap_or_default();
            cut("diff", diff.to_owned(), String::new())
        }
        _ => cut("result", result.content, String::new()),
    }
}

/// An `exec` tool's command line and the directory it runs in, exactly as the tool receives
/// them (`command` and `workdir`, the shape `run_command` and its kind take): what an approver
/// must read before letting a shell loose in the workspace.
fn command_preview(arguments: &Value) -> Option<pb::Preview> {
    let command = arguments.get("command")?.as_str()?;
    let workdir = arguments
        .get("workdir")
        .and_then(Value::as_str)
        .unwrap_or(".");
    let directory = match workdir.trim_start_matches("./") {
        "" | "." => GUEST_WORKSPACE.to_owned(),
        sub => format!("{GUEST_WORKSPACE}/{sub}"),
    };
    Some(cut(
        "command",
        format!("in {directory}\n$ {command}"),
        String::new(),
    ))
}

fn arguments_preview(arguments: &Value, error: String) -> pb::Preview {
    let text = serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string());
    cut("arguments", text, error)
}

fn cut(kind: &str, mut text: String, error: String) -> pb::Preview {
    let truncated = text.len() > MAX_PREVIEW_BYTES;
    if truncated {
        let mut end = MAX_PREVIEW_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    pb::Preview {
        kind: kind.into(),
        text,
        truncated,
        error,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_exec_call_shows_its_command_line_and_where_it_runs() {
        let preview =
            command_preview(&json!({"command": "make test && rm -rf build", "workdir": "./src"}))
                .expect("a command preview");
        assert_eq!(preview.kind, "command");
        assert_eq!(
            preview.text,
            "in /workspace/src\n$ make test && rm -rf build"
        );
        let root = command_preview(&json!({"command": "ls", "workdir": "."})).expect("preview");
        assert_eq!(root.text, "in /workspace\n$ ls");
        assert!(
            command_preview(&json!({"argv": ["ls"]})).is_none(),
            "no command: the arguments"
        );
    }
}
