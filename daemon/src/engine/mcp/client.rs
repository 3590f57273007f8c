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
//! - Sampling (`sampling/createMessage`) is refused: airlock does not offer it, so a server
//!   cannot spend a run's model budget or talk to its model behind the approvals. (Refused
//!   inside an `input_required` result, it fails the call.)
//! - Elicitation becomes a question to the instance's tenant's approvers (the `Approvals`
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
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, ErrorData,
    FormElicitationCapability, Implementation, ListRootsResult, ProtocolVersion, Root,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};

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

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(Default::default());
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(FormElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
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
        let roots = if self.workspace {
            let mut root = Root::new(format!("file://{GUEST_WORKSPACE}"));
            root.name = Some("workspace".into());
            vec![root]
        } else {
            Vec::new()
        };
        Ok(ListRootsResult::new(roots))
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Err(ErrorData::invalid_request(
            "airlock does not offer sampling to hosted MCP servers",
            None,
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let declined = Ok(ElicitResult::new(ElicitationAction::Decline));
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
            Ok(ElicitResult::new(ElicitationAction::Accept).with_content(answer))
        } else {
            declined
        }
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
