//! The `process` engine: existing programs as tools, each call in a fresh Linux sandbox.
//!
//! Every call gets new user, pid, mount, uts, network, IPC and cgroup namespaces (but for a
//! network namespace handed on between calls without a network, see `network.rs`); a root
//! built from read-only binds of the profile's grants, the workspace at `/workspace` as
//! granted, the tool's folder at `/tool`, a fresh `/proc`, a minimal `/dev`, a
//! size-limited `/tmp` and an `/etc/passwd` and `/etc/group` naming the sandbox's user, pivoted into with the host's root detached; a new session; an
//! unprivileged uid and gid (the workspace owner's, never root) mapped to the same host ids;
//! no capabilities, bounding set included; `no_new_privs`; a Landlock ruleset mirroring the
//! grants and denying TCP; a seccomp filter; rlimits; a cgroup for processes and memory; and
//! only the environment the profile sets. See `child.rs` for the order of these steps.
//!
//! Network: the namespace has no route out. A profile with an allow-list gets the daemon's
//! egress proxy on the namespace's loopback (see `egress.rs`), the one port Landlock lets the
//! tool connect to, and the proxy variables in its environment; every connection then goes
//! through the call's `egress::Gate`.
//!
//! Lifecycle: the program is pid 1 of its namespace, so when it exits, or when the executor
//! drops the call (deadline, cancel, output limit) and the sandbox is killed, the kernel
//! kills every process of the sandbox; reaping pid 1 means all of them are gone. A call's
//! deadline holds without the daemon too: the deadline keeper (`keeper.rs`), a process
//! outside the daemon's thread group, kills the sandbox then if a stopped or hung daemon
//! has not.
//!
//! Fail closed: the host is probed once when the engine starts, by building a complete
//! sandbox; if that fails, or if a profile asks for something the host lacks, tools are
//! refused at load with a message naming the missing layer.

mod argv;
mod cgroup;
mod child;
mod egress;
mod host;
mod identity;
mod keeper;
mod landlock;
mod launcher;
mod limits;
mod network;
mod pidfd;
mod plan;
mod program;
mod sandbox;
mod seccomp;
mod server;
mod spare;
mod stack;
mod sys;
mod usage;
mod view;

/// The rule builders, for the fuzz target that builds them from profiles.
#[cfg(feature = "testing")]
pub use plan::rights as landlock_rights;
#[cfg(feature = "testing")]
pub use seccomp::{Family as SeccompFamily, build as build_seccomp, model as seccomp_model};

pub(crate) use keeper::Armed;
pub(crate) use plan::openat2;
pub use server::{RunningServer, ServerProgram, ServerStart};
pub use usage::{Usage, UsageWindow};

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use super::image::{Abi, Code, ToolImage};
use crate::changes::IdMap;
use crate::engine::contract::{Engine, EngineKind, Exit, Launch, LoadError, LoadedTool, ToolKind};
use crate::output::{OutputCapture, StreamKind};
use crate::profile::{Access, NetworkPolicy, Profile};

use argv::CommandLine;
pub use argv::render_for_policy;
use host::Host;
use identity::Identities;
use keeper::Keeper;
use launcher::Launcher;
use limits::SandboxLimits;
use plan::{Blueprint, CallSpec, Devices};
use sandbox::Sandbox;
use view::View;

/// Subdirectory of the daemon's state directory the engine owns: the mount point of every
/// sandbox's root (in the sandbox's own mount namespace), and the start-up check's tool
/// folder.
const ENGINE_DIR: &str = "process";
const ROOT_DIR: &str = "root";
const PROBE_DIR: &str = "probe";

/// How often the CPU time of a sandbox's whole group is checked against its limit.
const CPU_WATCH_INTERVAL: Duration = Duration::from_millis(20);

/// Read size for stdout and stderr.
const READ_CHUNK: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// The daemon's state directory.
    pub state_dir: PathBuf,
}

