//! Helpers for airlock's integration tests: a real daemon on a loopback port, tool folders
//! built from real modules, workspaces, and a gRPC client that collects a call's events.
//!
//! Every daemon requires an access token; the helpers read the one it created in its state
//! dir and send it with each call. [`token_for`] finds it again from the endpoint, for tests
//! that connect on their own (and for the `airlock` CLI, through `AIRLOCK_TOKEN`).
//!
//! WebAssembly modules come from `scripts/build-wasm.sh` (the test command runs it first);
//! a missing module is a clear panic that says so, never a skipped test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod browser;
pub mod cli;
pub mod egress;
pub mod link;
pub mod mcp;
pub mod model_api;
pub mod netns;
pub mod procs;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use airlock_daemon::Daemon;
use airlock_daemon::config::AgentSettings;
use airlock_daemon::config::{
    ApprovalRights, AuthSettings, ConsoleSettings, DaemonConfig, ListenAddr, StoreBackend,
    TenantFile, TlsFiles,
};
use airlock_proto::v1 as pb;
use pb::execute_tool_event::Event;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// A channel that sends a tenant's token with every call.
pub type AuthedChannel = InterceptedService<Channel, BearerToken>;

/// Adds `authorization: Bearer <token>` to each request.
#[derive(Clone)]
pub struct BearerToken(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl BearerToken {
    pub fn new(token: &str) -> BearerToken {
        BearerToken(format!("Bearer {token}").parse().expect("a token is ASCII"))
    }
}

impl Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// The token of each daemon the helpers started, by endpoint.
fn tokens() -> &'static Mutex<HashMap<String, String>> {
    static TOKENS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    TOKENS.get_or_init(Mutex::default)
}

/// The `default` tenant's token of the daemon serving `endpoint`, when these helpers started
/// it; empty otherwise (an address where no daemon of theirs listens).
pub fn token_for(endpoint: &str) -> String {
    tokens()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(endpoint)
        .cloned()
        .unwrap_or_default()
}

/// Connects to a daemon these helpers started, sending its default token.
pub async fn connect(endpoint: &str) -> Result<AuthedChannel, tonic::transport::Error> {
    let token = token_for(endpoint);
    assert!(
        !token.is_empty(),
        "no daemon of these helpers serves {endpoint}"
    );
    let channel = Channel::from_shared(endpoint.to_owned())
        .expect("a valid endpoint")
        .connect()
        .await?;
    Ok(InterceptedService::new(channel, BearerToken::new(&token)))
}

/// Connects to `endpoint` (`http://…` or `unix:/path`), sending `token` with every call.
pub async fn connect_with_token(endpoint: &str, token: &str) -> AuthedChannel {
    // `Endpoint` (unlike `Channel::from_shared`) also takes `unix:/path`.
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_owned())
        .unwrap()
        .connect()
        .await
        .expect("connect to airlockd");
    InterceptedService::new(channel, BearerToken::new(token))
}

/// The token of the tenant `ci` that [`ci_tenant`] configures.
pub const CI_TOKEN: &str = "ci-token-0123456789abcdef";

/// Writes `text` to `dir/name`, readable by its owner alone, as the daemon requires of
/// token files and keys.
pub fn private_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A tenant whose token is in `token_file`, allowed `tools`, with no roots of its own and no
/// caps.
pub fn tenant(
    name: &str,
    token_file: PathBuf,
    tools: &[&str],
    approvals: ApprovalRights,
) -> TenantFile {
    TenantFile {
        name: name.into(),
        token_file: Some(token_file),
        token_env: None,
        tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
        workspace_roots: Vec::new(),
        approvals,
        max_concurrent_runs: None,
        max_concurrent_executions: None,
        policy_files: Vec::new(),
    }
}

/// Access for one tenant besides the default: `ci`, with the token [`CI_TOKEN`] (its file in
/// `secrets`), allowed `tools`, answering no approvals.
pub fn ci_tenant(secrets: &Path, tools: &[&str]) -> AuthSettings {
    AuthSettings {
        unix_socket_trust: false,
        tenants: vec![tenant(
            "ci",
            private_file(secrets, "ci", CI_TOKEN),
            tools,
            ApprovalRights::None,
        )],
    }
}

/// The token a daemon created in `state_dir`.
pub fn read_token(state_dir: &Path) -> String {
    let path = state_dir.join(airlock_daemon::TOKEN_FILE);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
        .trim()
        .to_owned()
}

/// How many fork copies (`<name>-fork-<id>`, as `ForkRun` names them) `dir` holds.
pub fn fork_copies_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|entry| {
            let name = entry.as_ref().unwrap().file_name();
            name.to_string_lossy().contains("-fork-")
        })
        .count()
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the repository")
        .to_owned()
}

