//! The registry of live runs ([`LiveRuns`]): each run going on by its id, with what a start
//! asks of them kept counted — a tenant's runs at work, for its cap, and a session's runs —
//! so that a start costs the same with ten thousand runs going on as with none. (Both were
//! scans of every live run, a few µs per thousand: the bench's scale section found them in
//! the profile of a daemon with 10,000 runs waiting.)
//!
//! A run is at work from its launch until its loop starts recording its end
//! ([`LiveRuns::finishing`]); it stays in the registry, finishing, until its end is committed
//! ([`LiveRuns::remove`]). A start holds its place among its tenant's runs at work from its
//! check to its launch ([`Slot`]): between them it awaits the store for a while, and starts
//! made at once would otherwise all pass a cap only some of them fit under. Every change is
//! made under the one lock, so the counts are those a scan would give at any moment.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::live::LiveRun;
use crate::ids::{RunId, SessionId};

/// The live runs; clones share one registry.
#[derive(Clone, Default)]
pub(super) struct LiveRuns(Arc<Mutex<Registry>>);

#[derive(Default)]
struct Registry {
    runs: HashMap<RunId, Arc<LiveRun>>,
    /// Each tenant's runs in `runs` that are not finishing, and the places its starts hold
    /// ([`Slot`]); no entry for none.
    at_work: HashMap<String, usize>,
    /// Each session's runs in `runs`, finishing ones included, in the order they came; no
    /// entry for none.
    by_session: HashMap<SessionId, Vec<Arc<LiveRun>>>,
}

impl LiveRuns {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds a place for a run of `tenant` if fewer than `max` of its runs are at work or
    /// held; `None` if its cap is reached.
    pub(super) fn hold(&self, tenant: &str, max: usize) -> Option<Slot> {
        let mut registry = self.lock();
        if registry.at_work.get(tenant).copied().unwrap_or(0) >= max {
            return None;
        }
        *registry.at_work.entry(tenant.to_owned()).or_default() += 1;
        Some(Slot {
            registry: self.clone(),
            tenant: Some(tenant.to_owned()),
        })
    }

    /// Adds a run just launched (in place of one of the same id, which should not be), in
    /// the place its start held, if it held one (a resumed run holds none: it is counted as
    /// it comes back, whatever its tenant's cap).
    pub(super) fn insert(&self, run: Arc<LiveRun>, slot: Option<Slot>) {
        let mut registry = self.lock();
        registry.take(&run.run_id);
        // Taken out of the slot under this lock, so the slot's drop gives back nothing.
        let held = slot.and_then(|mut slot| slot.tenant.take());
        match held {
            Some(tenant) if tenant == run.tenant && !run.is_finishing() => {}
            held => {
                if let Some(tenant) = held {
                    registry.stop_counting(&tenant);
                }
                if !run.is_finishing() {
                    *registry.at_work.entry(run.tenant.clone()).or_default() += 1;
                }
            }
        }
        registry
            .by_session
            .entry(run.session_id.clone())
            .or_default()
            .push(run.clone());
        registry.runs.insert(run.run_id.clone(), run);
    }

    /// Takes out a run whose end is committed (or whose loop gave up).
    pub(super) fn remove(&self, run_id: &RunId) -> Option<Arc<LiveRun>> {
        self.lock().take(run_id)
    }

    /// Marks `run` as recording its end: from here on it does not count against its
    /// tenant's cap, and a next run of its session waits for it to leave.
    pub(super) fn finishing(&self, run: &Arc<LiveRun>) {
        let mut registry = self.lock();
        if run.finishing.swap(true, Ordering::AcqRel) {
            return;
        }
        let registered = registry
            .runs
            .get(&run.run_id)
            .is_some_and(|held| Arc::ptr_eq(held, run));
        if registered {
            registry.stop_counting(&run.tenant);
        }
    }

    pub(super) fn get(&self, run_id: &RunId) -> Option<Arc<LiveRun>> {
        self.lock().runs.get(run_id).cloned()
    }

    pub(super) fn ids(&self) -> Vec<RunId> {
        self.lock().runs.keys().cloned().collect()
    }

    pub(super) fn all(&self) -> Vec<Arc<LiveRun>> {
        self.lock().runs.values().cloned().collect()
    }

    /// How many runs of `tenant` are at work (not finishing), places held included (what
    /// [`LiveRuns::hold`] checks its cap against).
    #[cfg(test)]
    pub(super) fn at_work(&self, tenant: &str) -> usize {
        self.lock().at_work.get(tenant).copied().unwrap_or(0)
    }

    /// A run of `session` in the registry, at work or finishing: the one that came first.
    pub(super) fn in_session(&self, session: &SessionId) -> Option<Arc<LiveRun>> {
        self.lock()
            .by_session
            .get(session)
            .and_then(|runs| runs.first())
            .cloned()
    }
}

/// A place among its tenant's runs at work, held by a start from its check to its launch
/// ([`LiveRuns::hold`]); given back when dropped unless a launched run took it.
pub(super) struct Slot {
    registry: LiveRuns,
    /// The tenant whose place it is; none once a run took it.
    tenant: Option<String>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(tenant) = self.tenant.take() {
            self.registry.lock().stop_counting(&tenant);
        }
    }
}

impl Registry {
    fn take(&mut self, run_id: &RunId) -> Option<Arc<LiveRun>> {
        let run = self.runs.remove(run_id)?;
        if !run.is_finishing() {
            self.stop_counting(&run.tenant);
        }
        if let Some(runs) = self.by_session.get_mut(&run.session_id) {
            runs.retain(|held| !Arc::ptr_eq(held, &run));
            if runs.is_empty() {
                self.by_session.remove(&run.session_id);
            }
        }
        Some(run)
    }

    fn stop_counting(&mut self, tenant: &str) {
        if let Some(count) = self.at_work.get_mut(tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.at_work.remove(tenant);
            }
        }
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
