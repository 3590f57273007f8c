//! The engines' load contract: what an engine needs of a tool to load it — its code, how it
//! is called, the digest it is pinned to, and the schema its arguments follow. A tool's
//! manifest embeds one; the engines see nothing else of the manifest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::kind::EngineKind;
use crate::secrets::Secrets;

/// How arguments reach a tool and its result comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Abi {
    /// JSON arguments on stdin, one JSON result on stdout (sdk/ABI.md).
    JsonStdio,
    /// Arguments substituted into argv; stdout is the result.
    Argv,
}

/// A tool's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// A WebAssembly module or component, by its absolute path; called under the JSON ABI.
    Module(PathBuf),
    /// A program and its arguments, never passed through a shell.
    Command { argv: Vec<String>, abi: Abi },
    /// An MCP server whose tools airlock serves.
    Mcp(Arc<McpServer>),
}

/// A hosted MCP server: how it is reached, and what its tools are trusted as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub transport: McpTransport,
    /// The server may change the workspace; otherwise it is mounted read-only for it.
    pub writes_workspace: bool,
    /// An instance with no call for this long is stopped.
    pub idle_timeout: Duration,
    /// Tool name (as the server names it) to the digest its listing must have.
    pub pins: BTreeMap<String, String>,
    /// The workspace its tools are listed in when it loads.
    pub listing_workspace: ListingWorkspace,
    /// How its first listing is taken; the daemon's default when unset.
    pub trust: Option<crate::engine::mcp::trust::TrustMode>,
    /// Its tools served under their own names, not `<server>__<tool>`.
    pub bare_names: bool,
}

/// The workspace a stdio server is started in to list its tools when it loads (the
/// manifest's `mcp.listing_workspace`), made by the daemon in its state dir. A server that
/// checks its workspace at start (`mcp-server-git --repository /workspace` exits unless it is
/// a git repository) is listed in one it accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ListingWorkspace {
    /// An empty folder.
    #[default]
    Empty,
    /// An empty git repository: the layout `git init` makes, no commits, made fresh at
    /// each load.
    Git,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A program airlock starts in the process sandbox and talks to over stdin and stdout.
    Stdio { command: Vec<String> },
    /// A remote server, reached over Streamable HTTP through the egress gate.
    Http {
        url: String,
        /// The secret (by its `env` name) sent as `Authorization: Bearer …`.
        bearer_secret: Option<String>,
        /// Or tokens fetched with the client credentials grant (never both).
        oauth: Option<crate::engine::mcp::oauth::OAuthConfig>,
    },
}

/// What an engine loads.
#[derive(Debug, Clone)]
pub struct ToolImage {
    /// The tool's name, for messages and logs.
    pub name: String,
    /// The `tool.toml` it was read from: what errors name, and whose folder is the tool's.
    pub source: PathBuf,
    pub code: Code,
    /// The pinned sha256 of the module or program, lowercase hex.
    pub sha256: Option<String>,
    /// The JSON Schema of the arguments: argv placeholders must name its properties.
    pub input_schema: serde_json::Value,
    /// What the tool gets in its environment beyond its profile's.
    pub secrets: Secrets,
}

impl ToolImage {
    /// The engine that runs this code.
    pub fn engine(&self) -> EngineKind {
        match self.code {
            Code::Module(_) => EngineKind::Wasm,
            Code::Command { .. } => EngineKind::Process,
            Code::Mcp(_) => EngineKind::Mcp,
        }
    }

    pub fn abi(&self) -> Abi {
        match self.code {
            // An MCP tool's result is turned into the JSON ABI's by the engine.
            Code::Module(_) | Code::Mcp(_) => Abi::JsonStdio,
            Code::Command { abi, .. } => abi,
        }
    }

    /// The tool's folder.
    pub fn dir(&self) -> &Path {
        self.source.parent().unwrap_or(Path::new("."))
    }
}
