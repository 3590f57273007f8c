//! The daemon's configuration: built-in defaults, then an optional TOML file (`--config`),
//! then command-line flags. Tools directories accumulate; every other setting is replaced by
//! the later source.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use crate::engine::wasm::DEFAULT_MAX_CONCURRENT_CALLS;

pub use crate::agent::{AgentSettings, ProviderSettings, RetryPolicy, RunDefaults};

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
    /// The OpenTelemetry collector spans are exported to (OTLP/gRPC); none when unset.
    pub otlp_endpoint: Option<String>,
    /// How tools' egress resolves names.
    pub egress: EgressSettings,
    /// Where to serve MCP over Streamable HTTP (`/mcp`); off when unset.
    pub mcp_listen: Option<std::net::SocketAddr>,
    /// How hosted servers whose manifests do not say are trusted: on first use (the
    /// default), or explicitly, nothing served until an operator accepts a listing.
    pub mcp_trust: crate::engine::mcp::trust::TrustMode,
    /// OAuth 2.1 at the MCP endpoint: the authorization server whose access tokens it takes
    /// beside the daemon's own tokens, and which tenant each stands for.
    pub mcp_oauth: Option<McpOAuthSettings>,
    /// The web console on the gRPC address.
    pub console: ConsoleSettings,
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
    /// OTLP/gRPC address of an OpenTelemetry collector, e.g. `http://127.0.0.1:4317`.
    pub otlp_endpoint: Option<String>,
    pub mcp_listen: Option<std::net::SocketAddr>,
    /// `"first-use"` (the default) or `"explicit"`.
    pub mcp_trust: Option<crate::engine::mcp::trust::TrustMode>,
    pub mcp_oauth: Option<McpOAuthSettings>,
    #[serde(default)]
    pub egress: EgressSettings,
    #[serde(default)]
    pub console: ConsoleSettings,
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
}

