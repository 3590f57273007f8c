//! The vocabulary every provider shares: the conversation a model call is made of
//! ([`Message`], [`ModelRequest`]), the model's reply ([`ModelResponse`]), what a provider
//! reports while it works ([`ProviderEvent`], the wire [`Exchange`] among it), how it fails
//! ([`ProviderError`]), and the [`ModelProvider`] trait itself. Its own file so the providers (`openai`, `anthropic`,
//! `scripted`, `cassette`) and their helpers (`exchange`, `http`, `retry`) use it without
//! importing `mod.rs`, which builds them.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Whose wire format an exchange is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    /// Chat Completions.
    Openai,
    /// Messages.
    Anthropic,
    /// The scripted model's own: the provider-neutral request and response as JSON.
    Scripted,
}

/// A reply body as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WireReply {
    /// A whole JSON body.
    Whole(Value),
    /// A streamed reply: the data of each server-sent event, in order.
    Stream(Vec<String>),
}

/// The wire exchange of one model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    pub format: WireFormat,
    /// The request body as sent.
    pub request: Value,
    pub reply: WireReply,
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
}

/// One tool call the model proposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (OpenAI `call_…`, Anthropic `toolu_…`), or one the
    /// provider made up when the model gave none.
    pub id: String,
    pub name: String,
    /// The arguments exactly as the model wrote them; may be invalid JSON.
    pub arguments: String,
}

/// The conversation, in provider-neutral form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        text: String,
    },
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    /// The observation for one tool call, answering the assistant message that proposed it.
    Tool {
        call_id: String,
        name: String,
        /// What the model reads: the result, or a structured description of an error.
        content: String,
        is_error: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub system: String,
    pub messages: Vec<Message>,
    /// Shared by every step of a run.
    pub tools: Arc<[ToolDefinition]>,
    pub max_output_tokens: u32,
    pub temperature: Option<f32>,
    /// How many answers the model gave in this run before this call, those summarised or
    /// dropped from `messages` included and the session's earlier runs' not: the turn a
    /// stateless provider (the scripted one) numbers this call with.
    pub answers: u32,
    pub purpose: Purpose,
}

/// What a model call is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// The run's next step.
    #[default]
    Step,
    /// A summary of older steps, to fit the context (no tools).
    Compaction,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model wants tools called.
    ToolCalls,
    /// The output token limit cut the answer.
    Length,
    /// The provider filtered the content.
    ContentFilter,
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelResponse {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub finish: FinishReason,
}

/// What a provider reports while a call is in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderEvent {
    /// An attempt failed with a transient error; the next one starts after `delay`.
    Retrying {
        attempt: u32,
        error: String,
        delay: Duration,
    },
    /// A piece of the model's text, as it streams (only providers that stream send these).
    TextDelta(String),
    /// A piece of a proposed call, as it streams: its id and name when the provider first
    /// sends them, then pieces of its arguments.
    ToolCallDelta {
        /// Which of the answer's calls (0 for the first).
        index: u32,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    /// The wire exchange of the attempt that answered, for the run's cassette: sent once,
    /// after the answer is complete.
    Exchange(Exchange),
}

/// Receives [`ProviderEvent`]s.
pub trait ProviderEvents: Send + Sync {
    fn event(&self, event: ProviderEvent);

    /// Whether the receiver keeps the call's wire exchange ([`ProviderEvent::Exchange`]): a
    /// provider keeps a reply's pieces and builds the exchange only then.
    fn wants_exchange(&self) -> bool {
        false
    }
}

impl<F: Fn(ProviderEvent) + Send + Sync> ProviderEvents for F {
    fn event(&self, event: ProviderEvent) {
        self(event)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The provider is misconfigured (no API key, a bad URL, an invalid script).
    #[error("model provider configuration: {0}")]
    Config(String),
    /// The request could not be sent or the connection failed.
    #[error("cannot reach the model provider: {0}")]
    Transport(String),
    #[error("the model provider did not answer within {0:?}")]
    Timeout(Duration),
    /// The provider answered with an HTTP error.
    #[error("the model provider answered HTTP {status}: {message}")]
    Http { status: u16, message: String },
    /// The provider's answer could not be understood.
    #[error("the model provider's answer is malformed: {0}")]
    Malformed(String),
    /// A scripted model has no turn for this point of the conversation.
    #[error("the scripted model has no turn left: {0}")]
    ScriptExhausted(String),
    /// A replayed run asked something other than its cassette recorded.
    #[error("the run diverged from its cassette: {0}")]
    Diverged(String),
    /// Transient failures went on past the retry policy.
    #[error("the model call failed {attempts} times; last: {last}")]
    RetriesExhausted {
        attempts: u32,
        last: Box<ProviderError>,
    },
}

impl ProviderError {
    /// Whether trying again may help: transport errors, timeouts, 408, 409, 429 and 5xx.
    pub fn is_transient(&self) -> bool {
        match self {
            ProviderError::Transport(_) | ProviderError::Timeout(_) => true,
            ProviderError::Http { status, .. } => matches!(status, 408 | 409 | 429 | 500..=599),
            ProviderError::Config(_)
            | ProviderError::Malformed(_)
            | ProviderError::ScriptExhausted(_)
            | ProviderError::Diverged(_)
            | ProviderError::RetriesExhausted { .. } => false,
        }
    }
}

/// One model, reachable through its provider.
#[async_trait::async_trait]
pub trait ModelProvider: Send + Sync {
    /// `provider:model`, for events and traces.
    fn describe(&self) -> String;

    /// Whether the model's answers come from the run's client (a replayed cassette): then
    /// its usage is no provider's, and the metrics count it as airlock's `replay`, whatever
    /// model the cassette names.
    fn replayed(&self) -> bool {
        false
    }

    /// Asks the model for its next step. Dropping the future abandons the call.
    async fn complete(
        &self,
        request: &ModelRequest,
        events: &dyn ProviderEvents,
    ) -> Result<ModelResponse, ProviderError>;
}

/// A rough token count for `bytes` of text (about four bytes a token for English and code),
/// for where no count is reported: the scripted model, and servers that send no usage.
pub(super) fn estimated_tokens(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(4)).unwrap_or(u64::MAX)
}
