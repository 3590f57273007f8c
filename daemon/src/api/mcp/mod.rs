//! airlock's tools over MCP: the Streamable HTTP endpoint `airlockd --mcp-listen ADDR` serves
//! at `/mcp`, for MCP clients that speak HTTP (and for the MCP Inspector).
//!
//! The same tokens and tenants as gRPC: every request carries `Authorization: Bearer
//! <token>` — one of the daemon's, or, with `[mcp_oauth]`, an access token of the
//! configured issuer (`api/oauth`, which also serves the protected-resource metadata) — and
//! a tenant sees and calls its own tools in its own workspaces. The protocol — both
//! revisions: sessions and SSE streams for 2025-11-25, stateless requests for 2026-07-28,
//! `Host` and `Origin` checks against DNS rebinding — is rmcp's (`StreamableHttpService`);
//! this module authenticates, and `handler.rs` translates MCP calls into the executor's,
//! with approvals as `direct_approval.rs` asks them (in-band for 2026-07-28, `mrtr.rs`) and
//! a hosted server's questions relayed to the calling client (`relay.rs`); what a client is
//! told of a finished or refused call is worded once, in `replies.rs`.
//!
//! A call's workspace is the `workspace` query parameter of the endpoint's URL
//! (`http://127.0.0.1:7412/mcp?workspace=/srv/project`): MCP itself has no notion of one.
//!
//! The walls are the gRPC edge's, through the same code: calls are admitted by
//! `direct_call` (tools, roots, argument size, the tenant's cap counted across both
//! edges), and a session is its opener's alone (`sessions.rs`). An approval question goes to
//! the call that raised it, on that request's own stream, and to the tenant's approvers.
//!
//! Every byte of a request is a stranger's: no code of this edge indexes or slices (the
//! lints below), and the fuzz target `mcp_edge` drives [`route`] with arbitrary methods,
//! paths, queries, headers and bodies, its corpus replayed by the tests.
#![deny(clippy::indexing_slicing, clippy::string_slice)]

mod handler;
mod mrtr;
#[cfg(any(test, feature = "testing"))]
pub mod probe;
#[cfg(test)]
mod probe_tests;
mod relay;
mod replies;
mod sessions;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::auth::ConnectionAudit;
use super::direct_call::DirectCalls;
use super::oauth::{self, Refusal, ResourceServer};
use super::tenants::{Tenant, Tenants};
use crate::audit::Auditor;
use sessions::Sessions;

pub use handler::ToolServer;

/// The one path the endpoint serves.
const PATH: &str = "/mcp";

/// The header that names a request's session.
const SESSION_HEADER: &str = "mcp-session-id";

/// The tenant a request was authenticated as, for the handler.
#[derive(Clone)]
pub struct McpCaller(pub Arc<super::tenants::Tenant>);

type Service = StreamableHttpService<ToolServer, LocalSessionManager>;

/// The endpoint: rmcp's service, who opened each of its sessions, and who may call.
#[derive(Clone)]
pub struct Endpoint {
    service: Service,
    sessions: Arc<Sessions>,
    tenants: Arc<Tenants>,
    /// Access tokens of an OAuth authorization server, when one is configured.
    oauth: Option<Arc<ResourceServer>>,
    /// Where each connection's token outcome is recorded.
    audit: ConnectionAudit,
}

/// Serves MCP on `listener` until `stop` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tenants: Arc<Tenants>,
    calls: Arc<DirectCalls>,
    oauth: Option<Arc<ResourceServer>>,
    stop: CancellationToken,
) {
    let local = listener.local_addr().ok();
    let auditor = calls.executor.auditor().clone();
    let endpoint = Endpoint::new(local, tenants, calls, &stop)
        .with_oauth(oauth)
        .with_auditor(auditor);
    tracing::info!(listen = ?local, path = PATH, "serving MCP over Streamable HTTP");
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(error = %err, "cannot accept an MCP connection");
                continue;
            }
        };
        let endpoint = endpoint.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let handle = hyper::service::service_fn(move |request| {
                let endpoint = endpoint.clone();
                async move { Ok::<_, Infallible>(endpoint.route(request, peer).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handle);
            tokio::pin!(connection);
            tokio::select! {
                _ = &mut connection => {}
                () = stop.cancelled() => connection.as_mut().graceful_shutdown(),
            }
        });
    }
}

