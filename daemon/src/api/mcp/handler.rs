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
//! A hosted server's questions about the call reach the client the same two ways
//! (`relay.rs`), and its non-text answer (images, audio, resources) as the blocks it was.
//!
//! Logging is deprecated by the newest MCP revision (SEP-2577) and still what clients of
//! every earlier one use to see a tool's logs.
#![expect(deprecated)]

use std::sync::Arc;

use airlock_proto::v1 as pb;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, InputResponses, ListToolsResult, LoggingLevel, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool as McpTool,
};
use rmcp::service::{RequestContext, RoleServer};

use super::McpCaller;
use super::mrtr::{self, Retry, States, Step};
use super::relay::{self, Asking, Flight, Landed, Offers, Parked, Resumed};
use super::replies::{answer, refusal};
use crate::api::direct_approval::{DirectApprovals, InBand};
use crate::api::direct_call::{Admitted, DirectCall, DirectCalls};
use crate::api::tenants::Tenant;
use crate::engine::ToolKind;
use crate::policy::{Approver, Verdict};
use crate::profile::NetworkPolicy;
use crate::tools::Tool;

#[derive(Clone)]
pub struct ToolServer {
    calls: Arc<DirectCalls>,
    /// The request states of in-band approvals; none when no key could be drawn (then a
    /// 2026-07-28 client's risky call waits for the approver consoles).
    states: Option<Arc<States>>,
    /// The questions of in-band approvals, waiting for their call's retry.
    in_band: Arc<InBand>,
    /// Calls parked on a hosted server's question, waiting for their client's retry.
    parked: Arc<Parked>,
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
            parked: Arc::default(),
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

/// A tool as MCP describes it, its annotations derived from its manifest: what airlock
/// decided about it, not what its author claimed.
fn mcp_tool(tool: &Tool) -> Option<McpTool> {
    let schema = tool.arguments.json().as_object()?.clone();
    let open_world = matches!(tool.profile.network, NetworkPolicy::AllowList { .. });
    let annotations = airlock_mcp_bridge::annotations(
        crate::wire::risk(tool.manifest.risk),
        tool.manifest.idempotent,
        open_world,
    );
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

    /// A tool's definition, asked by rmcp to check a 2026-07-28 request's `Mcp-Param-*`
    /// headers against its body (SEP-2243: a mismatch is refused with -32020 and HTTP 400)
    /// before the request reaches [`ServerHandler::call_tool`]. rmcp asks without the
    /// request's tenant, so only a tool whose schema annotates a header is named, and the
    /// check compares nothing but the request's own headers with its own body: a tenant
    /// learns from it at most that a tool of that name annotates that argument. Whether
    /// it may call the tool is decided in `call_tool`, as for every call.
    fn get_tool(&self, name: &str) -> Option<McpTool> {
        let tool = self.calls.executor.registry().get(name)?;
        mcp_tool(&tool).filter(|tool| annotates_headers(&tool.input_schema))
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
                .iter()
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
        if let Some(key) = request.input_responses.as_ref().and_then(relay::malformed) {
            return Err(ErrorData::invalid_params(
                format!("inputResponses.{key} is not an answer to an input request"),
                None,
            ));
        }
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let asking = Asking::new(
            &tenant.name,
            &request.name,
            &arguments,
            workspace.as_deref(),
        );
        // The retry of a call parked on its server's question goes on where it stopped,
        // under the admission it already holds.
        if let (Some(states), Some(sealed)) = (&self.states, &request.request_state)
            && let Some(resumed) = self
                .resume(
                    states,
                    asking.clone(),
                    sealed,
                    request.input_responses.clone(),
                    &context,
                    &request.name,
                )
                .await
        {
            return resumed;
        }
        // Answers sent without a state are for the server's first round; with one, they
        // answer an approval (or nothing this daemon asked).
        let opening = request
            .request_state
            .is_none()
            .then_some(request.input_responses.clone())
            .flatten();
        let retry = Retry {
            state: request.request_state,
            responses: request.input_responses,
        };
        let admitted = self.calls.admit(
            &tenant,
            DirectCall {
                tool: request.name.to_string(),
                arguments_json: arguments.to_string(),
                workspace,
                timeout: None,
                ask_risky: true,
            },
        );
        let Admitted { call, slot } = match admitted {
            Ok(admitted) => admitted,
            Err(err) => return Ok(refusal(err).into()),
        };
        let cancel = context.ct.child_token();
        let _stop = cancel.clone().drop_guard();
        let in_band = self.states.as_ref().filter(|_| asks_in_band(&context));
        // A state that named no parked call is an approval's or a stranger's: only the
        // in-band approval of this very call may take it. Anything else would start the
        // call anew on a retry that meant to resume one.
        if retry.state.is_some() && !(DirectApprovals::needed(&call) && in_band.is_some()) {
            return Err(ErrorData::invalid_params(relay::STALE_QUESTION, None));
        }
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
            if let Some(result) =
                self.calls
                    .approvals
                    .settle(&tenant.name, &call, &question.approval_id, outcome)
            {
                return refused(format!("DENIED: {}", result.error_message));
            }
        }
        let offers = offers(&context);
        let opening = relay::opening(opening, offers);
        let asking = Asking {
            hosted: call.tool.loaded.kind() == ToolKind::McpTool,
            ..asking
        };
        let flight = Flight::start(self.calls.executor.clone(), call, slot, offers, opening);
        self.fly(flight, asking, None, &context, &request.name)
            .await
    }
}

