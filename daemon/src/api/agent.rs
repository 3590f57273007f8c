//! `airlock.v1.Agent`: sessions, runs on a bidirectional stream, approver consoles.
//!
//! Every run belongs to the tenant that started it. Another tenant's run ids answer
//! NOT_FOUND, exactly like ids that do not exist, so that ids do not leak; approval requests
//! reach only the consoles of tenants that may answer them.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::Arc;

use airlock_proto::v1 as pb;
use futures::Stream;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::auth::caller;
use super::direct_call::{check_tool, forbidden_workspace};
use super::error::ApiError;
use super::quota::Turns;
use super::tenants::Tenant;
use crate::agent::{AgentError, AgentRuntime, RunOwner, changes_page};
use crate::config::ApprovalRights;
use crate::ids::{RunId, SessionId};
use crate::policy::{DecisionError, Verdict};
use crate::store::{
    RunCursor, RunFilter, RunRecord, RunState, SessionCursor, SessionSummary, StoreError,
};
use crate::wire;
use crate::workspace::WorkspaceError;

/// Runs listed per page unless the client asks for fewer; and the most it may ask for.
const DEFAULT_PAGE_SIZE: u32 = 50;
const MAX_PAGE_SIZE: u32 = 500;

/// Messages queued for an approver console.
const CONSOLE_BUFFER: usize = 256;

/// How often WatchRuns sends the runs that changed: a run that appends a hundred events a
/// second is read once per tick, not once per event, and a list still looks live.
const WATCH_RUNS_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// A session's labels: a few short tags (a ticket, a repository), not a document store.
const MAX_LABELS: usize = 64;
const MAX_LABEL_BYTES: usize = 256;