/// A module built by `scripts/build-wasm.sh`: `tests/modules/<name>.wasm`.
pub fn test_module(name: &str) -> PathBuf {
    built(
        repo_root()
            .join("tests/modules")
            .join(format!("{name}.wasm")),
    )
}

/// A first-party plugin's module: `plugins/<name>/<name>.wasm`.
pub fn plugin_module(name: &str) -> PathBuf {
    built(
        repo_root()
            .join("plugins")
            .join(name)
            .join(format!("{name}.wasm")),
    )
}

fn built(path: PathBuf) -> PathBuf {
    assert!(
        path.is_file(),
        "{} is missing: build the WebAssembly modules first with scripts/build-wasm.sh \
         (scripts/test.sh does this)",
        path.display()
    );
    path
}

/// `tests/modules/<name>.wat`, assembled to a binary module.
pub fn wat_module(name: &str) -> Vec<u8> {
    let path = repo_root()
        .join("tests/modules")
        .join(format!("{name}.wat"));
    wat::parse_file(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// A directory of tool folders for one test.
pub struct ToolsDir {
    dir: TempDir,
}

impl Default for ToolsDir {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolsDir {
    pub fn new() -> ToolsDir {
        ToolsDir {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Adds a tool folder `name` with `module` copied in as `<name>.wasm` and a manifest made
    /// of the standard keys plus `extra` (TOML lines that override or add keys).
    pub fn add(&self, name: &str, module: &[u8], extra: &str) -> PathBuf {
        let folder = self.dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("{name}.wasm")), module).unwrap();
        self.write_manifest(name, &standard_manifest(name, extra))
    }

    /// Adds a tool with `module` read from a file.
    pub fn add_file(&self, name: &str, module: &Path, extra: &str) -> PathBuf {
        self.add(name, &std::fs::read(module).unwrap(), extra)
    }

    /// Copies the first-party plugin `name` (its folder's files: manifest, schema, module)
    /// in, where a test may change it.
    pub fn add_plugin(&self, name: &str) -> PathBuf {
        let folder = self.dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        for entry in std::fs::read_dir(repo_root().join("plugins").join(name)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::copy(&path, folder.join(path.file_name().unwrap())).unwrap();
            }
        }
        folder
    }

    /// Writes `tool.toml` of folder `name` verbatim.
    pub fn write_manifest(&self, name: &str, manifest: &str) -> PathBuf {
        let folder = self.dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        let path = folder.join("tool.toml");
        std::fs::write(&path, manifest).unwrap();
        path
    }
}

/// A manifest with every required key; `extra` lines come last, and a key in `extra`
/// replaces the standard one.
pub fn standard_manifest(name: &str, extra: &str) -> String {
    let overridden = |key: &str| {
        extra.lines().any(|line| {
            line.trim_start().starts_with(&format!("{key} "))
                || line.trim_start().starts_with(&format!("{key}="))
        })
    };
    let mut manifest = String::new();
    for (key, value) in [
        ("name", format!("\"{name}\"")),
        ("version", "\"0.1.0\"".to_owned()),
        ("description", format!("\"test tool {name}\"")),
        ("risk", "\"read_only\"".to_owned()),
        ("engine", "\"wasm\"".to_owned()),
        ("module", format!("\"{name}.wasm\"")),
        ("profile", "\"strict\"".to_owned()),
        ("timeout_ms", "20000".to_owned()),
        ("input_schema", "{ type = \"object\" }".to_owned()),
    ] {
        if !overridden(key) {
            manifest.push_str(&format!("{key} = {value}\n"));
        }
    }
    manifest.push_str(extra);
    manifest.push('\n');
    manifest
}

/// The module cache shared by the tests of one target directory (and by the daemons they
/// start as processes), or `AIRLOCK_TEST_MODULE_CACHE`: deploy/container/test.sh runs the
/// escape corpus inside the image with the checkout mounted read-only.
pub fn shared_module_cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("AIRLOCK_TEST_MODULE_CACHE") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("tests run from target/<profile>/deps")
        .join("airlock-test-modules")
}

/// Options for a test daemon.
pub struct DaemonOptions {
    pub tools_dirs: Vec<PathBuf>,
    /// Defaults to the repository's `sandbox-profiles/`.
    pub profiles_dir: PathBuf,
    /// Defaults to a fresh temporary directory.
    pub state_dir: Option<PathBuf>,
    /// Defaults to one cache shared by every test of the run (`target/airlock-test-modules`),
    /// so each module is compiled once per run rather than once per test.
    pub module_cache_dir: Option<PathBuf>,
    pub max_concurrent_calls: u32,
    pub agent: AgentSettings,
    /// The OpenTelemetry collector to export to (`[otlp]`).
    pub otlp: airlock_daemon::config::OtlpFile,
    /// The Prometheus endpoint (`[metrics]`); off unless `listen` is set.
    pub metrics: airlock_daemon::config::MetricsFile,
    /// Whether the audit log records (on, as by default).
    pub audit: bool,
    /// Tenants besides `default`, and Unix socket trust.
    pub auth: AuthSettings,
    /// Where to listen; a loopback port when unset.
    pub listen: Option<ListenAddr>,
    pub tls: Option<TlsFiles>,
    /// Workspace roots; a fresh temporary directory (`workspace_root`) is always the first.
    pub extra_workspace_roots: Vec<PathBuf>,
    /// Serve MCP over Streamable HTTP here (port 0: any); see [`TestDaemon::mcp_addr`].
    pub mcp_listen: Option<std::net::SocketAddr>,
    /// OAuth 2.1 at the MCP endpoint.
    pub mcp_oauth: Option<airlock_daemon::config::McpOAuthSettings>,
    /// The web console: the built-in pages unless set otherwise.
    pub console: ConsoleSettings,
    /// `[approvals]`: webhooks and the links they carry.
    pub approvals: airlock_daemon::config::ApprovalsFile,
    /// How a hosted server that says nothing is trusted (`mcp_trust`).
    pub mcp_trust: airlock_daemon::config::TrustMode,
    /// The operator's policy rule files, for every tenant (`[policy] files`).
    pub policy_files: Vec<PathBuf>,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            tools_dirs: Vec::new(),
            profiles_dir: repo_root().join("sandbox-profiles"),
            state_dir: None,
            module_cache_dir: Some(shared_module_cache()),
            max_concurrent_calls: 16,
            agent: AgentSettings::default(),
            otlp: Default::default(),
            metrics: Default::default(),
            audit: true,
            auth: AuthSettings::default(),
            listen: None,
            tls: None,
            extra_workspace_roots: Vec::new(),
            mcp_listen: None,
            mcp_oauth: None,
            policy_files: Vec::new(),
            console: ConsoleSettings::default(),
            approvals: Default::default(),
            mcp_trust: Default::default(),
        }
    }
}

