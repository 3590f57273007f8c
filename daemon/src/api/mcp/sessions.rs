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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

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