impl ToolServer {
    /// Drives `flight` for the request of `context` to its end, putting the hosted server's
    /// questions to the client on the way (`relay.rs`).
    async fn fly(
        &self,
        mut flight: Flight,
        asking: Asking,
        until: Option<std::time::Instant>,
        context: &RequestContext<RoleServer>,
        tool: &str,
    ) -> Result<CallToolResponse, ErrorData> {
        // A 2026-07-28 request says in its `_meta` the level it wants logs at, and gets none
        // when it names none (SEP-2575); earlier clients set a session's level, all by default.
        let logs = if modern(context) {
            context
                .meta
                .log_level()
                .is_some_and(|level| matches!(level, LoggingLevel::Debug | LoggingLevel::Info))
        } else {
            self.logs_info()
        };
        loop {
            match flight.drive(context, tool, logs).await? {
                Landed::Done(result) => {
                    if let Some(error) = flight.lacked() {
                        return Err(error);
                    }
                    return Ok(answer(*result, asking.hosted).into());
                }
                Landed::Asked(asked) if !modern(context) => {
                    flight.ask_in_stream(context, asked).await?;
                }
                Landed::Asked(asked) => {
                    let states = self.states.as_ref().ok_or_else(|| {
                        ErrorData::internal_error("the question cannot be put in-band", None)
                    })?;
                    let until = until.unwrap_or_else(|| relay::park_until(states, flight.deadline));
                    return self
                        .parked
                        .park(states, asking, flight, asked, until)
                        .map(Into::into)
                        .ok_or_else(|| {
                            ErrorData::internal_error("the question cannot be put in-band", None)
                        });
                }
            }
        }
    }

    /// The retry of a parked call, when `sealed` names one of `asking`'s: the client's
    /// answers go to the server, and the call drives on. Asked again when the answers leave
    /// a question out.
    async fn resume(
        &self,
        states: &States,
        asking: Asking,
        sealed: &str,
        answers: Option<InputResponses>,
        context: &RequestContext<RoleServer>,
        tool: &str,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let Resumed {
            flight,
            asked,
            asking,
            until,
        } = self.parked.take(states, &asking, sealed)?;
        let answers = answers.unwrap_or_default();
        if !asked.answered_by(&answers) {
            // Asked again, under the same time limit: re-asking never extends a call's stay.
            return Some(
                self.parked
                    .park(states, asking, flight, asked, until)
                    .map(Into::into)
                    .ok_or_else(|| ErrorData::invalid_params(relay::STALE_QUESTION, None)),
            );
        }
        asked.answer(answers);
        Some(self.fly(flight, asking, Some(until), context, tool).await)
    }
}

/// How deep in nested `properties` a header annotation is looked for: a hosted server's
/// schema is a stranger's, and serde_json already stops documents at 128 levels.
const ANNOTATION_DEPTH: usize = 32;

/// Whether a schema annotates any of its properties, down to [`ANNOTATION_DEPTH`], with
/// `x-mcp-header`.
fn annotates_headers(schema: &serde_json::Map<String, serde_json::Value>) -> bool {
    fn within(schema: &serde_json::Map<String, serde_json::Value>, depth: usize) -> bool {
        depth < ANNOTATION_DEPTH
            && schema
                .get("properties")
                .and_then(|properties| properties.as_object())
                .is_some_and(|properties| {
                    properties
                        .values()
                        .filter_map(|p| p.as_object())
                        .any(|property| {
                            property.contains_key("x-mcp-header") || within(property, depth + 1)
                        })
                })
    }
    within(schema, 0)
}

/// What the client of `context` offers to answer for a hosted server: a client of
/// 2025-11-25 in its session's capabilities, one of 2026-07-28 in the request's `_meta`.
fn offers(context: &RequestContext<RoleServer>) -> Offers {
    let capabilities = if modern(context) {
        context.client_capabilities()
    } else {
        context
            .peer
            .peer_info()
            .map(|info| info.capabilities.clone())
    };
    capabilities.map_or_else(Offers::default, |capabilities| Offers {
        elicits: capabilities.elicitation.is_some(),
        samples: capabilities.sampling.is_some(),
    })
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
    !modern(context) && airlock_mcp_bridge::can_ask(context)
}

/// Whether the MCP client answers an elicitation in an input-required result and retries
/// (2026-07-28); one that does not waits for the approver consoles.
fn asks_in_band(context: &RequestContext<RoleServer>) -> bool {
    modern(context)
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some())
}

/// Puts `question` to the person at the client; their answer as a decision on it.
async fn ask(context: &RequestContext<RoleServer>, question: &pb::ApprovalRequest) -> Verdict {
    crate::api::request::verdict(&airlock_mcp_bridge::ask(&context.peer, question).await)
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
