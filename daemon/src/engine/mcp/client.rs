//! airlock as the MCP client of a hosted server: what it tells the server about itself, and
//! how it answers what the server asks of it.
//!
//! - `roots/list` answers the instance's workspace as the sandbox shows it (`/workspace`),
//!   or nothing when the profile grants none: a server learns no host path.
//! - Sampling (`sampling/createMessage`) is refused: airlock does not offer it, so a server
//!   cannot spend a run's model budget or talk to its model behind the approvals.
//! - Elicitation is declined: a hosted server cannot put questions to a person on its own
//!   (see the MCP notes in SECURITY.md).
//! - A changed tool list (`notifications/tools/list_changed`) marks the instance for a new
//!   listing before its next call, so the trust check sees what the server now says.
//!
//! Roots and sampling are deprecated by the newest MCP revision (SEP-2577), which hosted
//! servers of every SDK generation do not speak yet: airlock answers them as above until
//! the servers it hosts have moved on.
#![expect(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, Implementation,
    ListRootsResult, ProtocolVersion, Root,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};

use crate::profile::GUEST_WORKSPACE;

/// The client side of one instance's connection.
#[derive(Clone)]
pub struct Client {
    /// Whether the instance's sandbox shows a workspace.
    pub workspace: bool,
    /// Set when the server says its tool list changed.
    pub tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(Default::default());
        ClientConfig::new(
            capabilities,
            Implementation::new("airlockd", env!("CARGO_PKG_VERSION")),
        )
        // The newest revision that still has the `initialize` handshake: what servers of
        // every SDK generation in use today answer.
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
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}
