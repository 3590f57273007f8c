//! The gRPC surface: the `airlock.v1` services, gRPC health and server reflection. This layer
//! only translates between wire messages and the services behind it.

mod agent;
mod error;
mod tools;

use std::future::Future;
use std::sync::Arc;

use airlock_proto::v1::agent_server::AgentServer;
use airlock_proto::v1::tools_server::ToolsServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::Server;

use crate::agent::AgentRuntime;
use crate::tools::Executor;

pub use error::ApiError;

/// Serves every service on `listener` until `shutdown` resolves, then stops accepting and
/// lets in-flight calls finish.
pub async fn serve(
    executor: Arc<Executor>,
    agents: Arc<AgentRuntime>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
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

    Server::builder()
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(ToolsServer::new(tools::ToolsService::new(executor)))
        .add_service(AgentServer::new(agent::AgentService::new(agents)))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
            shutdown.await;
            health
                .set_not_serving::<ToolsServer<tools::ToolsService>>()
                .await;
            health
                .set_not_serving::<AgentServer<agent::AgentService>>()
                .await;
        })
        .await?;
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}