/// What the engine runs on, when the host can run it.
struct Runtime {
    host: Host,
    launcher: Launcher,
    /// Kills a call's sandbox at its deadline when the daemon cannot (see `keeper`).
    keeper: Arc<Keeper>,
    root: CString,
    devices: Arc<Devices>,
    identities: Arc<Identities>,
    seccomp: seccomp::Filters,
    idmap: Option<Arc<IdMap>>,
}

pub struct ProcessEngine {
    runtime: Result<Arc<Runtime>, String>,
}

impl ProcessEngine {
    /// Probes the host and starts the engine's threads. A host that cannot run sandboxes
    /// still gets an engine: it refuses every tool with the reason.
    pub fn new(config: &ProcessConfig) -> ProcessEngine {
        let runtime = Runtime::start(config).map(Arc::new);
        match &runtime {
            Ok(runtime) => tracing::info!(
                landlock_abi = runtime.host.landlock_abi,
                cgroups = %runtime.host.cgroups.describe(),
                deadline_keeper = runtime.keeper.pid(),
                "process engine ready"
            ),
            Err(reason) => tracing::warn!(%reason, "process tools are unavailable on this host"),
        }
        ProcessEngine { runtime }
    }

    /// Why this host cannot run process tools, if it cannot.
    #[cfg(any(test, feature = "testing"))]
    pub fn unavailable(&self) -> Option<&str> {
        self.runtime.as_ref().err().map(String::as_str)
    }
}

impl Runtime {
    fn start(config: &ProcessConfig) -> Result<Runtime, String> {
        let host = Host::probe()?;
        let dir = config.state_dir.join(ENGINE_DIR);
        let root_dir = dir.join(ROOT_DIR);
        let probe_dir = dir.join(PROBE_DIR);
        for needed in [&root_dir, &probe_dir] {
            std::fs::create_dir_all(needed)
                .map_err(|err| format!("cannot create {}: {err}", needed.display()))?;
        }
        let root = CString::new(root_dir.as_os_str().as_bytes())
            .map_err(|_| format!("{} contains a NUL byte", root_dir.display()))?;
        let devices = Arc::new(
            Devices::open().map_err(|err| format!("cannot open the host's /dev devices: {err}"))?,
        );
        let identities = Arc::new(Identities::new().map_err(|err| {
            format!("cannot make the tmpfs of the sandboxes' /etc/passwd: {err}")
        })?);
        let keeper = Arc::new(
            Keeper::start().map_err(|err| format!("cannot start the deadline keeper: {err}"))?,
        );
        let launcher = Launcher::start(host.cgroups.clone(), keeper.clone())
            .map_err(|err| format!("cannot start the sandbox launcher: {err}"))?;
        let idmap = IdMap::create()
            .inspect_err(|err| {
                tracing::warn!(error = %err, "cannot make the id mapping for root-owned workspaces; tools may not write them");
            })
            .ok()
            .map(Arc::new);
        let runtime = Runtime {
            host,
            launcher,
            keeper,
            root,
            devices,
            identities,
            seccomp: seccomp::Filters::build()
                .map_err(|err| format!("cannot compile the seccomp filter: {err}"))?,
            idmap,
        };
        runtime.check_end_to_end(&probe_dir)?;
        Ok(runtime)
    }

    fn blueprint(&self, view: View, program: CString, profile: &Profile) -> Blueprint {
        let limits = SandboxLimits::new(
            &profile.limits,
            self.host.cgroups.has_memory(),
            self.host.cgroups.has_pids(),
        );
        let rlimits = limits.rlimits(|resource| self.host.hard_limit(resource));
        let family = seccomp::Family::of(&profile.network);
        Blueprint {
            view,
            program,
            limits,
            rlimits,
            landlock_abi: self.host.landlock_abi,
            cap_last: self.host.cap_last,
            family,
            seccomp: self.seccomp.get(family),
            root: self.root.clone(),
            devices: self.devices.clone(),
            identities: self.identities.clone(),
            egress_port: match profile.network {
                NetworkPolicy::None => None,
                NetworkPolicy::AllowList { .. } => Some(egress::PROXY_PORT),
            },
            executable_writes: profile.executable_writes,
            idmap: self.idmap.clone(),
        }
    }

