//! Retention: what the daemon forgets once it is old — finished runs with everything
//! recorded for them, sessions left without runs, kept outputs with their blobs, and the
//! owners of executions that left nothing. Never anything of a run that has not finished: a
//! live run, or one a restart will resume, keeps all it has.
//!
//! The daemon sweeps by itself when `[store] retention_days` is set; `airlock gc`
//! (`Daemon.CollectGarbage`) sweeps on demand.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cancel::or_cancel;
use crate::ids;
use crate::output::{KeptError, KeptOutputs};
use crate::store::audit::{AuditDraft, CHECKPOINT};
use crate::store::{Store, StoreError};
use crate::tools::MAX_TIMEOUT_MS;

/// Runs deleted per transaction: a large backlog goes in bounded steps, each short enough
/// not to hold up the runs' own writes behind it.
const RUNS_PER_BATCH: usize = 100;

/// How often the daemon sweeps when a retention is configured: ages are counted in days,
/// so an hour's lag is nothing, and a sweep that finds nothing costs a few queries.
const SWEEP_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// What one sweep deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    pub runs: u64,
    pub sessions: u64,
    pub outputs: u64,
    pub executions: u64,
    /// Audit records cut from the chains' beginnings (at a checkpoint).
    pub audit_records: u64,
}

impl Swept {
    fn is_empty(&self) -> bool {
        *self == Swept::default()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Kept(#[from] KeptError),
}

pub struct Retention {
    store: Arc<dyn Store>,
    kept: Option<Arc<KeptOutputs>>,
    /// The configured age; none keeps everything unless asked.
    configured: Option<Duration>,
}

impl Retention {
    pub fn new(
        store: Arc<dyn Store>,
        kept: Option<Arc<KeptOutputs>>,
        configured: Option<Duration>,
    ) -> Retention {
        Retention {
            store,
            kept,
            configured,
        }
    }

    /// The age `[store] retention_days` sets.
    pub fn configured(&self) -> Option<Duration> {
        self.configured
    }

    /// Deletes what is older than `older_than`.
    pub async fn sweep(&self, older_than: Duration) -> Result<Swept, RetentionError> {
        let age = i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX);
        let before_ms = ids::now_ms().saturating_sub(age);
        let mut swept = Swept::default();
        loop {
            let deleted = self
                .store
                .delete_finished_runs(before_ms, RUNS_PER_BATCH)
                .await?;
            swept.runs += deleted.runs;
            swept.sessions += deleted.sessions;
            if deleted.runs < RUNS_PER_BATCH as u64 {
                break;
            }
        }
        if let Some(kept) = &self.kept {
            swept.outputs = kept.sweep(before_ms).await?;
        }
        // After the outputs: an owner goes only once its execution's output has. And never
        // while its execution may still run, whatever the age asked for: a direct call's
        // owner is what keeps another tenant from cancelling it.
        let longest_call = i64::try_from(MAX_TIMEOUT_MS).unwrap_or(i64::MAX);
        let owners_before_ms = before_ms.min(ids::now_ms().saturating_sub(longest_call));
        swept.executions = self.store.forget_executions(owners_before_ms).await?;
        // Each chain gets a checkpoint now, where a later sweep may cut it; this sweep cuts
        // at the newest checkpoint an earlier one left that is older than the age.
        for tenant in self.store.audit_tenants().await? {
            self.store
                .append_audit(&AuditDraft {
                    tenant: tenant.clone(),
                    at_ms: ids::now_ms(),
                    kind: CHECKPOINT.to_owned(),
                    actor: "daemon".to_owned(),
                    subject: String::new(),
                    reason: "retention checkpoint: records before it may be removed once they \
                             are older than the retention age"
                        .to_owned(),
                    details: "{}".to_owned(),
                })
                .await?;
            swept.audit_records += self.store.cut_audit(&tenant, before_ms).await?;
        }
        Ok(swept)
    }

    /// Sweeps at once and then every [`SWEEP_INTERVAL`] with the configured age, until
    /// `stop`; does nothing when none is configured.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let Some(age) = self.configured else {
            return;
        };
        let mut ticks = tokio::time::interval(SWEEP_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while or_cancel(&stop, ticks.tick()).await.is_ok() {
            match or_cancel(&stop, self.sweep(age)).await {
                Err(_cancelled) => return,
                Ok(Ok(swept)) if swept.is_empty() => {}
                Ok(Ok(swept)) => tracing::info!(
                    runs = swept.runs,
                    sessions = swept.sessions,
                    outputs = swept.outputs,
                    executions = swept.executions,
                    older_than_days = age.as_secs() / 86_400,
                    "retention: deleted what had grown old"
                ),
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "retention: the sweep failed; trying again later");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::testing::Harness;
    use crate::ids::RunId;

    /// A finished run, and a live one waiting on its tool (on the workspace's FIFO `gate`).
    async fn finished_and_live(harness: &Harness) -> (RunId, RunId, std::path::PathBuf) {
        let (finished, mut follower) = harness
            .start(harness.scripted(&json!({"turns": [{"final": "done"}]}), &[]))
            .await;
        follower.rest().await;
        let gate = harness.gate();
        let script = json!({"turns": [
            {"tool_calls": [{"name": "wait_gate", "arguments": {}}]},
            {"final": "done"}
        ]});
        let (live, mut follower) = harness
            .start(harness.scripted(&script, &["wait_gate"]))
            .await;
        follower
            .until(|event| matches!(event, airlock_proto::v1::run_event::Event::ToolStarted(_)))
            .await;
        (finished, live, gate)
    }

    #[tokio::test]
    async fn a_sweep_deletes_finished_runs_and_never_a_live_one() {
        let harness = Harness::new();
        let (finished, live, gate) = finished_and_live(&harness).await;
        let retention = Retention::new(harness.store.clone(), None, None);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let swept = retention
            .sweep(Duration::from_millis(1))
            .await
            .expect("sweep");
        assert_eq!((swept.runs, swept.sessions), (1, 1), "{swept:?}");
        assert_eq!(harness.store.run(&finished).await.expect("read"), None);
        assert!(harness.store.run(&live).await.expect("read").is_some());
        // The live run goes on to its end, its log whole.
        std::fs::write(gate, b"x").expect("open the gate");
        let log = harness.follow(&live).await.rest().await;
        assert_eq!(crate::agent::testing::finished(&log).final_text, "done");
        assert_eq!(log.first().map(|event| event.seq), Some(1));
    }

    #[tokio::test]
    async fn the_daemon_sweeps_by_itself_when_a_retention_is_configured() {
        let harness = Harness::new();
        let (finished, _) = harness
            .start(harness.scripted(&json!({"turns": [{"final": "done"}]}), &[]))
            .await;
        harness.follow(&finished).await.rest().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let stop = CancellationToken::new();
        let sweeping = tokio::spawn(
            Arc::new(Retention::new(
                harness.store.clone(),
                None,
                Some(Duration::from_millis(1)),
            ))
            .run(stop.clone()),
        );
        let mut waited = 0;
        while harness.store.run(&finished).await.expect("read").is_some() {
            assert!(waited < 6000, "the run was never swept");
            waited += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stop.cancel();
        sweeping.await.expect("stops when told");

        // Without a configured age there is nothing to do, and it says so by returning.
        let idle = Arc::new(Retention::new(harness.store.clone(), None, None));
        idle.run(CancellationToken::new()).await;
    }
}
