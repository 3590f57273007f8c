//! Assembling a daemon from its configuration: profiles, engines, the tool registry and the
//! executor, then serving them until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::api;
use crate::config::DaemonConfig;
use crate::engine::Engines;
use crate::engine::wasm::{WasmConfig, WasmEngine};
use crate::profile::Profiles;
use crate::tools::{Executor, Registry, ToolLoadError};
use crate::workspace::WorkspaceRoots;

/// Subdirectory of the state dir that holds compiled modules.
const MODULE_CACHE_DIR: &str = "modules";

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot create the state directory {path}: {source}")]
    StateDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Wasm(#[from] crate::engine::wasm::SetupError),
    #[error("{0}")]
    WorkspaceRoots(std::io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Serve(#[from] api::ServeError),
}

pub struct Daemon {
    config: DaemonConfig,
    executor: Arc<Executor>,
    refused: Vec<ToolLoadError>,
}

impl Daemon {
    /// Loads everything the configuration names. Broken profiles and tools are logged and
    /// left out; only what makes the daemon itself unusable is an error.
    pub fn build(config: DaemonConfig) -> Result<Daemon, StartError> {
        std::fs::create_dir_all(&config.state_dir).map_err(|source| StartError::StateDir {
            path: config.state_dir.clone(),
            source,
        })?;
        let (profiles, profile_errors) = Profiles::load_dir(&config.profiles_dir);
        for error in &profile_errors {
            tracing::error!(%error, "profile refused");
        }
        let wasm = WasmEngine::new(&WasmConfig {
            cache_dir: config
                .module_cache_dir
                .clone()
                .unwrap_or_else(|| config.state_dir.join(MODULE_CACHE_DIR)),
            max_concurrent_calls: config.wasm_max_concurrent_calls,
        })?;
        let engines = Engines::default().with(Arc::new(wasm));
        let (registry, refused) = Registry::load(&config.tools_dirs, &profiles, &engines);
        for error in &refused {
            tracing::error!(tool = %error.path.display(), reason = %error.message, "tool refused");
        }
        for tool in registry.tools() {
            tracing::info!(
                tool = tool.name(),
                engine = %tool.manifest.engine,
                profile = %tool.profile.name,
                digest = tool.digest(),
                "serving tool"
            );
        }
        let workspaces =
            WorkspaceRoots::new(&config.workspace_roots).map_err(StartError::WorkspaceRoots)?;
        let executor = Arc::new(Executor::new(Arc::new(registry), workspaces));
        Ok(Daemon {
            config,
            executor,
            refused,
        })
    }

    pub fn config(&self) -> &DaemonConfig {
        &self.config
    }

    pub fn executor(&self) -> &Arc<Executor> {
        &self.executor
    }

    /// The tools that were refused at load, with why.
    pub fn refused_tools(&self) -> &[ToolLoadError] {
        &self.refused
    }

    /// Binds the configured address.
    pub async fn bind(&self) -> Result<TcpListener, StartError> {
        TcpListener::bind(self.config.listen)
            .await
            .map_err(|source| StartError::Listen {
                addr: self.config.listen,
                source,
            })
    }

    /// Serves on `listener` until `shutdown` resolves; then stops accepting, gives in-flight
    /// calls the configured grace period, and cancels what is still running.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartError> {
        let local = listener.local_addr().ok();
        tracing::info!(
            listen = ?local,
            tools = self.executor.registry().len(),
            refused = self.refused.len(),
            roots = ?self.config.workspace_roots,
            "airlockd serving"
        );
        let grace = self.config.shutdown_grace;
        let executor = self.executor.clone();
        let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            shutdown.await;
            tracing::info!("shutting down: no new calls");
            let _ = stopping_tx.send(());
        };
        let server = api::serve(self.executor.clone(), listener, shutdown);
        tokio::pin!(server);
        tokio::select! {
            result = &mut server => return Ok(result?),
            _ = stopping_rx => {}
        }
        // The server is draining; give running calls their grace, then cut them off so the
        // drain completes.
        tokio::select! {
            result = &mut server => return Ok(result?),
            () = tokio::time::sleep(grace) => {
                tracing::warn!(running = executor.running(), "grace period over; cancelling running calls");
                executor.cancel_all();
            }
        }
        Ok(server.await?)
    }
}
