//! MCP requests as the executor's calls: `tools/list` is the caller's tools with their
//! schemas and annotations derived from their manifests, `tools/call` one execution admitted
//! as gRPC's are (`direct_call`) — asked about first when its risk is above read-only,
//! reported as progress while it writes output, its stderr lines sent as log messages (a
//! tool's logs, by the ABI), cancelled when the client cancels.
//!
//! The approval question is put to the person at the client from the request's own task:
//! rmcp routes a request made there onto the POST stream that carries the call (SEP-2260),
//! so a client that reads only that stream sees it, and no other stream of the session ever
//! does. The tenant's approver consoles see the same question; the first answer wins.
//! A client of the 2026-07-28 revision, which has no server-to-client requests, is asked
//! in-band instead: an input-required result it answers by retrying the call (`mrtr.rs`).
//!
//! Logging is deprecated by the newest MCP revision (SEP-2577) and still what clients of
//! every earlier one use to see a tool's logs.
#![expect(deprecated)]

use std::sync::Arc;

use airlock_proto::v1 as pb;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, ErrorData, Implementation, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool as McpTool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use tokio::sync::mpsc;

use super::McpCaller;
use super::mrtr::{self, Retry, States, Step};
use crate::api::direct_approval::{self, DirectApprovals, InBand};
use crate::api::direct_call::{Admitted, DirectCall, DirectCalls};
use crate::api::error::ApiError;
use crate::api::tenants::Tenant;
use crate::domain::Decision;
use crate::output::StreamKind;
use crate::policy::{Approver, Verdict};
use crate::profile::NetworkPolicy;
use crate::tools::{ExecutionEvent, Risk, Tool, ToolStatus};

#[derive(Clone)]
pub struct ToolServer {
    calls: Arc<DirectCalls>,
    /// The request states of in-band approvals; none when no key could be drawn (then a
    /// 2026-07-28 client's risky call waits for the approver consoles).
    states: Option<Arc<States>>,
    /// The questions of in-band approvals, waiting for their call's retry.
    in_band: Arc<InBand>,
    /// The least severe level the session's client wants log messages at; all when unset.
    log_level: Arc<std::sync::Mutex<Option<LoggingLevel>>>,
}

impl ToolServer {
    pub fn new(calls: Arc<DirectCalls>) -> ToolServer {
        let states = States::new(calls.approvals.timeout)
            .inspect_err(|err| {
                tracing::error!(
                    error = %err,
                    "no key for MCP request states: 2026-07-28 clients' approvals go to the \
                     approver consoles only"
                );
            })
            .ok()
            .map(Arc::new);
        ToolServer {
            calls,
            states,
            in_band: Arc::default(),
            log_level: Arc::default(),
        }
    }

    /// The server of one more session: what it serves shared, its log level its own.
    pub fn for_session(&self) -> ToolServer {
        ToolServer {
            log_level: Arc::default(),
            ..self.clone()
        }
    }

    /// Whether the client wants log messages at `info`, the level of a tool's stderr.
    fn logs_info(&self) -> bool {
        let wanted = self.log_level.lock().ok().and_then(|level| *level);
        wanted.is_none_or(|level| matches!(level, LoggingLevel::Debug | LoggingLevel::Info))
    }
}

/// The authenticated tenant and the workspace of a request.
fn caller(
    context: &RequestContext<RoleServer>,
) -> Result<(Arc<Tenant>, Option<String>), ErrorData> {
    let parts = context
        .extensions
        .get::<http::request::Parts>()
        .ok_or_else(|| ErrorData::internal_error("the request has no HTTP parts", None))?;
    let McpCaller(tenant) = parts
        .extensions
        .get::<McpCaller>()
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))?;
    let workspace = parts.uri.query().and_then(workspace_of);
    Ok((tenant, workspace))
}

/// The `workspace` parameter of a query string, decoded (`%XX` escapes and `+`); bytes that
/// are not UTF-8 read as U+FFFD, which no workspace root holds.
fn workspace_of(query: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "workspace")
        .map(|(_, value)| value.into_owned())
}

/// A refusal of the admission, as a failed call's result: the status's name and the reason
/// (`DENIED: tenant `a` may not use this workspace: …`).
fn refusal(err: ApiError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(refusal_text(err))])
}

