//! The gRPC surface: the `airlock.v1` services, gRPC health and server reflection. This layer
//! translates between wire messages and the services behind it, and decides who may call:
//! every `Tools` and `Agent` call carries a tenant's token ([`auth`]).

mod agent;
pub mod approval_links;
mod audit;
pub mod auth;
mod batched_writes;
mod console;
mod daemon;
pub mod direct_approval;
pub mod direct_call;
mod error;
pub mod limits;
pub mod listen;
pub mod mcp;
mod mcp_trust;
mod message_size;
pub mod metrics_http;
pub mod oauth;
mod policy;
mod quota;
mod request;
pub mod tenants;
pub mod tls;
pub mod token_file;
mod tools;
mod unix_authority;

use std::future::Future;
use std::sync::Arc;

use airlock_proto::v1::agent_server::AgentServer;
use airlock_proto::v1::audit_server::AuditServer;
use airlock_proto::v1::daemon_server::DaemonServer;
use airlock_proto::v1::policy_server::PolicyServer;
use airlock_proto::v1::tools_server::ToolsServer;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::service::RoutesBuilder;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Server, ServerTlsConfig};

use crate::agent::AgentRuntime;
use crate::config::ConsoleSettings;
use crate::retention::Retention;
use crate::store::Store;
use crate::tools::Executor;
use batched_writes::BatchedWrites;
use message_size::LimitMessages;

pub use listen::{ListenError, Listener};
pub use tenants::Tenants;

/// Who may call, and how connections are secured.
pub struct Access {
    pub tenants: Arc<Tenants>,
    /// Clients on a Unix socket need no token (see `config::AuthSettings`).
    pub unix_socket_trust: bool,
    /// TLS on the listener; plaintext when none.
    pub tls: Option<ServerTlsConfig>,
}

/// What the services serve.
pub struct Services {
    pub executor: Arc<Executor>,
    /// Admission of direct calls: the one the MCP endpoint shares, so that a tenant's cap
    /// counts its calls on both edges.
    pub calls: Arc<direct_call::DirectCalls>,
    pub agents: Arc<AgentRuntime>,
    pub store: Arc<dyn Store>,
    pub retention: Arc<Retention>,
    /// Where hosted MCP servers' trust records are: the shared dir (see `DaemonConfig`).
    pub trust_dir: std::path::PathBuf,
    /// The web console's pages, beside the services.
    pub console: ConsoleSettings,
    /// Approval links, when `[approvals]` configures them.
    pub links: Option<approval_links::LinkState>,
}

/// Serves every service on `listener` until `shutdown` resolves, then stops accepting and
/// lets in-flight calls finish.
pub async fn serve(
    services: Services,
    listener: Listener,
    access: Access,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let Services {
        executor,
        calls,
        agents,
        store,
        retention,
        trust_dir,
        console,
        links,
    } = services;
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<ToolsServer<tools::ToolsService>>()
        .await;
    health
        .set_serving::<AgentServer<agent::AgentService>>()
        .await;
    // v1alpha as well: grpcurl and many other clients still ask for it.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(airlock_proto::v1::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection().build_v1()?;
    let reflection_v1alpha = reflection().build_v1alpha()?;
    let authenticate = auth::Authenticate::new(
        access.tenants,
        access.unix_socket_trust,
        executor.auditor().clone(),
    );
    health
        .set_serving::<DaemonServer<daemon::DaemonService>>()
        .await;
    let info = DaemonServer::new(daemon::DaemonService::new(
        executor.clone(),
        retention,
        trust_dir,
        console.models.clone(),
    ));
    let tools = ToolsServer::new(tools::ToolsService::new(calls, store.clone()))
        .max_decoding_message_size(limits::MAX_DECODING_MESSAGE_BYTES)
        .max_encoding_message_size(limits::MAX_ENCODING_MESSAGE_BYTES);
    let audit = AuditServer::new(audit::AuditService::new(store.clone()))
        .max_encoding_message_size(limits::MAX_ENCODING_MESSAGE_BYTES);
    health
        .set_serving::<AuditServer<audit::AuditService>>()
        .await;
    let policy = PolicyServer::new(policy::PolicyService::new(agents.clone()));
    health
        .set_serving::<PolicyServer<policy::PolicyService>>()
        .await;
    let agent = AgentServer::new(agent::AgentService::new(agents))
        .max_decoding_message_size(limits::MAX_DECODING_MESSAGE_BYTES)
        .max_encoding_message_size(limits::MAX_ENCODING_MESSAGE_BYTES);

    // HTTP/1.1 as well as HTTP/2: browsers call through gRPC-Web, and the console's pages
    // are served on the same address (see `console`).
    let mut server = Server::builder()
        .accept_http1(true)
        .http2_max_header_list_size(limits::MAX_HEADER_LIST_BYTES);
    if let Some(tls) = access.tls {
        server = server.tls_config(tls)?;
    }
    // Every service, open ones included, refuses an oversize message the same way. The
    // services a browser calls also speak gRPC-Web.
    let mut routes = RoutesBuilder::default();
    routes
        .add_service(LimitMessages::new(health_service))
        .add_service(LimitMessages::new(reflection_v1))
        .add_service(LimitMessages::new(reflection_v1alpha))
        .add_service(console::browser_facing(LimitMessages::new(
            InterceptedService::new(info, authenticate.clone()),
        )))
        .add_service(console::browser_facing(LimitMessages::new(
            InterceptedService::new(tools, authenticate.clone()),
        )))
        .add_service(console::browser_facing(LimitMessages::new(
            InterceptedService::new(policy, authenticate.clone()),
        )))
        .add_service(console::browser_facing(LimitMessages::new(
            InterceptedService::new(audit, authenticate.clone()),
        )))
        .add_service(console::browser_facing(LimitMessages::new(
            InterceptedService::new(agent, authenticate),
        )));
    let mut routes = routes.routes().into_axum_router();
    if let Some(links) = links {
        routes = approval_links::add_routes(routes, links);
    }
    let routes = console::add_pages(routes, &console);
    let router = server.add_routes(routes.into());
    let stopped = async {
        shutdown.await;
        health
            .set_not_serving::<ToolsServer<tools::ToolsService>>()
            .await;
        health
            .set_not_serving::<AgentServer<agent::AgentService>>()
            .await;
        health
            .set_not_serving::<DaemonServer<daemon::DaemonService>>()
            .await;
        health
            .set_not_serving::<PolicyServer<policy::PolicyService>>()
            .await;
        health
            .set_not_serving::<AuditServer<audit::AuditService>>()
            .await;
    };
    // The listener is kept (not moved) so that a Unix socket's file is removed when it drops.
    match listener {
        Listener::Tcp(tcp) => {
            // tonic sets TCP_NODELAY only on sockets it accepts itself. Without it a streamed
            // call's small frames wait for the client's delayed ACK: ~40 ms per call.
            let incoming = TcpIncoming::from(tcp)
                .with_nodelay(Some(true))
                .map(|stream| stream.map(BatchedWrites::new));
            router
                .serve_with_incoming_shutdown(incoming, stopped)
                .await?;
        }
        Listener::Unix {
            listener,
            path,
            owned,
        } => {
            let _remove = path.filter(|_| owned).map(listen::RemoveOnDrop);
            // Every client's authority is accepted there (see `unix_authority`).
            let incoming = UnixListenerStream::new(listener).map(|stream| {
                stream.map(|stream| BatchedWrites::new(unix_authority::AnyAuthority::new(stream)))
            });
            router
                .serve_with_incoming_shutdown(incoming, stopped)
                .await?;
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}
