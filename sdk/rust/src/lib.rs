//! The guest side of the airlock tool ABI (`sdk/ABI.md`) for tools written in Rust.
//!
//! A tool is one function from a typed input to a typed output. [`run`] does everything
//! else the ABI asks of a WASI command: it reads the arguments from stdin, decodes them
//! into the input type (a mismatch becomes an `error` result that names the offending
//! field), calls the function and writes exactly one result document to stdout.
//!
//! ```no_run
//! use airlock_sdk::{ToolError, Workspace, IoResultExt};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! /// Counts the bytes of a workspace file.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Args {
//!     /// Workspace-relative path of the file.
//!     path: String,
//! }
//!
//! #[derive(Serialize)]
//! struct Out {
//!     bytes: u64,
//! }
//!
//! fn tool(args: Args) -> Result<Out, ToolError> {
//!     let path = Workspace::guest().resolve(&args.path)?;
//!     let metadata = std::fs::metadata(&path).with_path(&args.path)?;
//!     Ok(Out { bytes: metadata.len() })
//! }
//!
//! fn main() {
//!     airlock_sdk::run(tool)
//! }
//! ```
//!
//! Running the built tool with `--schema` as its first argument prints the input type's
//! JSON Schema, which is what the tool's `schema.json` should hold (see [`input_schema`]).
//! Derive `JsonSchema` with `#[serde(deny_unknown_fields)]` so the schema is strict
//! (`additionalProperties: false`) and the doc comments become the descriptions a model
//! reads.
//!
//! A tool that changes a workspace file writes it with [`atomic::write`], so nothing ever
//! sees the file half-written.

pub mod atomic;
mod error;
mod response;
mod runner;
mod schema;
mod workspace;

pub use error::IoResultExt;
pub use error::ToolError;
pub use runner::MAX_INPUT_BYTES;
pub use runner::handle;
pub use runner::run;
pub use schema::input_schema;
pub use workspace::GUEST_ROOT;
pub use workspace::PathError;
pub use workspace::Workspace;
