//! The agent runtime itself: what it holds (the shared services, the registry of live runs,
//! where abandoned runs are announced), how it is made, and what it tells about its live runs.
//! Its operations are `impl AgentRuntime` blocks of their own files: starting runs (`start`),
//! resolving and launching their loops (`launch`), resuming them (`resume`), steering live
//! ones (`steer`), reading recorded ones (`reads`), sessions, changes and the fleet.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tokio::sync::mpsc;

use super::error::AgentError;
use super::live::{LiveRun, Shared};
use super::log::RunChanges;
use super::registry::LiveRuns;
use super::settings::AgentSettings;
use crate::ids::RunId;
use crate::policy::{ApprovalBroker, PolicyBook};
use crate::store::Store;
use crate::tools::Executor;
use crate::trace::Tracer;

/// The agent runtime: the runs going on in this daemon, and the access to those recorded.
pub struct AgentRuntime {
    pub(super) shared: Arc<Shared>,
    pub(super) live: LiveRuns,
    /// Where runs whose loop gave up unfinished are announced (see [`Ending::Abandoned`]),
    /// once a fleet listens; a daemon on a store of its own resumes them at its next start.
    pub(super) abandoned: Arc<Mutex<Option<mpsc::UnboundedSender<RunId>>>>,
}

impl AgentRuntime {
    pub fn new(
        executor: Arc<Executor>,
        store: Arc<dyn Store>,
        tracer: Arc<Tracer>,
        settings: AgentSettings,
        policy: Arc<PolicyBook>,
    ) -> AgentRuntime {
        AgentRuntime {
            shared: Arc::new(Shared {
                executor,
                store,
                approvals: Arc::new(ApprovalBroker::default()),
                tracer,
                settings,
                policy,
                run_changes: RunChanges::default(),
                remote: OnceLock::new(),
            }),
            live: LiveRuns::default(),
            abandoned: Arc::default(),
        }
    }

    /// The operator's rules, per tenant.
    pub fn policy(&self) -> &Arc<PolicyBook> {
        &self.shared.policy
    }

    /// The runs whose loop gives up unfinished from now on (their log could not be
    /// written), for the fleet to hand on.
    pub fn abandoned_runs(&self) -> mpsc::UnboundedReceiver<RunId> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *self
            .abandoned
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(sender);
        receiver
    }

    /// The tools runs may be given now (see [`crate::tools::Executor::registry`]).
    pub fn registry(&self) -> Arc<crate::tools::Registry> {
        self.shared.executor.registry()
    }

    /// The daemon's audit log.
    pub fn auditor(&self) -> &crate::audit::Auditor {
        self.shared.executor.auditor()
    }

    /// The daemon's workspace roots.
    pub fn workspaces(&self) -> &crate::workspace::WorkspaceRoots {
        self.shared.executor.workspaces()
    }

    pub fn approvals(&self) -> &Arc<ApprovalBroker> {
        &self.shared.approvals
    }

    /// How long a question waits for an answer unless a run says otherwise.
    pub fn approval_timeout(&self) -> std::time::Duration {
        self.shared.settings.defaults.approval_timeout
    }

    /// The runs going on now.
    pub fn live_run_ids(&self) -> Vec<RunId> {
        self.live.ids()
    }

    pub(super) fn live_run(&self, run_id: &RunId) -> Option<Arc<LiveRun>> {
        self.live.get(run_id)
    }

    /// The tenant that owns run `run_id`.
    pub async fn run_owner(&self, run_id: &RunId) -> Result<String, AgentError> {
        if let Some(live) = self.live_run(run_id) {
            return Ok(live.tenant.clone());
        }
        Ok(self.run(run_id).await?.tenant)
    }

    /// Cancels every live run (at shutdown).
    pub fn cancel_all(&self, reason: &str) {
        for live in self.live.all() {
            live.cancel.pull(reason.to_owned());
        }
    }
}
