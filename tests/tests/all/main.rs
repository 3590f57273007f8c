//! airlock's integration tests, built as one binary: each module is one feature, driven
//! across crates against the real daemon (gRPC on loopback, the `airlockd` and `airlock`
//! binaries, real modules, programs and namespaces). One binary links wasmtime once; twenty
//! would spend most of CI linking.
//!
//! The shared helpers (daemons, tool folders, workspaces, network namespaces) are the
//! `airlock-tests` library, `tests/src`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_approvals;
mod agent_providers;
mod agent_runs;
mod agent_traces;
mod api_errors;
mod approval_webhooks;
mod auth;
mod cassettes;
mod changes;
mod changes_boundary;
mod cli;
mod cli_messages;
mod console_api;
mod console_browser;
mod console_review;
mod console_serving;
mod console_start;
mod console_undo;
mod crash_resume;
mod crash_stages;
mod daemon_process;
mod egress_approvals;
mod egress_process;
mod egress_wasm;
mod escape_corpus;
mod evals;
mod fleet;
mod fleet_clients;
mod fleet_outages;
mod grpc_api;
mod mcp_add;
mod mcp_add_writes;
mod mcp_conformance;
mod mcp_edge;
mod mcp_gateway;
mod mcp_host;
mod mcp_mrtr;
mod mcp_oauth;
mod mcp_questions;
mod mcp_remote_oauth;
mod mcp_trust;
mod mcp_usage;
mod mcp_writers;
mod output_story;
mod plugins;
mod policy;
mod process_sandbox;
mod process_seccomp;
mod registry;
mod retention;
mod run_reattach;
mod sessions;
mod store_failures;
mod streaming;
mod systemd_service;
mod telemetry;
mod trace_export;
mod typed_components;
mod wasm_sandbox;
