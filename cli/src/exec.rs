//! `airlock tools exec TOOL`: runs one tool through the daemon, streams the tool's log to
//! stderr as it comes, then prints the result and exits with the code of its status.

use std::io::Write;
use std::path::PathBuf;

use crate::arguments::ArgumentSource;
use airlock_client::proto::{ExecuteToolRequest, OutputStream, ToolResult};
use airlock_client::{AirlockClient, ExecutionEvent, exit_code};
use airlock_render as render;
use clap::Args;

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;
use crate::workspace::Workspace;

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The tool to run.
    tool: String,

    /// The arguments: JSON text, @FILE to read them from a file, or - to read standard input.
    #[arg(long, value_name = "JSON|@FILE|-", default_value = "{}")]
    args: ArgumentSource,

    /// The workspace the tool works in [default: the current directory, when it lies inside
    /// the daemon's workspace roots]; made absolute here, as the daemon resolves paths on its
    /// own host.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// A deadline in milliseconds. It can only shorten the tool's own timeout; 0 keeps it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    timeout_ms: u64,

    /// Print the whole result as one JSON object instead of a status line and the content.
    #[arg(long)]
    json: bool,
}

pub async fn run<O: Write, E: Write>(
    args: ExecArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let arguments_json = args.args.read()?;
    let client = server.connect().await?;
    let workspace = Workspace::choose(&client, args.workspace.as_deref()).await?;
    let request = ExecuteToolRequest {
        tool: args.tool,
        arguments_json,
        workspace: workspace.path.clone(),
        timeout_ms: args.timeout_ms,
        // The person at the terminal ran the command: that is the approval.
        require_approval: false,
    };

    let mut execution_id = None;
    let outcome = {
        let call = call(&client, &workspace, request, out, &mut execution_id);
        tokio::pin!(call);
        tokio::select! {
            result = &mut call => Some(result),
            () = interrupted() => None,
        }
        // The call, and with it the event stream, is dropped here: the daemon sees the
        // stream go away and cancels the call.
    };
    match outcome {
        Some(result) => {
            let result = result?;
            report(&result, args.json, out)?;
            Ok(exit_code::for_raw_status(result.status))
        }
        None => {
            let message = match execution_id {
                Some(id) => format!("airlock: interrupted; execution {id} cancelled"),
                None => "airlock: interrupted".to_owned(),
            };
            out.line(&message)?;
            Ok(exit_code::INTERRUPTED)
        }
    }
}

/// Runs the call to its result, copying the tool's stderr to ours as it arrives.
async fn call<O: Write, E: Write>(
    client: &AirlockClient,
    workspace: &Workspace,
    request: ExecuteToolRequest,
    out: &mut Output<O, E>,
    execution_id: &mut Option<String>,
) -> Result<ToolResult, CliError> {
    let mut execution = client
        .execute_tool(request)
        .await
        .map_err(|error| workspace.explain(error))?;
    loop {
        match execution.next_event().await? {
            ExecutionEvent::Started(started) => *execution_id = Some(started.execution_id),
            ExecutionEvent::Output(chunk) => match OutputStream::try_from(chunk.stream) {
                Ok(OutputStream::Stderr) => out.tool_log(&chunk.data)?,
                // Stdout carries the ABI's result document, which arrives decoded in the
                // result; a stream this client does not know is not shown either.
                Ok(OutputStream::Stdout | OutputStream::Unspecified) | Err(_) => {}
            },
            ExecutionEvent::Finished(result) => return Ok(result),
            // `airlock tools exec` asks for no approval; the daemon sends none.
            ExecutionEvent::Approval(_) => {}
        }
    }
}

/// Resolves once the user presses Ctrl-C.
async fn interrupted() {
    if tokio::signal::ctrl_c().await.is_err() {
        // No handler could be installed, so Ctrl-C keeps its default effect of ending the
        // process; there is nothing to wait for.
        std::future::pending::<()>().await;
    }
}