/// The text of [`refusal`].
pub(super) fn refusal_text(err: ApiError) -> String {
    let status = tonic::Status::from(err);
    let word = match status.code() {
        tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => "DENIED",
        tonic::Code::InvalidArgument | tonic::Code::OutOfRange => "INVALID_ARGUMENTS",
        tonic::Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        tonic::Code::NotFound => "NOT_FOUND",
        tonic::Code::FailedPrecondition | tonic::Code::Aborted => "FAILED_PRECONDITION",
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => "UNAVAILABLE",
        tonic::Code::Cancelled => "CANCELLED",
        tonic::Code::AlreadyExists => "ALREADY_EXISTS",
        tonic::Code::Ok
        | tonic::Code::Unknown
        | tonic::Code::Unimplemented
        | tonic::Code::Internal
        | tonic::Code::DataLoss => "INTERNAL",
    };
    format!("{word}: {}", status.message())
}

/// A tool as MCP describes it, its annotations derived from its manifest: what airlock
/// decided about it, not what its author claimed.
fn mcp_tool(tool: &Tool) -> Option<McpTool> {
    let schema = tool.arguments.json().as_object()?.clone();
    let risk = tool.manifest.risk;
    let open_world =
        risk == Risk::Network || matches!(tool.profile.network, NetworkPolicy::AllowList { .. });
    let annotations = ToolAnnotations::new()
        .read_only(risk == Risk::ReadOnly)
        .destructive(matches!(
            risk,
            Risk::Install | Risk::Exec | Risk::Destructive
        ))
        .idempotent(tool.manifest.idempotent)
        .open_world(open_world);
    Some(
        McpTool::new(
            tool.name().to_owned(),
            tool.manifest.description.clone(),
            Arc::new(schema),
        )
        .with_annotations(annotations),
    )
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
        .with_server_info(Implementation::new("airlockd", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "airlock's sandboxed tools: every call runs in a sandbox under its tool's \
                 profile; risky calls wait for a person's approval.",
        )
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Ok(mut level) = self.log_level.lock() {
            *level = Some(request.level);
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (tenant, _) = caller(&context)?;
        Ok(ListToolsResult::with_all_items(
            self.calls
                .visible(&tenant)
                .filter_map(|tool| mcp_tool(tool))
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (tenant, workspace) = caller(&context)?;
        let refused =
            |message: String| Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into());
        // A tool the tenant may not use is, to it, no tool: the protocol's error for a name
        // it does not know.
        if !self.calls.sees(&tenant, &request.name) {
            return Err(ErrorData::invalid_params(
                format!("no tool named `{}`", request.name),
                None,
            ));
        }
        let retry = Retry {
            state: request.request_state,
            responses: request.input_responses,
        };
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let admitted = self.calls.admit(
            &tenant,
            DirectCall {
                tool: request.name.to_string(),
                arguments_json: arguments.to_string(),
                workspace,
                timeout: None,
            },
        );
        let Admitted { call, slot: _slot } = match admitted {
            Ok(admitted) => admitted,
            Err(err) => return Ok(refusal(err).into()),
        };
        let cancel = context.ct.child_token();
        let _stop = cancel.clone().drop_guard();
        let in_band = self.states.as_ref().filter(|_| asks_in_band(&context));
        if DirectApprovals::needed(&call)
            && let Some(states) = in_band
        {
            match mrtr::approve(
                &self.calls,
                &self.in_band,
                states,
                &tenant,
                &call,
                retry,
                &cancel,
            )
            .await
            {
                Step::Ask(question) => return Ok(question.into()),
                Step::Refused(message) => return refused(message),
                Step::Proceed => {}
            }
        } else if DirectApprovals::needed(&call)
            && let Some((question, asked)) = self
                .calls
                .approvals
                .register(&tenant.name, &call, &cancel)
                .await
        {
            // Asked here, in the request's task, so that the question rides this request's
            // stream; the consoles are asked as `outcome` is awaited.
            let mut elicit = std::pin::pin!(futures::future::OptionFuture::from(
                can_ask(&context).then(|| ask(&context, &question))
            ));
            let mut elicited = false;
            let mut outcome = std::pin::pin!(asked.outcome());
            let outcome = loop {
                tokio::select! {
                    outcome = &mut outcome => break outcome,
                    Some(verdict) = &mut elicit, if !elicited => {
                        elicited = true;
                        // Too late when a console answered first: the broker says so, and
                        // the console's answer stands.
                        let _ = self.calls.approvals.broker.decide(&verdict, &Approver::Console);
                    }
                    () = cancel.cancelled() => {
                        return Err(ErrorData::internal_error("cancelled by the client", None));
                    }
                }
            };
            if let Some(result) = direct_approval::refusal(outcome) {
                return refused(format!("DENIED: {}", result.error_message));
            }
        }
        let (events, mut reports) = mpsc::unbounded_channel();
        let executor = self.calls.executor.clone();
        let running = tokio::spawn({
            let cancel = cancel.clone();
            async move { executor.run(call, events, cancel).await }
        });
        let progress = context.meta.get_progress_token();
        // A 2026-07-28 request says in its `_meta` the level it wants logs at, and gets none
        // when it names none (SEP-2575); earlier clients set a session's level, all by default.
        let logs = if modern(&context) {
            context
                .meta
                .log_level()
                .is_some_and(|level| matches!(level, LoggingLevel::Debug | LoggingLevel::Info))
        } else {
            self.logs_info()
        };
        let mut written = 0u64;
        while let Some(event) = reports.recv().await {
            let chunk = match &event {
                ExecutionEvent::Output(chunk) => chunk,
                ExecutionEvent::Started { .. } => continue,
                // The call's last event. The channel may stay open a little longer: a
                // finished WebAssembly call's store, which still holds the capture and so a
                // sender, is torn down when its worker thread next parks.
                ExecutionEvent::Finished(_) => break,
            };
            if let Some(token) = &progress {
                written += chunk.data.len() as u64;
                let mut update = ProgressNotificationParam::new(token.clone(), written as f64);
                update.message = Some(format!("{written} bytes of output"));
                let _ = context.peer.notify_progress(update).await;
            }
            if logs && chunk.stream == StreamKind::Stderr {
                for line in String::from_utf8_lossy(&chunk.data).lines() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let message = LoggingMessageNotificationParam::new(
                        LoggingLevel::Info,
                        serde_json::Value::String(line.to_owned()),
                    )
                    .with_logger(request.name.to_string());
                    let _ = context.peer.notify_logging_message(message).await;
                }
            }
        }
        let result = running
            .await
            .map_err(|err| ErrorData::internal_error(format!("the call failed: {err}"), None))?;
        if result.status == ToolStatus::Ok {
            return Ok(CallToolResult::success(vec![ContentBlock::text(result.content)]).into());
        }
        let message = if result.error_message.is_empty() {
            result.content
        } else {
            result.error_message
        };
        refused(format!("{}: {message}", result.status.as_str()))
    }
}

/// Whether the request is of the 2026-07-28 revision or later: no session, and no request
/// from the server to the client.
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether the MCP client offers elicitation to a request from the server, while it waits
/// for a call's result (revisions before 2026-07-28).
fn can_ask(context: &RequestContext<RoleServer>) -> bool {
    !modern(context)
        && context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some())
}

