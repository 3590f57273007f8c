//! airlockd: hosts AI agents' tool calls and runs every tool in a sandbox.
//!
//! The daemon is assembled in [`Daemon`]; the gRPC surface is [`api`]; tools, their
//! manifests and the executor are in [`tools`]; the engines that run them in [`engine`].

pub mod agent;
pub mod api;
mod cancel;
pub mod config;
mod daemon;
mod domain;
pub mod egress;
pub mod engine;
pub mod ids;
pub mod output;
mod pause;
pub mod policy;
pub mod profile;
mod retention;
pub mod store;
pub mod tools;
pub mod trace;
pub mod wire;
pub mod workspace;

pub use daemon::{Daemon, StartError};
