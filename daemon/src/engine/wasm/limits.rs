//! Per-call resource limits inside a store: linear memory (summed over all of a component's
//! memories), table elements, and the number of instances, memories and tables.

use std::sync::Arc;

use wasmtime::ResourceLimiter;

use crate::engine::contract::RunStats;

/// No table needs more elements than this: even very large C++ programs have well under a
/// million functions, and each element costs host memory.
pub const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// A command component is a handful of core instances (the program, the WASI adapter and
/// shims); a thousand means a hostile module is multiplying them.
const MAX_INSTANCES: usize = 64;
const MAX_MEMORIES: usize = 16;
const MAX_TABLES: usize = 64;

/// A limit a call hit; the trap that stops the call carries it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitHit {
    #[error(
        "the tool tried to grow its memory to {desired} bytes; the profile allows {limit} bytes (limits.memory)"
    )]
    Memory { desired: u64, limit: u64 },
    #[error("the tool tried to grow a table to {desired} elements; the limit is {limit}")]
    Table { desired: usize, limit: usize },
    #[error("the tool used more than {limit_ms} ms of CPU time (limits.cpu_time_ms)")]
    CpuTime { limit_ms: u128 },
}

pub struct Limiter {
    memory_limit: u64,
    /// Bytes of linear memory committed across all memories of the store.
    committed: u64,
    stats: Arc<RunStats>,
}

impl Limiter {
    pub fn new(memory_limit: u64, stats: Arc<RunStats>) -> Limiter {
        Limiter {
            memory_limit,
            committed: 0,
            stats,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current) as u64;
        let total = self.committed.saturating_add(growth);
        if total > self.memory_limit {
            // Trapping rather than failing the grow: a program that checks for failure would
            // go on, but most would crash later with a less useful message, and the status
            // must say that a limit was hit.
            return Err(LimitHit::Memory {
                desired: total,
                limit: self.memory_limit,
            }
            .into());
        }
        self.committed = total;
        self.stats.record_memory(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            return Err(LimitHit::Table {
                desired,
                limit: MAX_TABLE_ELEMENTS,
            }
            .into());
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_summed_across_memories_and_stops_at_the_limit() {
        let stats = Arc::new(RunStats::default());
        let mut limiter = Limiter::new(100, stats.clone());
        assert!(limiter.memory_growing(0, 60, None).expect("fits"));
        assert!(
            limiter
                .memory_growing(0, 40, None)
                .expect("exactly the limit")
        );
        let err = limiter.memory_growing(40, 41, None).expect_err("one past");
        assert!(matches!(
            err.downcast_ref::<LimitHit>(),
            Some(LimitHit::Memory {
                desired: 101,
                limit: 100
            })
        ));
        assert_eq!(stats.peak_memory_bytes(), 100);
    }

    #[test]
    fn tables_stop_at_their_limit() {
        let mut limiter = Limiter::new(0, Arc::new(RunStats::default()));
        assert!(
            limiter
                .table_growing(0, MAX_TABLE_ELEMENTS, None)
                .expect("at the limit")
        );
        assert!(
            limiter
                .table_growing(0, MAX_TABLE_ELEMENTS + 1, None)
                .is_err()
        );
    }
}
