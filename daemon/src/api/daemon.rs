//! `airlock.v1.Daemon`: what a client learns about the daemon before anything else — its
//! version, the workspace roots the caller may use, and the limits its requests must keep —
//! and, for the operator, garbage collection and trust in hosted MCP servers' tools.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use airlock_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::auth::caller;
use super::error::ApiError;
use super::limits;
use super::mcp_trust::McpTrust;
use super::tenants::DEFAULT_TENANT;
use crate::agent::MAX_INPUT_BYTES;
use crate::output::MAX_PAGE_BYTES;
use crate::retention::Retention;
use crate::tools::Executor;

pub struct DaemonService {
    executor: Arc<Executor>,
    retention: Arc<Retention>,
    /// Reviews of hosted MCP servers' listings.
    trust: McpTrust,
    /// The models offered for new runs (`[console] models`).
    models: Vec<String>,
}

impl DaemonService {
    pub fn new(
        executor: Arc<Executor>,
        retention: Arc<Retention>,
        trust_dir: PathBuf,
        models: Vec<String>,
    ) -> DaemonService {
        DaemonService {
            trust: McpTrust::new(executor.clone(), trust_dir),
            executor,
            retention,
            models,
        }
    }
}

/// Fails unless `tenant` is the daemon's operator, who alone may do `what`.
pub(super) fn operator_only(tenant: &super::tenants::Tenant, what: &str) -> Result<(), ApiError> {
    if tenant.name == DEFAULT_TENANT {
        return Ok(());
    }
    Err(ApiError::Forbidden {
        tenant: tenant.name.clone(),
        what: format!(
            "may not {what}: only the `{DEFAULT_TENANT}` tenant, the daemon's operator, may"
        ),
    })
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
            models: self.models.clone(),
        }))
    }

    async fn collect_garbage(
        &self,
        request: Request<pb::CollectGarbageRequest>,
    ) -> Result<Response<pb::CollectGarbageResponse>, Status> {
        let tenant = caller(&request)?;
        // It deletes every tenant's old runs: the operator's call alone.
        operator_only(&tenant, "collect garbage")?;
        let older_than = match request.into_inner().older_than_ms {
            0 => self.retention.configured().ok_or_else(|| {
                ApiError::invalid(
                    "older_than_ms",
                    "required: this daemon has no configured retention ([store] \
                     retention_days), so name the age to delete from",
                )
            })?,
            millis => Duration::from_millis(millis),
        };
        let swept = self
            .retention
            .sweep(older_than)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::CollectGarbageResponse {
            older_than_ms: u64::try_from(older_than.as_millis()).unwrap_or(u64::MAX),
            runs: swept.runs,
            sessions: swept.sessions,
            outputs: swept.outputs,
            executions: swept.executions,
        }))
    }

    async fn trust_mcp_server(
        &self,
        request: Request<pb::TrustMcpServerRequest>,
    ) -> Result<Response<pb::TrustMcpServerResponse>, Status> {
        let tenant = caller(&request)?;
        // Trust decides what every tenant's runs may call.
        operator_only(&tenant, "change what is trusted")?;
        Ok(Response::new(
            self.trust.decide(&tenant, request.into_inner())?,
        ))
    }

    async fn list_mcp_servers(
        &self,
        request: Request<pb::ListMcpServersRequest>,
    ) -> Result<Response<pb::ListMcpServersResponse>, Status> {
        let tenant = caller(&request)?;
        // What every tenant's runs may call, and from where: the operator's to review.
        operator_only(&tenant, "review hosted MCP servers")?;
        Ok(Response::new(self.trust.list()?))
    }
}