/// Refuses labels past the bounds above, naming the label.
fn check_labels(labels: &std::collections::HashMap<String, String>) -> Result<(), ApiError> {
    if labels.len() > MAX_LABELS {
        return Err(ApiError::invalid(
            "labels",
            format!("{} labels; the limit is {MAX_LABELS}", labels.len()),
        ));
    }
    for (key, value) in labels {
        if key.is_empty() || key.len() > MAX_LABEL_BYTES || value.len() > MAX_LABEL_BYTES {
            let shown: String = key.chars().take(40).collect();
            return Err(ApiError::invalid(
                "labels",
                format!(
                    "label `{shown}`: keys must be 1 to {MAX_LABEL_BYTES} bytes and values at \
                     most {MAX_LABEL_BYTES}"
                ),
            ));
        }
    }
    Ok(())
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

    /// Checks that `run_id` (request field `field`) is a run of `tenant`. Another tenant's
    /// run is NOT_FOUND, exactly like one that does not exist.
    async fn owned_run(
        &self,
        tenant: &Tenant,
        run_id: &str,
        field: &str,
    ) -> Result<RunId, ApiError> {
        let run_id = parse_id(RunId::parse, run_id, field)?;
        let owner = self
            .runtime
            .run_owner(&run_id)
            .await
            .map_err(|err| ApiError::from(err).at(field))?;
        if tenant.owns(&owner) {
            Ok(run_id)
        } else {
            Err(ApiError::from(AgentError::UnknownRun(run_id.into_string())).at(field))
        }
    }

    /// A run of `tenant`'s events after `attach.after_seq`, then its live ones; errors name
    /// fields of the `AttachRun`.
    async fn attach(
        &self,
        tenant: &Tenant,
        attach: &pb::AttachRun,
    ) -> Result<(RunId, mpsc::Receiver<Result<pb::RunEvent, StoreError>>), ApiError> {
        let run_id = self.owned_run(tenant, &attach.run_id, "run_id").await?;
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

    /// Sends on `outgoing` every pending approval request `tenant` may answer (only `run`'s,
    /// when given), then every change to them, until the receiver goes — in a fleet, those
    /// of the runs other daemons execute too.
    fn feed_approvals(
        &self,
        tenant: Arc<Tenant>,
        run: Option<RunId>,
        outgoing: mpsc::Sender<Result<pb::ApprovalRequest, Status>>,
    ) {
        let (pending, mut updates) = self.runtime.approvals().subscribe();
        let broker = self.runtime.approvals().clone();
        let runtime = self.runtime.clone();
        if let Some(mut remote) = self.runtime.watch_remote_approvals() {
            let (tenant, run, outgoing, runtime) = (
                tenant.clone(),
                run.clone(),
                outgoing.clone(),
                runtime.clone(),
            );
            tokio::spawn(async move {
                while let Some(request) = remote.recv().await {
                    if shown(&runtime, &tenant, run.as_ref(), &request).await
                        && outgoing.send(Ok(request)).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
        tokio::spawn(async move {
            let visible = async |request: &pb::ApprovalRequest| {
                shown(&runtime, &tenant, run.as_ref(), request).await
            };
            for request in pending {
                if visible(&request).await && outgoing.send(Ok(request)).await.is_err() {
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
                            if visible(&request).await && outgoing.send(Ok(request)).await.is_err()
                            {
                                return;
                            }
                        }
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if visible(&update).await && outgoing.send(Ok(update)).await.is_err() {
                    return;
                }
            }
        });
    }

    /// Checks a run's start against what `tenant` may do, and narrows its tools to the
    /// tenant's. Errors name fields inside the `StartRun`.
    fn check_start(&self, tenant: &Tenant, start: &mut pb::StartRun) -> Result<(), ApiError> {
        if !start.session_id.is_empty() {
            parse_id(SessionId::parse, &start.session_id, "session_id")?;
        }
        tenant
            .may_use_workspace(wire::non_empty(&start.workspace))
            .map_err(|err| forbidden_workspace(tenant, err).at("workspace"))?;
        self.check_session_tools(tenant, &mut start.tools)
    }

    /// Tools a request names for a run or a session, held to the tenant's: "every tool"
    /// becomes every tool the tenant may use. (A run in a session that leaves its tools
    /// unset inherits the session's, and the runtime holds those to the tenant's too.)
    fn check_session_tools(
        &self,
        tenant: &Tenant,
        tools: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        let Some(allowed) = tenant.allowed_tools() else {
            return Ok(());
        };
        if tools.is_empty() {
            // "Every tool" means every tool this tenant may use.
            let registry = self.runtime.registry();
            *tools = allowed
                .iter()
                .filter(|name| registry.get(name).is_some())
                .cloned()
                .collect();
            if tools.is_empty() {
                return Err(ApiError::Forbidden {
                    tenant: tenant.name.clone(),
                    what: "may use none of the tools this daemon serves".into(),
                }
                .at("tools"));
            }
        }
        for tool in tools.iter() {
            check_tool(tenant, tool).map_err(|err| err.at("tools"))?;
        }
        Ok(())
    }
}

/// Parses an id a client sent in request field `field` with `parse` (such as
/// [`RunId::parse`]), so a typo is told apart from an id that names nothing.
pub(super) fn parse_id<T>(
    parse: fn(&str) -> Result<T, String>,
    text: &str,
    field: &str,
) -> Result<T, ApiError> {
    parse(text).map_err(|reason| ApiError::invalid(field, reason))
}

/// A decision as a client sent it, decoded once here.
fn verdict(decision: &pb::ApprovalDecision) -> Verdict {
    Verdict {
        approval_id: decision.approval_id.clone(),
        decision: pb::Decision::try_from(decision.decision)
            .ok()
            .and_then(wire::decision_from),
        reason: decision.reason.clone(),
        digest: decision.digest.clone(),
    }
}

/// `tenant`, when it may answer approvals at all.
fn approver(tenant: Arc<Tenant>) -> Result<Arc<Tenant>, ApiError> {
    if tenant.approvals == ApprovalRights::None {
        return Err(ApiError::Forbidden {
            tenant: tenant.name.clone(),
            what: "may not answer approvals (its `approvals` is `none`)".into(),
        });
    }
    Ok(tenant)
}

/// Answers `decision` for `tenant`'s console: another tenant's request is answered as if it
/// were not pending at all.
async fn decide_as(
    runtime: &AgentRuntime,
    tenant: &Tenant,
    decision: &pb::ApprovalDecision,
) -> Result<(), ApiError> {
    let allowed = match runtime.pending_approval(&decision.approval_id).await {
        Some(request) => may_answer(runtime, tenant, &request).await,
        None => false,
    };
    if allowed {
        Ok(runtime.decide(&verdict(decision)).await?)
    } else {
        Err(DecisionError::NotPending(decision.approval_id.clone()).into())
    }
}

/// Whether a console of `tenant` watching `run` (every run, when none) is shown `request`.
async fn shown(
    runtime: &AgentRuntime,
    tenant: &Tenant,
    run: Option<&RunId>,
    request: &pb::ApprovalRequest,
) -> bool {
    run.is_none_or(|run| request.run_id == run.as_str())
        && may_answer(runtime, tenant, request).await
}

/// Whether a console of `tenant` may see (and answer) an approval request; the requests of
/// a run nobody owns are nobody's. A request outside any run names its tenant.
async fn may_answer(
    runtime: &AgentRuntime,
    tenant: &Tenant,
    request: &pb::ApprovalRequest,
) -> bool {
    if request.run_id.is_empty() {
        return !request.tenant.is_empty() && tenant.may_answer_for(&request.tenant);
    }
    let Ok(run_id) = RunId::parse(&request.run_id) else {
        return false;
    };
    runtime
        .run_owner(&run_id)
        .await
        .is_ok_and(|owner| tenant.may_answer_for(&owner))
}

/// Who starts a run, as the runtime holds it to the tenant's limits.
fn run_owner(tenant: &Tenant) -> RunOwner {
    RunOwner {
        tenant: tenant.name.clone(),
        max_live_runs: tenant.max_concurrent_runs,
        allowed_tools: tenant.allowed_tools().cloned(),
    }
}

/// The page token of the page after `cursor`: opaque to clients, and checked like any field
/// when it comes back.
fn page_token(cursor: &RunCursor) -> String {
    format!("{}.{}", cursor.created_at_ms, cursor.run_id)
}

fn parse_session_page_token(token: &str) -> Result<SessionCursor, ApiError> {
    let (time, session_id) = token.split_once('.').ok_or_else(invalid_page_token)?;
    Ok(SessionCursor {
        last_active_ms: time.parse().map_err(|_| invalid_page_token())?,
        session_id: SessionId::parse(session_id).map_err(|_| invalid_page_token())?,
    })
}

fn invalid_page_token() -> ApiError {
    ApiError::invalid(
        "page_token",
        "not a page token of this daemon: pass the `next_page_token` of the previous \
         response unchanged, or none for the first page",
    )
}

fn session_info(summary: SessionSummary) -> pb::Session {
    let session = summary.session;
    pb::Session {
        session_id: session.session_id.into_string(),
        workspace: session.workspace.unwrap_or_default(),
        labels: session.labels.into_iter().collect(),
        created_at_ms: session.created_at_ms,
        settings: Some(session.settings),
        runs: summary.runs,
        last_run_id: summary
            .last_run_id
            .map(RunId::into_string)
            .unwrap_or_default(),
        last_active_ms: summary.last_active_ms,
        running: summary.running,
    }
}

fn parse_page_token(token: &str) -> Result<RunCursor, ApiError> {
    let (time, run_id) = token.split_once('.').ok_or_else(invalid_page_token)?;
    let created_at_ms = time.parse().map_err(|_| invalid_page_token())?;
    let run_id = RunId::parse(run_id).map_err(|_| invalid_page_token())?;
    Ok(RunCursor {
        created_at_ms,
        run_id,
    })
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
            .may_use_workspace(wire::non_empty(&request.workspace))
            .map_err(|err| forbidden_workspace(&tenant, err).at("workspace"))?;
        check_labels(&request.labels)?;
        let labels: BTreeMap<String, String> = request.labels.into_iter().collect();
        let mut settings = request.settings.unwrap_or_default();
        self.check_session_tools(&tenant, &mut settings.tools)
            .map_err(|err| err.at("settings"))?;
        let session = self
            .runtime
            .create_session(
                wire::non_empty(&request.workspace),
                labels,
                settings,
                &tenant.name,
            )
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(session_info(SessionSummary {
            last_active_ms: session.created_at_ms,
            session,
            runs: 0,
            last_run_id: None,
            running: false,
        })))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let tenant = caller(&request)?;
        let session_id = parse_id(
            SessionId::parse,
            &request.get_ref().session_id,
            "session_id",
        )?;
        let summary = self
            .runtime
            .session(&session_id, &tenant.name)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(session_info(summary)))
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let after = match request.page_token.as_str() {
            "" => None,
            token => Some(parse_session_page_token(token)?),
        };
        let size = match request.page_size {
            0 => DEFAULT_PAGE_SIZE,
            size => size.min(MAX_PAGE_SIZE),
        };
        let (sessions, next) = self
            .runtime
            .list_sessions(&tenant.name, size as usize, after.as_ref())
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListSessionsResponse {
            sessions: sessions.into_iter().map(session_info).collect(),
            next_page_token: next
                .map(|cursor| format!("{}.{}", cursor.last_active_ms, cursor.session_id))
                .unwrap_or_default(),
        }))
    }

    type RunStream = EventStream<pb::RunEvent>;

    async fn run(
        &self,
        request: Request<Streaming<pb::RunRequest>>,
    ) -> Result<Response<Self::RunStream>, Status> {
        let tenant = caller(&request)?;
        let mut requests = request.into_inner();
        let first = requests.message().await?.ok_or_else(|| {
            ApiError::invalid("request", "the stream ended before its first message")
        })?;
        let (run_id, events) = match first.request {
            Some(pb::run_request::Request::Start(mut start)) => {
                self.check_start(&tenant, &mut start)
                    .map_err(|err| err.at("start"))?;
                let owner = run_owner(&tenant);
                let started = {
                    let _turn = self.starts.take(&tenant.name).await;
                    self.runtime
                        .start(start, &owner)
                        .await
                        .map_err(|err| ApiError::from(err).at("start"))?
                };
                (started.live.run_id.clone(), started.events)
            }
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
        let stream = ReceiverStream::new(events)
            .map(|event| event.map_err(|err| Status::from(ApiError::from(err))));
        Ok(Response::new(Box::pin(stream)))
    }

    type ApprovalsStream = EventStream<pb::ApprovalRequest>;

    async fn approvals(
        &self,
        request: Request<Streaming<pb::ApprovalDecision>>,
    ) -> Result<Response<Self::ApprovalsStream>, Status> {
        let tenant = approver(caller(&request)?)?;
        let mut decisions = request.into_inner();
        let (sender, receiver) = mpsc::channel(CONSOLE_BUFFER);
        self.feed_approvals(tenant.clone(), None, sender.clone());
        let runtime = self.runtime.clone();
        tokio::spawn(async move {
            while let Ok(Some(decision)) = decisions.message().await {
                if let Err(err) = decide_as(&runtime, &tenant, &decision).await {
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

    type WatchRunStream = EventStream<pb::RunEvent>;

    async fn watch_run(
        &self,
        request: Request<pb::AttachRun>,
    ) -> Result<Response<Self::WatchRunStream>, Status> {
        let tenant = caller(&request)?;
        let (_, events) = self.attach(&tenant, request.get_ref()).await?;
        let stream = ReceiverStream::new(events)
            .map(|event| event.map_err(|err| Status::from(ApiError::from(err))));
        Ok(Response::new(Box::pin(stream)))
    }

    type WatchApprovalsStream = EventStream<pb::ApprovalRequest>;

    async fn watch_approvals(
        &self,
        request: Request<pb::WatchApprovalsRequest>,
    ) -> Result<Response<Self::WatchApprovalsStream>, Status> {
        let tenant = approver(caller(&request)?)?;
        let run = match request.get_ref().run_id.as_str() {
            "" => None,
            run_id => Some(self.owned_run(&tenant, run_id, "run_id").await?),
        };
        let (sender, receiver) = mpsc::channel(CONSOLE_BUFFER);
        self.feed_approvals(tenant, run, sender);
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn decide_approval(
        &self,
        request: Request<pb::ApprovalDecision>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        let tenant = approver(caller(&request)?)?;
        decide_as(&self.runtime, &tenant, request.get_ref()).await?;
        Ok(Response::new(pb::DecideApprovalResponse {}))
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = self.owned_run(&tenant, &request.run_id, "run_id").await?;
        self.runtime
            .cancel(&run_id, &request.reason)
            .await
            .map_err(|err| ApiError::from(err).at("run_id"))?;
        Ok(Response::new(pb::CancelRunResponse {}))
    }

    async fn get_run(
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

    async fn list_runs(
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
            next_page_token: next.as_ref().map(page_token).unwrap_or_default(),
        }))
    }

    type WatchRunsStream = EventStream<pb::RunInfo>;

    async fn watch_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<Self::WatchRunsStream>, Status> {
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
                                    .is_none_or(|session| run.session_id == *session);
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

    async fn get_trace(
        &self,
        request: Request<pb::GetTraceRequest>,
    ) -> Result<Response<pb::Trace>, Status> {
        let tenant = caller(&request)?;
        let run_id = self
            .owned_run(&tenant, &request.into_inner().run_id, "run_id")
            .await?;
        let (run, spans) = self
            .runtime
            .trace(&run_id)
            .await
            .map_err(|err| ApiError::from(err).at("run_id"))?;
        Ok(Response::new(pb::Trace {
            run_id: run.run_id.into_string(),
            trace_id: run.trace_id.to_string(),
            spans,
        }))
    }

    async fn get_cassette(
        &self,
        request: Request<pb::GetCassetteRequest>,
    ) -> Result<Response<pb::GetCassetteResponse>, Status> {
        let tenant = caller(&request)?;
        let run_id = self
            .owned_run(&tenant, &request.into_inner().run_id, "run_id")
            .await?;
        let cassette = self
            .runtime
            .cassette(&run_id)
            .await
            .map_err(|err| ApiError::from(err).at("run_id"))?;
        Ok(Response::new(cassette))
    }

    async fn list_changes(
        &self,
        request: Request<pb::ListChangesRequest>,
    ) -> Result<Response<pb::ListChangesResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = self.owned_run(&tenant, &request.run_id, "run_id").await?;
        let (run, mut steps) = self
            .runtime
            .changes(&run_id)
            .await
            .map_err(|err| ApiError::from(err).at("run_id"))?;
        if request.step > run.steps {
            return Err(
                ApiError::invalid("step", format!("run {run_id} has {} steps", run.steps)).into(),
            );
        }
        if request.step != 0 {
            steps.retain(|step| step.step == request.step);
        }
        let (steps, next_offset, total_changes) =
            changes_page(steps, request.offset, request.limit);
        Ok(Response::new(pb::ListChangesResponse {
            workspace: run.workspace.unwrap_or_default(),
            steps,
            next_offset,
            total_changes,
        }))
    }

    async fn read_blob(
        &self,
        request: Request<pb::ReadBlobRequest>,
    ) -> Result<Response<pb::ReadBlobResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = self.owned_run(&tenant, &request.run_id, "run_id").await?;
        let content = self
            .runtime
            .read_blob(&run_id, &request.digest)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ReadBlobResponse { content }))
    }

    async fn fork_run(
        &self,
        request: Request<pb::ForkRunRequest>,
    ) -> Result<Response<pb::RunInfo>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = self.owned_run(&tenant, &request.run_id, "run_id").await?;
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
        self.check_start(&tenant, &mut fork.start)?;
        let owner = run_owner(&tenant);
        let check = {
            let (runtime, tenant) = (self.runtime.clone(), tenant.clone());
            move |copy: &std::path::Path| {
                allowed_workspace(&runtime, &tenant, copy)
                    .map_err(|err| format!("the copy {} is refused: {err}", copy.display()))
            }
        };
        let live = {
            let _turn = self.starts.take(&tenant.name).await;
            self.runtime
                .start_fork(fork, &owner, check)
                .await
                .map_err(ApiError::from)?
        };
        let run = self
            .runtime
            .run(&live.run_id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(run_info(run)))
    }

    async fn revert_run(
        &self,
        request: Request<pb::RevertRunRequest>,
    ) -> Result<Response<pb::RevertRunResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = self.owned_run(&tenant, &request.run_id, "run_id").await?;
        let report = self
            .runtime
            .revert(&run_id, request.to_step, request.force)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::RevertRunResponse {
            restored: report.restored,
            removed: report.removed,
            unrestorable: report
                .unrestorable
                .into_iter()
                .map(|conflict| pb::RevertConflict {
                    path: conflict.path,
                    reason: conflict.reason,
                })
                .collect(),
        }))
    }
}

