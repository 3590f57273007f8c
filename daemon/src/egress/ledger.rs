//! The account of one call's egress: every host contacted, with connections and bytes each
//! way, and every refused attempt with its reason. It goes into the call's result metadata
//! and trace.
//!
//! A hosted MCP server outlives its calls, so its gate's ledger is the instance's, not a
//! call's: a call takes what that ledger gained while the call was in flight
//! ([`Ledger::since`]) into its own ([`Ledger::add`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Distinct `host:port` pairs one call's ledger holds. Past it the gate refuses new hosts
/// without recording them (the log still shows them): a tool scanning the network would
/// otherwise grow the ledger, and the result, without bound.
pub const MAX_CONTACTS: usize = 256;

/// One `host:port` a call tried to reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contact {
    pub host: String,
    pub port: u16,
    /// Connections opened.
    pub connections: u64,
    /// Bytes the tool sent to the host.
    pub bytes_sent: u64,
    /// Bytes the host sent to the tool.
    pub bytes_received: u64,
    /// Attempts refused.
    pub refused: u64,
    /// Why the last attempt was refused; empty when none was.
    pub refusal: String,
}

/// Byte counters of one contact, shared with the streams that move the bytes.
#[derive(Debug, Default)]
pub struct Counters {
    sent: AtomicU64,
    received: AtomicU64,
}

