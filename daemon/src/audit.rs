//! The audit log's front door: every part of the daemon that does something security-relevant
//! — accepts or refuses a connection's token, asks for or decides an approval, matches a
//! policy rule, trusts or refuses an MCP listing, allows or refuses egress, loads a tenant or
//! a configuration, reverts or forks a run — says so with [`Auditor::record`], and the sink
//! the daemon installed ([`Auditor::install`]) chains it in the store and exports it.
//!
//! An [`Auditor`] is a shared slot, handed to the parts as they are built and filled once the
//! store is open: the MCP engine's trust records and the registry exist before the store
//! does, and what they record while loading (a listing trusted on first use) waits in the
//! slot — up to [`MAX_EARLY_ACTS`] — until the sink is installed. Each daemon has its own
//! (several may share a process: the tests run many). An auditor nobody installs a sink in
//! (unit tests, `check-tool`) keeps at most that many acts, and drops the rest.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Acts kept until the sink is installed: what loading the tools records (a few per hosted
/// server) fits many times over.
pub const MAX_EARLY_ACTS: usize = 1024;

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

#[derive(Default)]
struct Slot {
    sink: OnceLock<Arc<dyn AuditSink>>,
    /// What was recorded before the sink was installed, in order.
    early: Mutex<Vec<Act>>,
}

/// A daemon's way into its audit log; clones share it.
#[derive(Clone, Default)]
pub struct Auditor(Arc<Slot>);

impl std::fmt::Debug for Auditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Auditor")
            .field(&self.0.sink.get().is_some())
            .finish()
    }
}

impl Auditor {
    /// Sends every act from now on to `sink`, after those recorded before; only the first
    /// call counts.
    pub fn install(&self, sink: Arc<dyn AuditSink>) {
        // Under the lock: an act recorded meanwhile waits for the early ones to go first.
        let mut early = self.0.early.lock().unwrap_or_else(PoisonError::into_inner);
        if self.0.sink.set(sink.clone()).is_ok() {
            for act in early.drain(..) {
                sink.record(act);
            }
        }
    }

    /// Records `act` in its tenant's chain.
    pub fn record(&self, act: Act) {
        if let Some(sink) = self.0.sink.get() {
            sink.record(act);
            return;
        }
        let mut early = self.0.early.lock().unwrap_or_else(PoisonError::into_inner);
        match self.0.sink.get() {
            Some(sink) => sink.record(act),
            None if early.len() < MAX_EARLY_ACTS => early.push(act),
            None => {}
        }
    }
}

/// An auditor with the tenant whose acts it records: what a run's parts hold.
#[derive(Clone, Debug)]
pub struct TenantAudit {
    pub tenant: String,
    pub auditor: Auditor,
}

impl TenantAudit {
    /// A new act of this tenant's.
    pub fn act(&self, kind: &'static str) -> Act {
        Act::new(&self.tenant, kind)
    }

    pub fn record(&self, act: Act) {
        self.auditor.record(act);
    }
}
