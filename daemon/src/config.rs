//! The daemon's configuration: built-in defaults, then an optional TOML file (`--config`),
//! then command-line flags. Tools directories accumulate; every other setting is replaced by
//! the later source.
//!
//! The file's sections that stand on their own are beside this one: where the daemon listens
//! (`listen`), its store and blob cap (`store`), its tenants and their tokens (`tenants`), and
//! why a configuration is refused (`error`); all are re-exported here.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::engine::wasm::DEFAULT_MAX_CONCURRENT_CALLS;

pub use crate::agent::{AgentSettings, ProviderSettings, RetryPolicy, RunDefaults};
pub use crate::engine::mcp::trust::TrustMode;

mod error;
mod listen;
mod store;
mod telemetry;
mod tenants;

pub use crate::notify::{ApprovalsFile, WebhookFile, WebhookFormat};
pub use error::ConfigError;
pub use listen::{ListenAddr, TlsFiles};
pub use store::{ChangesFile, DEFAULT_BLOB_CAP_BYTES, StoreBackend, StoreFile};
pub use telemetry::{AuditFile, HeaderValue, MetricsFile, OtlpFile, OtlpProtocol};
pub use tenants::{ApprovalRights, AuthSettings, McpOAuthSettings, OAuthTenantRule, TenantFile};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7411";

/// Served when they exist, relative to the directory the daemon starts in: running
/// `airlockd` from the repository root serves the first-party plugins and profiles.
pub const DEFAULT_TOOLS_DIR: &str = "plugins";
pub const DEFAULT_PROFILES_DIR: &str = "sandbox-profiles";

/// The module cache's folder in the state dir, unless `module_cache_dir` is set.
const MODULE_CACHE_DIR: &str = "modules";

/// How long in-flight calls may go on after a shutdown signal before they are cancelled.
const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub listen: ListenAddr,
    /// Serve TLS with this certificate; plaintext when unset.
    pub tls: Option<TlsFiles>,
    /// Who may connect: the tenants besides `default`, and whether the Unix socket's
    /// permissions stand in for a token.
    pub auth: AuthSettings,
    pub tools_dirs: Vec<PathBuf>,
    pub profiles_dir: PathBuf,
    pub state_dir: PathBuf,
    /// Where compiled modules are kept; `<state_dir>/modules` unless set.
    pub module_cache_dir: Option<PathBuf>,
    /// Requests may only name workspaces inside one of these.
    pub workspace_roots: Vec<PathBuf>,
    pub wasm_max_concurrent_calls: u32,
    pub shutdown_grace: Duration,
    /// Model providers and the defaults of runs.
    pub agent: AgentSettings,
    /// Where runs are kept: the state dir's SQLite file, or a database a fleet shares.
    pub store: StoreBackend,
    /// What grows older than this is deleted (see `retention`); none keeps everything.
    pub retention: Option<Duration>,
    /// The cap of the blob store that keeps change sets' contents for undo (`[changes]
    /// blob_cap`); past it the least recently used go.
    pub blob_cap_bytes: u64,
    /// The OpenTelemetry collector (`[otlp]`, its endpoint also from `otlp_endpoint` or
    /// `--otlp-endpoint`); the environment's `OTEL_EXPORTER_OTLP_*` fill in the rest.
    pub otlp: OtlpFile,
    /// The Prometheus endpoint and whether metrics are recorded.
    pub metrics: MetricsFile,
    /// Whether the audit log records.
    pub audit: bool,
    /// How tools' egress resolves names.
    pub egress: EgressSettings,
    /// Where to serve MCP over Streamable HTTP (`/mcp`); off when unset.
    pub mcp_listen: Option<std::net::SocketAddr>,
    /// How hosted servers whose manifests do not say are trusted: on first use (the
    /// default), or explicitly, nothing served until an operator accepts a listing.
    pub mcp_trust: TrustMode,
    /// OAuth 2.1 at the MCP endpoint: the authorization server whose access tokens it takes
    /// beside the daemon's own tokens, and which tenant each stands for.
    pub mcp_oauth: Option<McpOAuthSettings>,
    /// The web console on the gRPC address.
    pub console: ConsoleSettings,
    /// The operator's rule files for every tenant (`[policy] files`, then `--policy`).
    pub policy_files: Vec<PathBuf>,
    /// Where approval requests are posted, and the links that answer them.
    pub approvals: ApprovalsFile,
}

