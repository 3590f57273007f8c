//! Client library for `airlockd`, and the pieces the `airlock` command line is built from.
//!
//! - [`connect`] opens a connection to the daemon and returns an [`AirlockClient`] with one
//!   typed method per call of the `airlock.v1` API. An agent run is driven through a
//!   [`RunHandle`] (its events, and the decisions, cancel and input sent back), approvals of
//!   every run through an [`ApprovalConsole`].
//! - [`exit_code`] maps a tool's status, and every way a call can fail, to a process exit
//!   code, so that scripts can tell "the tool failed" from "airlock could not ask".
//! - [`arguments`] reads a tool call's JSON arguments from the places a command line offers;
//!   [`duration`] reads durations (`90s`, `5m`); [`answer`] reads a person's answer to an
//!   approval request.
//! - [`render`] turns tools, results, run events, traces and approval requests into the text
//!   and JSON that `airlock` prints.
//!
//! The generated API types are re-exported as [`proto`], so that users of this crate need no
//! direct dependency on `airlock-proto`.

pub mod answer;
pub mod arguments;
mod client;
pub mod duration;
mod error;
pub mod exit_code;
pub mod render;

pub use airlock_proto::v1 as proto;
pub use client::auth;
pub use client::{
    AirlockClient, ApprovalConsole, AuthedChannel, ConnectOptions, DEFAULT_ENDPOINT, Execution,
    ExecutionEvent, Peer, RunHandle, connect, connect_with, speaks_tls,
};
pub use error::ClientError;