    /// Builds one complete sandbox, without running anything in it: every layer a tool will
    /// get is set up once, so a host that cannot provide one is known before any tool loads.
    fn check_end_to_end(&self, probe_dir: &Path) -> Result<(), String> {
        let profile = probe_profile();
        let view = View::new(&profile, probe_dir)?;
        let blueprint = Arc::new(self.blueprint(view, c"/tool".to_owned(), &profile));
        let call = CallSpec {
            workspace: None,
            root: None,
            argv: vec![c"probe".to_owned()],
            env: Vec::new(),
            dry_run: true,
            read_only: false,
            build_ahead: false,
            deadline: None,
        };
        let mut sandbox = self.launcher.launch_blocking(blueprint, call)?;
        let waited = sandbox
            .wait_blocking()
            .map_err(|err| format!("cannot wait for the start-up sandbox: {err}"))?;
        match waited.ended {
            limits::Ended::Exited(0) => Ok(()),
            other => Err(format!(
                "the start-up sandbox ended unexpectedly: {other:?}"
            )),
        }
    }
}

/// Refuses a profile that asks for something this host cannot enforce.
fn check_profile(host: &Host, profile: &Profile) -> Result<(), LoadError> {
    let unenforceable = |what: String| LoadError::Unenforceable {
        engine: EngineKind::Process,
        profile: profile.name.clone(),
        what,
    };
    if host.landlock_abi < landlock::REQUIRED_ABI {
        let have = match host.landlock_abi {
            0 => "no Landlock at all".to_owned(),
            abi => format!("Landlock ABI {abi}"),
        };
        return Err(LoadError::Unavailable {
            engine: EngineKind::Process,
            message: format!(
                "Landlock ABI {} (TCP bind/connect rules, Linux 6.7) is needed to enforce network = \"none\"; this kernel has {have}",
                landlock::REQUIRED_ABI
            ),
        });
    }
    if profile.limits.processes.is_some() {
        host.can_limit_processes().map_err(unenforceable)?;
    }
    Ok(())
}

/// A profile with nothing granted, for the start-up check.
fn probe_profile() -> Profile {
    Profile {
        name: "process-engine-probe".into(),
        description: "start-up check".into(),
        files: Vec::new(),
        network: NetworkPolicy::None,
        env: crate::profile::EnvPolicy::default(),
        limits: crate::profile::Limits {
            memory_bytes: 64 << 20,
            wall_time: Duration::from_secs(10),
            cpu_time: Some(Duration::from_secs(1)),
            output_bytes: 1 << 20,
            processes: Some(4),
            open_files: Some(64),
            file_size_bytes: Some(1 << 20),
            tmp_bytes: Some(1 << 20),
        },
        executable_writes: false,
        change_exclusions: Vec::new(),
        change_rules: crate::changes::ChangeRules::default(),
        source: PathBuf::from("<built in>"),
    }
}

impl Engine for ProcessEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Process
    }

    fn load(&self, image: &ToolImage, profile: &Profile) -> Result<Arc<dyn LoadedTool>, LoadError> {
        let invalid = |message: String| LoadError::Invalid {
            path: image.source.clone(),
            message,
        };
        let Code::Command { argv, abi } = &image.code else {
            return Err(invalid("process tools name a `command`".into()));
        };
        let command_line = CommandLine::parse(argv, *abi, &image.input_schema).map_err(&invalid)?;
        let (runtime, blueprint, digest) = self.prepare(
            EngineKind::Process,
            &image.name,
            &image.source,
            &command_line,
            image.sha256.as_deref(),
            profile,
        )?;
        Ok(Arc::new(ProcessTool {
            name: image.name.clone(),
            abi: *abi,
            digest,
            command_line,
            blueprint,
            runtime,
        }))
    }
}

