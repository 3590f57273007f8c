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
//! Risky calls (any risk above `read_only`) wait for the person at the client: the call,
//! with its exact arguments, is put to them as an elicitation, and runs only when accepted.
//! A client that cannot be asked (no elicitation capability) gets the call refused, never
//! run unasked.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use airlock_client::proto::{ExecuteToolRequest, Risk, ToolInfo, ToolStatus};
use airlock_client::{AirlockClient, ExecutionEvent, exit_code};
use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, ErrorData, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt as _};

use super::workspace::Workspace;
use super::{CliError, Output, Server};

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The workspace every call works in [default: the current directory, when it lies inside
    /// the daemon's workspace roots].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

pub async fn run<O: Write, E: Write>(
    args: McpArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    let workspace = Workspace::choose(&client, args.workspace.as_deref()).await?;
    let gateway = Gateway {
        client: Arc::new(client),
        workspace: workspace.path,
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
        if tool.risk != Risk::ReadOnly as i32
            && let Some(refusal) = ask(&context, tool, &arguments).await
        {
            return Ok(CallToolResult::error(vec![ContentBlock::text(refusal)]).into());
        }
        let mut execution = self
            .client
            .execute_tool(ExecuteToolRequest {
                tool: tool.name.clone(),
                arguments_json: arguments.to_string(),
                workspace: self.workspace.clone(),
                timeout_ms: 0,
            })
            .await
            .map_err(internal)?;
        // Dropping the execution, when the client cancels, stops the tool.
        let result = tokio::select! {
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("cancelled by the client", None));
            }
            result = async {
                loop {
                    match execution.next_event().await? {
                        ExecutionEvent::Finished(result) => {
                            return Ok::<_, airlock_client::ClientError>(result);
                        }
                        ExecutionEvent::Started(_) | ExecutionEvent::Output(_) => {}
                    }
                }
            } => result.map_err(internal)?,
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

/// Puts a risky call to the person at the client; the reason it may not run, if it may not.
async fn ask(
    context: &RequestContext<RoleServer>,
    tool: &ToolInfo,
    arguments: &serde_json::Value,
) -> Option<String> {
    let can_ask = context
        .peer
        .peer_info()
        .is_some_and(|info| info.capabilities.elicitation.is_some());
    if !can_ask {
        return Some(format!(
            "DENIED: `{}` is a {} tool and needs a person's approval; this MCP client cannot be asked (it offers no elicitation)",
            tool.name,
            risk_name(tool.risk)
        ));
    }
    let schema =
        serde_json::from_value(serde_json::json!({"type": "object", "properties": {}})).ok()?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "airlock: allow this {} call?\n{} {}",
            risk_name(tool.risk),
            tool.name,
            serde_json::to_string_pretty(arguments).unwrap_or_default()
        ),
        requested_schema: schema,
    };
    match context.peer.create_elicitation(params).await {
        Ok(answer) if answer.action == ElicitationAction::Accept => None,
        Ok(_) => Some(format!("DENIED: the call to `{}` was declined", tool.name)),
        Err(err) => Some(format!(
            "DENIED: the approval of `{}` could not be asked: {err}",
            tool.name
        )),
    }
}

/// A tool as MCP describes it, with annotations from its manifest; none for a tool whose
/// schema is not a JSON object (the daemon never serves one).
fn mcp_tool(info: &ToolInfo) -> Option<Tool> {
    let schema: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&info.input_schema_json).ok()?;
    let risk = Risk::try_from(info.risk).unwrap_or(Risk::Destructive);
    let annotations = ToolAnnotations::new()
        .read_only(risk == Risk::ReadOnly)
        .destructive(matches!(
            risk,
            Risk::Destructive | Risk::Exec | Risk::Install
        ))
        .idempotent(info.idempotent)
        .open_world(risk == Risk::Network);
    Some(
        Tool::new(
            info.name.clone(),
            info.description.clone(),
            Arc::new(schema),
        )
        .with_annotations(annotations),
    )
}

fn risk_name(raw: i32) -> String {
    airlock_client::render::risk_name(raw).into_owned()
}

fn internal(error: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(error.to_string(), None)
}
