//! Runs: `Run` (start or attach, then steer on the same stream), `StartRun`, `WatchRun`,
//! `CancelRun`, `GetRun`, `ListRuns`, `WatchRuns` and `ForkRun`. A tenant's cap on live runs
//! is the runtime's to hold, under concurrent starts too: a start waiting on its session's
//! previous run, or on the store, holds up none of the tenant's others.

use std::collections::BTreeSet;
use std::sync::Arc;

use airlock_proto::v1 as pb;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::access::{CONSOLE_BUFFER, EventStream, check_start, owned_run, run_owner};
use crate::agent::{AgentError, AgentRuntime, Events};
use crate::api::auth::caller;
use crate::api::error::ApiError;
use crate::api::request::{parse_id, run_page_token, runs_query, verdict};
use crate::api::tenants::Tenant;
use crate::audit::Act;
use crate::config::ApprovalRights;
use crate::ids::RunId;
use crate::store::{RunRecord, RunState};
use crate::wire;
use crate::workspace::WorkspaceError;

/// How often WatchRuns sends the runs that changed: a run that appends a hundred events a
/// second is read once per tick, not once per event, and a list still looks live.
const WATCH_RUNS_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// The run calls of the `Agent` service.
pub(super) struct Runs {
    runtime: Arc<AgentRuntime>,
}

impl Runs {
    pub(super) fn new(runtime: Arc<AgentRuntime>) -> Runs {
        Runs { runtime }
    }

    /// A run of `tenant`'s events after `attach.after_seq`, then its live ones; errors name
    /// fields of the `AttachRun`.
    async fn attach(
        &self,
        tenant: &Tenant,
        attach: &pb::AttachRun,
    ) -> Result<(RunId, Events), ApiError> {
        let run_id = owned_run(&self.runtime, tenant, &attach.run_id, "run_id").await?;
        let last_seq = self
            .runtime
            .last_seq(&run_id)
            .await
            .map_err(ApiError::from)?;
        if attach.after_seq > last_seq {
            return Err(ApiError::AfterTheEnd {
                after_seq: attach.after_seq,
                last_seq,
            }
            .at("after_seq"));
        }
        let events = self
            .runtime
            .follow(&run_id, attach.after_seq)
            .await
            .map_err(|err| ApiError::from(err).at("run_id"))?;
        Ok((run_id, events))
    }

    /// Starts a run of `tenant`'s; errors name fields of the `StartRun`.
    async fn start(
        &self,
        tenant: &Tenant,
        mut start: pb::StartRun,
    ) -> Result<(RunId, Events), ApiError> {
        check_start(&self.runtime, tenant, &mut start)?;
        let owner = run_owner(tenant);
        let started = self
            .runtime
            .start(start, &owner)
            .await
            .map_err(ApiError::from)?;
        Ok((started.live.run_id.clone(), started.events))
    }

    /// `StartRun`: `Run`'s start for a client that cannot stream both ways. The run is the
    /// daemon's once started: a client that goes leaves it running.
    pub(super) async fn start_streaming(
        &self,
        request: Request<pb::StartRun>,
    ) -> Result<Response<EventStream<pb::RunEvent>>, Status> {
        let tenant = caller(&request)?;
        let (_, events) = self.start(&tenant, request.into_inner()).await?;
        Ok(Response::new(event_stream(events)))
    }