/// The TOML file. Relative paths in it are relative to the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub listen: Option<ListenAddr>,
    pub tls: Option<TlsFiles>,
    #[serde(default)]
    pub auth: AuthSettings,
    #[serde(default)]
    pub tools_dirs: Vec<PathBuf>,
    pub profiles_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub module_cache_dir: Option<PathBuf>,
    #[serde(default)]
    pub workspace_roots: Vec<PathBuf>,
    pub shutdown_grace_ms: Option<u64>,
    #[serde(default)]
    pub wasm: WasmFile,
    #[serde(default)]
    pub providers: ProvidersFile,
    #[serde(default)]
    pub runs: RunsFile,
    #[serde(default)]
    pub store: StoreFile,
    #[serde(default)]
    pub changes: ChangesFile,
    /// OTLP/gRPC address of an OpenTelemetry collector, e.g. `http://127.0.0.1:4317` (the
    /// same as `[otlp] endpoint`).
    pub otlp_endpoint: Option<String>,
    #[serde(default)]
    pub otlp: OtlpFile,
    #[serde(default)]
    pub metrics: MetricsFile,
    #[serde(default)]
    pub audit: AuditFile,
    pub mcp_listen: Option<std::net::SocketAddr>,
    /// `"first-use"` (the default) or `"explicit"`.
    pub mcp_trust: Option<TrustMode>,
    pub mcp_oauth: Option<McpOAuthSettings>,
    #[serde(default)]
    pub egress: EgressSettings,
    #[serde(default)]
    pub console: ConsoleSettings,
    #[serde(default)]
    pub policy: PolicySettings,
    #[serde(default)]
    pub approvals: ApprovalsFile,
}

/// `[policy]`: the operator's rule files, for every tenant (a tenant's own `policy_files`
/// come after them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySettings {
    #[serde(default)]
    pub files: Vec<PathBuf>,
}

/// `[console]`: the web console served beside the gRPC services.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSettings {
    /// Serve the console's pages at `/` of the gRPC address. gRPC-Web is served either way:
    /// it is part of the API, for every client that cannot speak HTTP/2 trailers.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Serve the console's files from this directory, read on each request, instead of
    /// those built into the daemon: for working on the console (`console/dist`).
    pub dir: Option<PathBuf>,
    /// The models the console's "New run" form offers (`DaemonInfo.models`), the default
    /// first: "openai:MODEL", "anthropic:MODEL". A request may still name any model.
    #[serde(default)]
    pub models: Vec<String>,
}

/// A list longer than this is not one a person picks from.
pub const MAX_CONSOLE_MODELS: usize = 64;

/// The longest model name offered: provider, colon and a model id.
pub const MAX_MODEL_NAME_BYTES: usize = 200;

impl ConsoleSettings {
    /// Refuses a model list no form can offer: too long, or a name empty, too long, with
    /// control characters or without its provider.
    fn check(&self) -> Result<(), ConfigError> {
        if self.models.len() > MAX_CONSOLE_MODELS {
            return Err(ConfigError::ConsoleModel(format!(
                "{} models, over the {MAX_CONSOLE_MODELS} a form offers",
                self.models.len()
            )));
        }
        for model in &self.models {
            let named = model
                .split_once(':')
                .is_some_and(|(provider, id)| !provider.is_empty() && !id.is_empty());
            if !named || model.len() > MAX_MODEL_NAME_BYTES || model.chars().any(char::is_control) {
                return Err(ConfigError::ConsoleModel(format!(
                    "{model:?} is not \"provider:model\" of at most {MAX_MODEL_NAME_BYTES} bytes"
                )));
            }
        }
        Ok(())
    }
}

impl Default for ConsoleSettings {
    fn default() -> ConsoleSettings {
        ConsoleSettings {
            enabled: true,
            dir: None,
            models: Vec::new(),
        }
    }
}

fn enabled() -> bool {
    true
}

