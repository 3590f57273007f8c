//! Approver consoles: `Approvals` (watch and answer on one stream), `WatchApprovals`,
//! `DecideApproval`. A console sees, and may answer, only the requests of the tenants its
//! own may answer for; another tenant's request is answered as if it were not pending.

use std::sync::Arc;

use airlock_proto::v1 as pb;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::access::{CONSOLE_BUFFER, EventStream, approver, owned_run};
use crate::agent::AgentRuntime;
use crate::api::auth::caller;
use crate::api::error::ApiError;
use crate::api::request::verdict;
use crate::api::tenants::Tenant;
use crate::ids::RunId;
use crate::policy::DecisionError;

/// The approval calls of the `Agent` service.
pub(super) struct Approvals {
    runtime: Arc<AgentRuntime>,
}

impl Approvals {
    pub(super) fn new(runtime: Arc<AgentRuntime>) -> Approvals {
        Approvals { runtime }
    }

    pub(super) async fn console(
        &self,
        request: Request<Streaming<pb::ApprovalDecision>>,
    ) -> Result<Response<EventStream<pb::ApprovalRequest>>, Status> {
        let tenant = approver(caller(&request)?)?;
        let mut decisions = request.into_inner();
        let (sender, receiver) = mpsc::channel(CONSOLE_BUFFER);
        self.feed(tenant.clone(), None, sender.clone());
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

    pub(super) async fn watch(
        &self,
        request: Request<pb::WatchApprovalsRequest>,
    ) -> Result<Response<EventStream<pb::ApprovalRequest>>, Status> {
        let tenant = approver(caller(&request)?)?;
        let run = match request.get_ref().run_id.as_str() {
            "" => None,
            run_id => Some(owned_run(&self.runtime, &tenant, run_id, "run_id").await?),
        };
        let (sender, receiver) = mpsc::channel(CONSOLE_BUFFER);
        self.feed(tenant, run, sender);
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    pub(super) async fn decide(
        &self,
        request: Request<pb::ApprovalDecision>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        let tenant = approver(caller(&request)?)?;
        decide_as(&self.runtime, &tenant, request.get_ref()).await?;
        Ok(Response::new(pb::DecideApprovalResponse {}))
    }

    /// Sends on `outgoing` every pending approval request `tenant` may answer (only `run`'s,
    /// when given), then every change to them, until the receiver goes — in a fleet, those
    /// of the runs other daemons execute too.
    fn feed(
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
}

/// Answers `decision` for `tenant`'s console (or an approval link sent for `tenant`):
/// another tenant's request is answered as if it were not pending at all.
pub(in crate::api) async fn decide_as(
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
