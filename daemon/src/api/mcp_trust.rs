//! The operator's review of hosted MCP servers' tool listings, for `airlock.v1.Daemon`: which
//! servers there are and how far each differs from what is trusted (`ListMcpServers`), the
//! differences themselves, and accepting or refusing a listing (`TrustMcpServer`). The
//! callers check that the caller is the operator; the records are `engine::mcp::trust`'s.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use airlock_proto::v1 as pb;

use super::error::ApiError;
use super::tenants::{DEFAULT_TENANT, Tenant};
use crate::audit::Act;
use crate::engine::mcp::trust::{self, AcceptError};
use crate::tools::Executor;

pub(super) struct McpTrust {
    executor: Arc<Executor>,
    /// Where hosted MCP servers' trust records are.
    trust_dir: PathBuf,
}

impl McpTrust {
    pub(super) fn new(executor: Arc<Executor>, trust_dir: PathBuf) -> McpTrust {
        McpTrust {
            executor,
            trust_dir,
        }
    }

    /// How many of `server`'s tools this daemon serves.
    fn served(&self, server: &str) -> usize {
        self.executor
            .registry()
            .loaded()
            .filter(|tool| {
                tool.manifest
                    .origin
                    .as_ref()
                    .is_some_and(|origin| origin.server == server)
            })
            .count()
    }

    /// Every server this daemon serves tools of or has a record of, with its review's
    /// figures.
    pub(super) fn list(&self) -> Result<pb::ListMcpServersResponse, ApiError> {
        let mut servers: BTreeSet<String> = trust::recorded_servers(&self.trust_dir)
            .into_iter()
            .collect();
        servers.extend(
            self.executor
                .registry()
                .loaded()
                .filter_map(|tool| tool.manifest.origin.as_ref())
                .map(|origin| origin.server.clone()),
        );
        let servers = servers
            .into_iter()
            .map(|server| {
                // A server hosted but never listed yet (it failed to start) has no record:
                // nothing to review.
                let review = trust::review(&self.trust_dir, &server).ok();
                pb::McpServerInfo {
                    tools_served: u32::try_from(self.served(&server)).unwrap_or(u32::MAX),
                    differences: review.as_ref().map_or(0, |review| {
                        u32::try_from(review.differences.len()).unwrap_or(u32::MAX)
                    }),
                    listing: review
                        .as_ref()
                        .map(|review| review.listing.clone())
                        .unwrap_or_default(),
                    refused: review.is_some_and(|review| review.refused),
                    server,
                }
            })
            .collect();
        Ok(pb::ListMcpServersResponse { servers })
    }

    /// A review (`show`), an acceptance or a refusal of `request.server`'s listing.
    pub(super) fn decide(
        &self,
        tenant: &Tenant,
        request: pb::TrustMcpServerRequest,
    ) -> Result<pb::TrustMcpServerResponse, ApiError> {
        let server = request.server;
        let recorded = trust::is_recorded(&self.trust_dir, &server);
        if self.served(&server) == 0 && !recorded {
            return Err(ApiError::NotFound {
                kind: "MCP server",
                id: server,
            });
        }
        if request.show {
            let review = trust::review(&self.trust_dir, &server)
                .map_err(|message| ApiError::invalid("server", message))?;
            let json = |definition: Option<serde_json::Value>| {
                definition
                    .map(|value| value.to_string())
                    .unwrap_or_default()
            };
            return Ok(pb::TrustMcpServerResponse {
                accepted: Vec::new(),
                listing: review.listing,
                refused: review.refused,
                differences: review
                    .differences
                    .into_iter()
                    .map(|difference| pb::McpToolDifference {
                        tool: difference.tool,
                        trusted_json: json(difference.trusted),
                        seen_json: json(difference.seen),
                    })
                    .collect(),
            });
        }
        let reviewed = Some(request.reviewed.as_str()).filter(|reviewed| !reviewed.is_empty());
        let failed = |err| match err {
            AcceptError::Record(message) => ApiError::invalid("server", message),
            changed @ AcceptError::ChangedSinceReview { .. } => {
                ApiError::Stale(changed.to_string()).at("reviewed")
            }
        };
        if request.refuse {
            let listing = trust::refuse_seen(&self.trust_dir, &server, reviewed).map_err(failed)?;
            tracing::warn!(%server, %listing, tenant = %tenant.name, "MCP server's listing refused");
            self.executor.auditor().record(
                Act::new(DEFAULT_TENANT, "mcp.trust.refused")
                    .actor(&tenant.name)
                    .subject(&server)
                    .reason("an operator refused the listing last seen")
                    .detail("listing", listing.as_str()),
            );
            return Ok(pb::TrustMcpServerResponse {
                accepted: Vec::new(),
                differences: Vec::new(),
                listing,
                refused: true,
            });
        }
        let accepted = trust::accept_seen(&self.trust_dir, &server, reviewed).map_err(failed)?;
        tracing::warn!(%server, ?accepted, ?reviewed, tenant = %tenant.name, "MCP server's tools trusted as last listed");
        self.executor.auditor().record(
            Act::new(DEFAULT_TENANT, "mcp.trust.accepted")
                .actor(&tenant.name)
                .subject(&server)
                .reason("an operator trusted the listing last seen")
                .detail("reviewed", reviewed.unwrap_or_default())
                .detail("changed", serde_json::json!(accepted)),
        );
        Ok(pb::TrustMcpServerResponse {
            accepted,
            differences: Vec::new(),
            listing: String::new(),
            refused: false,
        })
    }
}
