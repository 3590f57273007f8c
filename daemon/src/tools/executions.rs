//! The calls running right now, by execution id, so `CancelExecution` can reach them and a
//! caller's claim to one can be checked without the store.
//!
//! Every call registers here and leaves when it ends, from whichever runtime thread runs it:
//! the map is sharded (dashmap), so that concurrent calls do not queue on one lock.

use std::sync::Arc;

use dashmap::DashMap;
use tokio_util::sync::CancellationToken;

use crate::ids::ExecutionId;

#[derive(Debug, Default, Clone)]
pub struct Executions {
    running: Arc<DashMap<ExecutionId, Running>>,
}

#[derive(Debug)]
struct Running {
    cancel: CancellationToken,
    /// The tenant the call was started for, when it has one.
    tenant: Option<String>,
}

/// Keeps an execution listed until dropped.
#[derive(Debug)]
pub struct Registration {
    executions: Executions,
    id: ExecutionId,
}

impl Executions {
    pub fn register(
        &self,
        id: ExecutionId,
        cancel: CancellationToken,
        tenant: Option<String>,
    ) -> Registration {
        self.running.insert(id.clone(), Running { cancel, tenant });
        Registration {
            executions: self.clone(),
            id,
        }
    }

    /// Cancels a running execution; false if no such execution is running.
    pub fn cancel(&self, id: &ExecutionId) -> bool {
        // The token is cloned out so that cancelling (which wakes the call) holds no shard.
        let token = self.running.get(id).map(|running| running.cancel.clone());
        token.map(|token| token.cancel()).is_some()
    }

    /// The tenant a running execution was started for; none when no execution runs under
    /// `id` or it was started for no tenant.
    pub fn tenant(&self, id: &ExecutionId) -> Option<String> {
        self.running
            .get(id)
            .and_then(|running| running.tenant.clone())
    }

    pub fn cancel_all(&self) {
        for running in self.running.iter() {
            running.cancel.cancel();
        }
    }

    pub fn len(&self) -> usize {
        self.running.len()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.executions.running.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_reaches_a_registered_execution_until_it_ends() {
        let executions = Executions::default();
        let token = CancellationToken::new();
        let (one, other) = (ExecutionId::new(), ExecutionId::new());
        let registration = executions.register(one.clone(), token.clone(), None);
        assert!(!executions.cancel(&other));
        assert!(executions.cancel(&one));
        assert!(token.is_cancelled());
        drop(registration);
        assert_eq!(executions.len(), 0);
        assert!(!executions.cancel(&one));
    }

    #[test]
    fn a_running_execution_names_its_tenant_until_it_ends() {
        let executions = Executions::default();
        let id = ExecutionId::new();
        let registration =
            executions.register(id.clone(), CancellationToken::new(), Some("bob".into()));
        assert_eq!(executions.tenant(&id).as_deref(), Some("bob"));
        assert_eq!(executions.tenant(&ExecutionId::new()), None);
        drop(registration);
        assert_eq!(executions.tenant(&id), None);
    }
}
