//! airlockd: hosts AI agents' tool calls and runs every tool in a sandbox.
//!
//! The daemon is assembled in [`Daemon`] from a [`config::DaemonConfig`]; that is the whole
//! public surface. The modules behind it are the crate's own: the gRPC surface (`api`), the
//! agent loop (`agent`), tools and the executor (`tools`), the engines that run them
//! (`engine`), the store (`store`). The `testing` feature opens the parts that the
//! integration tests, benchmarks and fuzz targets drive directly ([`testing`]).
//!
//! # Layers
//!
//! The modules stand in layers; a module imports its own layer's and those below, never one
//! above (`scripts/imports.py` checks it in CI, and that no two files import each other):
//!
//! 1. `daemon`, `check`, `reload`, `systemd` — assembling the daemon; the `check-tool`
//!    entry point; reloading tools on SIGHUP; telling systemd what the daemon does
//! 2. `api` — the gRPC, gRPC-Web, MCP and HTTP edges, translation only
//! 3. `config`, `fleet`, `retention`, `notify` — the config file; work shared by a fleet;
//!    clean-up; approval requests posted to people's webhooks
//! 4. `agent` — the run loop, its context, providers, sessions
//! 5. `tools`, `wire` — the registry and executor; domain values as API messages
//! 6. `engine` — the WebAssembly, process and MCP engines
//! 7. `changes`, `egress`, `policy`, `output`, `secrets`, `trace`, `telemetry`, `profile`,
//!    `workspace`, `http_client` — what the engines and the loop are built from
//! 8. `store` — the run store and its two backends
//! 9. `domain`, `ids`, `cancel`, `pause`, `metrics`, `audit`, `privileges`, `test_random` —
//!    values every layer names, the metrics registry every layer counts in, the audit log's
//!    front door every layer records acts through, the capabilities the engines need (which
//!    `main` takes up before any thread starts), and the unit tests' generator

mod agent;
mod api;
mod audit;
mod cancel;
mod changes;
mod check;
pub mod config;
mod daemon;
mod domain;
mod egress;
mod engine;
mod fleet;
mod http_client;
mod ids;
mod metrics;
mod notify;
mod output;
mod pause;
mod policy;
pub mod privileges;
mod profile;
mod reload;
mod retention;
mod secrets;
mod store;
mod systemd;
mod telemetry;
#[cfg(test)]
mod test_random;
mod tools;
mod trace;
mod wire;
mod workspace;

pub use check::{CheckError, CheckOptions, check_tool};
pub use daemon::{Daemon, StartError};
pub use engine::wasm::on_worker_park;
pub use reload::{ReloadError, Reloaded, Reloader};
pub use store::install_page_cache;

/// Where the access token of the `default` tenant is kept, in the state dir.
pub use api::token_file::TOKEN_FILE;

/// What the integration tests, the benchmarks and the fuzz targets drive without a daemon:
/// the engines and what they load, the manifest and argument parsers, the request limits.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::api::limits::{MAX_ARGUMENTS_BYTES, MAX_DECODING_MESSAGE_BYTES};
    pub use crate::api::mcp::probe::Probe as McpEdgeProbe;
    pub use crate::api::oauth::jwks::MIN_REFETCH as OAUTH_MIN_REFETCH;
    pub use crate::changes::boundary::check as change_boundary;
    pub use crate::changes::{
        CallRules, ChangeRules, ChangeSet, Changes, Deadline, Exclusions, Modes, Overlay,
    };
    pub use crate::domain::Risk;
    pub use crate::engine::mcp::conformance_client as mcp_conformance_client;
    pub use crate::engine::process::{
        ProcessConfig, ProcessEngine, SeccompFamily, build_seccomp, landlock_rights, seccomp_model,
    };
    pub use crate::engine::wasm::{MAX_MODULE_BYTES, WasmConfig, WasmEngine};
    pub use crate::engine::{Code, Engine, Exit, Launch, LoadedTool, RunStats, ToolKind};
    pub use crate::ids::ExecutionId;
    pub use crate::output::OutputCapture;
    pub use crate::policy::rules::file::parse as parse_rules;
    pub use crate::policy::rules::shell::parse_line;
    pub use crate::policy::rules::{Call as PolicyCall, Decision, Hosts, Layer, Policy, RuleSet};
    pub use crate::policy::{ApprovalPolicy, Gate as LevelGate, gate as level_gate};
    pub use crate::profile::{
        Access, GUEST_WORKSPACE, HostMatch, HostPattern, NetworkPolicy, Profile, Profiles,
    };
    pub use crate::store::fresh_postgres_database;
    pub use crate::tools::{AbiResult, ArgumentError, ArgumentSchema, Manifest, parse_result};
}
