//! Tools: manifests, the registry the daemon serves, argument validation against each tool's
//! schema, and the executor that turns one call into a normalised [`ToolResult`].

mod abi;
mod arguments;
mod executions;
mod executor;
mod judged;
mod manifest;
mod registry;
mod result;
mod writes;

// For the fuzz targets in fuzz/, which read tool output as the executor does.
pub use crate::domain::Risk;
#[doc(hidden)]
pub use executor::{Call, CallError, CallRequest, ExecutionEvent, Executor};
pub use manifest::{MAX_TIMEOUT_MS, Manifest};
pub use registry::{MANIFEST_FILE, Registry, Tool, ToolLoadError};
pub use result::{ResultMetadata, ToolResult, ToolStatus};
pub use writes::ChangeJournal;
#[cfg(feature = "testing")]
pub use {
    abi::{AbiResult, parse_result},
    arguments::{ArgumentError, ArgumentSchema},
};
