//! The calls running right now, by execution id, so `CancelExecution` can reach them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::ids::ExecutionId;

#[derive(Debug, Default, Clone)]
pub struct Executions {
    running: Arc<Mutex<HashMap<ExecutionId, CancellationToken>>>,
}

/// Keeps an execution listed until dropped.
#[derive(Debug)]
pub struct Registration {
    executions: Executions,
    id: ExecutionId,
}

impl Executions {
    pub fn register(&self, id: ExecutionId, cancel: CancellationToken) -> Registration {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), cancel);
        Registration {
            executions: self.clone(),
            id,
        }
    }

    /// Cancels a running execution; false if no such execution is running.
    pub fn cancel(&self, id: &ExecutionId) -> bool {
        let token = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned();
        token.map(|token| token.cancel()).is_some()
    }

    pub fn cancel_all(&self) {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        for token in running.values() {
            token.cancel();
        }
    }

    pub fn len(&self) -> usize {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.executions
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
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
        let registration = executions.register(one.clone(), token.clone());
        assert!(!executions.cancel(&other));
        assert!(executions.cancel(&one));
        assert!(token.is_cancelled());
        drop(registration);
        assert_eq!(executions.len(), 0);
        assert!(!executions.cancel(&one));
    }
}
