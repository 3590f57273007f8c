//! The audit log's front door: every part of the daemon that does something security-relevant
//! — accepts or refuses a connection's token, asks for or decides an approval, matches a
//! policy rule, trusts or refuses an MCP listing, allows or refuses egress, loads a tenant or
//! a configuration, reverts or forks a run — says so here with [`record`], and the sink the
//! daemon installed ([`install`]) chains it in the store and exports it.
//!
//! The sink is the process's, as `tracing`'s dispatcher is: the acts come from every layer,
//! and passing a handle through each of them would thread one more argument through the
//! engines, the gate and the edges for a call that must not fail. Before a sink is installed
//! (unit tests, `check-tool`) acts are dropped.

use std::sync::{Arc, PoisonError, RwLock};

/// One act, as its part of the daemon tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Act {
    /// Whose chain it goes in: the tenant it concerns.
    pub tenant: String,
    /// What happened, dotted: `auth.refused`, `approval.decided`, `egress.refused`, …
    pub kind: &'static str,
    /// Who did it.
    pub actor: String,
    /// What it was done to.
    pub subject: String,
    /// Why.
    pub reason: String,
    /// The rest.
    pub details: serde_json::Value,
}

impl Act {
    pub fn new(tenant: impl Into<String>, kind: &'static str) -> Act {
        Act {
            tenant: tenant.into(),
            kind,
            actor: String::new(),
            subject: String::new(),
            reason: String::new(),
            details: serde_json::Value::Object(serde_json::Map::new()),
        }
    }

    pub fn actor(mut self, actor: impl Into<String>) -> Act {
        self.actor = actor.into();
        self
    }

    pub fn subject(mut self, subject: impl Into<String>) -> Act {
        self.subject = subject.into();
        self
    }

    pub fn reason(mut self, reason: impl Into<String>) -> Act {
        self.reason = reason.into();
        self
    }

    pub fn detail(mut self, key: &str, value: impl Into<serde_json::Value>) -> Act {
        if let serde_json::Value::Object(map) = &mut self.details {
            map.insert(key.to_owned(), value.into());
        }
        self
    }
}

/// Where acts go: the daemon's audit log.
pub trait AuditSink: Send + Sync {
    /// Takes the act; must not block (the store takes it in order and commits it later).
    fn record(&self, act: Act);
}

static SINK: RwLock<Option<Arc<dyn AuditSink>>> = RwLock::new(None);

/// Sends every act from now on to `sink`.
pub fn install(sink: Arc<dyn AuditSink>) {
    *SINK.write().unwrap_or_else(PoisonError::into_inner) = Some(sink);
}

/// Records `act` in its tenant's chain.
pub fn record(act: Act) {
    let sink = SINK.read().unwrap_or_else(PoisonError::into_inner).clone();
    if let Some(sink) = sink {
        sink.record(act);
    }
}
