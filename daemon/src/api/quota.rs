//! Per-tenant counts of things in progress, so that one tenant cannot take every slot.
//!
//! A cap holds only if "count, compare, take" is one step: two requests that both count
//! before either takes would both see the last free slot. [`Quota`] counts under one lock.
//! Runs are counted by the agent runtime, whose start holds its place among its tenant's
//! runs from its check to its launch (`agent::registry::LiveRuns::hold`), so the edges need
//! nothing of their own for them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::error::ApiError;

/// Counts one kind of thing (a direct tool call) per tenant.
#[derive(Debug, Default, Clone)]
pub struct Quota {
    counts: Arc<Mutex<HashMap<String, u32>>>,
}

/// One slot taken; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    counts: Arc<Mutex<HashMap<String, u32>>>,
    tenant: String,
}

impl Quota {
    /// Takes a slot for `tenant` unless it already holds `max`; `what` names the thing in the
    /// refusal.
    pub fn acquire(&self, tenant: &str, max: u32, what: &'static str) -> Result<Slot, ApiError> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(tenant.to_owned()).or_default();
        if *count >= max {
            return Err(ApiError::Capacity {
                tenant: tenant.to_owned(),
                max,
                what,
            });
        }
        *count += 1;
        Ok(Slot {
            counts: self.counts.clone(),
            tenant: tenant.to_owned(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn quota_never_lets_concurrent_takers_past_the_maximum() {
        let quota = Quota::default();
        let held = Arc::new(Mutex::new(Vec::new()));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let quota = quota.clone();
                let held = held.clone();
                tokio::spawn(async move {
                    if let Ok(slot) = quota.acquire("a", 5, "calls") {
                        held.lock().expect("not poisoned").push(slot);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
        assert_eq!(held.lock().expect("not poisoned").len(), 5);
    }

    #[test]
    fn a_tenant_gets_its_maximum_and_a_slot_comes_back_when_dropped() {
        let quota = Quota::default();
        let first = quota.acquire("a", 2, "calls").expect("1");
        let _second = quota.acquire("a", 2, "calls").expect("2");
        let status = quota.acquire("a", 2, "calls").expect_err("3");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(status.to_string().contains("tenant `a`"), "{status:?}");
        let _other = quota.acquire("b", 2, "calls").expect("another tenant");
        drop(first);
        quota.acquire("a", 2, "calls").expect("freed");
    }
}