/// Whether the MCP client answers an elicitation in an input-required result and retries
/// (2026-07-28); one that does not waits for the approver consoles.
fn asks_in_band(context: &RequestContext<RoleServer>) -> bool {
    modern(context)
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some())
}

/// The schema of a question with no fields: the answer is the action alone.
pub(super) fn no_fields() -> ElicitationSchema {
    ElicitationSchema::new(std::collections::BTreeMap::new())
}

/// Puts `question` to the person at the client; their answer as a decision on it.
async fn ask(context: &RequestContext<RoleServer>, question: &pb::ApprovalRequest) -> Verdict {
    let verdict = |decision: Decision, reason: &str| Verdict {
        approval_id: question.approval_id.clone(),
        decision: Some(decision),
        reason: reason.to_owned(),
        digest: question.digest.clone(),
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question.as_question(),
        requested_schema: no_fields(),
    };
    match context.peer.create_elicitation(params).await {
        Ok(answer) if answer.action == ElicitationAction::Accept => {
            verdict(Decision::ApproveOnce, "")
        }
        Ok(_) => verdict(Decision::Deny, "declined at the MCP client"),
        Err(err) => verdict(
            Decision::Deny,
            &format!("the MCP client could not be asked: {err}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_decoded_from_any_query() {
        assert_eq!(
            workspace_of("workspace=/srv/my%20project").as_deref(),
            Some("/srv/my project")
        );
        assert_eq!(workspace_of("x=1&workspace=a+b").as_deref(), Some("a b"));
        assert_eq!(workspace_of("workspace=100%").as_deref(), Some("100%"));
        assert_eq!(workspace_of("workspace=%zz").as_deref(), Some("%zz"));
        // Found by a reviewer: an escape cut by a multi-byte character panicked.
        assert_eq!(workspace_of("workspace=%a€").as_deref(), Some("%a€"));
        assert_eq!(workspace_of("workspace=%a").as_deref(), Some("%a"));
        assert_eq!(workspace_of("workspace=%ff").as_deref(), Some("\u{fffd}"));
        assert_eq!(workspace_of("other=1"), None);
    }
}
