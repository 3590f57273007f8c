//! A run's change sets: listed step by step, their contents read back, and undone.
//!
//! The change sets live in the run's event log (`changes` events, right after the
//! `tool_finished` of the call that made them), so they are exactly what clients were shown,
//! and survive a restart like every event. A revert reads them back, folds those of the steps
//! to undo into one plan, and runs it on a blocking thread; a live run is never reverted
//! under itself.

use airlock_proto::v1 as pb;

use super::{AgentError, AgentRuntime};
use crate::changes::{RevertError, RevertPlan, RevertReport};
use crate::ids::RunId;
use crate::store::RunRecord;
use crate::wire;

/// Events read from the store per query while collecting a run's change sets.
const EVENT_PAGE: usize = 1000;

impl AgentRuntime {
    /// The run and its change sets, in order, each with its step's 1-based index.
    pub async fn changes(
        &self,
        run_id: &RunId,
    ) -> Result<(RunRecord, Vec<pb::StepChanges>), AgentError> {
        let run = self.run(run_id).await?;
        let mut steps = Vec::new();
        let mut step_ids: Vec<String> = Vec::new();
        let mut after = 0;
        loop {
            let events = self
                .shared
                .store
                .events_after(run_id, after, EVENT_PAGE)
                .await?;
            let Some(last) = events.last() else { break };
            after = last.seq;
            for event in events {
                match event.event {
                    Some(pb::run_event::Event::StepStarted(_)) => step_ids.push(event.step_id),
                    Some(pb::run_event::Event::Changes(changes)) => {
                        let step = step_ids
                            .iter()
                            .position(|id| *id == event.step_id)
                            .map_or(0, |index| index + 1);
                        steps.push(pb::StepChanges {
                            step: u32::try_from(step).unwrap_or(u32::MAX),
                            step_id: event.step_id,
                            call_id: changes.call_id,
                            tool: changes.tool,
                            change_set: changes.change_set,
                        });
                    }
                    _ => {}
                }
            }
        }
        Ok((run, steps))
    }

    /// A content one of the run's change sets names, while the blob store keeps it.
    pub async fn read_blob(&self, run_id: &RunId, digest: &str) -> Result<Vec<u8>, AgentError> {
        let (_, steps) = self.changes(run_id).await?;
        let named = steps
            .iter()
            .filter_map(|step| step.change_set.as_ref())
            .flat_map(|set| &set.changes)
            .flat_map(|change| [&change.before, &change.after])
            .flatten()
            .any(|state| state.digest == digest);
        let unknown = || AgentError::UnknownBlob(digest.to_owned());
        if !named {
            return Err(unknown());
        }
        let changes = self.shared.executor.changes().ok_or_else(unknown)?.clone();
        let digest = digest.to_owned();
        tokio::task::spawn_blocking(move || changes.blobs().read(&digest))
            .await
            .map_err(|err| AgentError::Revert(format!("reading a blob panicked: {err}")))?
            .map_err(|err| AgentError::Revert(format!("cannot read a blob: {err}")))?
            .ok_or_else(unknown)
    }

    /// Puts a finished run's workspace back as it was before step `to_step` (1-based).
    pub async fn revert(
        &self,
        run_id: &RunId,
        to_step: u32,
        force: bool,
    ) -> Result<RevertReport, AgentError> {
        if self.live_run(run_id).is_some() {
            return Err(AgentError::RunLive(run_id.to_string()));
        }
        if to_step == 0 {
            return Err(AgentError::Invalid {
                field: "to_step",
                reason: "steps count from 1: revert to the state before which step?".into(),
            });
        }
        let (run, steps) = self.changes(run_id).await?;
        let workspace = run.workspace.ok_or_else(|| AgentError::Invalid {
            field: "run_id",
            reason: "the run has no workspace, so it changed nothing".into(),
        })?;
        let workspace = self
            .shared
            .executor
            .workspaces()
            .resolve(Some(&workspace))?
            .ok_or_else(|| AgentError::Invalid {
                field: "run_id",
                reason: "the run has no workspace, so it changed nothing".into(),
            })?;
        let sets: Vec<_> = steps
            .iter()
            .filter(|step| step.step >= to_step)
            .filter_map(|step| step.change_set.as_ref())
            .map(wire::change_set_from)
            .collect();
        let plan = RevertPlan::new(&sets);
        let Some(changes) = self.shared.executor.changes().cloned() else {
            return Err(AgentError::Revert(
                "this daemon keeps no change sets (its change-set store is unavailable)".into(),
            ));
        };
        tokio::task::spawn_blocking(move || plan.execute_at(&workspace, changes.blobs(), force))
            .await
            .map_err(|err| AgentError::Revert(format!("the revert panicked: {err}")))?
            .map_err(|err| match err {
                RevertError::Conflicts(_) => AgentError::RevertConflicts(err.to_string()),
                RevertError::Io { .. } => AgentError::Revert(err.to_string()),
            })
    }
}