/// A daemon serving on a loopback port, stopped when dropped.
pub struct TestDaemon {
    /// `http://127.0.0.1:<port>` (or `unix:/path`, `https://localhost:<port>`).
    pub endpoint: String,
    /// The `default` tenant's token, from the state dir.
    pub token: String,
    /// The only directory requests may name workspaces in.
    pub workspace_root: TempDir,
    pub state_dir: PathBuf,
    /// Where the daemon serves MCP, when `mcp_listen` was set.
    pub mcp_addr: Option<std::net::SocketAddr>,
    /// Where the Prometheus endpoint listens, when `metrics.listen` was set.
    pub metrics_addr: Option<std::net::SocketAddr>,
    refused: Vec<String>,
    reloader: std::sync::Arc<airlock_daemon::Reloader>,
    _state: Option<TempDir>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl TestDaemon {
    pub async fn start(options: DaemonOptions) -> TestDaemon {
        let workspace_root = tempfile::tempdir().unwrap();
        let (state_dir, state) = match options.state_dir {
            Some(dir) => (dir, None),
            None => {
                let temp = tempfile::tempdir().unwrap();
                (temp.path().to_owned(), Some(temp))
            }
        };
        let tls = options.tls.is_some();
        let mut workspace_roots = vec![workspace_root.path().to_owned()];
        workspace_roots.extend(options.extra_workspace_roots);
        let config = DaemonConfig {
            listen: options
                .listen
                .unwrap_or_else(|| "127.0.0.1:0".parse().unwrap()),
            tls: options.tls,
            auth: options.auth,
            tools_dirs: options.tools_dirs,
            profiles_dir: options.profiles_dir,
            state_dir: state_dir.clone(),
            module_cache_dir: options.module_cache_dir,
            workspace_roots,
            wasm_max_concurrent_calls: options.max_concurrent_calls,
            shutdown_grace: Duration::from_secs(2),
            agent: options.agent,
            store: StoreBackend::default(),
            retention: None,
            blob_cap_bytes: airlock_daemon::config::DEFAULT_BLOB_CAP_BYTES,
            otlp: options.otlp,
            metrics: options.metrics,
            audit: options.audit,
            egress: Default::default(),
            mcp_listen: options.mcp_listen,
            mcp_trust: options.mcp_trust,
            mcp_oauth: options.mcp_oauth,
            console: options.console,
            policy_files: options.policy_files,
            approvals: options.approvals,
        };
        let daemon = Daemon::build(config).await.expect("daemon builds");
        let refused = daemon
            .refused_tools()
            .iter()
            .map(|error| error.to_string())
            .collect();
        let token = read_token(&state_dir);
        let reloader = daemon.reloader();
        let listener = daemon.bind().await.expect("bind loopback");
        let mcp_addr = daemon.mcp_addr();
        let metrics_addr = daemon.metrics_addr();
        let endpoint = match listener.local_addr() {
            Some(addr) if tls => format!("https://localhost:{}", addr.port()),
            Some(addr) => format!("http://{addr}"),
            None => listener.describe(),
        };
        tokens()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(endpoint.clone(), token.clone());
        let (shutdown, stop) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            daemon
                .serve(listener, async {
                    let _ = stop.await;
                })
                .await
                .expect("daemon serves");
        });
        TestDaemon {
            endpoint,
            token,
            workspace_root,
            state_dir,
            mcp_addr,
            metrics_addr,
            refused,
            reloader,
            _state: state,
            shutdown: Some(shutdown),
            server: Some(server),
        }
    }

    /// Starts a daemon serving the tools in `tools`.
    pub async fn with_tools(tools: &ToolsDir) -> TestDaemon {
        TestDaemon::start(DaemonOptions {
            tools_dirs: vec![tools.path().to_owned()],
            ..DaemonOptions::default()
        })
        .await
    }

    /// Why each refused tool was refused.
    /// Reloads the tools and profiles, as SIGHUP does.
    pub async fn reload(&self) -> airlock_daemon::Reloaded {
        self.reloader.reload().await.expect("the reload runs")
    }

    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// A connection without a token: enough for health and reflection only.
    pub async fn channel(&self) -> Channel {
        // `Endpoint` (unlike `Channel::from_shared`) also takes `unix:/path`.
        tonic::transport::Endpoint::from_shared(self.endpoint.clone())
            .unwrap()
            .connect()
            .await
            .expect("connect to the test daemon")
    }

    /// A connection that sends `token` with every call.
    pub async fn channel_with_token(&self, token: &str) -> AuthedChannel {
        InterceptedService::new(self.channel().await, BearerToken::new(token))
    }

    /// A connection as the `default` tenant.
    pub async fn authed_channel(&self) -> AuthedChannel {
        self.channel_with_token(&self.token).await
    }

    pub async fn tools(&self) -> pb::tools_client::ToolsClient<AuthedChannel> {
        pb::tools_client::ToolsClient::new(self.authed_channel().await)
    }

    pub async fn policy(&self) -> pb::policy_client::PolicyClient<AuthedChannel> {
        pb::policy_client::PolicyClient::new(self.authed_channel().await)
    }

    /// A fresh workspace directory inside the daemon's workspace root.
    pub fn workspace(&self, name: &str) -> PathBuf {
        let dir = self.workspace_root.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Runs a tool and collects its whole event stream.
    pub async fn exec(
        &self,
        tool: &str,
        arguments: serde_json::Value,
        workspace: Option<&Path>,
    ) -> Execution {
        self.exec_request(pb::ExecuteToolRequest {
            tool: tool.to_owned(),
            arguments_json: arguments.to_string(),
            workspace: workspace
                .map(|w| w.to_str().unwrap().to_owned())
                .unwrap_or_default(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .expect("ExecuteTool is accepted")
    }

    pub async fn exec_request(
        &self,
        request: pb::ExecuteToolRequest,
    ) -> Result<Execution, tonic::Status> {
        let stream = self.tools().await.execute_tool(request).await?.into_inner();
        Execution::read(stream).await
    }

    /// Stops the daemon and waits until it has stopped.
    pub async fn stop(mut self) {
        self.stop_inner().await;
    }

    async fn stop_inner(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("daemon task");
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// Everything one call streamed.
#[derive(Debug, Default)]
pub struct Execution {
    pub execution_id: Option<String>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub result: Option<pb::ToolResult>,
    pub events: Vec<Event>,
}

impl Execution {
    /// Everything an `ExecuteTool` stream brings, to its end.
    pub async fn read(
        mut stream: tonic::Streaming<pb::ExecuteToolEvent>,
    ) -> Result<Execution, tonic::Status> {
        let mut execution = Execution::default();
        while let Some(event) = stream.message().await? {
            execution.push(event.event.expect("every event carries a payload"));
        }
        Ok(execution)
    }

    fn push(&mut self, event: Event) {
        match &event {
            Event::Started(started) => {
                assert!(self.execution_id.is_none(), "two started events");
                self.execution_id = Some(started.execution_id.clone());
            }
            Event::Output(output) => match pb::OutputStream::try_from(output.stream) {
                Ok(pb::OutputStream::Stdout) => self.stdout.extend_from_slice(&output.data),
                Ok(pb::OutputStream::Stderr) => self.stderr.extend_from_slice(&output.data),
                other => panic!("output on an unknown stream: {other:?}"),
            },
            Event::Finished(result) => {
                assert!(self.result.is_none(), "two finished events");
                self.result = Some(result.clone());
            }
            Event::Approval(_) => {
                assert!(
                    self.execution_id.is_none() && self.result.is_none(),
                    "an approval comes first"
                );
            }
        }
        self.events.push(event);
    }

    pub fn result(&self) -> &pb::ToolResult {
        self.result
            .as_ref()
            .expect("the stream ended with a result")
    }

    pub fn status(&self) -> pb::ToolStatus {
        pb::ToolStatus::try_from(self.result().status).expect("a known status")
    }

    /// The result's content parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.result().content)
            .unwrap_or_else(|err| panic!("content is not JSON ({err}): {:?}", self.result()))
    }

    /// Asserts the status, showing the whole result when it differs.
    #[track_caller]
    pub fn assert_status(&self, expected: pb::ToolStatus) -> &Self {
        assert_eq!(
            self.status(),
            expected,
            "result: {:#?}\nstderr: {}",
            self.result(),
            String::from_utf8_lossy(&self.stderr)
        );
        self
    }
}

/// A profiles directory for one test: the repository's profiles plus the test's own.
pub struct ProfilesDir {
    dir: TempDir,
}

impl Default for ProfilesDir {
    fn default() -> Self {
        Self::new()
    }
}

impl ProfilesDir {
    pub fn new() -> ProfilesDir {
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(repo_root().join("sandbox-profiles")).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
        ProfilesDir { dir }
    }

    /// Adds profile `name` with the given TOML.
    pub fn add(&self, name: &str, toml: &str) -> &Self {
        std::fs::write(self.dir.path().join(format!("{name}.toml")), toml).unwrap();
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// A binary of the workspace (`airlockd`, `airlock`), from the target directory this test
/// runs from. `cargo build --bins` (part of scripts/test.sh) builds them.
pub fn cargo_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("tests run from target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the binaries first with `cargo build --bins` (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The client side of one `Agent.Run` stream: send requests, read the run's events.
pub struct RunStream {
    requests: tokio::sync::mpsc::UnboundedSender<pb::RunRequest>,
    events: tonic::Streaming<pb::RunEvent>,
    /// Every event read so far.
    pub seen: Vec<pb::RunEvent>,
}

impl TestDaemon {
    pub async fn agent(&self) -> pb::agent_client::AgentClient<AuthedChannel> {
        pb::agent_client::AgentClient::new(self.authed_channel().await)
    }

    /// Run `run_id` as `GetRun` answers it to the `default` tenant.
    pub async fn run_info(&self, run_id: &str) -> pb::RunInfo {
        self.agent()
            .await
            .get_run(pb::GetRunRequest {
                run_id: run_id.into(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    /// Opens a `Run` stream whose first message is `first`.
    pub async fn open_run(
        &self,
        first: pb::run_request::Request,
    ) -> Result<RunStream, tonic::Status> {
        RunStream::open(self.agent().await, first).await
    }

    /// Attaches to run `run_id` after event `after_seq`.
    pub async fn attach_run(&self, run_id: &str, after_seq: u64) -> RunStream {
        self.open_run(pb::run_request::Request::Attach(pb::AttachRun {
            run_id: run_id.into(),
            after_seq,
        }))
        .await
        .expect("attaches")
    }

    /// Starts a run.
    pub async fn start_run(&self, start: pb::StartRun) -> RunStream {
        self.open_run(pb::run_request::Request::Start(start))
            .await
            .expect("the run starts")
    }
}

/// A `StartRun` for the scripted model playing `script` in `workspace`.
pub fn scripted_run(workspace: &Path, script: &serde_json::Value) -> pb::StartRun {
    pb::StartRun {
        workspace: workspace.to_str().unwrap().to_owned(),
        input: "do the task".into(),
        model: Some(pb::ModelConfig {
            model: "scripted".into(),
            script: script.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl RunStream {
    /// Opens a `Run` stream on `agent` whose first message is `first`.
    pub async fn open(
        mut agent: pb::agent_client::AgentClient<AuthedChannel>,
        first: pb::run_request::Request,
    ) -> Result<RunStream, tonic::Status> {
        let (requests, receiver) = tokio::sync::mpsc::unbounded_channel();
        requests
            .send(pb::RunRequest {
                request: Some(first),
            })
            .unwrap();
        let events = agent
            .run(tokio_stream::wrappers::UnboundedReceiverStream::new(
                receiver,
            ))
            .await?
            .into_inner();
        Ok(RunStream {
            requests,
            events,
            seen: Vec::new(),
        })
    }

    pub fn send(&self, request: pb::run_request::Request) {
        self.requests
            .send(pb::RunRequest {
                request: Some(request),
            })
            .expect("the stream is open");
    }

    pub fn decide(&self, approval_id: &str, decision: pb::Decision, reason: &str) {
        self.send(pb::run_request::Request::Decision(pb::ApprovalDecision {
            approval_id: approval_id.into(),
            decision: decision as i32,
            reason: reason.into(),
            digest: String::new(),
            grant_prefix: Vec::new(),
        }));
    }

    /// The next event, `None` at the end, or the status the stream ended with.
    pub async fn next_raw(&mut self) -> Result<Option<pb::RunEvent>, tonic::Status> {
        let event = self.events.message().await?;
        if let Some(event) = &event {
            self.seen.push(event.clone());
        }
        Ok(event)
    }

    /// The next event, or `None` when the stream ended.
    pub async fn next(&mut self) -> Option<pb::RunEvent> {
        let event = tokio::time::timeout(Duration::from_secs(60), self.events.message())
            .await
            .expect("an event within a minute")
            .expect("the stream stays healthy")?;
        self.seen.push(event.clone());
        Some(event)
    }

    /// Reads to the end of the stream.
    pub async fn drain(&mut self) {
        while self.next().await.is_some() {}
    }

    /// Reads until an event matches, and returns it.
    pub async fn until<T>(
        &mut self,
        mut pick: impl FnMut(&pb::run_event::Event) -> Option<T>,
    ) -> T {
        loop {
            let event = self.next().await.unwrap_or_else(|| {
                panic!(
                    "the stream ended before the awaited event; seen: {:#?}",
                    self.seen
                )
            });
            if let Some(found) = event.event.as_ref().and_then(&mut pick) {
                return found;
            }
        }
    }

    /// Reads to the end of the run and returns how it finished.
    pub async fn finished(&mut self) -> pb::RunFinished {
        let finished = self
            .until(|event| match event {
                pb::run_event::Event::RunFinished(finished) => Some(finished.clone()),
                _ => None,
            })
            .await;
        assert!(self.next().await.is_none(), "events after run_finished");
        finished
    }

    pub async fn approval_requested(&mut self) -> pb::ApprovalRequest {
        self.until(|event| match event {
            pb::run_event::Event::ApprovalRequested(requested) => requested.request.clone(),
            _ => None,
        })
        .await
    }

    pub fn run_id(&self) -> &str {
        &self.seen.first().expect("at least one event").run_id
    }

    /// Every event seen so far, streamed pieces included.
    pub fn seen(&self) -> &[pb::RunEvent] {
        &self.seen
    }

    /// The events seen so far of one kind.
    pub fn of<T>(&self, pick: impl Fn(&pb::run_event::Event) -> Option<T>) -> Vec<T> {
        self.seen
            .iter()
            .filter_map(|event| event.event.as_ref().and_then(&pick))
            .collect()
    }
}

/// `airlockd` as a real process: started on an ephemeral loopback port, its log collected.
pub struct DaemonProcess {
    child: tokio::process::Child,
    pub endpoint: String,
    /// The `default` tenant's token, read from the file the daemon names in its log.
    pub token: String,
    log: Arc<Mutex<String>>,
}

/// What a starting `airlockd` process logged up to the moment it served.
pub(crate) struct Startup {
    /// The `default` tenant's token, read from the file the daemon names in its log.
    pub(crate) token: String,
    /// The `airlockd serving` line, which names where it listens.
    pub(crate) serving: String,
    /// Every line logged, still collected in the background after the start.
    pub(crate) log: Arc<Mutex<String>>,
}

/// Reads the log of `child` (an `airlockd` with stderr piped) until the daemon serves, and
/// keeps collecting it afterwards, so that a failing test can show all of it.
pub(crate) async fn await_serving(child: &mut tokio::process::Child) -> Startup {
    use tokio::io::AsyncBufReadExt;
    let stderr = child.stderr.take().expect("airlockd's stderr is piped");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let log = Arc::new(Mutex::new(String::new()));
    let mut token = None;
    let serving = loop {
        let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .expect("airlockd serves within two minutes")
            .unwrap()
            .unwrap_or_else(|| panic!("airlockd exited before serving:\n{}", log.lock().unwrap()));
        log.lock().unwrap().push_str(&format!("{line}\n"));
        if line.contains("access tokens loaded")
            && let Some(path) = line
                .split("token_file=")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
        {
            token = Some(read_token(Path::new(path).parent().unwrap()));
        }
        if line.contains("airlockd serving") {
            break line;
        }
    };
    let collected = log.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            collected.lock().unwrap().push_str(&format!("{line}\n"));
        }
    });
    let token = token.unwrap_or_else(|| {
        panic!(
            "airlockd did not log its token file:\n{}",
            log.lock().unwrap()
        )
    });
    Startup {
        token,
        serving,
        log,
    }
}

/// How to start an `airlockd` process beyond its arguments.
#[derive(Debug, Clone)]
pub struct ProcessOptions {
    /// `--listen`; a free loopback port by default.
    pub listen: String,
    /// Extra environment, e.g. `AIRLOCK_TEST_PAUSE`.
    pub env: Vec<(String, String)>,
}

impl Default for ProcessOptions {
    fn default() -> ProcessOptions {
        ProcessOptions {
            listen: "127.0.0.1:0".into(),
            env: Vec::new(),
        }
    }
}

/// `airlockd ARGS` in `cwd`, with its standard error piped to the test.
pub fn airlockd_command(
    args: &[&str],
    cwd: &Path,
    options: &ProcessOptions,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(cargo_bin("airlockd"));
    command
        .args(["--listen", &options.listen])
        .args(args)
        .current_dir(cwd)
        // The daemon's own default filter, as its users run it (a test that wants more sets
        // AIRLOCK_LOG in its options).
        .env_remove("AIRLOCK_LOG")
        .env("NO_COLOR", "1")
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

impl DaemonProcess {
    /// Starts `airlockd --listen 127.0.0.1:0 ARGS` in `cwd` and waits until it serves.
    pub async fn start(args: &[&str], cwd: &Path) -> DaemonProcess {
        DaemonProcess::start_with(args, cwd, &ProcessOptions::default()).await
    }

    /// As [`DaemonProcess::start`], with `options`.
    pub async fn start_with(args: &[&str], cwd: &Path, options: &ProcessOptions) -> DaemonProcess {
        let mut child = airlockd_command(args, cwd, options)
            .spawn()
            .expect("airlockd starts");
        let Startup {
            token,
            serving,
            log,
        } = await_serving(&mut child).await;
        let addr = serving
            .split("listen=Some(")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or_else(|| panic!("airlockd serves no TCP address: {serving}"));
        DaemonProcess::serving(child, format!("http://{addr}"), token, log)
    }

    /// A daemon that serves at `endpoint`, its token known to [`connect`].
    fn serving(
        child: tokio::process::Child,
        endpoint: String,
        token: String,
        log: Arc<Mutex<String>>,
    ) -> DaemonProcess {
        tokens()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(endpoint.clone(), token.clone());
        DaemonProcess {
            child,
            endpoint,
            token,
            log,
        }
    }

    /// Starts `airlockd --listen systemd ARGS` in `cwd` as a systemd socket unit would:
    /// `systemd-socket-activate` binds `socket` and execs the daemon with it (`LISTEN_FDS`)
    /// at the first connection, which this makes; `env` is set for the daemon too (e.g.
    /// `NOTIFY_SOCKET`). Waits until it serves.
    pub async fn socket_activated(
        args: &[&str],
        cwd: &Path,
        socket: &Path,
        env: &[(&str, &str)],
    ) -> DaemonProcess {
        let mut command = tokio::process::Command::new("systemd-socket-activate");
        command.arg(format!("--listen={}", socket.display()));
        for (name, value) in env {
            command.arg(format!("--setenv={name}={value}"));
        }
        let mut child = command
            .arg(cargo_bin("airlockd"))
            .args(["--listen", "systemd"])
            .args(args)
            .current_dir(cwd)
            .env_remove("AIRLOCK_LOG")
            .env("NO_COLOR", "1")
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("systemd-socket-activate starts (Debian's systemd package)");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        // The activator binds the socket, then waits for a first connection to exec.
        let _first = loop {
            if let Ok(stream) = std::os::unix::net::UnixStream::connect(socket) {
                break stream;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "systemd-socket-activate did not bind {}",
                socket.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let Startup { token, log, .. } = await_serving(&mut child).await;
        DaemonProcess::serving(child, format!("unix:{}", socket.display()), token, log)
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The daemon's process id.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id().expect("running")).unwrap()
    }

    /// Waits (a minute at most) until the daemon has logged a line containing `text`.
    pub async fn await_log(&self, text: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !self.log().contains(text) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "airlockd did not log `{text}` within a minute:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: signalling our own child process.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0);
    }

    /// SIGKILL, and wait until it is gone.
    pub async fn kill(mut self) {
        self.signal(libc::SIGKILL);
        self.child.wait().await.unwrap();
    }

    pub async fn wait(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("airlockd exits within a minute")
            .unwrap()
    }

    /// A connection as the `default` tenant.
    pub async fn channel(&self) -> AuthedChannel {
        connect_with_token(&self.endpoint, &self.token).await
    }

    pub async fn agent(&self) -> pb::agent_client::AgentClient<AuthedChannel> {
        pb::agent_client::AgentClient::new(self.channel().await)
    }

    /// The names of the tools `ListTools` says the daemon serves.
    pub async fn tool_names(&self) -> Vec<String> {
        pb::tools_client::ToolsClient::new(self.channel().await)
            .list_tools(pb::ListToolsRequest {})
            .await
            .unwrap()
            .into_inner()
            .tools
            .into_iter()
            .map(|tool| tool.name)
            .collect()
    }
}

/// Approves every request pending on `daemon`'s console after `delay` each, until aborted or
/// until the daemon's stream ends (it died). An answer the daemon rejects is sent again
/// after `delay`, a few times at most: in a fleet, the daemon executing the run may have
/// died before applying it, and its successor waits for one.
pub fn approver(daemon: &DaemonProcess, delay: Duration) -> JoinHandle<()> {
    /// How many times one request is answered again.
    const RETRIES: u32 = 20;
    let endpoint = daemon.endpoint.clone();
    tokio::spawn(async move {
        let Ok(channel) = connect(&endpoint).await else {
            return;
        };
        let (decisions, receiver) = tokio::sync::mpsc::unbounded_channel();
        let Ok(response) = pb::agent_client::AgentClient::new(channel)
            .approvals(tokio_stream::wrappers::UnboundedReceiverStream::new(
                receiver,
            ))
            .await
        else {
            return;
        };
        let mut requests = response.into_inner();
        // Each request's digest, and how many times it was answered again.
        let mut answered: HashMap<String, (String, u32)> = HashMap::new();
        while let Ok(Some(request)) = requests.message().await {
            let digest = match pb::ApprovalState::try_from(request.state) {
                Ok(pb::ApprovalState::Pending) => {
                    answered
                        .entry(request.approval_id.clone())
                        .or_insert((request.digest.clone(), 0));
                    request.digest
                }
                Ok(pb::ApprovalState::DecisionRejected) => {
                    match answered.get_mut(&request.approval_id) {
                        Some((digest, again)) if *again < RETRIES => {
                            *again += 1;
                            digest.clone()
                        }
                        _ => continue,
                    }
                }
                _ => continue,
            };
            tokio::time::sleep(delay).await;
            let _ = decisions.send(pb::ApprovalDecision {
                approval_id: request.approval_id,
                decision: pb::Decision::ApproveOnce as i32,
                reason: String::new(),
                digest,
                grant_prefix: Vec::new(),
            });
        }
    })
}

/// An approver console on a daemon's `Approvals` stream, as `airlock approvals` is.
pub struct Console {
    decisions: tokio::sync::mpsc::UnboundedSender<pb::ApprovalDecision>,
    requests: tonic::Streaming<pb::ApprovalRequest>,
}

impl Console {
    pub async fn open(daemon: &TestDaemon) -> Console {
        Console::on(daemon.agent().await).await
    }

    /// A console through `agent` (a client of any daemon).
    pub async fn on(mut agent: pb::agent_client::AgentClient<AuthedChannel>) -> Console {
        let (decisions, receiver) = tokio::sync::mpsc::unbounded_channel();
        let requests = agent
            .approvals(tokio_stream::wrappers::UnboundedReceiverStream::new(
                receiver,
            ))
            .await
            .unwrap()
            .into_inner();
        Console {
            decisions,
            requests,
        }
    }

    pub async fn next(&mut self) -> pb::ApprovalRequest {
        tokio::time::timeout(Duration::from_secs(60), self.requests.message())
            .await
            .expect("an approval message within a minute")
            .unwrap()
            .expect("the console stream is open")
    }

    /// The next message in `state`, skipping others.
    pub async fn next_in(&mut self, state: pb::ApprovalState) -> pb::ApprovalRequest {
        loop {
            let message = self.next().await;
            if message.state == state as i32 {
                return message;
            }
        }
    }

    /// Sends `decision` as it is.
    pub fn send(&self, decision: pb::ApprovalDecision) {
        self.decisions.send(decision).unwrap();
    }

    /// Answers `approval_id` with no digest.
    pub fn decide(&self, approval_id: &str, decision: pb::Decision) {
        self.send(pb::ApprovalDecision {
            approval_id: approval_id.into(),
            decision: decision as i32,
            reason: String::new(),
            digest: String::new(),
            grant_prefix: Vec::new(),
        });
    }

    /// Answers `request`, bound to its digest.
    pub fn answer(&self, request: &pb::ApprovalRequest, decision: pb::Decision) {
        self.send(pb::ApprovalDecision {
            approval_id: request.approval_id.clone(),
            decision: decision as i32,
            reason: String::new(),
            digest: request.digest.clone(),
            grant_prefix: Vec::new(),
        });
    }
}