/// `[egress]`: how the daemon resolves the hosts tools reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressSettings {
    /// Names the daemon resolves itself, to these addresses, instead of asking DNS (like
    /// `curl --resolve`): `hosts = { "api.example.test" = ["198.51.100.7"] }`. The rules
    /// still apply to the addresses.
    #[serde(default)]
    pub hosts: BTreeMap<String, Vec<IpAddr>>,
}

impl EgressSettings {
    fn check(&self) -> Result<(), ConfigError> {
        for (name, addrs) in &self.hosts {
            let is_name = matches!(
                format!("{name}:1").parse::<crate::profile::HostPattern>(),
                Ok(crate::profile::HostPattern {
                    host: crate::profile::HostMatch::Name(_),
                    ..
                })
            );
            if !is_name || addrs.is_empty() {
                return Err(ConfigError::EgressHost { name: name.clone() });
            }
        }
        Ok(())
    }
}

/// Where the model APIs are and which environment variables hold their keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvidersFile {
    pub openai_base_url: Option<String>,
    pub openai_api_key_env: Option<String>,
    pub anthropic_base_url: Option<String>,
    pub anthropic_api_key_env: Option<String>,
    pub request_timeout_ms: Option<u64>,
    /// Stream answers from `openai` and `anthropic` (on by default); off for local servers
    /// whose streamed tool calls are unreliable.
    pub stream: Option<bool>,
}

/// Defaults for the runs whose clients leave a budget unset.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsFile {
    pub max_steps: Option<u32>,
    pub wall_time_ms: Option<u64>,
    pub max_tool_calls: Option<u32>,
    pub max_repeated_errors: Option<u32>,
    pub context_tokens: Option<u64>,
    /// The same call with the same result this many times stops a run (NO_PROGRESS).
    pub max_repeated_calls: Option<u32>,
    /// This many steps in a row that change and observe nothing new stop a run.
    pub max_idle_steps: Option<u32>,
    pub approval_timeout_ms: Option<u64>,
    pub max_output_tokens: Option<u32>,
    /// Keep each model call's wire exchange with its run, for its cassette (default true).
    pub keep_exchanges: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WasmFile {
    pub max_concurrent_calls: Option<u32>,
}

/// Settings given on the command line.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<ListenAddr>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_client_ca: Option<PathBuf>,
    pub unix_socket_trust: bool,
    pub tools_dirs: Vec<PathBuf>,
    /// `--policy`: rule files for every tenant, after the file's.
    pub policy_files: Vec<PathBuf>,
    pub profiles_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub workspace_roots: Vec<PathBuf>,
    pub otlp_endpoint: Option<String>,
    pub metrics_listen: Option<std::net::SocketAddr>,
    pub metrics_token_file: Option<PathBuf>,
    pub mcp_listen: Option<std::net::SocketAddr>,
    pub no_console: bool,
    pub console_dir: Option<PathBuf>,
    /// `--store`: `sqlite`, or a PostgreSQL URL.
    pub store: Option<String>,
}

impl ConfigFile {
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut file: ConfigFile = toml::from_str(&text).map_err(|err| ConfigError::Parse {
            path: path.to_owned(),
            message: err.to_string(),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let anchor = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        file.tools_dirs.iter_mut().for_each(anchor);
        file.workspace_roots.iter_mut().for_each(anchor);
        file.profiles_dir.iter_mut().for_each(anchor);
        file.state_dir.iter_mut().for_each(anchor);
        file.module_cache_dir.iter_mut().for_each(anchor);
        file.store.shared_dir.iter_mut().for_each(anchor);
        file.console.dir.iter_mut().for_each(anchor);
        for webhook in &mut file.approvals.webhooks {
            webhook.url_file.iter_mut().for_each(anchor);
            webhook.secret_file.iter_mut().for_each(anchor);
        }
        file.policy.files.iter_mut().for_each(anchor);
        if let Some(tls) = &mut file.tls {
            anchor(&mut tls.cert);
            anchor(&mut tls.key);
            tls.client_ca.iter_mut().for_each(anchor);
        }
        for tenant in &mut file.auth.tenants {
            tenant.token_file.iter_mut().for_each(anchor);
            tenant.workspace_roots.iter_mut().for_each(anchor);
            tenant.policy_files.iter_mut().for_each(anchor);
        }
        if let Some(ListenAddr::Unix(path)) = &mut file.listen {
            anchor(path);
        }
        file.metrics.token_file.iter_mut().for_each(anchor);
        file.otlp.ca_file.iter_mut().for_each(anchor);
        file.otlp.client_cert_file.iter_mut().for_each(anchor);
        file.otlp.client_key_file.iter_mut().for_each(anchor);
        Ok(file)
    }
}

impl DaemonConfig {
    /// Where what every daemon of a fleet must read is kept: the default tenant's token,
    /// kept outputs, change sets' contents, hosted MCP servers' trust records. The state
    /// dir, unless the fleet shares storage.
    pub fn shared_dir(&self) -> &Path {
        match &self.store {
            StoreBackend::Postgres {
                shared_dir: Some(shared),
                ..
            } => shared,
            StoreBackend::Postgres { .. } | StoreBackend::Sqlite { .. } => &self.state_dir,
        }
    }

