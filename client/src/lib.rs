//! The Rust library any program drives `airlockd` with.
//!
//! - [`connect`] opens a connection to the daemon — TCP, TLS, mutual TLS or the Unix socket,
//!   the token found as [`auth`] describes — and returns an [`AirlockClient`] with one typed
//!   method per call of the `airlock.v1` API. An agent run is driven through a [`RunHandle`]
//!   (its events, and the decisions, cancel and input sent back), approvals of every run
//!   through an [`ApprovalConsole`].
//! - [`ClientError`] is every way a call can fail, read from the gRPC status as proto/API.md's
//!   table says; [`exit_code`] is the exit-code convention of airlock's command-line programs
//!   built on it (the `airlock` binary among them).
//! - [`answer`] turns a person's answer to an approval request into the decision bound to that
//!   request; [`model`] reads the model a run names (`openai:MODEL`, `scripted:FILE`,
//!   `replay:FILE`) into the configuration sent with it.
//!
//! No rendering and no command-line grammar live here: those are `airlock-render` and
//! `airlock-cli`. The generated API types are re-exported as [`proto`], so that users of this
//! crate need no direct dependency on `airlock-proto`.

pub mod answer;
mod client;
mod error;
pub mod exit_code;
pub mod model;
mod token;

pub use airlock_proto::v1 as proto;
pub use client::agent::{ApprovalConsole, RunHandle};
pub use client::auth;
pub use client::{
    AirlockClient, AuthedChannel, ConnectOptions, DEFAULT_ENDPOINT, Execution, ExecutionEvent,
    connect, connect_with, speaks_tls,
};
pub use error::{ClientError, Peer};

/// The largest request document a client reads from a file to send (arguments, a script, a
/// cassette's model): 4 MiB is tonic's default limit on one gRPC message, so a larger request
/// would not reach a daemon with default settings anyway.
pub const MAX_MESSAGE_BYTES: u64 = 4 * 1024 * 1024;
