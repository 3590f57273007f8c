//! `airlock.v1.Agent`: sessions, runs on a bidirectional stream, approver consoles.
//!
//! Every run belongs to the tenant that started it. Another tenant's run ids answer
//! NOT_FOUND, exactly like ids that do not exist, so that ids do not leak; approval requests
//! reach only the consoles of tenants that may answer them.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use airlock_proto::v1 as pb;
use futures::Stream;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::auth::caller;
use super::error::ApiError;
use super::limits;
use super::quota::Turns;
use super::tenants::Tenant;
use super::tools::check_call;
use crate::agent::{AgentError, AgentRuntime, RunOwner};
use crate::config::ApprovalRights;
use crate::store::{RunFilter, RunRecord, RunState};

/// Runs listed per page unless the client asks for fewer; and the most it may ask for.
const DEFAULT_PAGE_SIZE: u32 = 50;
const MAX_PAGE_SIZE: u32 = 500;

/// Messages queued for an approver console.
const CONSOLE_BUFFER: usize = 256;

pub struct AgentService {
    runtime: Arc<AgentRuntime>,
    /// A tenant's run starts take turns, so that its cap on live runs holds under
    /// concurrent starts (see [`Turns`]).
    starts: Turns,
}

impl AgentService {
    pub fn new(runtime: Arc<AgentRuntime>) -> AgentService {
        AgentService {
            runtime,
            starts: Turns::default(),
        }
    }

    /// Fails with NOT_FOUND unless `tenant` owns run `run_id`.
    fn check_owner(&self, tenant: &Tenant, run_id: &str) -> Result<(), Status> {
        let owner = self.runtime.run_owner(run_id).map_err(ApiError::from)?;
        if tenant.owns(&owner) {
            Ok(())
        } else {
            Err(ApiError::from(AgentError::UnknownRun(run_id.to_owned())).into())
        }
    }

    /// Narrows a run's tools to the tenant's and checks its workspace.
    fn check_start(&self, tenant: &Tenant, start: &mut pb::StartRun) -> Result<(), Status> {
        if start.input.len() > limits::MAX_ARGUMENTS_BYTES {
            return Err(Status::invalid_argument(format!(
                "the input is {} bytes; the limit is {} bytes",
                start.input.len(),
                limits::MAX_ARGUMENTS_BYTES
            )));
        }
        tenant
            .may_use_workspace(&start.workspace)
            .map_err(|err| Status::permission_denied(format!("tenant `{}`: {err}", tenant.name)))?;
        let Some(allowed) = tenant.allowed_tools() else {
            return Ok(());
        };
        if start.tools.is_empty() {
            // "Every tool" means every tool this tenant may use.
            let registry = self.runtime.registry();
            start.tools = allowed
                .iter()
                .filter(|name| registry.get(name).is_some())
                .cloned()
                .collect();
            if start.tools.is_empty() {
                return Err(Status::permission_denied(format!(
                    "tenant `{}` may use none of the tools this daemon serves",
                    tenant.name
                )));
            }
        }
        for tool in &start.tools {
            check_call(tenant, tool, "")?;
        }
        Ok(())
    }
}

type EventStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl pb::agent_server::Agent for AgentService {
    async fn create_session(
        &self,
        request: Request<pb::CreateSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        tenant
            .may_use_workspace(&request.workspace)
            .map_err(|err| Status::permission_denied(format!("tenant `{}`: {err}", tenant.name)))?;
        let labels: BTreeMap<String, String> = request.labels.into_iter().collect();
        let session = self
            .runtime
            .create_session(&request.workspace, labels, &tenant.name)
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::Session {
            session_id: session.session_id,
            workspace: session.workspace,
            labels: session.labels.into_iter().collect(),
            created_at_ms: session.created_at_ms,
        }))
    }

    type RunStream = EventStream<pb::RunEvent>;

    async fn run(
        &self,
        request: Request<Streaming<pb::RunRequest>>,
    ) -> Result<Response<Self::RunStream>, Status> {
        let tenant = caller(&request)?;
        let mut requests = request.into_inner();
        let first = requests
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("the stream ended before its first message"))?;
        let (run_id, events) = match first.request {
            Some(pb::run_request::Request::Start(mut start)) => {
                self.check_start(&tenant, &mut start)?;
                let owner = RunOwner {
                    tenant: tenant.name.clone(),
                    max_live_runs: tenant.max_concurrent_runs,
                };
                let live = {
                    let _turn = self.starts.take(&tenant.name).await;
                    self.runtime.start(start, &owner).map_err(ApiError::from)?
                };
                let events = self
                    .runtime
                    .follow(&live.run_id, 0)
                    .map_err(ApiError::from)?;
                (live.run_id.clone(), events)
            }
            Some(pb::run_request::Request::Attach(attach)) => {
                self.check_owner(&tenant, &attach.run_id)?;
                let events = self
                    .runtime
                    .follow(&attach.run_id, attach.after_seq)
                    .map_err(ApiError::from)?;
                (attach.run_id, events)
            }
            Some(
                pb::run_request::Request::Decision(_)
                | pb::run_request::Request::Cancel(_)
                | pb::run_request::Request::Input(_),
            )
            | None => {
                return Err(Status::invalid_argument(
                    "the first message must start a run or attach to one",
                ));
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
                        } else {
                            runtime.decide_for_run(&run_id, &decision);
                        }
                    }
                    Some(pb::run_request::Request::Cancel(cancel)) => {
                        if let Err(err) = runtime.cancel(&run_id, &cancel.reason) {
                            tracing::debug!(run = %run_id, error = %err, "cancel from a run stream ignored");
                        }
                    }
                    Some(pb::run_request::Request::Input(input)) => {
                        if let Err(err) = runtime.send_input(&run_id, input.text) {
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
        let stream = ReceiverStream::new(events).map(|event| {
            event.map_err(|err| Status::from(ApiError::from(crate::agent::AgentError::from(err))))
        });
        Ok(Response::new(Box::pin(stream)))
    }

    type ApprovalsStream = EventStream<pb::ApprovalRequest>;

    async fn approvals(
        &self,
        request: Request<Streaming<pb::ApprovalDecision>>,
    ) -> Result<Response<Self::ApprovalsStream>, Status> {
        let tenant = caller(&request)?;
        if tenant.approvals == ApprovalRights::None {
            return Err(Status::permission_denied(format!(
                "tenant `{}` may not answer approvals",
                tenant.name
            )));
        }
        let mut decisions = request.into_inner();
        let (sender, receiver) = mpsc::channel(CONSOLE_BUFFER);
        let (pending, mut updates) = self.runtime.approvals().subscribe();
        let broker = self.runtime.approvals().clone();
        let outgoing = sender.clone();
        let runtime = self.runtime.clone();
        let console_tenant = tenant.clone();
        // Only the requests of runs this tenant may answer; an unknown run's are nobody's.
        let visible = move |request: &pb::ApprovalRequest| {
            runtime
                .run_owner(&request.run_id)
                .is_ok_and(|owner| console_tenant.may_answer_for(&owner))
        };
        tokio::spawn(async move {
            for request in pending {
                if visible(&request) && outgoing.send(Ok(request)).await.is_err() {
                    return;
                }
            }
            loop {
                let update = match updates.recv().await {
                    Ok(update) => update,
                    // Fell behind: what matters is what is pending now.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let (pending, fresh) = broker.subscribe();
                        updates = fresh;
                        for request in pending {
                            if visible(&request) && outgoing.send(Ok(request)).await.is_err() {
                                return;
                            }
                        }
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if visible(&update) && outgoing.send(Ok(update)).await.is_err() {
                    return;
                }
            }
        });
        let runtime = self.runtime.clone();
        tokio::spawn(async move {
            while let Ok(Some(decision)) = decisions.message().await {
                // Another tenant's request is answered as if it were not pending at all.
                let allowed = runtime
                    .approvals()
                    .pending_run_id(&decision.approval_id)
                    .and_then(|run_id| runtime.run_owner(&run_id).ok())
                    .is_some_and(|owner| tenant.may_answer_for(&owner));
                let decided = if allowed {
                    runtime.decide(&decision)
                } else {
                    Err(crate::policy::DecisionError::NotPending(
                        decision.approval_id.clone(),
                    ))
                };
                if let Err(err) = decided {
                    let rejected = pb::ApprovalRequest {
                        approval_id: decision.approval_id.clone(),
                        state: pb::ApprovalState::DecisionRejected as i32,
                        detail: err.to_string(),
                        ..Default::default()
                    };
                    if sender.send(Ok(rejected)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        self.check_owner(&tenant, &request.run_id)?;
        self.runtime
            .cancel(&request.run_id, &request.reason)
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::CancelRunResponse {}))
    }

    async fn get_run(
        &self,
        request: Request<pb::GetRunRequest>,
    ) -> Result<Response<pb::RunInfo>, Status> {
        let tenant = caller(&request)?;
        let run_id = request.into_inner().run_id;
        let run = self.runtime.run(&run_id).map_err(ApiError::from)?;
        if !tenant.owns(&run.tenant) {
            return Err(ApiError::from(AgentError::UnknownRun(run_id)).into());
        }
        Ok(Response::new(run_info(run)))
    }

    async fn list_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let state = match pb::RunState::try_from(request.state) {
            Ok(pb::RunState::Unspecified) => None,
            Ok(pb::RunState::Running) => Some(RunState::Running),
            Ok(pb::RunState::WaitingForApproval) => Some(RunState::WaitingForApproval),
            Ok(pb::RunState::Finished) => Some(RunState::Finished),
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "unknown run state {}",
                    request.state
                )));
            }
        };
        let filter = RunFilter {
            session_id: (!request.session_id.is_empty()).then_some(request.session_id),
            state,
            tenant: Some(tenant.name.clone()),
        };
        let size = match request.page_size {
            0 => DEFAULT_PAGE_SIZE,
            size => size.min(MAX_PAGE_SIZE),
        };
        let token = (!request.page_token.is_empty()).then_some(request.page_token.as_str());
        let (runs, next) = self
            .runtime
            .list_runs(&filter, size as usize, token)
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListRunsResponse {
            runs: runs.into_iter().map(run_info).collect(),
            next_page_token: next.unwrap_or_default(),
        }))
    }

    async fn get_trace(
        &self,
        request: Request<pb::GetTraceRequest>,
    ) -> Result<Response<pb::Trace>, Status> {
        let tenant = caller(&request)?;
        let run_id = request.into_inner().run_id;
        self.check_owner(&tenant, &run_id)?;
        let (run, spans) = self.runtime.trace(&run_id).map_err(ApiError::from)?;
        Ok(Response::new(pb::Trace {
            run_id: run.run_id,
            trace_id: run.trace_id,
            spans,
        }))
    }
}

fn run_info(run: RunRecord) -> pb::RunInfo {
    pb::RunInfo {
        run_id: run.run_id,
        session_id: run.session_id,
        state: match run.state {
            RunState::Running => pb::RunState::Running,
            RunState::WaitingForApproval => pb::RunState::WaitingForApproval,
            RunState::Finished => pb::RunState::Finished,
        } as i32,
        stop_reason: run.stop_reason.unwrap_or(pb::StopReason::Unspecified) as i32,
        input: run.start.input,
        final_text: run.final_text,
        usage: Some(run.usage),
        model: run.model,
        workspace: run.workspace,
        trace_id: run.trace_id,
        created_at_ms: run.created_at_ms,
        finished_at_ms: run.finished_at_ms.unwrap_or(0),
        last_seq: run.last_seq,
        steps: run.steps,
        stop_detail: run.stop_detail,
    }
}