impl ProcessEngine {
    /// What every program the engine runs needs before its first start, a tool's or a hosted
    /// server's: the host able to enforce `profile` (for the engine `kind`, which errors
    /// name), the sandbox's view of its grants (the folder of `source`, its `tool.toml`, is
    /// seen at `/tool`), and `command_line`'s program found in that view and matching its
    /// pinned digest. Returns the runtime, the blueprint of the program's sandboxes and the
    /// program's digest.
    fn prepare(
        &self,
        kind: EngineKind,
        name: &str,
        source: &Path,
        command_line: &CommandLine,
        sha256: Option<&str>,
        profile: &Profile,
    ) -> Result<(Arc<Runtime>, Arc<Blueprint>, String), LoadError> {
        let runtime = match &self.runtime {
            Ok(runtime) => runtime,
            Err(reason) => {
                return Err(LoadError::Unavailable {
                    engine: kind,
                    message: reason.clone(),
                });
            }
        };
        check_profile(&runtime.host, profile)?;
        let dir = source.parent().unwrap_or(Path::new("."));
        let view = View::new(profile, dir).map_err(|what| LoadError::Unenforceable {
            engine: kind,
            profile: profile.name.clone(),
            what,
        })?;
        for absent in &view.absent {
            tracing::debug!(tool = %name, path = %absent.display(), "granted path does not exist on this host");
        }
        let env = profile.resolve_env(|var| std::env::var(var).ok());
        let search_path = env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map_or(program::DEFAULT_SEARCH_PATH, |(_, value)| value.as_str());
        let program =
            program::resolve(command_line.program(), &view, search_path).map_err(|message| {
                LoadError::Invalid {
                    path: source.to_owned(),
                    message: format!("the program cannot run in the sandbox: {message}"),
                }
            })?;
        if let Some(pinned) = sha256
            && pinned != program.digest
        {
            return Err(LoadError::DigestMismatch {
                path: program.host.clone(),
                pinned: pinned.to_owned(),
                actual: program.digest,
            });
        }
        let blueprint = Arc::new(runtime.blueprint(view, program.guest.clone(), profile));
        Ok((runtime.clone(), blueprint, program.digest))
    }
}

struct ProcessTool {
    name: String,
    abi: Abi,
    digest: String,
    command_line: CommandLine,
    blueprint: Arc<Blueprint>,
    runtime: Arc<Runtime>,
}

impl LoadedTool for ProcessTool {
    fn digest(&self) -> &str {
        &self.digest
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Program
    }

    fn run(&self, launch: Launch) -> BoxFuture<'_, Exit> {
        Box::pin(self.call(launch))
    }
}

