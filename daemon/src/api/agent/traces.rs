//! What a run left to look back on: `GetTrace` (its spans) and `GetCassette` (a finished
//! run's model exchanges, for the `replay` model to play back).

use std::sync::Arc;

use airlock_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::access::owned_run;
use crate::agent::AgentRuntime;
use crate::api::auth::caller;
use crate::api::error::ApiError;

/// The trace calls of the `Agent` service.
pub(super) struct Traces {
    runtime: Arc<AgentRuntime>,
}

impl Traces {
    pub(super) fn new(runtime: Arc<AgentRuntime>) -> Traces {
        Traces { runtime }
    }

    pub(super) async fn trace(
        &self,
        request: Request<pb::GetTraceRequest>,
    ) -> Result<Response<pb::Trace>, Status> {
        let tenant = caller(&request)?;
        let run_id = owned_run(
            &self.runtime,
            &tenant,
            &request.into_inner().run_id,
            "run_id",
        )
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

    pub(super) async fn cassette(
        &self,
        request: Request<pb::GetCassetteRequest>,
    ) -> Result<Response<pb::GetCassetteResponse>, Status> {
        let tenant = caller(&request)?;
        let run_id = owned_run(
            &self.runtime,
            &tenant,
            &request.into_inner().run_id,
            "run_id",
        )
        .await?;
        let cassette = self
            .runtime
            .cassette(&run_id)
            .await
            .map_err(|err| ApiError::from(err).at("run_id"))?;
        Ok(Response::new(cassette))
    }
}
