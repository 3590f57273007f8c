//! A run's changes to its workspace: `ListChanges` (the change sets of its tool calls, step
//! by step, a page at a time), `ReadBlob` (a content a change set refers to, before or after)
//! and `RevertRun` (the workspace back to a step).

use std::sync::Arc;

use airlock_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::access::owned_run;
use crate::agent::{AgentRuntime, changes_page};
use crate::api::auth::caller;
use crate::api::error::ApiError;
use crate::audit::Act;
use crate::changes::Conflict;

/// The change calls of the `Agent` service.
pub(super) struct Changes {
    runtime: Arc<AgentRuntime>,
}

impl Changes {
    pub(super) fn new(runtime: Arc<AgentRuntime>) -> Changes {
        Changes { runtime }
    }

    pub(super) async fn list(
        &self,
        request: Request<pb::ListChangesRequest>,
    ) -> Result<Response<pb::ListChangesResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = owned_run(&self.runtime, &tenant, &request.run_id, "run_id").await?;
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

    pub(super) async fn read_blob(
        &self,
        request: Request<pb::ReadBlobRequest>,
    ) -> Result<Response<pb::ReadBlobResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = owned_run(&self.runtime, &tenant, &request.run_id, "run_id").await?;
        let content = self
            .runtime
            .read_blob(&run_id, &request.digest)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ReadBlobResponse { content }))
    }

    pub(super) async fn revert(
        &self,
        request: Request<pb::RevertRunRequest>,
    ) -> Result<Response<pb::RevertRunResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let run_id = owned_run(&self.runtime, &tenant, &request.run_id, "run_id").await?;
        if request.dry_run {
            let (report, conflicts) = self
                .runtime
                .preview_revert(&run_id, request.to_step)
                .await
                .map_err(ApiError::from)?;
            return Ok(Response::new(pb::RevertRunResponse {
                restored: report.restored,
                removed: report.removed,
                unrestorable: Vec::new(),
                conflicts: conflicts.into_iter().map(revert_conflict).collect(),
            }));
        }
        let report = self
            .runtime
            .revert(&run_id, request.to_step, request.force)
            .await
            .map_err(ApiError::from)?;
        self.runtime.auditor().record(
            Act::new(&tenant.name, "run.reverted")
                .actor(&tenant.name)
                .subject(run_id.as_str())
                .reason(if request.force {
                    "a run's workspace was put back before a step, over conflicts"
                } else {
                    "a run's workspace was put back before a step"
                })
                .detail("to_step", request.to_step)
                .detail("restored", report.restored.len())
                .detail("removed", report.removed.len())
                .detail("unrestorable", report.unrestorable.len()),
        );
        Ok(Response::new(pb::RevertRunResponse {
            restored: report.restored,
            removed: report.removed,
            unrestorable: report
                .unrestorable
                .into_iter()
                .map(revert_conflict)
                .collect(),
            conflicts: Vec::new(),
        }))
    }
}

fn revert_conflict(conflict: Conflict) -> pb::RevertConflict {
    pb::RevertConflict {
        path: conflict.path,
        reason: conflict.reason,
    }
}
