//! Engines run tools. Each engine checks, when a tool is loaded, that it can enforce
//! everything the tool's profile asks for on this host (and refuses the tool otherwise), and
//! prepares it for fast calls; the executor then runs calls through [`LoadedTool::run`].
//!
//! Deadlines, cancellation and the output limit are the executor's: it drops the future
//! returned by `run`, and an engine must stop all of the tool's work when that happens.
//!
//! The contract engines implement is `contract.rs`, and what kinds there are `kind.rs`; this
//! file only names the engines and re-exports the contract and the tool image (`image.rs`), so
//! that it imports none of them.

mod contract;
mod image;
mod kind;
pub mod mcp;
pub mod process;
pub mod wasm;

/// Named outside the engines only by the integration tests and benchmarks (`crate::testing`).
#[cfg(feature = "testing")]
pub use contract::Engine;
pub use contract::{EngineKind, Engines, Exit, Launch, LoadedTool, RunStats, ToolKind};
pub use image::{Abi, Code, ListingWorkspace, McpServer, McpTransport, ToolImage};
