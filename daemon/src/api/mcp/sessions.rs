//! Which tenant opened each MCP session, so that a session is its opener's alone.
//!
//! rmcp keeps the sessions themselves; a session id is a bearer secret to it. Here every
//! request that names a session must carry a token of the tenant that opened it: another
//! tenant's request (its GET stream, a POST into it, a DELETE) is answered as if the session
//! did not exist, and nothing of the session reaches it — not its approval questions, not
//! its notifications. A tenant holds at most [`MAX_SESSIONS_PER_TENANT`] live sessions.
//!
//! Entries of sessions rmcp has dropped (idle past its keep-alive, or closed) are swept
//! when a tenant reaches its cap and when the table doubles since its last sweep.
//!
//! Clients of the 2026-07-28 revision have no sessions: each request stands alone, served
//! statelessly by rmcp. Such a request is neither counted nor held to the cap
//! ([`may_open_session`] tells it from one that may open a session by its headers alone,
//! as the body is not read here).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// The most live sessions one tenant holds. An MCP client opens one per connection (an IDE
/// a handful); each session holds a task and its channels in the daemon until it is closed or
/// idles out, so a tenant that opens sessions in a loop is stopped here, not at memory's end.
pub const MAX_SESSIONS_PER_TENANT: usize = 64;

/// Why a request may not use a session.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No session of this tenant has this id (another tenant's is none of its business).
    Unknown,
    /// The tenant holds [`MAX_SESSIONS_PER_TENANT`] sessions already.
    Full,
}

/// Whether a POST without a session id may open a session, judged by its headers: only an
/// `initialize` request opens one, and a request that says in its headers it is of the
/// 2026-07-28 revision or later (the version header, as rmcp reads it) and names one method
/// other than `initialize` is not one — rmcp refuses a body that contradicts its
/// `Mcp-Method` header. Every other POST is held to the cap, as before.
pub fn may_open_session(headers: &http::HeaderMap) -> bool {
    let modern = headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28.as_str());
    let mut methods = headers.get_all("mcp-method").iter();
    let one_method = match (methods.next(), methods.next()) {
        (Some(method), None) => Some(method),
        _ => None,
    };
    let names_another = one_method.is_some_and(|method| method.as_bytes() != b"initialize");
    !(modern && names_another)
}

pub struct Sessions {
    manager: Arc<LocalSessionManager>,
    /// Session id → the tenant that opened it.
    owners: Mutex<HashMap<String, String>>,
    /// The table's size after its last sweep.
    swept_at: Mutex<usize>,
}

impl Sessions {
    pub fn new(manager: Arc<LocalSessionManager>) -> Sessions {
        Sessions {
            manager,
            owners: Mutex::default(),
            swept_at: Mutex::new(0),
        }
    }

    /// Whether `tenant` may use session `id`.
    pub fn check(&self, tenant: &str, id: &str) -> Result<(), Refusal> {
        let owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        match owners.get(id) {
            Some(owner) if owner == tenant => Ok(()),
            Some(_) | None => Err(Refusal::Unknown),
        }
    }

    /// Before `tenant` opens a session: whether it may hold one more.
    pub async fn may_open(&self, tenant: &str) -> Result<(), Refusal> {
        if self.count(tenant) < MAX_SESSIONS_PER_TENANT {
            return Ok(());
        }
        self.sweep().await;
        if self.count(tenant) < MAX_SESSIONS_PER_TENANT {
            Ok(())
        } else {
            Err(Refusal::Full)
        }
    }

    /// Records that `tenant` opened session `id`.
    pub async fn opened(&self, tenant: &str, id: String) {
        let size = {
            let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
            owners.insert(id, tenant.to_owned());
            owners.len()
        };
        let last = *self.swept_at.lock().unwrap_or_else(PoisonError::into_inner);
        if size > last.saturating_mul(2).max(MAX_SESSIONS_PER_TENANT) {
            self.sweep().await;
        }
    }

    /// Forgets session `id` (closed by its owner).
    pub fn closed(&self, id: &str) {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    fn count(&self, tenant: &str) -> usize {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|owner| *owner == tenant)
            .count()
    }

    /// Drops the entries of sessions rmcp no longer has.
    async fn sweep(&self) {
        let ids: Vec<String> = self
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        let mut gone = Vec::new();
        for id in ids {
            let live = self
                .manager
                .has_session(&Arc::from(id.as_str()))
                .await
                .unwrap_or(false);
            if !live {
                gone.push(id);
            }
        }
        let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        for id in gone {
            owners.remove(&id);
        }
        *self.swept_at.lock().unwrap_or_else(PoisonError::into_inner) = owners.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, http::HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn only_a_modern_request_naming_another_method_is_sessionless() {
        let modern_call = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
        ];
        assert!(!may_open_session(&headers(&modern_call)));
        for may_open in [
            // Today's clients: no headers, or the legacy version.
            headers(&[]),
            headers(&[
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-method", "tools/call"),
            ]),
            // No version header: rmcp does not check the method header against the body.
            headers(&[("mcp-method", "tools/call")]),
            headers(&[("mcp-protocol-version", "2026-07-28")]),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "initialize"),
            ]),
            // Two method headers: not a request that names one.
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-method", "initialize"),
            ]),
        ] {
            assert!(may_open_session(&may_open), "{may_open:?}");
        }
    }
}
