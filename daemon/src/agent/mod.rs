//! The agent runtime: sessions, the runs of the agent loop, and their live state.
//!
//! A run belongs to the daemon, not to the client that started it: it goes on when its
//! client disconnects, and any client can follow it from any point of its event log. Live
//! runs are kept in the runtime ([`AgentRuntime`], `runtime.rs`); finished ones live only in
//! the store. A new run (`start.rs`) and a resumed one (`resume.rs`) are set up by the same
//! code (`launch.rs`: [`AgentRuntime::resolve`], [`AgentRuntime::launch`]): they differ only
//! in where their state comes from. The loop of a run is `run/`.
//!
//! This file only declares the modules and names what the rest of the daemon uses.

mod changes;
mod context;
mod elsewhere;
mod error;
pub(crate) mod judge;
mod launch;
mod live;
mod log;
mod observation;
mod preview;
mod prompt;
pub mod provider;
mod reads;
mod recording;
mod registry;
mod remote;
mod request_delta;
mod resume;
mod run;
mod runtime;
mod session;
mod settings;
mod start;
mod steer;
#[cfg(test)]
pub(crate) mod testing;
mod tokens;

pub use changes::changes_page;
pub use error::AgentError;
pub use log::Events;
pub(crate) use preview::preview;
pub use provider::{ProviderSettings, RetryPolicy};
pub use runtime::AgentRuntime;
pub use settings::{AgentSettings, RunDefaults};
pub use start::{MAX_INPUT_BYTES, RunOwner};
