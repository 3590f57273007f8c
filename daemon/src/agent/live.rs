//! What every run shares ([`Shared`]) and the handles of a run going on now ([`LiveRun`]):
//! how it is stopped from outside, sent input, and seen to finish. The run's loop holds them
//! as much as the runtime does.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::log::{Events, RunChanges, RunLog};
use super::remote::Remote;
use super::settings::AgentSettings;
use crate::ids::{RunId, SessionId};
use crate::policy::{ApprovalBroker, PolicyBook};
use crate::store::{RunRecord, Store};
use crate::tools::Executor;
use crate::trace::Tracer;

/// What every run shares.
pub(crate) struct Shared {
    pub executor: Arc<Executor>,
    pub store: Arc<dyn Store>,
    pub approvals: Arc<ApprovalBroker>,
    pub tracer: Arc<Tracer>,
    pub settings: AgentSettings,
    /// The operator's rules, per tenant.
    pub policy: Arc<PolicyBook>,
    /// Every run's committed events, by run: what live lists of runs follow.
    pub run_changes: RunChanges,
    /// The fleet, when the store is shared: how runs other daemons execute are followed and
    /// steered.
    pub remote: OnceLock<Remote>,
}

/// How a run is stopped from outside: a token its waits watch, and why it was pulled.
#[derive(Debug, Default)]
pub struct CancelSwitch {
    token: CancellationToken,
    reason: Mutex<Option<String>>,
}

impl CancelSwitch {
    /// Pulls the switch; the first reason given is the one kept.
    pub fn pull(&self, reason: String) {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
        self.token.cancel();
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    pub fn is_pulled(&self) -> bool {
        self.token.is_cancelled()
    }

    pub fn reason(&self) -> String {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "cancelled".into())
    }
}

/// A run that is going on now.
pub struct LiveRun {
    pub run_id: RunId,
    pub session_id: SessionId,
    /// The tenant that started it.
    pub tenant: String,
    pub log: Arc<RunLog>,
    pub(super) input: mpsc::UnboundedSender<String>,
    pub(super) cancel: Arc<CancelSwitch>,
    pub(super) rejections: AtomicU32,
    /// Set as the loop starts recording the run's end: a client may already hold the
    /// `RunFinished` event, and the run does no more work. Set only by the registry
    /// (`LiveRuns::finishing`), which stops counting the run against its tenant's cap.
    pub(super) finishing: AtomicBool,
    /// Turns true once the run has left the live registry, its end and its last
    /// conversation committed.
    pub(super) gone: watch::Sender<bool>,
}

impl LiveRun {
    /// The handles of `record`'s run, going on now, and where the input sent to it arrives.
    pub(super) fn new(
        record: &RunRecord,
        session_id: &SessionId,
        log: Arc<RunLog>,
    ) -> (LiveRun, mpsc::UnboundedReceiver<String>) {
        let (input, receiver) = mpsc::unbounded_channel();
        let live = LiveRun {
            run_id: record.run_id.clone(),
            session_id: session_id.clone(),
            tenant: record.tenant.clone(),
            log,
            input,
            cancel: Arc::default(),
            rejections: AtomicU32::new(0),
            finishing: AtomicBool::new(false),
            gone: watch::Sender::new(false),
        };
        (live, receiver)
    }

    /// Whether the run is recording its end (or has recorded it).
    pub fn is_finishing(&self) -> bool {
        self.finishing.load(Ordering::Acquire)
    }

    /// Waits, at most `limit`, for a finishing run to leave the live registry; false for a
    /// run still at work, or one whose end is not committed within `limit`.
    pub(super) async fn left_within(&self, limit: Duration) -> bool {
        if !self.is_finishing() {
            return false;
        }
        let mut gone = self.gone.subscribe();
        tokio::time::timeout(limit, gone.wait_for(|gone| *gone))
            .await
            .is_ok_and(|waited| waited.is_ok())
    }
}

/// A run just started, and its events from the first on.
pub struct Started {
    pub live: Arc<LiveRun>,
    pub events: Events,
}
