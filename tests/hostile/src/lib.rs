//! Hostile tools for the airlock sandbox tests.
//!
//! Each binary in `src/bin` attacks one part of the sandbox (files, memory, time, output,
//! network, the ABI itself) and says in its `//!` doc what it attacks and what outcome the
//! sandbox must produce. This library holds only what they share: the tool side of the ABI
//! (`sdk/ABI.md`), written by hand so that the tools depend on nothing but serde, and the
//! report of one attempt against the sandbox.

mod abi;
mod attempt;

pub use abi::{ToolError, read_args, run, run_raw, write_result};
pub use attempt::{Attempt, CONTENT_LIMIT, list_dir, read_head};
