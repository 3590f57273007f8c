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
use super::tenants::DEFAULT_TENANT;
use crate::agent::MAX_INPUT_BYTES;
use crate::audit::Act;
use crate::engine::mcp::trust::AcceptError;
use crate::output::MAX_PAGE_BYTES;
use crate::retention::Retention;
use crate::tools::Executor;

pub struct DaemonService {
    executor: Arc<Executor>,
    retention: Arc<Retention>,
    /// Where hosted MCP servers' trust records are.
    trust_dir: PathBuf,
}

impl DaemonService {
    pub fn new(
        executor: Arc<Executor>,
        retention: Arc<Retention>,
        trust_dir: PathBuf,
    ) -> DaemonService {
        DaemonService {
            executor,
            retention,
            trust_dir,
        }
    }
}

/// Fails unless `tenant` is the daemon's operator, who alone may do `what`.
fn operator_only(tenant: &super::tenants::Tenant, what: &str) -> Result<(), ApiError> {
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
        let request = request.into_inner();
        let server = request.server;
        let hosted = self.executor.registry().loaded().any(|tool| {
            tool.manifest
                .origin
                .as_ref()
                .is_some_and(|origin| origin.server == server)
        });
        let recorded = crate::engine::mcp::trust::is_recorded(&self.trust_dir, &server);
        if !hosted && !recorded {
            return Err(ApiError::NotFound {
                kind: "MCP server",
                id: server,
            }
            .into());
        }
        if request.show {
            let review = crate::engine::mcp::trust::review(&self.trust_dir, &server)
                .map_err(|message| ApiError::invalid("server", message))?;
            let json = |definition: Option<serde_json::Value>| {
                definition
                    .map(|value| value.to_string())
                    .unwrap_or_default()
            };
            return Ok(Response::new(pb::TrustMcpServerResponse {
                accepted: Vec::new(),
                listing: review.listing,
                differences: review
                    .differences
                    .into_iter()
                    .map(|difference| pb::McpToolDifference {
                        tool: difference.tool,
                        trusted_json: json(difference.trusted),
                        seen_json: json(difference.seen),
                    })
                    .collect(),
            }));
        }
        let reviewed = Some(request.reviewed.as_str()).filter(|reviewed| !reviewed.is_empty());
        let accepted = crate::engine::mcp::trust::accept_seen(&self.trust_dir, &server, reviewed)
            .map_err(|err| match err {
            AcceptError::Record(message) => ApiError::invalid("server", message),
            changed @ AcceptError::ChangedSinceReview { .. } => {
                ApiError::Stale(changed.to_string()).at("reviewed")
            }
        })?;
        tracing::warn!(%server, ?accepted, ?reviewed, tenant = %tenant.name, "MCP server's tools trusted as last listed");
        self.executor.auditor().record(
            Act::new(DEFAULT_TENANT, "mcp.trust.accepted")
                .actor(&tenant.name)
                .subject(&server)
                .reason("an operator trusted the listing last seen")
                .detail("reviewed", reviewed.unwrap_or_default())
                .detail("changed", serde_json::json!(accepted)),
        );
        Ok(Response::new(pb::TrustMcpServerResponse {
            accepted,
            differences: Vec::new(),
            listing: String::new(),
        }))
    }
}
