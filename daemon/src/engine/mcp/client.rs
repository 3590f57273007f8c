//! airlock as the MCP client of a hosted server: what it tells the server about itself, and
//! how it answers what the server asks of it.
//!
//! A session with a remote server speaks the newest revision the server offers of the two
//! airlock knows (see `instance::lifecycle`; a server run here over stdio is greeted with
//! `initialize`, see `Instance::start`): 2026-07-28, stateless (`server/discover`, then
//! each request carrying the protocol version, this client's info and capabilities in its
//! `_meta`, and over HTTP the standard `Mcp-Method`/`Mcp-Name` headers and the
//! `Mcp-Param-*` ones its tools' schemas ask for, all rmcp's), or 2025-11-25 over the
//! `initialize` handshake. A server of 2025-11-25 asks its questions as requests of its own
//! in the middle of a call; one of 2026-07-28 answers the call with an `input_required`
//! result (SEP-2322) whose requests rmcp puts to this same handler, then sends the call
//! again with the answers and the server's `requestState` untouched (`Instance::call_tool`).
//! Either way a question gets the same answer:
//!
//! - `roots/list` answers the instance's workspace as the sandbox shows it (`/workspace`),
//!   or nothing when the profile grants none: a server learns no host path.
//! - Otherwise sampling (`sampling/createMessage`) is refused: airlock offers no model of its
//!   own, so a server cannot spend a run's model budget or talk to its model behind the
//!   approvals. (Refused inside an `input_required` result, it fails the call.)
//! - Elicitation and sampling go to the MCP client whose call raised them, when it offered
//!   to answer them (`questions.rs` says when a question is known to be a call's).
//! - Otherwise elicitation becomes a question to the instance's tenant's approvers (the `Approvals`
//!   stream, `airlock approvals`), through the daemon's approval broker: approved, the
//!   server gets its form's defaults (a person at a console answers yes or no, not a form);
//!   a form with a required field that has no default, a denial, or no answer by the
//!   deadline is declined. A URL elicitation is declined.
//! - A changed tool list (`notifications/tools/list_changed`, which a server of 2026-07-28
//!   sends on the subscription `instance` opens) marks the instance for a new listing before
//!   its next call, so the trust check sees what the server now says.
//!
//! Roots and sampling are deprecated by 2026-07-28 (SEP-2577), which hosted servers of every
//! SDK generation do not follow yet: airlock answers them as above until the servers it hosts
//! have moved on.
#![expect(deprecated)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequest, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation, InputRequest,
    InputRequests, ListRootsResult, ProtocolVersion, Root,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde::de::DeserializeOwned;

use super::questions::{Callers, Questions, attributed};
use crate::profile::GUEST_WORKSPACE;

/// Who answers a hosted server's questions: the daemon's approval broker, set once the
/// daemon has one.
pub trait Asker: Send + Sync {
    /// Puts `message`, from `server`, to the approvers of `tenant`; true when approved.
    fn ask(
        &self,
        tenant: Option<String>,
        server: String,
        message: String,
    ) -> BoxFuture<'static, bool>;
}

/// Where an engine keeps its [`Asker`] until the daemon provides it.
pub type AskerSlot = Arc<OnceLock<Arc<dyn Asker>>>;

/// The client side of one instance's connection.
#[derive(Clone)]
pub struct Client {
    /// Whether the instance's sandbox shows a workspace.
    pub workspace: bool,
    /// Set when the server says its tool list changed.
    pub tools_changed: Arc<AtomicBool>,
    /// The server's name and the tenant its instance serves, for its questions.
    pub server: String,
    pub tenant: Option<String>,
    pub asker: AskerSlot,
    /// The calls in flight on the instance, and who can answer for each.
    pub callers: Arc<Callers>,
}

/// The key a single question forwarded to a client is asked under.
const FORWARDED: &str = "question";

/// Puts one question of `server` to the client `questions`; its answer, read as `T`.
async fn forward<T: DeserializeOwned>(
    server: &str,
    questions: &dyn Questions,
    request: InputRequest,
) -> Result<T, String> {
    let mut requests = InputRequests::new();
    requests.insert(FORWARDED.to_owned(), request);
    let mut answers = questions.ask(attributed(server, requests)).await?;
    let answer = answers
        .remove(FORWARDED)
        .ok_or_else(|| "the MCP client gave no answer".to_owned())?;
    serde_json::from_value(answer)
        .map_err(|err| format!("the MCP client's answer is malformed: {err}"))
}