impl ProcessTool {
    async fn call(&self, launch: Launch) -> Exit {
        let argv = match self.command_line.render(&launch.stdin) {
            Ok(argv) => argv,
            Err(message) => {
                return Exit::SandboxError(format!(
                    "cannot build the command line of `{}`: {message}",
                    self.name
                ));
            }
        };
        let env = sandbox_env(&self.blueprint, launch.env());
        let stdin = match self.abi {
            Abi::JsonStdio => launch.stdin.clone(),
            // The arguments are on the command line; a program that reads stdin (grep with
            // no file) must see an empty input, not the JSON.
            Abi::Argv => Bytes::new(),
        };
        let root = match &launch.overlay {
            Some(overlay) => match overlay.root().try_clone_to_owned() {
                Ok(root) => Some(root),
                Err(err) => {
                    return Exit::SandboxError(format!("cannot use the workspace overlay: {err}"));
                }
            },
            None => None,
        };
        let call = CallSpec {
            workspace: launch.workspace.clone(),
            root,
            argv,
            env,
            dry_run: false,
            build_ahead: true,
            deadline: Some(launch.deadline),
            // The executor hands a preview call its profile with every grant read-only.
            read_only: launch
                .profile
                .files
                .iter()
                .all(|grant| grant.access == Access::ReadOnly),
        };
        let mut sandbox = match self
            .runtime
            .launcher
            .launch(self.blueprint.clone(), call, launch.stats.clone())
            .await
        {
            Ok(sandbox) => sandbox,
            Err(message) => return Exit::SandboxError(message),
        };
        tracing::debug!(tool = %self.name, pid = sandbox.pid, "sandbox started");
        // Served for as long as this call runs: dropping the call drops the guard, which
        // stops the proxy and every connection through it.
        let _proxy = match serve_egress(&mut sandbox, launch.egress.clone()) {
            Ok(proxy) => proxy,
            Err(message) => return Exit::SandboxError(message),
        };
        let Some(ends) = sandbox.take_ends() else {
            return Exit::SandboxError("the sandbox's standard streams are missing".into());
        };
        let (stdin_fd, stdout, stderr) = match (
            pipe::Sender::from_owned_fd(ends.stdin),
            pipe::Receiver::from_owned_fd(ends.stdout),
            pipe::Receiver::from_owned_fd(ends.stderr),
        ) {
            (Ok(stdin_fd), Ok(stdout), Ok(stderr)) => (stdin_fd, stdout, stderr),
            (Err(err), _, _) | (_, Err(err), _) | (_, _, Err(err)) => {
                return Exit::SandboxError(format!("cannot read the sandbox's output: {err}"));
            }
        };
        let cpu_limit = self.blueprint.limits.cpu_time;
        let (_, _, _, waited) = tokio::join!(
            feed(stdin_fd, stdin),
            pump(stdout, launch.capture.clone(), StreamKind::Stdout),
            pump(stderr, launch.capture.clone(), StreamKind::Stderr),
            wait_within_cpu_limit(&sandbox, cpu_limit),
        );
        let (waited, cpu_exceeded) = match waited {
            Ok(waited) => waited,
            Err(err) => return Exit::SandboxError(format!("cannot wait for the sandbox: {err}")),
        };
        let used = sandbox.record_stats(Some(&waited));
        // Killed at or after the deadline, by the keeper (the executor's own stop drops this
        // future instead): the call ran out of time, as if the executor had stopped it.
        let past_deadline = std::time::Instant::now() >= launch.deadline;
        limits::classify(
            waited.ended,
            &used,
            &self.blueprint.limits,
            cpu_exceeded,
            past_deadline,
        )
    }
}

/// The environment a sandbox's program gets: `env`, and the proxy variables when the
/// profile has an allow-list.
fn sandbox_env(blueprint: &Blueprint, env: Vec<(String, String)>) -> Vec<CString> {
    let env = if blueprint.egress_port.is_some() {
        egress::proxy_env(env)
    } else {
        env
    };
    env.into_iter()
        .filter_map(|(name, value)| CString::new(format!("{name}={value}")).ok())
        .collect()
}

/// Serves the egress proxy inside `sandbox` through `gate`. Without a gate nothing may
/// leave: the listener closes and connections to it are refused.
fn serve_egress(
    sandbox: &mut Sandbox,
    gate: Option<Arc<crate::egress::Gate>>,
) -> Result<Option<ProxyTask>, String> {
    let (Some(listener), Some(gate)) = (sandbox.take_egress_listener(), gate) else {
        return Ok(None);
    };
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|err| format!("cannot serve the egress proxy: {err}"))?;
    Ok(Some(ProxyTask(tokio::spawn(crate::egress::proxy::serve(
        listener,
        gate,
        tokio_util::sync::CancellationToken::new(),
    )))))
}

/// The egress proxy of one call, stopped when dropped.
struct ProxyTask(tokio::task::JoinHandle<()>);

impl Drop for ProxyTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Writes the tool's stdin and closes it. A program that exits without reading it all is
/// not an error.
async fn feed(mut stdin: pipe::Sender, bytes: Bytes) {
    let _ = stdin.write_all(&bytes).await;
    let _ = stdin.shutdown().await;
}

