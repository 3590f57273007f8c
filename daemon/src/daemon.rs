//! Assembling a daemon from its configuration: profiles, engines, the tool registry and the
//! executor, then serving them until shutdown.

use crate::changes::Changes;
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::AgentRuntime;
use crate::api;
use crate::audit::{Act, Auditor};
use crate::config::{DaemonConfig, StoreBackend};
use crate::egress::Resolver;
use crate::engine::Engines;
use crate::engine::mcp::McpEngine;
use crate::engine::process::{ProcessConfig, ProcessEngine};
use crate::engine::wasm::{WasmConfig, WasmEngine};
use crate::fleet::Fleet;
use crate::output::{KeptLimits, KeptOutputs};
use crate::policy::PolicyBook;
use crate::profile::Profiles;
use crate::reload::Reloader;
use crate::retention::Retention;
use crate::store::{Leases, PostgresStore, Relay, SqliteStore, Store, StoreError, StoreOptions};
use crate::telemetry::audit_log::AuditLog;
use crate::telemetry::otlp::settings::{self as otlp_settings, SettingsError};
use crate::telemetry::otlp::{Exporters, OtlpError};
use crate::tools::{Executor, Registry, ToolLoadError};
use crate::trace::{SpanSink, Tracer};
use crate::workspace::WorkspaceRoots;

/// The store's file in the state dir.
const STORE_FILE: &str = "airlock.db";

/// The state dir is the daemon user's alone: it holds tokens, runs and tool outputs.
const STATE_DIR_MODE: u32 = 0o700;

/// How long cancelled calls get to report before the remaining connections are dropped.
const FINAL_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// How often a stopping daemon looks whether its last call ended: a fraction of the final
/// drain, so the stop waits little past the last call.
const CALLS_DONE_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Where full outputs are kept, in the state dir.
const OUTPUTS_DIR: &str = "outputs";

