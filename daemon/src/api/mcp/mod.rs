//! airlock's tools over MCP: the Streamable HTTP endpoint `airlockd --mcp-listen ADDR` serves
//! at `/mcp`, for MCP clients that speak HTTP (and for the MCP Inspector).
//!
//! The same tokens and tenants as gRPC: every request carries `Authorization: Bearer
//! <token>`, and a tenant sees and calls its own tools in its own workspaces. The protocol —
//! sessions, SSE streams, `Host` and `Origin` checks against DNS rebinding — is rmcp's
//! (`StreamableHttpService`); this module authenticates, and `handler.rs` translates MCP
//! calls into the executor's, with approvals as `direct_approval.rs` asks them.
//!
//! A call's workspace is the `workspace` query parameter of the endpoint's URL
//! (`http://127.0.0.1:7412/mcp?workspace=/srv/project`): MCP itself has no notion of one.

mod handler;

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

use super::direct_approval::DirectApprovals;
use super::tenants::Tenants;
use crate::tools::Executor;

pub use handler::ToolServer;

/// The one path the endpoint serves.
const PATH: &str = "/mcp";

/// The tenant a request was authenticated as, for the handler.
#[derive(Clone)]
pub struct McpCaller(pub Arc<super::tenants::Tenant>);

type Service = StreamableHttpService<ToolServer, LocalSessionManager>;

/// Serves MCP on `listener` until `stop` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tenants: Arc<Tenants>,
    executor: Arc<Executor>,
    approvals: Arc<DirectApprovals>,
    stop: CancellationToken,
) {
    let local = listener.local_addr().ok();
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
    let server = ToolServer::new(executor, approvals);
    let service: Service = StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
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
        let service = service.clone();
        let tenants = tenants.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let handle = hyper::service::service_fn(move |request| {
                let service = service.clone();
                let tenants = tenants.clone();
                async move { Ok::<_, Infallible>(route(&service, &tenants, request, peer).await) }
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

/// Authenticates a request and hands it to rmcp.
async fn route(
    service: &Service,
    tenants: &Tenants,
    mut request: Request<hyper::body::Incoming>,
    peer: SocketAddr,
) -> Response<BoxBody<Bytes, Infallible>> {
    if request.uri().path() != PATH {
        return plain(StatusCode::NOT_FOUND, "airlock serves MCP at /mcp");
    }
    let token = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        });
    let Some(tenant) = token.and_then(|token| tenants.identify(token.trim())) else {
        tracing::debug!(%peer, "MCP request without a valid token");
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
    request.extensions_mut().insert(McpCaller(tenant));
    service.handle(request).await.map(|body| body.boxed())
}

fn plain(status: StatusCode, text: &'static str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}