    pub(super) async fn run(
        &self,
        request: Request<Streaming<pb::RunRequest>>,
    ) -> Result<Response<EventStream<pb::RunEvent>>, Status> {
        let tenant = caller(&request)?;
        let mut requests = request.into_inner();
        let first = requests.message().await?.ok_or_else(|| {
            ApiError::invalid("request", "the stream ended before its first message")
        })?;
        let (run_id, events) = match first.request {
            Some(pb::run_request::Request::Start(start)) => self
                .start(&tenant, start)
                .await
                .map_err(|err| err.at("start"))?,
            Some(pb::run_request::Request::Attach(attach)) => self
                .attach(&tenant, &attach)
                .await
                .map_err(|err| err.at("attach"))?,
            Some(
                pb::run_request::Request::Decision(_)
                | pb::run_request::Request::Cancel(_)
                | pb::run_request::Request::Input(_),
            )
            | None => {
                return Err(ApiError::invalid(
                    "request",
                    "the first message must start a run (`start`) or attach to one (`attach`)",
                )
                .into());
            }
        };
        let runtime = self.runtime.clone();
        tokio::spawn(async move {
            // Later messages steer the run; when the client goes, the run goes on.
            while let Ok(Some(message)) = requests.message().await {
                match message.request {
                    Some(pb::run_request::Request::Decision(decision)) => {
                        if tenant.approvals == ApprovalRights::None {
                            runtime.refuse_decision_for_run(
                                &run_id,
                                &decision.approval_id,
                                &format!("tenant `{}` may not answer approvals", tenant.name),
                            );
                        } else if runtime.is_live(&run_id) {
                            runtime.decide_for_run(&run_id, &verdict(&decision)).await;
                        } else {
                            // In a fleet, the daemon executing the run answers it: the
                            // stream's next messages need not wait for that.
                            let (runtime, run_id) = (runtime.clone(), run_id.clone());
                            tokio::spawn(async move {
                                runtime.decide_for_run(&run_id, &verdict(&decision)).await;
                            });
                        }
                    }
                    Some(pb::run_request::Request::Cancel(cancel)) => {
                        if let Err(err) = runtime.cancel(&run_id, &cancel.reason).await {
                            tracing::debug!(run = %run_id, error = %err, "cancel from a run stream ignored");
                        }
                    }
                    Some(pb::run_request::Request::Input(input)) => {
                        if let Err(err) = runtime.send_input(&run_id, input.text).await {
                            tracing::debug!(run = %run_id, error = %err, "input from a run stream ignored");
                        }
                    }
                    Some(
                        pb::run_request::Request::Start(_) | pb::run_request::Request::Attach(_),
                    )
                    | None => {
                        tracing::debug!(run = %run_id, "a run stream may start or attach only once");
                    }
                }
            }
        });
        Ok(Response::new(event_stream(events)))
    }

    pub(super) async fn watch(
        &self,
        request: Request<pb::AttachRun>,
    ) -> Result<Response<EventStream<pb::RunEvent>>, Status> {
        let tenant = caller(&request)?;
        let (_, events) = self.attach(&tenant, request.get_ref()).await?;
        Ok(Response::new(event_stream(events)))
    }

    pub(super) async fn cancel(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = owned_run(&self.runtime, &tenant, &request.run_id, "run_id").await?;
        self.runtime
            .cancel(&run_id, &request.reason)
            .await
            .map_err(|err| ApiError::from(err).at("run_id"))?;
        Ok(Response::new(pb::CancelRunResponse {}))
    }

    pub(super) async fn get(
        &self,
        request: Request<pb::GetRunRequest>,
    ) -> Result<Response<pb::RunInfo>, Status> {
        let tenant = caller(&request)?;
        let run_id = parse_id(RunId::parse, &request.into_inner().run_id, "run_id")?;
        let run = self
            .runtime
            .run(&run_id)
            .await
            .map_err(|err| ApiError::from(err).at("run_id"))?;
        if !tenant.owns(&run.tenant) {
            return Err(ApiError::from(AgentError::UnknownRun(run_id.into_string()))
                .at("run_id")
                .into());
        }
        Ok(Response::new(run_info(run)))
    }

