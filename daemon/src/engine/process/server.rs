//! Long-lived programs in the process sandbox: what the `mcp` engine runs a hosted MCP
//! server as.
//!
//! A server gets exactly the sandbox a process tool's call gets — namespaces, the root built
//! from its profile's grants, Landlock, seccomp, rlimits, its own cgroup, the egress proxy
//! when its profile has an allow-list — but it is started once and kept: the caller owns the
//! [`RunningServer`] and talks to it over its standard streams. Dropping it kills the
//! sandbox, and with it every process the server started (the server is pid 1 of its
//! namespace).
//!
//! The profile's `wall_time` bounds each call, not the server's life, so it is not applied
//! here; `cpu_time` is a per-process rlimit and so bounds the CPU a server uses over its
//! whole life. What the server uses is measured per call, over windows of its cgroup
//! (`usage.rs`).

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::unix::pipe;

use super::argv::CommandLine;
use super::keeper::{Armed, Keeper};
use super::plan::{Blueprint, CallSpec};
use super::sandbox::Sandbox;
use super::usage::{SharedPeak, Usage, UsageWindow};
use super::{ProcessEngine, ProxyTask, Runtime, limits, sandbox_env, serve_egress};
use crate::engine::contract::{EngineKind, Exit, LoadError, RunStats};
use crate::engine::image::Abi;
use crate::profile::Profile;

/// A server program, checked against its profile and ready to start.
pub struct ServerProgram {
    name: String,
    argv: Vec<CString>,
    blueprint: Arc<Blueprint>,
    runtime: Arc<Runtime>,
}

/// What differs between instances of one server.
pub struct ServerStart {
    /// The instance's workspace on the host.
    pub workspace: Option<PathBuf>,
    /// The workspace as the server sees it, when that is an overlay over it (see `changes`).
    pub root: Option<std::os::fd::OwnedFd>,
    /// The whole environment: the profile's, the server's secrets.
    pub env: Vec<(String, String)>,
    /// Every grant read-only, the workspace included.
    pub read_only: bool,
    /// The gate every connection of the server goes through; `Some` exactly when the
    /// profile has an allow-list.
    pub egress: Option<Arc<crate::egress::Gate>>,
}

/// A server running in its sandbox.
pub struct RunningServer {
    sandbox: Sandbox,
    keeper: Arc<Keeper>,
    blueprint: Arc<Blueprint>,
    /// The daemon's ends of the server's stdin, stdout and stderr, until taken.
    pub streams: Option<(pipe::Sender, pipe::Receiver, pipe::Receiver)>,
    _proxy: Option<ProxyTask>,
    /// The calls' windows over the group's peak, where it is one for all (cgroup v1).
    peaks: SharedPeak,
}

impl ProcessEngine {
    /// Checks a server's command against `profile` as a process tool's would be: the program
    /// must resolve inside the sandbox's view, match its pinned digest, and the profile must
    /// be enforceable here.
    pub fn prepare_server(
        &self,
        name: &str,
        source: &Path,
        command: &[String],
        sha256: Option<&str>,
        profile: &Profile,
    ) -> Result<ServerProgram, LoadError> {
        let invalid = |message: String| LoadError::Invalid {
            path: source.to_owned(),
            message,
        };
        let command_line = CommandLine::parse(command, Abi::JsonStdio, &serde_json::json!({}))
            .map_err(&invalid)?;
        let argv = command_line.render(b"{}").map_err(&invalid)?;
        let (runtime, blueprint, _digest) = self.prepare(
            EngineKind::Mcp,
            name,
            source,
            &command_line,
            sha256,
            profile,
        )?;
        Ok(ServerProgram {
            name: name.to_owned(),
            argv,
            blueprint,
            runtime,
        })
    }
}

impl ServerProgram {
    /// Starts one instance.
    pub async fn start(&self, start: ServerStart) -> Result<RunningServer, String> {
        let env = sandbox_env(&self.blueprint, start.env);
        let call = CallSpec {
            root: start.root,
            workspace: start.workspace,
            argv: self.argv.clone(),
            env,
            dry_run: false,
            read_only: start.read_only,
            // A server is started once: a sandbox built ahead would wait in vain.
            build_ahead: false,
            // It outlives every call; its calls' deadlines are the MCP client's.
            deadline: None,
        };
        let mut sandbox = self
            .runtime
            .launcher
            .launch(self.blueprint.clone(), call, Arc::new(RunStats::default()))
            .await?;
        tracing::debug!(server = %self.name, pid = sandbox.pid, "server sandbox started");
        let proxy = serve_egress(&mut sandbox, start.egress)?;
        let ends = sandbox
            .take_ends()
            .ok_or("the sandbox's standard streams are missing")?;
        let streams = (
            pipe::Sender::from_owned_fd(ends.stdin),
            pipe::Receiver::from_owned_fd(ends.stdout),
            pipe::Receiver::from_owned_fd(ends.stderr),
        );
        let streams = match streams {
            (Ok(stdin), Ok(stdout), Ok(stderr)) => (stdin, stdout, stderr),
            (Err(err), _, _) | (_, Err(err), _) | (_, _, Err(err)) => {
                return Err(format!("cannot talk to the server's sandbox: {err}"));
            }
        };
        Ok(RunningServer {
            sandbox,
            keeper: self.runtime.keeper.clone(),
            blueprint: self.blueprint.clone(),
            streams: Some(streams),
            _proxy: proxy,
            peaks: SharedPeak::default(),
        })
    }
}

impl RunningServer {
    /// Waits for the server to end, and says how it did.
    pub async fn wait(&self) -> Exit {
        match self.sandbox.wait().await {
            Ok(waited) => limits::classify(
                waited.ended,
                &self.sandbox.cgroup_stats(),
                &self.blueprint.limits,
                false,
                false,
            ),
            Err(err) => Exit::SandboxError(format!("cannot wait for the server: {err}")),
        }
    }

    /// Kills the server and every process it started.
    pub fn kill(&self) {
        self.sandbox.kill();
    }

    /// Has the deadline keeper kill the server at `deadline` unless the returned guard is
    /// dropped first: a call's deadline, kept when the daemon cannot keep it.
    pub fn keep_until(&self, deadline: std::time::Instant) -> Result<Armed, String> {
        let pidfd = self
            .sandbox
            .pidfd()
            .ok_or("the server's sandbox was already reaped")?;
        self.keeper
            .arm(pidfd, deadline)
            .map_err(|err| err.to_string())
    }

    /// Opens a window over what the server uses, for one call (see `usage`): from now, or
    /// `from_start`, since the server started. None without a cgroup.
    pub fn usage_window(&self, from_start: bool) -> Option<UsageWindow> {
        self.sandbox
            .cgroup()
            .map(|group| UsageWindow::open(group, &self.peaks, from_start))
    }

    /// What the server used since `window` opened.
    pub fn usage(&self, window: &UsageWindow) -> Usage {
        self.sandbox
            .cgroup()
            .map(|group| window.close(group, &self.peaks))
            .unwrap_or_default()
    }

    /// The server's pid, as the host sees it.
    pub fn pid(&self) -> i32 {
        self.sandbox.pid
    }
}
