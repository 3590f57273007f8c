//! The daemon as a node of a fleet that shares one PostgreSQL store: it renews its lease,
//! and it takes over the runs of daemons whose lease lapsed (killed, stopped, cut off), each
//! from its last checkpoint by the same code a restart resumes runs with — so a call in
//! flight that must not run twice is OUTCOME_UNKNOWN, never repeated, and a pending approval
//! waits again under the same id and deadline.
//!
//! Who owns a run is the store's to decide ([`Leases`]): a claim is one transaction, and a
//! daemon that lost a run finds its next write for it refused. This module keeps the lease
//! fresh ([`lease`]) and, on a timer, gives back the runs it cannot go on with, stops the
//! runs it lost (a loop waiting for a person or a model writes nothing that would tell it),
//! and asks for runs; [`commands`] applies what clients of other daemons ask of the runs
//! executed here.

mod commands;
mod lease;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentError, AgentRuntime};
use crate::cancel::or_cancel;
use crate::ids::RunId;
use crate::store::{Leases, Relay, RunRecord};
use lease::RENEWALS_PER_LEASE;

/// Runs claimed per round: a daemon that comes up beside a dead one takes its runs over in
/// rounds of this many, so one daemon does not take all of them while the others idle.
const CLAIMS_PER_ROUND: usize = 16;

/// How long a run this daemon refused to take over (its workspace is not visible here) is
/// left out of its claims: long enough for another daemon that sees the workspace to take
/// it, short enough that a mount back after a hiccup does not leave the run waiting long.
const REFUSAL_MEMORY: Duration = Duration::from_secs(30);

/// The runs this daemon refused to take over, and when.
type Refused = HashMap<RunId, Instant>;

pub struct Fleet {
    leases: Arc<dyn Leases>,
    relay: Arc<dyn Relay>,
    agents: Arc<AgentRuntime>,
    lease: Duration,
    /// Runs whose loop gave up unfinished here (their log could not be written): this
    /// daemon still owns them, and holds a lease, so no other would ever take them; they
    /// are given back for the next claim (this daemon's included) to resume.
    abandoned: Mutex<Option<mpsc::UnboundedReceiver<RunId>>>,
    /// Runs this daemon owns and does not execute (abandoned, refused, or a takeover that
    /// failed), to give back at the next round: until then no daemon would take them.
    to_give_back: Mutex<Vec<RunId>>,
}

impl Fleet {
    pub fn new(
        leases: Arc<dyn Leases>,
        relay: Arc<dyn Relay>,
        agents: Arc<AgentRuntime>,
        lease: Duration,
    ) -> Fleet {
        let abandoned = Mutex::new(Some(agents.abandoned_runs()));
        agents.join_fleet(relay.clone());
        Fleet {
            leases,
            relay,
            agents,
            lease,
            abandoned,
            to_give_back: Mutex::default(),
        }
    }

    /// Joins the fleet: takes the lease, then the runs waiting for a daemon. How many it
    /// took over.
    pub async fn join(&self) -> Result<usize, AgentError> {
        self.leases.renew(self.lease).await?;
        tracing::info!(node = %self.leases.node(), lease_ms = self.lease.as_millis(), "joined the fleet");
        self.take_over(&mut Refused::new()).await
    }

    /// Renews the lease and takes runs over until `stop`, then gives the lease up so the
    /// fleet takes this daemon's unfinished runs over at once.
    pub async fn serve(self: Arc<Self>, stop: CancellationToken) {
        let period = self.lease / RENEWALS_PER_LEASE;
        let renewing = tokio::spawn(lease::keep(self.leases.clone(), self.lease, stop.clone()));
        let commanded = tokio::spawn(commands::serve(
            self.relay.clone(),
            self.agents.clone(),
            stop.clone(),
        ));
        let mut refused = Refused::new();
        let mut abandoned = self
            .abandoned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        while or_cancel(&stop, tokio::time::sleep(period)).await.is_ok() {
            if let Some(abandoned) = &mut abandoned {
                while let Ok(run_id) = abandoned.try_recv() {
                    self.give_back_later(run_id);
                }
            }
            // A stop does not wait for a round the store is slow to answer: what the round
            // left undone, the fleet does when this daemon's lease is given up or lapses.
            let round = async {
                self.give_back().await;
                self.stop_lost().await;
                if let Err(err) = self.take_over(&mut refused).await {
                    tracing::warn!(error = %err, "cannot take over the runs of lapsed daemons");
                }
            };
            if or_cancel(&stop, round).await.is_err() {
                break;
            }
        }
        let _ = renewing.await;
        let _ = commanded.await;
        match self.leases.release().await {
            Ok(()) => tracing::info!(node = %self.leases.node(), "left the fleet"),
            Err(err) => {
                tracing::warn!(error = %err, "cannot give the lease up; it lapses by itself")
            }
        }
    }

