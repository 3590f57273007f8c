//! What one call of a hosted server is accounted: the hosts its instance contacted or was
//! refused, and the instance's CPU time and peak memory, while the call was in flight.
//!
//! The instance outlives its calls, so its egress gate and its cgroup are the instance's;
//! a call opens an [`Account`] once it holds its instance (and, for a server whose calls take
//! turns, its turn), and when the account is dropped — the call ended, or was given up on —
//! what the instance did since goes into the call's own records: its egress ledger (which
//! the call's metadata, span and trace read) and its `RunStats`.
//!
//! - Hosts: what the instance's ledger gained since the account opened — connections,
//!   bytes each way, refusals with the last one's reason.
//! - CPU time and peak memory: the instance's cgroup over the same span (`process::usage`);
//!   none for a remote server, whose work is not done here, nor without cgroups.
//!
//! Exact for a call that was the only one in flight on its instance (always so for a server
//! that writes its workspace: its calls take turns). Calls in flight together on one
//! instance each get everything the instance did while they were in flight: a host may then
//! appear on several calls, and the CPU time and peak are the instance's over each call's
//! span, shared, not split. The call whose lease started the instance is accounted from the
//! start, its start-up included: it waited for it.

use std::sync::Arc;

use crate::egress::{Contact, Gate};
use crate::engine::contract::RunStats;
use crate::engine::mcp::instance::Instance;
use crate::engine::process::UsageWindow;

/// One call's account, settled into its records when dropped.
pub struct Account {
    instance: Arc<Instance>,
    stats: Arc<RunStats>,
    /// The call's gate, whose ledger is the call's; none when its profile has no network.
    gate: Option<Arc<Gate>>,
    /// The instance's ledger when the account opened (empty from the start).
    contacts: Vec<Contact>,
    window: Option<UsageWindow>,
}

impl Account {
    /// Opens the account of a call on `instance` now, or, `from_start`, since the instance
    /// started.
    pub fn open(
        instance: Arc<Instance>,
        from_start: bool,
        stats: Arc<RunStats>,
        gate: Option<Arc<Gate>>,
    ) -> Account {
        let contacts = match instance.egress() {
            Some(instance_gate) if !from_start && gate.is_some() => {
                instance_gate.ledger().snapshot()
            }
            _ => Vec::new(),
        };
        let window = instance.usage_window(from_start);
        Account {
            instance,
            stats,
            gate,
            contacts,
            window,
        }
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        if let (Some(call), Some(instance)) = (&self.gate, self.instance.egress()) {
            for contact in instance.ledger().since(&self.contacts) {
                call.ledger().add(&contact);
            }
        }
        if let Some(window) = &self.window {
            let usage = self.instance.usage(window);
            if let Some(peak) = usage.peak_memory_bytes {
                self.stats.record_memory(peak);
            }
            if let Some(cpu) = usage.cpu_time {
                self.stats.add_cpu_time(cpu);
            }
        }
    }
}
