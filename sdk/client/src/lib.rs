//! Client library for `airlockd`, and the pieces the `airlock` command line is built from.
//!
//! - [`connect`] opens a connection to the daemon and returns an [`AirlockClient`] with one
//!   typed method per call of the `airlock.v1` API.
//! - [`exit_code`] maps a tool's status, and every way a call can fail, to a process exit
//!   code, so that scripts can tell "the tool failed" from "airlock could not ask".
//! - [`arguments`] reads a tool call's JSON arguments from the places a command line offers.
//! - [`render`] turns tools and results into the text and JSON that `airlock` prints.
//!
//! The generated API types are re-exported as [`proto`], so that users of this crate need no
//! direct dependency on `airlock-proto`.

pub mod arguments;
mod client;
mod error;
pub mod exit_code;
pub mod render;

pub use airlock_proto::v1 as proto;
pub use client::{AirlockClient, DEFAULT_ENDPOINT, Execution, ExecutionEvent, connect};
pub use error::ClientError;
