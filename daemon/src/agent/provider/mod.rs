//! Model providers behind one trait: `openai` (Chat Completions), `anthropic` (Messages) and
//! `scripted` (a deterministic transcript for demos, tests and evals).
//!
//! A provider turns the loop's conversation into one model call and the model's reply back
//! into text and proposed tool calls. The reply is untrusted: tool call arguments are passed
//! on as the raw text the model wrote, valid JSON or not; the loop validates them.
//! Transient failures (timeouts, 429, 5xx) are retried with backoff inside the provider, and
//! each retry is reported through [`ProviderEvents`] so clients see it happen. Cancellation is
//! by dropping the future.

mod anthropic;
mod cassette;
mod exchange;
mod http;
mod openai;
mod retry;
mod scripted;
mod settings;
mod sse;
#[cfg(test)]
pub(crate) mod test_server;
mod types;

pub use cassette::{CASSETTE_VERSION, Cassette, CassetteEntry};
pub use retry::RetryPolicy;
pub use settings::{ModelSpec, ProviderSettings};
pub use types::{
    Exchange, Message, ModelProvider, ModelRequest, ModelResponse, ProviderError, ProviderEvent,
    ProviderEvents, Purpose, ToolCall, ToolDefinition, WireFormat,
};

/// Builds the provider for `spec`.
pub fn build(
    spec: &ModelSpec,
    settings: &ProviderSettings,
) -> Result<std::sync::Arc<dyn ModelProvider>, ProviderError> {
    match spec {
        ModelSpec::OpenAi { model } => {
            Ok(std::sync::Arc::new(openai::OpenAi::new(model, settings)?))
        }
        ModelSpec::Anthropic { model } => Ok(std::sync::Arc::new(anthropic::Anthropic::new(
            model, settings,
        )?)),
        ModelSpec::Scripted { script } => {
            Ok(std::sync::Arc::new(scripted::Scripted::parse(script)?))
        }
        ModelSpec::Replay { cassette } => {
            Ok(std::sync::Arc::new(cassette::Replay::parse(cassette)?))
        }
    }
}