/// The answer a form gets when a person approved it: every field's default. None when a
/// required field has none (a yes cannot fill it in).
fn defaults(schema: &serde_json::Value) -> Option<serde_json::Value> {
    let properties = schema.get("properties").and_then(|p| p.as_object());
    let mut answer = serde_json::Map::new();
    for (name, property) in properties.into_iter().flatten() {
        if let Some(default) = property.get("default") {
            answer.insert(name.clone(), default.clone());
        }
    }
    let required = schema
        .get("required")
        .and_then(|r| r.as_array())
        .cloned()
        .unwrap_or_default();
    required
        .iter()
        .all(|name| name.as_str().is_some_and(|name| answer.contains_key(name)))
        .then_some(serde_json::Value::Object(answer))
}

impl Client {
    /// The roots the server is told: the sandbox's workspace, when it shows one.
    pub fn roots(&self) -> ListRootsResult {
        let roots = if self.workspace {
            let mut root = Root::new(format!("file://{GUEST_WORKSPACE}"));
            root.name = Some("workspace".into());
            vec![root]
        } else {
            Vec::new()
        };
        ListRootsResult::new(roots)
    }

    /// A form answered by airlock itself: put to the tenant's approvers, filled with its
    /// defaults when approved, declined otherwise.
    pub async fn elicit_here(&self, request: ElicitRequestParams) -> ElicitResult {
        let declined = ElicitResult::new(ElicitationAction::Decline);
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return declined;
        };
        let Some(answer) = serde_json::to_value(&requested_schema)
            .ok()
            .as_ref()
            .and_then(defaults)
        else {
            return declined;
        };
        let Some(asker) = self.asker.get().cloned() else {
            return declined;
        };
        if asker
            .ask(self.tenant.clone(), self.server.clone(), message)
            .await
        {
            ElicitResult::new(ElicitationAction::Accept).with_content(answer)
        } else {
            declined
        }
    }

    /// Sampling, when no client takes it: refused.
    pub fn no_sampling() -> ErrorData {
        ErrorData::invalid_request(
            "airlock does not offer sampling to hosted MCP servers",
            None,
        )
    }

    /// The client of the call in flight, when it is the only one and can answer `request`.
    fn caller_for(&self, request: &InputRequest) -> Option<Arc<dyn Questions>> {
        self.callers
            .sole()
            .filter(|questions| super::questions::answers(questions.as_ref(), request))
    }
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(Default::default());
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(FormElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
        // Sampling is not offered: most calls' clients cannot take it, and a server that
        // samples only when offered is better left to do without. One that asks anyway is
        // forwarded to a client that can answer, refused otherwise.
        ClientConfig::new(
            capabilities,
            Implementation::new("airlockd", env!("CARGO_PKG_VERSION")),
        )
        // The revision a session started with `initialize` asks for: the newest that still
        // has the handshake. (A session of 2026-07-28 names its revision in each request.)
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(self.roots())
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = InputRequest::CreateMessage(CreateMessageRequest::new(params));
        let Some(caller) = self.caller_for(&request) else {
            return Err(Client::no_sampling());
        };
        forward(&self.server, caller.as_ref(), request)
            .await
            .map_err(|err| ErrorData::internal_error(err, None))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let question = InputRequest::Elicitation(ElicitRequest::new(request.clone()));
        let Some(caller) = self.caller_for(&question) else {
            return Ok(self.elicit_here(request).await);
        };
        // A client that could not answer (it went away, or answered nonsense) declines.
        Ok(forward(&self.server, caller.as_ref(), question)
            .await
            .unwrap_or_else(|err| {
                tracing::debug!(server = %self.server, error = %err, "a forwarded question was not answered");
                ElicitResult::new(ElicitationAction::Decline)
            }))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approved_form_answers_its_defaults_or_nothing() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "default": true}, "note": {"type": "string"}},
            "required": ["confirm"]
        });
        assert_eq!(
            defaults(&schema),
            Some(serde_json::json!({"confirm": true}))
        );
        let unanswerable = serde_json::json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"]
        });
        assert_eq!(defaults(&unanswerable), None);
    }
}