impl Default for ConsoleSettings {
    fn default() -> ConsoleSettings {
        ConsoleSettings {
            enabled: true,
            dir: None,
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

/// Where the daemon keeps sessions, runs and their logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreBackend {
    /// `airlock.db` in the state dir: the embedded default, for one machine.
    Sqlite {
        /// fsync on every commit (see `store::StoreOptions`).
        fsync_every_commit: bool,
    },
    /// A PostgreSQL database, which several daemons may share.
    Postgres {
        /// A libpq-style URL, `postgres://user@host:port/db`; it may hold a password, so it
        /// is never logged whole.
        url: String,
        /// How long the fleet waits for a daemon that stopped renewing its lease before
        /// another takes its runs over.
        lease: Duration,
        /// Storage every daemon of the fleet sees at this path (`[store] shared_dir`): the
        /// default tenant's token, kept outputs, change sets' contents and MCP servers' trust
        /// records live there, so any daemon authenticates, serves `ReadOutput`, reverts a
        /// run and trusts alike. None keeps them in the state dir, for a single daemon on
        /// PostgreSQL.
        shared_dir: Option<PathBuf>,
    },
}

impl Default for StoreBackend {
    fn default() -> StoreBackend {
        StoreBackend::Sqlite {
            fsync_every_commit: false,
        }
    }
}

/// The lease of a fleet's daemons unless `[store] lease_ms` says otherwise: a run waits this
/// long for another daemon when its own died, and each daemon renews three times in it, so
/// a pause of a few seconds (a slow disk, a garbage-collecting database) costs no run.
const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// The shortest lease `[store] lease_ms` may set: tests take runs over in well under a
/// second, but below this a renewal's round trip is a fair part of the lease.
const MIN_LEASE: Duration = Duration::from_millis(100);

impl StoreBackend {
    /// The backend `--store` / `[store] url` names: `sqlite`, or a PostgreSQL URL.
    fn parse(value: &str, file: &StoreFile) -> Result<StoreBackend, ConfigError> {
        let fsync_every_commit = file.fsync_every_commit;
        if value == "sqlite" {
            if file.lease_ms.is_some() || file.shared_dir.is_some() {
                return Err(ConfigError::Store(
                    "[store] lease_ms and shared_dir are a fleet's, on a PostgreSQL store".into(),
                ));
            }
            return Ok(StoreBackend::Sqlite { fsync_every_commit });
        }
        if !(value.starts_with("postgres://") || value.starts_with("postgresql://")) {
            return Err(ConfigError::Store(
                "the store is `sqlite` or a postgres:// URL".into(),
            ));
        }
        if fsync_every_commit {
            return Err(ConfigError::Store(
                "[store] fsync_every_commit is the SQLite store's; PostgreSQL's durability is \
                 the server's own (synchronous_commit)"
                    .into(),
            ));
        }
        let lease = file.lease_ms.map_or(DEFAULT_LEASE, Duration::from_millis);
        if lease < MIN_LEASE {
            return Err(ConfigError::Store(format!(
                "[store] lease_ms must be at least {} ms",
                MIN_LEASE.as_millis()
            )));
        }
        Ok(StoreBackend::Postgres {
            url: value.to_owned(),
            lease,
            shared_dir: file.shared_dir.clone(),
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreFile {
    /// `sqlite` (the default) or a PostgreSQL URL (`postgres://…`).
    pub url: Option<String>,
    #[serde(default)]
    pub fsync_every_commit: bool,
    /// A fleet's lease in milliseconds (PostgreSQL only; see `DEFAULT_LEASE`).
    pub lease_ms: Option<u64>,
    /// Storage the fleet's daemons share (PostgreSQL only; see `StoreBackend::Postgres`).
    pub shared_dir: Option<PathBuf>,
    /// Delete finished runs, kept outputs and their blobs once this many days old; unset
    /// keeps everything. Zero is refused: it would delete every run as it finishes.
    pub retention_days: Option<std::num::NonZeroU32>,
}

/// `[changes]`: the contents kept for undo.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangesFile {
    /// The blob store's cap, e.g. `"2 GiB"`.
    pub blob_cap: Option<crate::profile::ByteSize>,
}

/// The blob store's cap when `[changes] blob_cap` is unset: 2 GiB holds the edits of
/// thousands of coding runs (source files are small; build trees are recorded by digest only).
pub const DEFAULT_BLOB_CAP_BYTES: u64 = 2 << 30;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WasmFile {
    pub max_concurrent_calls: Option<u32>,
}

/// Where the daemon listens: a TCP address, or a Unix socket (`unix:/path`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl FromStr for ListenAddr {
    type Err = String;

    fn from_str(text: &str) -> Result<ListenAddr, String> {
        if let Some(path) = text.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if !path.starts_with('/') {
                return Err(format!("`{text}`: a Unix socket needs an absolute path"));
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        text.parse()
            .map(ListenAddr::Tcp)
            .map_err(|_| format!("`{text}` is neither host:port nor unix:/path"))
    }
}

impl TryFrom<String> for ListenAddr {
    type Error = String;

    fn try_from(text: String) -> Result<ListenAddr, String> {
        text.parse()
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => write!(f, "{addr}"),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// The server's certificate chain and key (PEM), and for mutual TLS the CA client
/// certificates must chain to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// When set, every client must present a certificate signed by this CA.
    pub client_ca: Option<PathBuf>,
}

/// `[mcp_oauth]`: the MCP endpoint as an OAuth 2.1 resource server. Clients that hold a JWT
/// access token from `issuer` for `resource` are served as the tenant its scopes or claims
/// map to; the daemon's own tokens keep working beside them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpOAuthSettings {
    /// The authorization server's issuer identifier (tokens' `iss`). Its metadata (RFC 8414,
    /// or OpenID discovery) names the key set unless `jwks_uri` does.
    pub issuer: String,
    /// Where the issuer's signing keys are, when its metadata is not to be read.
    pub jwks_uri: Option<String>,
    /// This endpoint's URL as clients reach it, e.g. `https://airlock.example.com/mcp`: the
    /// audience every token must name (RFC 8707), and what the protected-resource metadata
    /// (RFC 9728) says it is.
    pub resource: String,
    /// The signature algorithms accepted [default: RS256, ES256]. Asymmetric only: a key set
    /// is public, so a shared-secret (HS*) key in one would let anyone sign.
    #[serde(default = "default_jwt_algorithms")]
    pub algorithms: Vec<String>,
    /// The scopes the metadata advertises to clients (what they ask the issuer for).
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Which tenant a token stands for; a token that maps to none, or to two, is refused.
    pub tenants: Vec<OAuthTenantRule>,
}

fn default_jwt_algorithms() -> Vec<String> {
    vec!["RS256".to_owned(), "ES256".to_owned()]
}

/// One `[[mcp_oauth.tenants]]` rule: a token granted `scope`, or whose `claim` is `value`
/// (or an array holding it), is `tenant`'s.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthTenantRule {
    pub tenant: String,
    pub scope: Option<String>,
    pub claim: Option<String>,
    pub value: Option<String>,
}

/// `[auth]`: the tenants declared besides `default`, whose token the daemon creates.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// Clients on the Unix socket need no token: the socket's mode (0600) already limits it
    /// to the daemon's user, who can read the token file anyway. They act as `default`.
    #[serde(default)]
    pub unix_socket_trust: bool,
    #[serde(default)]
    pub tenants: Vec<TenantFile>,
}

/// One `[[auth.tenants]]` entry: a token and what its bearer may do. The token itself is
/// never written in the configuration, only where to find it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantFile {
    pub name: String,
    /// A file holding the token; it must be private to its owner (mode 0600 or stricter).
    pub token_file: Option<PathBuf>,
    /// An environment variable of the daemon holding the token.
    pub token_env: Option<String>,
    /// The tools it may list and run, by name; `"*"` for all.
    #[serde(default = "all_tools")]
    pub tools: Vec<String>,
    /// Where its workspaces may be; each inside one of the daemon's roots. Empty: the
    /// daemon's roots.
    #[serde(default)]
    pub workspace_roots: Vec<PathBuf>,
    #[serde(default)]
    pub approvals: ApprovalRights,
    pub max_concurrent_runs: Option<u32>,
    pub max_concurrent_executions: Option<u32>,
}

fn all_tools() -> Vec<String> {
    vec!["*".to_owned()]
}

/// Which approval requests a tenant sees and may answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRights {
    /// None: its runs' risky calls wait for another approver (a tenant with `all`).
    None,
    /// Those of its own runs.
    #[default]
    Own,
    /// Those of every tenant's runs: an operator's approver console.
    All,
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
    pub profiles_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub workspace_roots: Vec<PathBuf>,
    pub otlp_endpoint: Option<String>,
    pub mcp_listen: Option<std::net::SocketAddr>,
    pub no_console: bool,
    pub console_dir: Option<PathBuf>,
    /// `--store`: `sqlite`, or a PostgreSQL URL.
    pub store: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("cannot determine the current directory: {0}")]
    CurrentDir(std::io::Error),
    #[error("TLS needs both a certificate and a key (--tls-cert and --tls-key)")]
    TlsIncomplete,
    #[error("--store / [store] url: {0}")]
    Store(String),
    #[error(
        "[egress] hosts: `{name}` must be a DNS name (no wildcard, no address) mapped to at least one address"
    )]
    EgressHost { name: String },
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
        if let Some(tls) = &mut file.tls {
            anchor(&mut tls.cert);
            anchor(&mut tls.key);
            tls.client_ca.iter_mut().for_each(anchor);
        }
        for tenant in &mut file.auth.tenants {
            tenant.token_file.iter_mut().for_each(anchor);
            tenant.workspace_roots.iter_mut().for_each(anchor);
        }
        if let Some(ListenAddr::Unix(path)) = &mut file.listen {
            anchor(path);
        }
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
            otlp_endpoint: overrides.otlp_endpoint.or(file.otlp_endpoint),
            mcp_listen: overrides.mcp_listen.or(file.mcp_listen),
            mcp_trust: file.mcp_trust.unwrap_or_default(),
            mcp_oauth: file.mcp_oauth,
            egress: file.egress,
            console,
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
/// CLI looks for the token in the same place (sdk/client/src/token.rs keeps it in step).
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