    pub(super) async fn list(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        let tenant = caller(&request)?;
        let (filter, size, after) = runs_query(&tenant, request.get_ref())?;
        let (runs, next) = self
            .runtime
            .list_runs(&filter, size, after.as_ref())
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListRunsResponse {
            runs: runs.into_iter().map(run_info).collect(),
            next_page_token: next.as_ref().map(run_page_token).unwrap_or_default(),
        }))
    }

    pub(super) async fn watch_list(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<EventStream<pb::RunInfo>>, Status> {
        let tenant = caller(&request)?;
        let (filter, size, after) = runs_query(&tenant, request.get_ref())?;
        // Subscribed before listing: a change made while the page is read is sent after it.
        let mut changes = self.runtime.run_changes();
        let (page, _) = self
            .runtime
            .list_runs(&filter, size, after.as_ref())
            .await
            .map_err(ApiError::from)?;
        let (sender, receiver) = mpsc::channel(CONSOLE_BUFFER);
        let runtime = self.runtime.clone();
        tokio::spawn(async move {
            for run in page {
                if sender.send(Ok(run_info(run))).await.is_err() {
                    return;
                }
            }
            let mut changed = BTreeSet::new();
            let mut flush = tokio::time::interval(WATCH_RUNS_INTERVAL);
            flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    change = changes.recv() => match change {
                        Ok(run_id) => {
                            changed.insert(run_id);
                        }
                        // Fell behind: the runs of the caller's that are live now are the
                        // ones that may have changed unseen.
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            changed.extend(runtime.live_run_ids());
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    _ = flush.tick(), if !changed.is_empty() => {
                        for run_id in std::mem::take(&mut changed) {
                            let Ok(run) = runtime.run(&run_id).await else {
                                continue;
                            };
                            let wanted = run.tenant == tenant.name
                                && filter
                                    .session_id
                                    .as_ref()
                                    .is_none_or(|session| run.session_id == *session)
                                && filter.matches_text(&run.start.input);
                            if wanted && sender.send(Ok(run_info(run))).await.is_err() {
                                return;
                            }
                        }
                    }
                    () = sender.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    /// A new run whose conversation is an old one's up to a step, in the same session or in
    /// a copy of the workspace as it was before that step.
    pub(super) async fn fork(
        &self,
        request: Request<pb::ForkRunRequest>,
    ) -> Result<Response<pb::RunInfo>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = owned_run(&self.runtime, &tenant, &request.run_id, "run_id").await?;
        let copy_into = wire::non_empty(&request.copy_into).map(std::path::PathBuf::from);
        let mut fork = self
            .runtime
            .plan_fork(
                &run_id,
                request.at_step,
                request.copy_workspace,
                request.input,
                copy_into,
            )
            .await
            .map_err(ApiError::from)?;
        // The copy goes where the caller may work: its directory is checked now, the copy
        // itself once it exists (before anything is copied into it).
        if let Some(parent) = fork.copy_parent() {
            allowed_workspace(&self.runtime, &tenant, parent).map_err(|err| {
                ApiError::invalid(
                    "copy_into",
                    format!(
                        "the copy would be made in {}, and {err}; name a directory inside your workspace roots in copy_into",
                        parent.display()
                    ),
                )
            })?;
        }
        check_start(&self.runtime, &tenant, &mut fork.start)?;
        let owner = run_owner(&tenant);
        let check = {
            let (runtime, tenant) = (self.runtime.clone(), tenant.clone());
            move |copy: &std::path::Path| {
                allowed_workspace(&runtime, &tenant, copy)
                    .map_err(|err| format!("the copy {} is refused: {err}", copy.display()))
            }
        };
        let live = self
            .runtime
            .start_fork(fork, &owner, check)
            .await
            .map_err(ApiError::from)?;
        self.runtime.auditor().record(
            Act::new(&tenant.name, "run.forked")
                .actor(&tenant.name)
                .subject(live.run_id.as_str())
                .reason("a run was forked from an earlier run's step")
                .detail("from_run_id", run_id.as_str())
                .detail("at_step", request.at_step)
                .detail("copy_workspace", request.copy_workspace),
        );
        let run = self
            .runtime
            .run(&live.run_id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(run_info(run)))
    }
}

/// A run's events as the client's stream: each event copied out of the pointer the run's
/// subscribers share (moved when this subscriber holds it alone), a store error mapped once.
fn event_stream(events: Events) -> EventStream<pb::RunEvent> {
    Box::pin(ReceiverStream::new(events).map(|event| {
        event
            .map(Arc::unwrap_or_clone)
            .map_err(|err| Status::from(ApiError::from(err)))
    }))
}

/// Whether `tenant` may use `path` as a workspace: inside the daemon's roots and its own,
/// never the daemon's own directories.
fn allowed_workspace(
    runtime: &AgentRuntime,
    tenant: &Tenant,
    path: &std::path::Path,
) -> Result<(), WorkspaceError> {
    let path = path.to_string_lossy();
    runtime.workspaces().resolve(Some(&path))?;
    tenant.may_use_workspace(Some(&path))
}

fn run_info(run: RunRecord) -> pb::RunInfo {
    pb::RunInfo {
        run_id: run.run_id.into_string(),
        session_id: run.session_id.into_string(),
        state: match run.state {
            RunState::Running => pb::RunState::Running,
            RunState::WaitingForApproval => pb::RunState::WaitingForApproval,
            RunState::Finished => pb::RunState::Finished,
        } as i32,
        stop_reason: run
            .stop_reason
            .map_or(pb::StopReason::Unspecified, wire::stop_reason) as i32,
        input: run.start.input,
        final_text: run.final_text,
        usage: Some(wire::usage(&run.usage)),
        model: run.model,
        workspace: run.workspace.unwrap_or_default(),
        trace_id: run.trace_id.to_string(),
        created_at_ms: run.created_at_ms,
        finished_at_ms: run.finished_at_ms.unwrap_or(0),
        last_seq: run.last_seq,
        steps: run.steps,
        stop_detail: run.stop_detail,
    }
}

#[cfg(test)]
#[path = "runs_tests.rs"]
mod tests;