impl Endpoint {
    /// The endpoint of a listener at `local` (whose address is a valid `Host`).
    pub fn new(
        local: Option<SocketAddr>,
        tenants: Arc<Tenants>,
        calls: Arc<DirectCalls>,
        stop: &CancellationToken,
    ) -> Endpoint {
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = stop.child_token();
        if let Some(local) = local {
            // The address the endpoint was asked to serve is a valid Host too (a name that
            // resolves to it is not: that is what a DNS-rebinding attack looks like).
            config
                .allowed_hosts
                .extend([local.ip().to_string(), local.to_string()]);
        }
        // Browsers send an Origin: only pages served from loopback may call; a page elsewhere
        // that reached this port (DNS rebinding, a malicious site) is refused.
        config.allowed_origins = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
            .map(str::to_owned)
            .to_vec();
        let server = ToolServer::new(calls);
        let manager = Arc::new(LocalSessionManager::default());
        let service: Service =
            StreamableHttpService::new(move || Ok(server.for_session()), manager.clone(), config);
        Endpoint {
            service,
            sessions: Arc::new(Sessions::new(manager)),
            tenants,
            oauth: None,
            audit: ConnectionAudit::default(),
        }
    }

    /// Records each connection's token outcome in `auditor`'s log.
    pub fn with_auditor(mut self, auditor: Auditor) -> Endpoint {
        self.audit = ConnectionAudit::new(auditor);
        self
    }

    /// The endpoint taking `oauth`'s access tokens too, and serving its metadata.
    pub fn with_oauth(mut self, oauth: Option<Arc<ResourceServer>>) -> Endpoint {
        self.oauth = oauth;
        self
    }

    /// The tenant a request's token stands for: one of the daemon's tokens, else an access
    /// token of the OAuth issuer.
    async fn authenticate(&self, headers: &http::HeaderMap) -> Result<Arc<Tenant>, Refusal> {
        let token = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                value
                    .strip_prefix("Bearer ")
                    .or_else(|| value.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|token| !token.is_empty())
            .ok_or(Refusal::Missing)?;
        if let Some(tenant) = self.tenants.identify(token) {
            return Ok(tenant);
        }
        match &self.oauth {
            Some(oauth) => oauth.tenant_for(token).await,
            None => Err(Refusal::Invalid("not a token of this daemon".into())),
        }
    }

    /// The answer to a request that is not served as a tenant: 401 (403 for a token that
    /// names no tenant, 503 when the issuer's keys cannot be had) with the challenge that
    /// tells an OAuth client where to go.
    fn refuse(&self, refusal: &Refusal) -> Response<BoxBody<Bytes, Infallible>> {
        let Some(oauth) = &self.oauth else {
            let mut response = plain(
                StatusCode::UNAUTHORIZED,
                "send the daemon's access token: Authorization: Bearer <token>",
            );
            response.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
            return response;
        };
        let (status, text) = match refusal {
            Refusal::Missing => (
                StatusCode::UNAUTHORIZED,
                "send an access token: Authorization: Bearer <token>; the resource metadata                  names the authorization server"
                    .to_owned(),
            ),
            Refusal::Invalid(reason) => (StatusCode::UNAUTHORIZED, format!("{reason}\n")),
            Refusal::Insufficient(reason) => (StatusCode::FORBIDDEN, format!("{reason}\n")),
            Refusal::Unavailable(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the authorization server's keys cannot be had now: {reason}\n"),
            ),
        };
        let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
        *response.status_mut() = status;
        if let Ok(challenge) = http::HeaderValue::from_str(&oauth.challenge(refusal)) {
            response
                .headers_mut()
                .insert(http::header::WWW_AUTHENTICATE, challenge);
        }
        response
    }