    /// Where compiled modules are kept.
    pub fn module_cache(&self) -> PathBuf {
        self.module_cache_dir
            .clone()
            .unwrap_or_else(|| self.state_dir.join(MODULE_CACHE_DIR))
    }

    /// Merges defaults, `file` and `overrides`.
    pub fn resolve(file: ConfigFile, overrides: Overrides) -> Result<DaemonConfig, ConfigError> {
        let cwd = std::env::current_dir().map_err(ConfigError::CurrentDir)?;
        let otlp_endpoint = match (file.otlp_endpoint.clone(), file.otlp.endpoint.clone()) {
            (Some(_), Some(_)) => return Err(ConfigError::OtlpEndpointTwice),
            (top, table) => top.or(table),
        };
        let mut tools_dirs = Vec::new();
        let default_tools = cwd.join(DEFAULT_TOOLS_DIR);
        if default_tools.is_dir() {
            tools_dirs.push(default_tools);
        }
        tools_dirs.extend(file.tools_dirs);
        tools_dirs.extend(overrides.tools_dirs.into_iter().map(|dir| cwd.join(dir)));
        let mut workspace_roots: Vec<PathBuf> = overrides
            .workspace_roots
            .into_iter()
            .map(|dir| cwd.join(dir))
            .collect();
        if workspace_roots.is_empty() {
            workspace_roots = file.workspace_roots;
        }
        if workspace_roots.is_empty() {
            workspace_roots.push(cwd.clone());
        }
        let tls = match (overrides.tls_cert, overrides.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cwd.join(cert),
                key: cwd.join(key),
                client_ca: overrides
                    .tls_client_ca
                    .map(|ca| cwd.join(ca))
                    .or_else(|| file.tls.as_ref().and_then(|tls| tls.client_ca.clone())),
            }),
            (None, None) if overrides.tls_client_ca.is_none() => file.tls,
            _ => return Err(ConfigError::TlsIncomplete),
        };
        let mut auth = file.auth;
        auth.unix_socket_trust |= overrides.unix_socket_trust;
        file.egress.check()?;
        let store = StoreBackend::parse(
            overrides
                .store
                .as_deref()
                .or(file.store.url.as_deref())
                .unwrap_or("sqlite"),
            &file.store,
        )?;
        let mut console = file.console;
        console.check()?;
        file.approvals.check().map_err(ConfigError::Approvals)?;
        console.enabled &= !overrides.no_console;
        if let Some(dir) = overrides.console_dir {
            console.dir = Some(cwd.join(dir));
        }
        Ok(DaemonConfig {
            listen: overrides
                .listen
                .or(file.listen)
                .unwrap_or_else(default_listen),
            tls,
            auth,
            tools_dirs,
            profiles_dir: overrides
                .profiles_dir
                .map(|dir| cwd.join(dir))
                .or(file.profiles_dir)
                .unwrap_or_else(|| cwd.join(DEFAULT_PROFILES_DIR)),
            state_dir: overrides
                .state_dir
                .map(|dir| cwd.join(dir))
                .or(file.state_dir)
                .unwrap_or_else(default_state_dir),
            module_cache_dir: file.module_cache_dir,
            workspace_roots,
            wasm_max_concurrent_calls: file
                .wasm
                .max_concurrent_calls
                .unwrap_or(DEFAULT_MAX_CONCURRENT_CALLS),
            shutdown_grace: file
                .shutdown_grace_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_SHUTDOWN_GRACE),
            agent: agent_settings(&file.providers, &file.runs),
            store,
            retention: file
                .store
                .retention_days
                .map(|days| Duration::from_secs(u64::from(days.get()) * 24 * 60 * 60)),
            blob_cap_bytes: file
                .changes
                .blob_cap
                .map_or(DEFAULT_BLOB_CAP_BYTES, |cap| cap.0),
            otlp: OtlpFile {
                endpoint: overrides.otlp_endpoint.or(otlp_endpoint),
                ..file.otlp
            },
            metrics: MetricsFile {
                listen: overrides.metrics_listen.or(file.metrics.listen),
                token_file: overrides
                    .metrics_token_file
                    .map(|path| cwd.join(path))
                    .or(file.metrics.token_file),
                record: file.metrics.record,
            },
            audit: file.audit.enabled.unwrap_or(true),
            mcp_listen: overrides.mcp_listen.or(file.mcp_listen),
            mcp_trust: file.mcp_trust.unwrap_or_default(),
            mcp_oauth: file.mcp_oauth,
            egress: file.egress,
            console,
            policy_files: file
                .policy
                .files
                .into_iter()
                .chain(
                    overrides
                        .policy_files
                        .into_iter()
                        .map(|path| cwd.join(path)),
                )
                .collect(),
            approvals: file.approvals,
        })
    }
}

