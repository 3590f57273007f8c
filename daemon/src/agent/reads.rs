//! Reading recorded runs: a run's record, its last sequence number, its spans, its cassette,
//! and lists of runs.

use airlock_proto::v1 as pb;

use super::error::AgentError;
use super::recording;
use super::runtime::AgentRuntime;
use crate::ids::RunId;
use crate::store::{RunCursor, RunFilter, RunRecord, RunState};

impl AgentRuntime {
    /// The id of each run as its events are committed, from now on.
    pub fn run_changes(&self) -> tokio::sync::broadcast::Receiver<RunId> {
        self.shared.run_changes.subscribe()
    }

    pub async fn run(&self, run_id: &RunId) -> Result<RunRecord, AgentError> {
        self.shared
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| AgentError::UnknownRun(run_id.to_string()))
    }

    /// A finished run's model exchanges as a cassette.
    pub async fn cassette(&self, run_id: &RunId) -> Result<pb::GetCassetteResponse, AgentError> {
        let run = self.run(run_id).await?;
        if self.live_run(run_id).is_some() || run.state != RunState::Finished {
            return Err(AgentError::RunLive(run_id.to_string()));
        }
        let first = self.shared.store.events_after(run_id, 0, 1).await?;
        let started = first.iter().find_map(|event| match &event.event {
            Some(pb::run_event::Event::RunStarted(started)) => Some(started),
            _ => None,
        });
        let stored = self.shared.store.exchanges(run_id).await?;
        let cassette = recording::cassette(&run, started, &stored)?;
        Ok(pb::GetCassetteResponse {
            cassette: recording::encode(&cassette, &run)?,
            model: cassette.model,
            exchanges: u32::try_from(cassette.exchanges.len()).unwrap_or(u32::MAX),
        })
    }

    /// The sequence number of a run's last event.
    pub async fn last_seq(&self, run_id: &RunId) -> Result<u64, AgentError> {
        match self.live_run(run_id) {
            Some(live) => Ok(live.log.last_seq()),
            None => Ok(self.run(run_id).await?.last_seq),
        }
    }

    /// A run and its spans.
    pub async fn trace(&self, run_id: &RunId) -> Result<(RunRecord, Vec<pb::Span>), AgentError> {
        let run = self.run(run_id).await?;
        let spans = self.shared.store.spans(run_id).await?;
        Ok((run, spans))
    }

    pub async fn list_runs(
        &self,
        filter: &RunFilter,
        limit: usize,
        after: Option<&RunCursor>,
    ) -> Result<(Vec<RunRecord>, Option<RunCursor>), AgentError> {
        Ok(self.shared.store.list_runs(filter, limit, after).await?)
    }
}
