//! Per-tenant counts of things in progress, so that one tenant cannot take every slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tonic::Status;

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
    pub fn acquire(&self, tenant: &str, max: u32, what: &str) -> Result<Slot, Status> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(tenant.to_owned()).or_default();
        if *count >= max {
            return Err(Status::resource_exhausted(format!(
                "tenant `{tenant}` already has {count} {what} running, its limit; wait for one \
                 to finish"
            )));
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

    #[test]
    fn a_tenant_gets_its_maximum_and_a_slot_comes_back_when_dropped() {
        let quota = Quota::default();
        let first = quota.acquire("a", 2, "calls").expect("1");
        let _second = quota.acquire("a", 2, "calls").expect("2");
        let status = quota.acquire("a", 2, "calls").expect_err("3");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(status.message().contains("tenant `a`"), "{status:?}");
        let _other = quota.acquire("b", 2, "calls").expect("another tenant");
        drop(first);
        quota.acquire("a", 2, "calls").expect("freed");
    }
}