fn agent_settings(providers: &ProvidersFile, runs: &RunsFile) -> AgentSettings {
    let mut settings = AgentSettings::default();
    let p: &mut ProviderSettings = &mut settings.providers;
    let set = |target: &mut String, value: &Option<String>| {
        if let Some(value) = value {
            target.clone_from(value);
        }
    };
    set(&mut p.openai_base_url, &providers.openai_base_url);
    set(&mut p.openai_api_key_env, &providers.openai_api_key_env);
    set(&mut p.anthropic_base_url, &providers.anthropic_base_url);
    set(
        &mut p.anthropic_api_key_env,
        &providers.anthropic_api_key_env,
    );
    if let Some(ms) = providers.request_timeout_ms {
        p.request_timeout = Duration::from_millis(ms);
    }
    p.stream = providers.stream.unwrap_or(p.stream);
    let d: &mut RunDefaults = &mut settings.defaults;
    d.max_steps = runs.max_steps.unwrap_or(d.max_steps);
    d.wall_time = runs.wall_time_ms.map_or(d.wall_time, Duration::from_millis);
    d.max_tool_calls = runs.max_tool_calls.unwrap_or(d.max_tool_calls);
    d.max_repeated_errors = runs.max_repeated_errors.unwrap_or(d.max_repeated_errors);
    d.context_tokens = runs.context_tokens.unwrap_or(d.context_tokens);
    d.max_repeated_calls = runs.max_repeated_calls.unwrap_or(d.max_repeated_calls);
    d.max_idle_steps = runs.max_idle_steps.unwrap_or(d.max_idle_steps);
    d.approval_timeout = runs
        .approval_timeout_ms
        .map_or(d.approval_timeout, Duration::from_millis);
    d.max_output_tokens = runs.max_output_tokens.unwrap_or(d.max_output_tokens);
    settings.keep_exchanges = runs.keep_exchanges.unwrap_or(settings.keep_exchanges);
    settings
}

fn default_listen() -> ListenAddr {
    ListenAddr::Tcp(SocketAddr::from(([127, 0, 0, 1], 7411)))
}

/// `$XDG_STATE_HOME/airlock`, else `~/.local/state/airlock`, else `.airlock`. The `airlock`
/// CLI looks for the token in the same place (`client/src/client/auth.rs` keeps it in step).
pub fn default_state_dir() -> PathBuf {
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(state).join("airlock");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".local/state/airlock");
    }
    PathBuf::from(".airlock")
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