/// The status line and the error message on stderr, the content on stdout; or, with `json`,
/// the whole result on stdout.
fn report<O: Write, E: Write>(
    result: &ToolResult,
    json: bool,
    out: &mut Output<O, E>,
) -> Result<(), CliError> {
    if json {
        return out.stdout(&render::result_json(result));
    }
    out.line(&render::result_status_line(result))?;
    // The daemon keeps the whole output of a cut call; say which part is shown and how to
    // read the rest.
    if let Some(summary) = render::cut_summary(result) {
        out.line(&summary)?;
    }
    out.stdout(&render::result_content(&result.content))?;
    let message = result.error_message.trim_end();
    if !message.is_empty() {
        out.line(message)?;
    }
    // What the call changed in the workspace, on stderr with the status: stdout stays the
    // tool's output alone.
    if let Some(changes) = &result.changes {
        out.line("changed in the workspace:")?;
        for line in render::change_set_lines(changes, "  ") {
            out.line(&line)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use airlock_client::proto::ToolStatus;

    use super::*;

    fn reported(result: &ToolResult, json: bool) -> anyhow::Result<(String, String)> {
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        report(result, json, &mut out)?;
        let (stdout, stderr) = out.into_inner();
        Ok((String::from_utf8(stdout)?, String::from_utf8(stderr)?))
    }

    #[test]
    fn an_ok_result_puts_the_content_on_stdout_and_the_status_on_stderr() -> anyhow::Result<()> {
        let result = ToolResult {
            status: ToolStatus::Ok as i32,
            content: r#"{"text":"hi"}"#.to_owned(),
            duration_ms: 3,
            exit_code: Some(0),
            ..ToolResult::default()
        };
        let (stdout, stderr) = reported(&result, false)?;
        assert_eq!(stdout, "{\n  \"text\": \"hi\"\n}\n");
        assert_eq!(stderr, "status: OK, duration: 3 ms, tool exit code: 0\n");
        Ok(())
    }

    #[test]
    fn a_cut_result_says_how_to_read_all_of_it() -> anyhow::Result<()> {
        let result = ToolResult {
            status: ToolStatus::Ok as i32,
            content: "aaaa".to_owned(),
            truncated: true,
            original_bytes: 9_000,
            head_bytes: 4,
            execution_id: "exe_1".to_owned(),
            ..ToolResult::default()
        };
        let (stdout, stderr) = reported(&result, false)?;
        assert_eq!(stdout, "aaaa\n");
        assert_eq!(
            stderr,
            "status: OK, duration: 0 ms, truncated: 4 of 9000 bytes shown\n\
             shown: bytes 0–4 of 9000; the rest: airlock tools output exe_1 --offset 4\n"
        );
        Ok(())
    }

    #[test]
    fn a_failure_puts_its_message_on_stderr() -> anyhow::Result<()> {
        let result = ToolResult {
            status: ToolStatus::ToolError as i32,
            error_message: "no such file: a.txt\n".to_owned(),
            duration_ms: 1,
            ..ToolResult::default()
        };
        let (stdout, stderr) = reported(&result, false)?;
        assert_eq!(stdout, "");
        assert_eq!(
            stderr,
            "status: TOOL_ERROR, duration: 1 ms\nno such file: a.txt\n"
        );
        Ok(())
    }

    #[test]
    fn json_puts_the_whole_result_on_stdout_only() -> anyhow::Result<()> {
        let result = ToolResult {
            status: ToolStatus::Denied as i32,
            error_message: "denied by policy".to_owned(),
            ..ToolResult::default()
        };
        let (stdout, stderr) = reported(&result, true)?;
        let value: serde_json::Value = serde_json::from_str(&stdout)?;
        assert_eq!(value["status"], "DENIED");
        assert_eq!(value["error_message"], "denied by policy");
        assert_eq!(stderr, "");
        Ok(())
    }
}
