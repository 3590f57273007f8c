//! `airlock.v1.Agent`: sessions, runs on a bidirectional stream, approver consoles, a run's
//! changes and its trace.
//!
//! Every run belongs to the tenant that started it. Another tenant's run ids answer
//! NOT_FOUND, exactly like ids that do not exist, so that ids do not leak; approval requests
//! reach only the consoles of tenants that may answer them.
//!
//! tonic makes the service one trait; its implementation here only hands each call to the
//! concern that serves it — [`sessions`], [`runs`], [`approvals`], [`changes`], [`traces`] —
//! over what they share ([`access`]) and what every service reads out of requests
//! (`api::request`).

mod access;
mod approvals;
mod changes;
mod runs;
mod sessions;
mod traces;

use std::sync::Arc;

use airlock_proto::v1 as pb;
use tonic::{Request, Response, Status, Streaming};

use crate::agent::AgentRuntime;
use access::EventStream;
use approvals::Approvals;
use changes::Changes;
use runs::Runs;
use sessions::Sessions;
use traces::Traces;

pub(super) use approvals::decide_as;

pub struct AgentService {
    sessions: Sessions,
    runs: Runs,
    approvals: Approvals,
    changes: Changes,
    traces: Traces,
}

impl AgentService {
    pub fn new(runtime: Arc<AgentRuntime>) -> AgentService {
        AgentService {
            sessions: Sessions::new(runtime.clone()),
            runs: Runs::new(runtime.clone()),
            approvals: Approvals::new(runtime.clone()),
            changes: Changes::new(runtime.clone()),
            traces: Traces::new(runtime),
        }
    }
}

#[tonic::async_trait]
impl pb::agent_server::Agent for AgentService {
    async fn create_session(
        &self,
        request: Request<pb::CreateSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        self.sessions.create(request).await
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        self.sessions.get(request).await
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        self.sessions.list(request).await
    }

    type RunStream = EventStream<pb::RunEvent>;

    async fn run(
        &self,
        request: Request<Streaming<pb::RunRequest>>,
    ) -> Result<Response<Self::RunStream>, Status> {
        self.runs.run(request).await
    }

    type StartRunStream = EventStream<pb::RunEvent>;

    async fn start_run(
        &self,
        request: Request<pb::StartRun>,
    ) -> Result<Response<Self::StartRunStream>, Status> {
        self.runs.start_streaming(request).await
    }

    type ApprovalsStream = EventStream<pb::ApprovalRequest>;

    async fn approvals(
        &self,
        request: Request<Streaming<pb::ApprovalDecision>>,
    ) -> Result<Response<Self::ApprovalsStream>, Status> {
        self.approvals.console(request).await
    }

    type WatchRunStream = EventStream<pb::RunEvent>;

    async fn watch_run(
        &self,
        request: Request<pb::AttachRun>,
    ) -> Result<Response<Self::WatchRunStream>, Status> {
        self.runs.watch(request).await
    }

    type WatchApprovalsStream = EventStream<pb::ApprovalRequest>;

    async fn watch_approvals(
        &self,
        request: Request<pb::WatchApprovalsRequest>,
    ) -> Result<Response<Self::WatchApprovalsStream>, Status> {
        self.approvals.watch(request).await
    }

    async fn decide_approval(
        &self,
        request: Request<pb::ApprovalDecision>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        self.approvals.decide(request).await
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        self.runs.cancel(request).await
    }

    async fn get_run(
        &self,
        request: Request<pb::GetRunRequest>,
    ) -> Result<Response<pb::RunInfo>, Status> {
        self.runs.get(request).await
    }

    async fn list_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        self.runs.list(request).await
    }

    type WatchRunsStream = EventStream<pb::RunInfo>;

    async fn watch_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<Self::WatchRunsStream>, Status> {
        self.runs.watch_list(request).await
    }

    async fn get_trace(
        &self,
        request: Request<pb::GetTraceRequest>,
    ) -> Result<Response<pb::Trace>, Status> {
        self.traces.trace(request).await
    }

    async fn get_cassette(
        &self,
        request: Request<pb::GetCassetteRequest>,
    ) -> Result<Response<pb::GetCassetteResponse>, Status> {
        self.traces.cassette(request).await
    }

    async fn list_changes(
        &self,
        request: Request<pb::ListChangesRequest>,
    ) -> Result<Response<pb::ListChangesResponse>, Status> {
        self.changes.list(request).await
    }

    async fn read_blob(
        &self,
        request: Request<pb::ReadBlobRequest>,
    ) -> Result<Response<pb::ReadBlobResponse>, Status> {
        self.changes.read_blob(request).await
    }

    async fn fork_run(
        &self,
        request: Request<pb::ForkRunRequest>,
    ) -> Result<Response<pb::RunInfo>, Status> {
        self.runs.fork(request).await
    }

    async fn revert_run(
        &self,
        request: Request<pb::RevertRunRequest>,
    ) -> Result<Response<pb::RevertRunResponse>, Status> {
        self.changes.revert(request).await
    }
}
