//! The engine contract: what every engine is to the rest of the daemon — its kind
//! ([`EngineKind`], from `kind.rs`), the [`Engine`] that loads tools, the [`LoadedTool`] that
//! runs calls, what a call is given ([`Launch`]) and how it ends ([`Exit`]), and why a tool is
//! refused ([`LoadError`]). Also what importing an image of several tools finds ([`Imports`],
//! a hosted MCP server's tools).
//!
//! The engines (`wasm`, `process`, `mcp`) implement it and import it from here; this file
//! imports none of them back, only the leaves it names: the engines' kinds (`kind.rs`), the
//! image a tool is loaded from (`image.rs`), and the MCP client that answers a hosted
//! server's questions (`mcp/questions.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::image::ToolImage;
pub use super::kind::EngineKind;
use super::mcp::questions::Questions;
use crate::output::OutputCapture;
use crate::profile::Profile;
use crate::secrets::Secrets;

/// Runs tools of one kind.
pub trait Engine: Send + Sync {
    fn kind(&self) -> EngineKind;

    /// Loads `image`, checks that `profile` can be enforced, and prepares the tool for
    /// calls.
    fn load(&self, image: &ToolImage, profile: &Profile) -> Result<Arc<dyn LoadedTool>, LoadError>;

    /// The tools inside one image, for an engine whose images hold several (an MCP server's
    /// tools). Engines whose images are one tool each refuse.
    fn import(&self, image: &ToolImage, profile: &Arc<Profile>) -> Result<Imports, LoadError> {
        let _ = profile;
        Err(LoadError::Invalid {
            path: image.source.clone(),
            message: format!("the {} engine loads one tool per manifest", self.kind()),
        })
    }

    /// Checks again, without starting anything, what an import checked of the files
    /// `image` names (a hosted server's program and its pinned digest): a reload that keeps
    /// an imported image's tools asks this first, since its manifest alone cannot tell that
    /// a program beside it was replaced.
    fn recheck(&self, image: &ToolImage, profile: &Profile) -> Result<(), LoadError> {
        let _ = (image, profile);
        Ok(())
    }
}

/// What a tool's code is, and so how it is called (sdk/ABI.md); `ListTools` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// A WASI preview 1 core module, on the stdio ABI.
    WasmModule,
    /// A WASI preview 2 command component (`wasi:cli/run`), on the stdio ABI.
    WasmCommand,
    /// A component implementing the typed world `airlock:tool/tool` (sdk/wit).
    WasmComponent,
    /// A program run in the process sandbox.
    Program,
    /// A tool of a hosted MCP server.
    McpTool,
}

/// A tool ready to be called.
pub trait LoadedTool: Send + Sync {
    /// sha256 of the module or program, lowercase hex.
    fn digest(&self) -> &str;

    fn kind(&self) -> ToolKind;

    /// Runs one call to its end. Dropping the future stops the call.
    fn run(&self, launch: Launch) -> BoxFuture<'_, Exit>;

    /// Why the tool is withheld now — neither listed nor callable — if it is: a hosted
    /// server's tool whose listing no operator has trusted yet.
    fn withheld(&self) -> Option<String> {
        None
    }
}

/// Everything one call needs.
pub struct Launch {
    /// What the tool reads on stdin.
    pub stdin: Bytes,
    /// The call's workspace on the host, already checked against the workspace roots.
    pub workspace: Option<PathBuf>,
    /// The overlay the call writes through, when its profile lets it write the workspace:
    /// the engine gives the tool the overlay's view instead of the workspace (see `changes`).
    pub overlay: Option<Arc<crate::changes::Overlay>>,
    /// Where an engine that records a call's changes itself (a hosted server's, whose overlay
    /// outlives the call) leaves the call's change set.
    pub changed: Arc<std::sync::OnceLock<crate::changes::ChangeSet>>,
    pub profile: Arc<Profile>,
    /// Where stdout and stderr go, under the profile's output limit.
    pub capture: Arc<OutputCapture>,
    /// Resource use, updated while the call runs so it survives a stopped call.
    pub stats: Arc<RunStats>,
    /// The call's egress gate: `Some` exactly when the profile's network is an allow-list.
    /// Every outgoing connection of the tool goes through it.
    pub egress: Option<Arc<crate::egress::Gate>>,
    /// The secrets the tool's manifest names, for its environment.
    pub secrets: Secrets,
    /// Who the call is for: hosted servers keep one instance per tenant and workspace.
    pub tenant: Option<String>,
    /// The call's id, for a tool that logs it (a typed component's context).
    pub call_id: crate::ids::ExecutionId,
    /// When the executor stops the call (and, for a process tool, when the deadline keeper
    /// kills its sandbox if the daemon cannot).
    pub deadline: std::time::Instant,
    /// The MCP client that made the call, when it can answer a hosted server's questions.
    pub questions: Option<Arc<dyn Questions>>,
    /// The W3C `traceparent` of the span the call runs under (a run's tool span): a hosted
    /// MCP server is given it in the request's `_meta`, so its own spans continue the run's
    /// trace, as the MCP semantic conventions propagate context.
    pub trace_parent: Option<String>,
}