/// Copies one stream into the capture until the end of the stream or the output limit.
async fn pump(mut stream: pipe::Receiver, capture: Arc<OutputCapture>, kind: StreamKind) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => {
                if capture.write(kind, &buf[..n]).is_err() {
                    // Over the limit: the executor stops the call; stop reading now.
                    return;
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Waits for the sandbox to end, killing it if its group's CPU time passes `limit` (the
/// per-process RLIMIT_CPU alone would let a tree of processes use the limit many times).
async fn wait_within_cpu_limit(
    sandbox: &Sandbox,
    limit: Option<Duration>,
) -> std::io::Result<(pidfd::Waited, bool)> {
    let Some(limit) = limit.filter(|_| sandbox.accounts_cpu()) else {
        return sandbox.wait().await.map(|waited| (waited, false));
    };
    let mut exceeded = false;
    // The first look comes one interval in: a sandbox has used nothing at its start.
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + CPU_WATCH_INTERVAL,
        CPU_WATCH_INTERVAL,
    );
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let wait = sandbox.wait();
    tokio::pin!(wait);
    loop {
        tokio::select! {
            waited = &mut wait => return waited.map(|waited| (waited, exceeded)),
            _ = ticks.tick() => {
                if !exceeded && sandbox.cpu_time().is_some_and(|used| used > limit) {
                    exceeded = true;
                    sandbox.kill();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_builds_a_complete_sandbox() {
        let state = tempfile::tempdir().expect("tempdir");
        let engine = ProcessEngine::new(&ProcessConfig {
            state_dir: state.path().to_owned(),
        });
        assert_eq!(engine.unavailable(), None);
    }

    #[test]
    fn what_the_host_lacks_is_refused_naming_the_layer() {
        let mut host = Host::probe().expect("probe this host");
        let profile = probe_profile();
        check_profile(&host, &profile).expect("this host can enforce the probe profile");

        host.landlock_abi = 3;
        let err = check_profile(&host, &profile).expect_err("Landlock too old");
        assert!(matches!(err, LoadError::Unavailable { .. }), "{err}");
        assert!(err.to_string().contains("Landlock ABI 4"), "{err}");
        host.landlock_abi = 0;
        let err = check_profile(&host, &profile).expect_err("no Landlock");
        assert!(err.to_string().contains("no Landlock at all"), "{err}");

        host.landlock_abi = landlock::REQUIRED_ABI;
        host.cgroups = Arc::new(cgroup::Cgroups::default());
        host.kernel = (5, 10);
        let err = check_profile(&host, &profile).expect_err("no way to limit processes");
        assert!(err.to_string().contains("limits.processes"), "{err}");
        let mut unlimited = probe_profile();
        unlimited.limits.processes = None;
        check_profile(&host, &unlimited)
            .expect("without the key, the engine default applies as well as the host allows");

        let mut networked = unlimited;
        networked.network = NetworkPolicy::AllowList {
            allow: vec!["api.github.com:443".parse().expect("pattern")],
            deny: Vec::new(),
            ask_for_unlisted: false,
        };
        check_profile(&host, &networked).expect("allow-lists are enforced through the proxy");
    }

    #[test]
    fn the_shipped_network_profile_loads_with_its_proxy_port() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles");
        let (profiles, errors) = crate::profile::Profiles::load_dir(&dir);
        assert!(errors.is_empty(), "{errors:?}");
        let profile = profiles.get("process-network").expect("process-network");
        assert!(matches!(
            profile.network,
            NetworkPolicy::AllowList { ref deny, .. } if deny.len() == 1
        ));
        let state = tempfile::tempdir().expect("tempdir");
        let engine = ProcessEngine::new(&ProcessConfig {
            state_dir: state.path().to_owned(),
        });
        let runtime = engine
            .runtime
            .as_ref()
            .expect("the process engine runs here");
        check_profile(&runtime.host, &profile).expect("enforceable");
        let view = View::new(&profile, &dir).expect("view");
        let blueprint = runtime.blueprint(view, c"/tool".to_owned(), &profile);
        assert_eq!(blueprint.egress_port, Some(egress::PROXY_PORT));
        let none = profiles.get("process-readonly").expect("process-readonly");
        let view = View::new(&none, &dir).expect("view");
        assert_eq!(
            runtime
                .blueprint(view, c"/tool".to_owned(), &none)
                .egress_port,
            None
        );
    }
}