impl Counters {
    pub fn add_sent(&self, bytes: usize) {
        self.sent.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn add_received(&self, bytes: usize) {
        self.received.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct Entry {
    host: String,
    port: u16,
    connections: u64,
    refused: u64,
    refusal: String,
    counters: Arc<Counters>,
}

/// The egress account of one call.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: Mutex<Vec<Entry>>,
}

impl Ledger {
    /// Whether `host:port` already has an entry or there is room for one.
    pub fn has_room_for(&self, host: &str, port: u16) -> bool {
        let entries = self.lock();
        entries.len() < MAX_CONTACTS
            || entries
                .iter()
                .any(|entry| entry.host == host && entry.port == port)
    }

    /// Records a connection opened to `host:port`; the returned counters take its bytes
    /// (unrecorded ones when the ledger is full, which the gate checks first).
    pub fn connected(&self, host: &str, port: u16) -> Arc<Counters> {
        self.with_entry(host, port, |entry| {
            entry.connections += 1;
            entry.counters.clone()
        })
        .unwrap_or_default()
    }

    /// Records a refused attempt to reach `host:port`, unless the ledger is full.
    pub fn refused(&self, host: &str, port: u16, reason: &str) {
        self.with_entry(host, port, |entry| {
            entry.refused += 1;
            reason.clone_into(&mut entry.refusal);
        });
    }

    /// Adds `contact`'s figures to this ledger's entry for its host and port, unless the
    /// ledger is full: contacts another gate made on this call's behalf.
    pub fn add(&self, contact: &Contact) {
        self.with_entry(&contact.host, contact.port, |entry| {
            entry.connections += contact.connections;
            entry.refused += contact.refused;
            if !contact.refusal.is_empty() {
                entry.refusal.clone_from(&contact.refusal);
            }
            let counters = &entry.counters;
            counters
                .sent
                .fetch_add(contact.bytes_sent, Ordering::Relaxed);
            counters
                .received
                .fetch_add(contact.bytes_received, Ordering::Relaxed);
        });
    }

    /// What this ledger gained since it read `before` (an earlier [`Ledger::snapshot`] of
    /// it): each host with connections, bytes or refusals since, with those alone. A host
    /// refused since keeps its last refusal's reason.
    pub fn since(&self, before: &[Contact]) -> Vec<Contact> {
        let before: HashMap<(&str, u16), &Contact> = before
            .iter()
            .map(|contact| ((contact.host.as_str(), contact.port), contact))
            .collect();
        self.snapshot()
            .into_iter()
            .filter_map(|now| {
                let Some(then) = before.get(&(now.host.as_str(), now.port)) else {
                    return Some(now);
                };
                let refused = now.refused.saturating_sub(then.refused);
                let gained = Contact {
                    connections: now.connections.saturating_sub(then.connections),
                    bytes_sent: now.bytes_sent.saturating_sub(then.bytes_sent),
                    bytes_received: now.bytes_received.saturating_sub(then.bytes_received),
                    refused,
                    refusal: if refused > 0 {
                        now.refusal.clone()
                    } else {
                        String::new()
                    },
                    host: now.host,
                    port: now.port,
                };
                let moved =
                    gained.connections | gained.bytes_sent | gained.bytes_received | gained.refused;
                (moved != 0).then_some(gained)
            })
            .collect()
    }

    /// Every contact so far, in the order they were first tried.
    pub fn snapshot(&self) -> Vec<Contact> {
        self.lock()
            .iter()
            .map(|entry| Contact {
                host: entry.host.clone(),
                port: entry.port,
                connections: entry.connections,
                bytes_sent: entry.counters.sent.load(Ordering::Relaxed),
                bytes_received: entry.counters.received.load(Ordering::Relaxed),
                refused: entry.refused,
                refusal: entry.refusal.clone(),
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with_entry<T>(
        &self,
        host: &str,
        port: u16,
        update: impl FnOnce(&mut Entry) -> T,
    ) -> Option<T> {
        let mut entries = self.lock();
        let index = match entries
            .iter()
            .position(|entry| entry.host == host && entry.port == port)
        {
            Some(index) => index,
            None if entries.len() >= MAX_CONTACTS => return None,
            None => {
                entries.push(Entry {
                    host: host.to_owned(),
                    port,
                    connections: 0,
                    refused: 0,
                    refusal: String::new(),
                    counters: Arc::default(),
                });
                entries.len() - 1
            }
        };
        Some(update(&mut entries[index]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contacts_add_up_per_host_and_port() {
        let ledger = Ledger::default();
        let first = ledger.connected("a.test", 443);
        first.add_sent(10);
        first.add_received(100);
        let second = ledger.connected("a.test", 443);
        second.add_sent(5);
        ledger.refused("b.test", 80, "not listed");
        ledger.refused("b.test", 80, "still not listed");
        ledger.connected("a.test", 80);
        let contacts = ledger.snapshot();
        assert_eq!(
            contacts,
            vec![
                Contact {
                    host: "a.test".into(),
                    port: 443,
                    connections: 2,
                    bytes_sent: 15,
                    bytes_received: 100,
                    refused: 0,
                    refusal: String::new(),
                },
                Contact {
                    host: "b.test".into(),
                    port: 80,
                    connections: 0,
                    bytes_sent: 0,
                    bytes_received: 0,
                    refused: 2,
                    refusal: "still not listed".into(),
                },
                Contact {
                    host: "a.test".into(),
                    port: 80,
                    connections: 1,
                    ..Contact::default()
                },
            ]
        );
    }

    #[test]
    fn what_a_ledger_gained_moves_to_another() {
        let instance = Ledger::default();
        let early = instance.connected("a.test", 443);
        early.add_sent(10);
        instance.refused("b.test", 80, "not listed");
        let before = instance.snapshot();
        // While the call is in flight: more bytes on the old connection, a new one, a new
        // refusal of a known host and a new host.
        early.add_received(7);
        instance.connected("a.test", 443).add_sent(3);
        instance.refused("b.test", 80, "still not listed");
        instance.refused("c.test", 80, "denied");
        instance.connected("d.test", 443);
        let gained = instance.since(&before);
        assert_eq!(
            gained,
            vec![
                Contact {
                    host: "a.test".into(),
                    port: 443,
                    connections: 1,
                    bytes_sent: 3,
                    bytes_received: 7,
                    ..Contact::default()
                },
                Contact {
                    host: "b.test".into(),
                    port: 80,
                    refused: 1,
                    refusal: "still not listed".into(),
                    ..Contact::default()
                },
                Contact {
                    host: "c.test".into(),
                    port: 80,
                    refused: 1,
                    refusal: "denied".into(),
                    ..Contact::default()
                },
                Contact {
                    host: "d.test".into(),
                    port: 443,
                    connections: 1,
                    ..Contact::default()
                },
            ]
        );
        // Nothing happened since: nothing gained.
        assert!(instance.since(&instance.snapshot()).is_empty());
        let call = Ledger::default();
        call.refused("b.test", 80, "its own");
        for contact in &gained {
            call.add(contact);
        }
        let accounted = call.snapshot();
        assert_eq!(accounted.len(), 4);
        assert_eq!(
            (accounted[0].host.as_str(), accounted[0].refused),
            ("b.test", 2)
        );
        assert_eq!(accounted[0].refusal, "still not listed");
        assert_eq!(accounted[1], gained[0]);
    }

    #[test]
    fn room_runs_out_only_for_new_hosts() {
        let ledger = Ledger::default();
        for n in 0..MAX_CONTACTS {
            ledger.refused(&format!("h{n}.test"), 80, "no");
        }
        assert!(!ledger.has_room_for("new.test", 80));
        assert!(ledger.has_room_for("h0.test", 80));
        ledger.refused("new.test", 80, "no");
        assert_eq!(ledger.snapshot().len(), MAX_CONTACTS);
    }
}