/// What a ListRuns or WatchRuns request asks for: the filter (always the caller's tenant),
/// the page size, and where the page starts.
fn runs_query(
    tenant: &Tenant,
    request: &pb::ListRunsRequest,
) -> Result<(RunFilter, usize, Option<RunCursor>), ApiError> {
    let state = match pb::RunState::try_from(request.state) {
        Ok(pb::RunState::Unspecified) => None,
        Ok(pb::RunState::Running) => Some(RunState::Running),
        Ok(pb::RunState::WaitingForApproval) => Some(RunState::WaitingForApproval),
        Ok(pb::RunState::Finished) => Some(RunState::Finished),
        Err(_) => {
            return Err(ApiError::invalid(
                "state",
                format!("unknown run state {}", request.state),
            ));
        }
    };
    let session_id = wire::non_empty(&request.session_id)
        .map(|id| parse_id(SessionId::parse, id, "session_id"))
        .transpose()?;
    let after = match request.page_token.as_str() {
        "" => None,
        token => Some(parse_page_token(token)?),
    };
    let filter = RunFilter {
        session_id,
        state,
        tenant: Some(tenant.name.clone()),
    };
    let size = match request.page_size {
        0 => DEFAULT_PAGE_SIZE,
        size => size.min(MAX_PAGE_SIZE),
    };
    Ok((filter, size as usize, after))
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