impl Launch {
    /// The tool's environment: what its profile passes and sets, then its secrets.
    pub fn env(&self) -> Vec<(String, String)> {
        self.secrets.environment(&self.profile)
    }
}

/// How a call ended, from the engine's point of view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// The tool exited with this code.
    Code(i32),
    /// A process was killed by this signal.
    Signal(i32),
    /// The tool trapped or crashed; the message says where.
    Trap(String),
    /// What ran the call went away while the call was in flight (a hosted server died): the
    /// call may or may not have acted.
    Lost(String),
    /// A resource limit stopped the tool.
    LimitExceeded(String),
    /// The tool was killed at the call's deadline by the deadline keeper, before the
    /// executor's own stop reached it: the same end as the executor's timeout.
    PastDeadline,
    /// The tool ended but its result is not what the ABI says a result is.
    AbiViolation(String),
    /// The call was refused before it reached the tool (a hosted tool that changed since it
    /// was trusted).
    Refused(String),
    /// The sandbox could not be set up; the tool did not run.
    SandboxError(String),
}

/// Resource use of one call.
#[derive(Debug, Default)]
pub struct RunStats {
    peak_memory_bytes: AtomicU64,
    cpu_time_ns: AtomicU64,
}

impl RunStats {
    pub fn record_memory(&self, bytes: u64) {
        self.peak_memory_bytes.fetch_max(bytes, Ordering::Relaxed);
    }

    pub fn add_cpu_time(&self, time: Duration) {
        let nanos = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
        self.cpu_time_ns.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn peak_memory_bytes(&self) -> u64 {
        self.peak_memory_bytes.load(Ordering::Relaxed)
    }

    pub fn cpu_time(&self) -> Duration {
        Duration::from_nanos(self.cpu_time_ns.load(Ordering::Relaxed))
    }
}

/// Why an engine refused a tool.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is {size} bytes; the limit is {max}")]
    TooLarge { path: PathBuf, size: u64, max: u64 },
    #[error(
        "{path} has sha256 {actual}, but the manifest pins {pinned}; refusing a changed module"
    )]
    DigestMismatch {
        path: PathBuf,
        pinned: String,
        actual: String,
    },
    #[error("{path} is not a valid tool: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path} cannot be linked: {message}")]
    Link { path: PathBuf, message: String },
    #[error("the {engine} engine cannot enforce {what} of profile `{profile}`")]
    Unenforceable {
        engine: EngineKind,
        profile: String,
        what: String,
    },
    #[error("the {engine} engine is not available on this host: {message}")]
    Unavailable { engine: EngineKind, message: String },
}

/// The engines a daemon runs, by kind.
#[derive(Default, Clone)]
pub struct Engines {
    engines: Vec<Arc<dyn Engine>>,
}

impl Engines {
    pub fn with(mut self, engine: Arc<dyn Engine>) -> Self {
        self.engines.retain(|known| known.kind() != engine.kind());
        self.engines.push(engine);
        self
    }

    pub fn get(&self, kind: EngineKind) -> Option<&Arc<dyn Engine>> {
        self.engines.iter().find(|engine| engine.kind() == kind)
    }
}

/// What a tool's annotations claim. Hints from an untrusted server: they may raise the risk
/// airlock gives a tool, never lower it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

/// One tool of a server, ready to be served.
pub struct Imported {
    /// The tool's name on the server.
    pub tool: String,
    /// The name airlock serves it under.
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    pub hints: Hints,
    pub loaded: Arc<dyn LoadedTool>,
}

/// What importing a server found: the tools it serves, and those it refused with why.
pub struct Imports {
    pub tools: Vec<Imported>,
    pub refused: Vec<String>,
}