    /// The protected-resource metadata (RFC 9728), to anyone: it is what a client without
    /// a token reads first.
    fn metadata(&self) -> Response<BoxBody<Bytes, Infallible>> {
        let Some(oauth) = &self.oauth else {
            return plain(StatusCode::NOT_FOUND, "this endpoint takes no OAuth tokens");
        };
        let mut response =
            Response::new(Full::new(Bytes::from(oauth.metadata().to_string())).boxed());
        let headers = response.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        // Browser-based clients (the Inspector's web UI) read it from another origin.
        headers.insert(
            http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
            http::HeaderValue::from_static("*"),
        );
        response
    }

    /// Authenticates a request, holds it to its tenant's sessions, and hands it to rmcp.
    pub async fn route<B>(
        &self,
        mut request: Request<B>,
        peer: SocketAddr,
    ) -> Response<BoxBody<Bytes, Infallible>>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::fmt::Display,
    {
        if request.method() == http::Method::GET && oauth::is_metadata_path(request.uri().path()) {
            return self.metadata();
        }
        if request.uri().path() != PATH {
            return plain(StatusCode::NOT_FOUND, "airlock serves MCP at /mcp");
        }
        let tenant = match self.authenticate(request.headers()).await {
            Ok(tenant) => {
                self.audit.record("mcp", &peer.to_string(), Ok(&tenant));
                tenant
            }
            Err(refusal) => {
                tracing::debug!(%peer, ?refusal, "MCP request without a valid token");
                let why = match &refusal {
                    Refusal::Missing => "no bearer token",
                    Refusal::Invalid(why)
                    | Refusal::Insufficient(why)
                    | Refusal::Unavailable(why) => why.as_str(),
                };
                self.audit.record("mcp", &peer.to_string(), Err(why));
                return self.refuse(&refusal);
            }
        };
        let session = match request.headers().get(SESSION_HEADER).map(|id| id.to_str()) {
            Some(Ok(id)) => Some(id.to_owned()),
            Some(Err(_)) => return plain(StatusCode::BAD_REQUEST, "the session id is not text"),
            None => None,
        };
        let method = request.method().clone();
        let refusal = match &session {
            Some(id) => self.sessions.check(&tenant.name, id).err().map(|_| {
                tracing::debug!(%peer, tenant = %tenant.name, "MCP request for a session the tenant did not open");
                plain(StatusCode::NOT_FOUND, "no such MCP session")
            }),
            // A 2026-07-28 request has no session and opens none: not held to the cap.
            None if method == http::Method::POST
                && sessions::may_open_session(request.headers()) =>
            {
                self.sessions.may_open(&tenant.name).await.err().map(|_| {
                    plain(
                        StatusCode::TOO_MANY_REQUESTS,
                        "this tenant holds the most MCP sessions it may; close one (DELETE) first",
                    )
                })
            }
            None => None,
        };
        if let Some(refusal) = refusal {
            return refusal;
        }
        let tenant_name = tenant.name.clone();
        request.extensions_mut().insert(McpCaller(tenant));
        let mut response = self.service.handle(request).await.map(|body| body.boxed());
        match session {
            // A new session: its opener's alone from now on.
            None => {
                let opened = response
                    .headers()
                    .get(SESSION_HEADER)
                    .and_then(|id| id.to_str().ok())
                    .map(str::to_owned);
                if let Some(id) = opened
                    && response.status().is_success()
                {
                    self.sessions.opened(&tenant_name, id).await;
                }
            }
            // Closed: the MCP SDKs read 200 as success (rmcp answers 202, which the Python
            // SDK logs as a failed termination).
            Some(id) if method == http::Method::DELETE && response.status().is_success() => {
                self.sessions.closed(&id);
                *response.status_mut() = StatusCode::OK;
            }
            Some(_) => {}
        }
        response
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}