/// How long a stopping daemon waits for the OTLP collector to take the last spans: long
/// enough for a collector that answers, short enough that one that is down does not hold up
/// the exit.
const OTLP_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

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
    #[error(transparent)]
    Listen(#[from] api::ListenError),
    #[error(transparent)]
    Tenants(#[from] api::tenants::TenantError),
    #[error(transparent)]
    Tls(#[from] api::tls::TlsError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot resume the runs left unfinished: {0}")]
    Resume(String),
    #[error(transparent)]
    Serve(#[from] api::ServeError),
    #[error(transparent)]
    Otlp(#[from] OtlpError),
    #[error("OTLP settings: {0}")]
    OtlpSettings(#[from] SettingsError),
    #[error(transparent)]
    Metrics(#[from] api::metrics_http::MetricsError),
    #[error("[mcp_oauth]: {0}")]
    McpOAuth(String),
    #[error("{0}")]
    Policy(String),
    #[error("[approvals]: {0}")]
    Approvals(String),
    #[error("cannot listen for MCP on {addr}: {source}")]
    McpListen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
}

pub struct Daemon {
    config: DaemonConfig,
    /// The MCP endpoint's socket, bound by [`Daemon::bind`] and served by [`Daemon::serve`].
    mcp_listener: std::sync::Mutex<Option<tokio::net::TcpListener>>,
    executor: Arc<Executor>,
    agents: Arc<AgentRuntime>,
    store: Arc<dyn Store>,
    /// The fleet this daemon is a node of, when its store is shared.
    fleet: Option<Arc<Fleet>>,
    tenants: Arc<api::Tenants>,
    /// The MCP endpoint's OAuth resource server, when `[mcp_oauth]` configures one.
    oauth: Option<Arc<api::oauth::ResourceServer>>,
    refused: Vec<ToolLoadError>,
    exporters: Arc<Exporters>,
    /// The Prometheus endpoint's socket and token, bound by [`Daemon::bind`].
    metrics_listener:
        std::sync::Mutex<Option<(tokio::net::TcpListener, api::metrics_http::ScrapeToken)>>,
    /// Reloads the tools and profiles (SIGHUP).
    reloader: Arc<Reloader>,
    /// Approval webhooks and the key of their links, when `[approvals]` has a public URL.
    approvals: Option<(
        crate::notify::NotifySettings,
        Arc<crate::notify::links::LinkKey>,
    )>,
}

impl Daemon {
    /// Loads everything the configuration names. Broken profiles and tools are logged and
    /// left out; only what makes the daemon itself unusable is an error.
    pub async fn build(config: DaemonConfig) -> Result<Daemon, StartError> {
        // The state dir holds the access tokens, every run's record and the kept outputs:
        // the daemon's user alone may read it, whatever the umask.
        private_dir(&config.state_dir)?;
        let shared_dir = config.shared_dir().to_owned();
        if shared_dir != config.state_dir {
            private_dir(&shared_dir)?;
        } else if matches!(config.store, StoreBackend::Postgres { .. }) {
            tracing::warn!(
                "the store is PostgreSQL and [store] shared_dir is unset: the access token, kept \
                 outputs and change sets' contents stay in this daemon's state dir, where other \
                 daemons of a fleet cannot read them"
            );
        }
        let (profiles, profile_errors) = Profiles::load_dir(&config.profiles_dir);
        for error in &profile_errors {
            tracing::error!(%error, "profile refused");
        }
        let wasm = WasmEngine::new(&WasmConfig {
            cache_dir: config.module_cache(),
            max_concurrent_calls: config.wasm_max_concurrent_calls,
        })?;
        let process = Arc::new(ProcessEngine::new(&ProcessConfig {
            state_dir: config.state_dir.clone(),
        }));
        let resolver = Arc::new(Resolver::new(
            config
                .egress
                .hosts
                .iter()
                .map(|(name, addrs)| (name.clone(), addrs.clone()))
                .collect(),
        ));
        let changes = Changes::open(&config.state_dir, &shared_dir, config.blob_cap_bytes)
            .inspect_err(|err| {
                tracing::warn!(error = %err, "tools that write the workspace will be refused");
            })
            .map_err(|err| err.to_string());
        // Filled once the store is open; the parts built before it hold it already.
        let auditor = Auditor::default();
        let mcp = Arc::new(
            McpEngine::new(
                process.clone(),
                config.state_dir.clone(),
                shared_dir.clone(),
                resolver.clone(),
                changes.as_ref().ok().cloned(),
            )
            .with_default_trust(config.mcp_trust)
            .with_auditor(auditor.clone()),
        );
        let engines = Engines::default()
            .with(Arc::new(wasm))
            .with(process)
            .with(mcp.clone());
        let (registry, refused) = Registry::load(&config.tools_dirs, &profiles, &engines);
        for error in &refused {
            tracing::error!(tool = %error.path.display(), reason = %error.message, "tool refused");
        }
        for tool in registry.tools() {
            tracing::info!(
                tool = tool.name(),
                engine = %tool.manifest.engine(),
                profile = %tool.profile.name,
                digest = tool.digest(),
                "serving tool"
            );
        }
        let workspaces = WorkspaceRoots::new(&config.workspace_roots)
            .and_then(|roots| roots.reserve(&config.state_dir))
            .and_then(|roots| roots.reserve(&shared_dir))
            .map_err(StartError::WorkspaceRoots)?;
        let tenants = Arc::new(api::Tenants::load(&shared_dir, &config.auth, &workspaces)?);
        tracing::info!(
            token_file = %shared_dir.join(api::token_file::TOKEN_FILE).display(),
            tenants = ?tenants.names(),
            "access tokens loaded"
        );
        let approvals =
            crate::notify::resolve(&config.approvals, &shared_dir, &tenants.names(), |path| {
                api::token_file::read_secret_file(path).map_err(|err| err.to_string())
            })
            .map_err(StartError::Approvals)?;
        let tenant_policies: Vec<(String, Vec<PathBuf>)> = config
            .auth
            .tenants
            .iter()
            .map(|tenant| (tenant.name.clone(), tenant.policy_files.clone()))
            .collect();
        let policy = Arc::new(
            PolicyBook::load(&config.policy_files, &tenant_policies).map_err(StartError::Policy)?,
        );
        tracing::info!(rules = policy.len(), "policy rules loaded");
        let oauth = config
            .mcp_oauth
            .clone()
            .map(|settings| api::oauth::ResourceServer::new(settings, &tenants).map(Arc::new))
            .transpose()
            .map_err(StartError::McpOAuth)?;
        let (store, fleet) = open_store(&config.store, &config.state_dir).await?;
        let kept = KeptOutputs::open(
            &shared_dir.join(OUTPUTS_DIR),
            store.clone(),
            KeptLimits::default(),
        )
        .map_err(|source| StartError::StateDir {
            path: shared_dir.join(OUTPUTS_DIR),
            source,
        })?;
        let executor = Arc::new(
            Executor::new(Arc::new(registry), workspaces)
                .with_kept_outputs(Arc::new(kept))
                .with_resolver(resolver)
                .with_changes(changes)
                .with_auditor(auditor.clone()),
        );
        let record_metrics = config.metrics.record.unwrap_or(true);
        crate::metrics::global().set_enabled(record_metrics);
        let otlp = otlp_settings::resolve(&config.otlp, &otlp_settings::process_env)?;
        let exporters = Arc::new(Exporters::start(&otlp, record_metrics)?);
        if config.audit {
            auditor.install(Arc::new(AuditLog::new(
                store.clone(),
                exporters.logs.clone(),
                tokio::runtime::Handle::current(),
            )));
            audit_start(&auditor, &config, &tenants);
        }
        let sink = exporters
            .spans
            .clone()
            .map(|exporter| exporter as Arc<dyn SpanSink>);
        let tracer = Arc::new(Tracer::new(sink));
        let agents = Arc::new(AgentRuntime::new(
            executor.clone(),
            store.clone(),
            tracer,
            config.agent.clone(),
            policy,
        ));
        crate::metrics::global().set_source(Arc::new(Sampler {
            agents: agents.clone(),
            executor: executor.clone(),
        }));
        mcp.set_asker(Arc::new(api::direct_approval::DirectApprovals::new(
            executor.clone(),
            &agents,
        )));
        let fleet = fleet.map(|fleet| {
            Arc::new(Fleet::new(
                fleet.leases,
                fleet.relay,
                agents.clone(),
                fleet.lease,
            ))
        });
        let reloader = Arc::new(Reloader::new(
            config.tools_dirs.clone(),
            config.profiles_dir.clone(),
            engines,
            executor.clone(),
            auditor.clone(),
        ));
        Ok(Daemon {
            reloader,
            config,
            mcp_listener: std::sync::Mutex::new(None),
            executor,
            agents,
            store,
            fleet,
            tenants,
            oauth,
            refused,
            exporters,
            metrics_listener: std::sync::Mutex::new(None),
            approvals,
        })
    }

    pub fn config(&self) -> &DaemonConfig {
        &self.config
    }

    pub fn executor(&self) -> &Arc<Executor> {
        &self.executor
    }

    pub fn agents(&self) -> &Arc<AgentRuntime> {
        &self.agents
    }

    /// What reloads this daemon's tools and profiles while it serves (its `airlockd` does
    /// on SIGHUP).
    pub fn reloader(&self) -> Arc<Reloader> {
        self.reloader.clone()
    }

    /// The tools that were refused at load, with why.
    pub fn refused_tools(&self) -> &[ToolLoadError] {
        &self.refused
    }

    /// The tenants and their tokens.
    pub fn tenants(&self) -> &Arc<api::Tenants> {
        &self.tenants
    }

    /// Binds the configured address, and the MCP and metrics endpoints' when configured (a
    /// metrics address off loopback without a token file is refused here).
    pub async fn bind(&self) -> Result<api::Listener, StartError> {
        let listener = api::Listener::bind(&self.config.listen).await?;
        // The daemon's own socket is made 0600; one a socket unit bound is checked.
        if self.config.auth.unix_socket_trust && listener.unix_open_to_others() {
            return Err(api::ListenError::TrustedSocketOpen(listener.describe()).into());
        }
        if let Some(addr) = self.config.metrics.listen {
            let token = api::metrics_http::ScrapeToken::load(
                addr,
                self.config.metrics.token_file.as_deref(),
            )?;
            let metrics = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| api::metrics_http::MetricsError::Listen { addr, source })?;
            if let Ok(mut slot) = self.metrics_listener.lock() {
                *slot = Some((metrics, token));
            }
        }
        if let Some(addr) = self.config.mcp_listen {
            let mcp = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| StartError::McpListen { addr, source })?;
            if let Ok(mut slot) = self.mcp_listener.lock() {
                *slot = Some(mcp);
            }
        }
        Ok(listener)
    }

    /// Where the Prometheus endpoint listens, once bound.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics_listener
            .lock()
            .ok()?
            .as_ref()
            .and_then(|(listener, _)| listener.local_addr().ok())
    }

    /// Where the MCP endpoint listens, once bound.
    pub fn mcp_addr(&self) -> Option<std::net::SocketAddr> {
        self.mcp_listener
            .lock()
            .ok()?
            .as_ref()
            .and_then(|listener| listener.local_addr().ok())
    }

    /// Serves on `listener` until `shutdown` resolves; then stops accepting, gives in-flight
    /// calls the configured grace period, and cancels what is still running. Spans still
    /// queued for the OTLP collector are sent last, for a bounded time.
    pub async fn serve(
        self,
        listener: api::Listener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartError> {
        let exporters = self.exporters.clone();
        let served = self.serve_until_drained(listener, shutdown).await;
        exporters.shutdown(OTLP_FLUSH_TIMEOUT).await;
        served
    }

    async fn serve_until_drained(
        self,
        listener: api::Listener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartError> {
        // Runs a previous daemon left unfinished go on from their checkpoints: on a store of
        // its own, every one; in a fleet, those whose daemon's lease lapsed.
        let resuming = async {
            match &self.fleet {
                Some(fleet) => fleet.join().await,
                None => self.agents.resume_unfinished().await,
            }
        };
        let resumed = resuming.await.map_err(|err| match err {
            crate::agent::AgentError::Store(store) => StartError::Store(store),
            other => StartError::Resume(other.to_string()),
        })?;
        let in_fleet = CancellationToken::new();
        let leaving = self
            .fleet
            .clone()
            .map(|fleet| tokio::spawn(fleet.serve(in_fleet.clone())));
        let tls = self
            .config
            .tls
            .as_ref()
            .map(api::tls::server_config)
            .transpose()?;
        let local = listener.local_addr();
        tracing::info!(
            listen = ?local,
            socket = %listener.describe(),
            tls = tls.is_some(),
            tools = self.executor.registry().len(),
            resumed,
            refused = self.refused.len(),
            roots = ?self.config.workspace_roots,
            "airlockd serving"
        );
        crate::systemd::ready(&format!(
            "serving {} tools on {}",
            self.executor.registry().len(),
            listener.describe()
        ));
        let grace = self.config.shutdown_grace;
        let executor = self.executor.clone();
        let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            shutdown.await;
            tracing::info!("shutting down: no new calls");
            crate::systemd::stopping();
            let _ = stopping_tx.send(());
        };
        let access = api::Access {
            tenants: self.tenants.clone(),
            unix_socket_trust: self.config.auth.unix_socket_trust,
            tls,
        };
        let retention = Arc::new(Retention::new(
            self.store.clone(),
            self.executor.kept_outputs().cloned(),
            self.config.retention,
        ));
        let sweeping = CancellationToken::new();
        tokio::spawn(retention.clone().run(sweeping.clone()));
        let _stop_sweeping = sweeping.drop_guard();
        let mcp_listener = self
            .mcp_listener
            .lock()
            .ok()
            .and_then(|mut slot| slot.take());
        let serving_mcp = CancellationToken::new();
        // One admission for direct calls on every edge: a tenant's cap counts its calls over
        // gRPC and MCP together.
        let calls = Arc::new(api::direct_call::DirectCalls::new(
            self.executor.clone(),
            Arc::new(api::direct_approval::DirectApprovals::new(
                self.executor.clone(),
                &self.agents,
            )),
            self.agents.policy().clone(),
        ));
        if let Some(listener) = mcp_listener {
            tokio::spawn(api::mcp::serve(
                listener,
                self.tenants.clone(),
                calls.clone(),
                self.oauth.clone(),
                serving_mcp.clone(),
            ));
        }
        let _stop_mcp = serving_mcp.drop_guard();
        let metrics_listener = self
            .metrics_listener
            .lock()
            .ok()
            .and_then(|mut slot| slot.take());
        let serving_metrics = CancellationToken::new();
        if let Some((listener, token)) = metrics_listener {
            tokio::spawn(api::metrics_http::serve(
                listener,
                token,
                serving_metrics.clone(),
            ));
        }
        let _stop_metrics = serving_metrics.drop_guard();
        let notifying = CancellationToken::new();
        let links = match &self.approvals {
            Some((settings, key)) => {
                if !settings.webhooks.is_empty() {
                    crate::notify::start(
                        self.agents.clone(),
                        settings.clone(),
                        key.clone(),
                        notifying.clone(),
                    )
                    .map_err(StartError::Approvals)?;
                }
                Some(api::approval_links::LinkState::new(
                    key.clone(),
                    self.tenants.clone(),
                    self.agents.clone(),
                    settings.origin.clone(),
                ))
            }
            None => None,
        };
        let _stop_notifying = notifying.drop_guard();
        let services = api::Services {
            executor: self.executor.clone(),
            calls,
            agents: self.agents.clone(),
            store: self.store.clone(),
            retention,
            trust_dir: self.config.shared_dir().to_owned(),
            console: self.config.console.clone(),
            links,
        };
        let server = api::serve(services, listener, access, shutdown);
        let served = drain(server, stopping_rx, grace, &executor).await;
        // Stopped: the fleet may take this daemon's unfinished runs over at once.
        in_fleet.cancel();
        if let Some(leaving) = leaving {
            let _ = leaving.await;
        }
        served
    }
}

/// Where the scrape-time gauges come from: the runs, the approvals, the engines' pools and
/// the stores of bytes.
struct Sampler {
    agents: Arc<AgentRuntime>,
    executor: Arc<Executor>,
}

impl crate::metrics::Sample for Sampler {
    fn sample(&self) -> crate::metrics::Sampled {
        let approvals = self.agents.approvals();
        let waiting = approvals.runs_waiting();
        let live = self.agents.live_run_ids().len();
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        crate::metrics::Sampled {
            runs_running: gauge(live.saturating_sub(waiting)),
            runs_waiting_approval: gauge(waiting),
            approvals_pending: gauge(approvals.pending_count()),
            approvals_oldest_age: approvals.oldest_pending_age(),
            blob_store_bytes: self
                .executor
                .changes()
                .map_or(0, |changes| changes.blobs().used()),
            output_kept_bytes: self.executor.kept_outputs().map_or(0, |kept| kept.bytes()),
        }
    }
}

/// The acts of a start: the configuration this daemon serves with, and each tenant it
/// serves, in the audit log (a changed configuration is told apart by its digest).
fn audit_start(auditor: &Auditor, config: &DaemonConfig, tenants: &api::Tenants) {
    use sha2::Digest as _;
    let described = format!(
        "listen={:?} tools={:?} profiles={:?} roots={:?} policy={:?} store={} mcp_trust={:?} retention={:?}",
        config.listen,
        config.tools_dirs,
        config.profiles_dir,
        config.workspace_roots,
        config.policy_files,
        match &config.store {
            StoreBackend::Sqlite { .. } => "sqlite",
            StoreBackend::Postgres { .. } => "postgres",
        },
        config.mcp_trust,
        config.retention,
    );
    let digest = hex::encode(sha2::Sha256::digest(described.as_bytes()));
    auditor.record(
        Act::new(crate::domain::DEFAULT_TENANT, "config.loaded")
            .actor("daemon")
            .subject(env!("CARGO_PKG_VERSION"))
            .reason("the daemon started with this configuration")
            .detail("digest", digest)
            .detail("configuration", described),
    );
    for name in tenants.names() {
        auditor.record(
            Act::new(name, "tenant.loaded")
                .actor("daemon")
                .subject(name)
                .reason("the daemon serves this tenant"),
        );
    }
}

/// Creates `dir` if need be, private to the daemon's user whatever the umask: the state dir
/// and the fleet's shared dir hold the access token, every run's record and kept outputs.
fn private_dir(dir: &std::path::Path) -> Result<(), StartError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(STATE_DIR_MODE)
        .create(dir)
        .and_then(|()| {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(STATE_DIR_MODE))
        })
        .map_err(|source| StartError::StateDir {
            path: dir.to_owned(),
            source,
        })
}

/// What a shared store offers a fleet: leases (and how long each lasts), and the relay.
struct FleetStore {
    leases: Arc<dyn Leases>,
    relay: Arc<dyn Relay>,
    lease: std::time::Duration,
}

/// The store the configuration names, with its leases when a fleet shares it.
async fn open_store(
    backend: &StoreBackend,
    state_dir: &std::path::Path,
) -> Result<(Arc<dyn Store>, Option<FleetStore>), StartError> {
    Ok(match backend {
        StoreBackend::Sqlite { fsync_every_commit } => (
            Arc::new(SqliteStore::open(
                &state_dir.join(STORE_FILE),
                &StoreOptions {
                    fsync_every_commit: *fsync_every_commit,
                    ..StoreOptions::default()
                },
            )?),
            None,
        ),
        StoreBackend::Postgres { url, lease, .. } => {
            let shared = Arc::new(PostgresStore::connect(url, *lease).await?);
            let fleet = FleetStore {
                leases: shared.clone(),
                relay: shared.clone(),
                lease: *lease,
            };
            (shared, Some(fleet))
        }
    })
}

/// Serves until the shutdown signal, then drains: running calls get their grace and are cut
/// off after it. Runs are not cancelled: they are recorded, and the next daemon resumes them.
/// The grace is the calls': once none is running, nothing is left to wait for — a stream
/// that stays open (a run's client, waiting for a person or a model) does not hold the stop
/// up for the whole grace.
async fn drain(
    server: impl Future<Output = Result<(), api::ServeError>>,
    stopping: tokio::sync::oneshot::Receiver<()>,
    grace: std::time::Duration,
    executor: &Executor,
) -> Result<(), StartError> {
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => return Ok(result?),
        _ = stopping => {}
    }
    // Polled rather than signalled: a notice on every call's end would cost the hot path
    // for the sake of a stop.
    let calls_done = async {
        while executor.running() > 0 {
            tokio::time::sleep(CALLS_DONE_POLL).await;
        }
    };
    tokio::select! {
        result = &mut server => return Ok(result?),
        () = calls_done => {}
        () = tokio::time::sleep(grace) => {
            tracing::warn!(running = executor.running(), "grace period over; cancelling running calls");
            executor.cancel_all();
        }
    }
    // Clients that keep streams open (a follower of a finished run, an idle approver
    // console) would hold the drain forever: past a last moment, connections are dropped.
    tokio::select! {
        result = &mut server => Ok(result?),
        () = tokio::time::sleep(FINAL_DRAIN) => {
            tracing::warn!("closing the connections still open");
            Ok(())
        }
    }
}