    fn give_back_later(&self, run_id: RunId) {
        self.to_give_back
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(run_id);
    }

    /// Gives the runs of [`Fleet::to_give_back`] back; those the store could not take yet
    /// stay for the next round.
    async fn give_back(&self) {
        let runs = std::mem::take(
            &mut *self
                .to_give_back
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for run_id in runs {
            match self.leases.disown(&run_id).await {
                Ok(true) => {
                    tracing::info!(run = %run_id, "gave the run back to the fleet, to be resumed")
                }
                // Taken over by another daemon already (its log was refused for that).
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(run = %run_id, error = %err, "cannot give the run back yet");
                    self.give_back_later(run_id);
                }
            }
        }
    }

    /// Stops the runs executed here that another daemon took over while this one could not
    /// renew its lease. A loop that writes learns it at its next write (refused); this also
    /// reaches one that waits — for an approval, a model, a tool — and would otherwise keep
    /// its clients and approvers waiting on a run that has gone on elsewhere.
    async fn stop_lost(&self) {
        let executing = self.agents.live_run_ids();
        if executing.is_empty() {
            return;
        }
        match self.leases.lost(&executing).await {
            Ok(lost) => {
                for run_id in lost {
                    self.agents.lose(&run_id).await;
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot check that this daemon still owns its runs")
            }
        }
    }

    /// One round of claims; how many runs it took over.
    async fn take_over(&self, refused: &mut Refused) -> Result<usize, AgentError> {
        refused.retain(|_, at| at.elapsed() < REFUSAL_MEMORY);
        // Never a run whose loop is still live here: one this daemon lost and has not
        // stopped yet, whose stale loop would write under the new claim's epoch.
        let skip: Vec<RunId> = refused
            .keys()
            .cloned()
            .chain(self.agents.live_run_ids())
            .collect();
        let claimed = self.leases.claim(CLAIMS_PER_ROUND, &skip).await?;
        let mut resumed = 0;
        for record in claimed {
            if let Some(workspace) = &record.workspace
                && !visible(workspace).await
            {
                tracing::error!(
                    run = %record.run_id,
                    workspace = %workspace,
                    "cannot take this run over: its workspace is not visible on this machine \
                     (a fleet's workspace roots must be shared storage at the same path); \
                     leaving it to another daemon"
                );
                refused.insert(record.run_id.clone(), Instant::now());
                self.give_back_later(record.run_id);
                continue;
            }
            match self.resume(&record).await {
                Ok(true) => resumed += 1,
                Ok(false) => {}
                // Neither resumed nor finished (the store failed on the way): given back,
                // or it would stay this daemon's without running.
                Err(err) => {
                    tracing::warn!(run = %record.run_id, error = %err, "cannot take the run over; giving it back");
                    self.give_back_later(record.run_id);
                }
            }
        }
        self.give_back().await;
        if resumed > 0 {
            // A client may have sent a command for a run between its claim and its launch
            // here, when no daemon executed it: those wait in the store.
            commands::apply_untaken(&*self.relay, &self.agents).await;
        }
        Ok(resumed)
    }

    async fn resume(&self, record: &RunRecord) -> Result<bool, AgentError> {
        tracing::info!(run = %record.run_id, "taking the run over");
        self.agents.take_over(record).await
    }
}

async fn visible(workspace: &str) -> bool {
    tokio::fs::metadata(Path::new(workspace))
        .await
        .is_ok_and(|metadata| metadata.is_dir())
}
