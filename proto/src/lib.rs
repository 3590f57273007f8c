//! The `airlock.v1` API as Rust types: messages, the tonic client and server for every service,
//! and the encoded file descriptor set that the daemon serves through gRPC reflection; and
//! [`otlp`], the part of the OpenTelemetry protocol the daemon exports traces, metrics and logs with.
//!
//! The `.proto` files under `proto/airlock/v1` are the contract; this crate only compiles them.

#![allow(clippy::doc_lazy_continuation, clippy::large_enum_variant)]

/// Generated from `proto/airlock/v1`.
pub mod v1 {
    tonic::include_proto!("airlock.v1");

    /// The encoded `FileDescriptorSet` of every `airlock.v1` file, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/airlock_descriptor.bin"));

    impl ApprovalRequest {
        /// The request as one question to a person — the exact call, and its preview when
        /// that shows more than the arguments (a write's diff): what an MCP client puts to
        /// its user when airlock asks it (elicitation).
        pub fn as_question(&self) -> String {
            let risk = Risk::try_from(self.risk)
                .map(|risk| {
                    risk.as_str_name()
                        .trim_start_matches("RISK_")
                        .to_lowercase()
                })
                .unwrap_or_else(|_| "risky".into());
            let preview = self
                .preview
                .as_ref()
                .filter(|preview| preview.kind != "arguments" && !preview.text.is_empty())
                .map(|preview| format!("\n\n{}", preview.text))
                .unwrap_or_default();
            format!(
                "airlock: allow this {risk} call?\n{} {}{preview}",
                self.tool, self.arguments_json
            )
        }
    }

    impl run_event::Event {
        /// The event's kind, as its field is named in `RunEvent.event`.
        pub fn kind(&self) -> &'static str {
            use run_event::Event;
            match self {
                Event::RunStarted(_) => "run_started",
                Event::StepStarted(_) => "step_started",
                Event::ContextBuilt(_) => "context_built",
                Event::ModelText(_) => "model_text",
                Event::ModelRetry(_) => "model_retry",
                Event::ToolCallProposed(_) => "tool_call_proposed",
                Event::ToolCallRejected(_) => "tool_call_rejected",
                Event::ApprovalRequested(_) => "approval_requested",
                Event::ApprovalResolved(_) => "approval_resolved",
                Event::ToolStarted(_) => "tool_started",
                Event::ToolOutput(_) => "tool_output",
                Event::ToolFinished(_) => "tool_finished",
                Event::UserInput(_) => "user_input",
                Event::DecisionRejected(_) => "decision_rejected",
                Event::RunFinished(_) => "run_finished",
                Event::RunResumed(_) => "run_resumed",
                Event::Changes(_) => "changes",
                Event::TextDelta(_) => "text_delta",
                Event::ToolCallDelta(_) => "tool_call_delta",
                Event::ContextCompacted(_) => "context_compacted",
            }
        }
    }
}

/// OTLP export (OTLP 1.x), generated from the files in
/// `proto/otlp`: the `collector::{trace,metrics,logs}::v1` services' clients (what the
/// daemon's exporters send with) and servers (what a test's receiver serves). The metrics and
/// logs files are opentelemetry-proto v1.11's own, unchanged.
///
/// The modules nest as the protobuf packages do below `opentelemetry.proto`, because the
/// generated code names the messages of the other packages by relative paths.
pub mod otlp {
    pub mod common {
        /// `opentelemetry.proto.common.v1`.
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.common.v1");
        }
    }

    pub mod resource {
        /// `opentelemetry.proto.resource.v1`.
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.resource.v1");
        }
    }

    pub mod trace {
        /// `opentelemetry.proto.trace.v1`.
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.trace.v1");
        }
    }

    pub mod metrics {
        /// `opentelemetry.proto.metrics.v1`.
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.metrics.v1");
        }
    }

    pub mod logs {
        /// `opentelemetry.proto.logs.v1`.
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.logs.v1");
        }
    }

    pub mod collector {
        pub mod trace {
            /// `opentelemetry.proto.collector.trace.v1`.
            pub mod v1 {
                tonic::include_proto!("opentelemetry.proto.collector.trace.v1");
            }
        }

        pub mod metrics {
            /// `opentelemetry.proto.collector.metrics.v1`.
            pub mod v1 {
                tonic::include_proto!("opentelemetry.proto.collector.metrics.v1");
            }
        }

        pub mod logs {
            /// `opentelemetry.proto.collector.logs.v1`.
            pub mod v1 {
                tonic::include_proto!("opentelemetry.proto.collector.logs.v1");
            }
        }
    }
}

#[cfg(test)]
#[path = "compat_tests.rs"]
mod compat_tests;
