//! `airlock mcp`: airlock's tools for any MCP client, over stdio.
//!
//! An IDE or desktop assistant starts `airlock mcp --workspace .` as its MCP server; this
//! process answers MCP on stdin and stdout (rmcp, the maintained Rust SDK) and forwards to
//! the daemon over gRPC with the caller's token: `tools/list` is `ListTools` — each tool with
//! its schema and MCP annotations derived from its manifest's risk — and `tools/call` is
//! `ExecuteTool` in the workspace, so every call runs in airlock's sandbox under its
//! profile. A client's `notifications/cancelled` drops the execution's stream, which stops
//! the tool.
//!
//! Risky calls (any risk above `read_only`) wait for a person: the daemon puts the exact
//! call to the tenant's approver consoles (`airlock approvals`), and, when the MCP client
//! offers elicitation, this gateway also asks the person at the client and sends their
//! answer as a decision bound to the call's digest. The first answer wins; none by the
//! deadline is a denial.
//!
//! `airlock mcp add` is the other direction's first step: it hosts a third-party server
//! (mcp_add/).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use airlock_client::proto::{ApprovalDecision, ExecuteToolRequest, Risk, ToolInfo, ToolStatus};
use airlock_client::{AirlockClient, ExecutionEvent, exit_code};
use clap::{Args, Subcommand};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt as _};
use tokio::sync::mpsc;

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;
use crate::workspace::Workspace;

/// Without a subcommand, the stdio gateway (what an IDE starts); `add` hosts a server.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct McpArgs {
    #[command(subcommand)]
    command: Option<McpCommand>,
    /// The workspace every call works in [default: the current directory, when it lies inside
    /// the daemon's workspace roots].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Host an MCP server from PyPI or npm: install it into a folder of its own in the
    /// daemon's tools directory (a lock file records every package and its hash), write its
    /// manifest, and list its tools in its sandbox as the daemon will.
    Add(super::mcp_add::AddArgs),
}

pub async fn run<O: Write, E: Write>(
    args: McpArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    if let Some(McpCommand::Add(add)) = args.command {
        return super::mcp_add::run(add, server, out).await;
    }
    let client = server.connect().await?;
    let workspace = Workspace::choose(&client, args.workspace.as_deref()).await?;
    let decisions = answer_as_console(&client).await?;
    let gateway = Gateway {
        client: Arc::new(client),
        workspace: workspace.path,
        decisions,
    };
    let running = gateway
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|err| CliError::Usage(format!("cannot serve MCP on stdio: {err}")))?;
    let _ = running.waiting().await;
    let _ = out;
    Ok(exit_code::OK)
}

#[derive(Clone)]
struct Gateway {
    client: Arc<AirlockClient>,
    /// Absolute; empty for none.
    workspace: String,
    /// Decisions of the person at the MCP client, sent on an approver console.
    decisions: mpsc::UnboundedSender<ApprovalDecision>,
}

/// An approver console that sends the gateway's decisions and reads (and ignores) what the
/// daemon streams to it, so that its stream never backs up.
async fn answer_as_console(
    client: &AirlockClient,
) -> Result<mpsc::UnboundedSender<ApprovalDecision>, CliError> {
    let mut console = client.approvals().await?;
    let (decisions, mut to_send) = mpsc::unbounded_channel::<ApprovalDecision>();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                update = console.next() => {
                    if !matches!(update, Ok(Some(_))) {
                        return;
                    }
                }
                decision = to_send.recv() => {
                    let Some(decision) = decision else { return };
                    if console.decide(decision).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    Ok(decisions)
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("airlock", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "airlock's sandboxed tools: every call runs in a sandbox under its tool's profile; \
                 risky calls ask you first.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.client.list_tools().await.map_err(internal)?;
        Ok(ListToolsResult::with_all_items(
            tools.iter().filter_map(mcp_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tools = self.client.list_tools().await.map_err(internal)?;
        let Some(tool) = tools.iter().find(|tool| tool.name == request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool named `{}`", request.name),
                None,
            ));
        };
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let mut execution = self
            .client
            .execute_tool(ExecuteToolRequest {
                tool: tool.name.clone(),
                arguments_json: arguments.to_string(),
                workspace: self.workspace.clone(),
                timeout_ms: 0,
                require_approval: true,
            })
            .await
            .map_err(internal)?;
        // The person at the client is asked while the call waits; a console may answer
        // first, and then their answer no longer counts.
        let mut asking = std::pin::pin!(futures::future::OptionFuture::from(None));
        // Dropping the execution, when the client cancels, stops the tool.
        let result = loop {
            tokio::select! {
                () = context.ct.cancelled() => {
                    return Err(ErrorData::internal_error("cancelled by the client", None));
                }
                Some(decision) = &mut asking => {
                    let _ = self.decisions.send(decision);
                    asking.set(None.into());
                }
                event = execution.next_event() => match event.map_err(internal)? {
                    ExecutionEvent::Finished(result) => break result,
                    ExecutionEvent::Approval(question) => {
                        if airlock_mcp_bridge::can_ask(&context) {
                            let peer = context.peer.clone();
                            let ask = async move { airlock_mcp_bridge::ask(&peer, &question).await };
                            asking.set(Some(ask).into());
                        }
                    }
                    ExecutionEvent::Started(_) | ExecutionEvent::Output(_) => {}
                },
            }
        };
        let text = if result.status == ToolStatus::Ok as i32 {
            result.content
        } else {
            let status = ToolStatus::try_from(result.status)
                .map(|status| status.as_str_name())
                .unwrap_or("TOOL_STATUS_UNSPECIFIED");
            let message = if result.error_message.is_empty() {
                result.content
            } else {
                result.error_message
            };
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "{status}: {message}"
            ))])
            .into());
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// A tool as MCP describes it, with annotations from its manifest; none for a tool whose
/// schema is not a JSON object (the daemon never serves one).
fn mcp_tool(info: &ToolInfo) -> Option<Tool> {
    let schema: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&info.input_schema_json).ok()?;
    let risk = Risk::try_from(info.risk).unwrap_or(Risk::Destructive);
    Some(
        Tool::new(
            info.name.clone(),
            info.description.clone(),
            Arc::new(schema),
        )
        .with_annotations(airlock_mcp_bridge::annotations(
            risk,
            info.idempotent,
            false,
        )),
    )
}

fn internal(error: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(error.to_string(), None)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    #[test]
    fn the_gateway_keeps_its_grammar_beside_add() -> anyhow::Result<()> {
        let gateway = |args: &[&str]| -> anyhow::Result<super::McpArgs> {
            let cli = Cli::try_parse_from(args)?;
            match cli.command {
                Command::Mcp(args) => Ok(args),
                other => anyhow::bail!("not `mcp`: {other:?}"),
            }
        };
        let plain = gateway(&["airlock", "mcp", "--workspace", "."])?;
        assert!(plain.command.is_none());
        assert_eq!(plain.workspace, Some(std::path::PathBuf::from(".")));
        assert!(gateway(&["airlock", "mcp"])?.command.is_none());
        let add = gateway(&[
            "airlock",
            "mcp",
            "add",
            "pypi:mcp-server-time",
            "--tools-dir",
            "t",
        ])?;
        assert!(matches!(add.command, Some(super::McpCommand::Add(_))));
        // A workspace is the gateway's; `add` has none.
        assert!(
            Cli::try_parse_from(["airlock", "mcp", "--workspace", ".", "add", "pypi:x"]).is_err()
        );
        Ok(())
    }
}
