//! `airlock.v1.Daemon`: what a client learns about the daemon before anything else — its
//! version, the workspace roots the caller may use, and the limits its requests must keep.

use std::sync::Arc;

use airlock_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::auth::caller;
use super::limits;
use crate::agent::MAX_INPUT_BYTES;
use crate::output::MAX_PAGE_BYTES;
use crate::tools::Executor;

pub struct DaemonService {
    executor: Arc<Executor>,
}

impl DaemonService {
    pub fn new(executor: Arc<Executor>) -> DaemonService {
        DaemonService { executor }
    }
}

#[tonic::async_trait]
impl pb::daemon_server::Daemon for DaemonService {
    async fn get_info(
        &self,
        request: Request<pb::GetInfoRequest>,
    ) -> Result<Response<pb::DaemonInfo>, Status> {
        let tenant = caller(&request)?;
        let roots = tenant.roots().unwrap_or_else(|| self.executor.workspaces());
        Ok(Response::new(pb::DaemonInfo {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            tenant: tenant.name.clone(),
            workspace_roots: roots
                .roots()
                .iter()
                .map(|root| root.to_string_lossy().into_owned())
                .collect(),
            limits: Some(pb::DaemonLimits {
                max_arguments_bytes: limits::MAX_ARGUMENTS_BYTES as u64,
                max_input_bytes: MAX_INPUT_BYTES as u64,
                max_request_bytes: limits::MAX_DECODING_MESSAGE_BYTES as u64,
                max_output_page_bytes: MAX_PAGE_BYTES,
                max_concurrent_runs: tenant.max_concurrent_runs,
                max_concurrent_executions: tenant.max_concurrent_executions,
            }),
        }))
    }
}
