//! `anthropic`: the Messages API (`POST {base_url}/v1/messages`, `anthropic-version:
//! 2023-06-01`) with tool use.
//!
//! The conversation maps onto alternating user and assistant messages of content blocks:
//! the system prompt goes top-level, tool calls are `tool_use` blocks (their raw arguments
//! parsed back into the `input` object the API wants) and observations are `tool_result`
//! blocks, all those answering one assistant message grouped into one user message as the
//! API requires. Answers stream by default (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop` events); text is reported as it arrives, and a retried
//! attempt streams its text again after the [`ProviderEvent::Retrying`] that announces it.

use std::collections::BTreeMap;

use bytes::Bytes;
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::exchange::{self, Sent};
use super::http::{self, ApiKey, HttpClient};
use super::retry::Failure;
use super::retry::RetryPolicy;
use super::settings::ProviderSettings;
use super::types::{
    FinishReason, Message, ModelProvider, ModelRequest, ModelResponse, ProviderError,
    ProviderEvent, ProviderEvents, ToolCall, Usage, WireFormat, WireReply, estimated_tokens,
};

/// Anthropic's own API: the host that needs a key. Other base URLs (proxies, gateways) may
/// not.
const ANTHROPIC_HOST: &str = "api.anthropic.com";

/// The API version this module speaks.
const API_VERSION: &str = "2023-06-01";

#[derive(Debug)]
pub(super) struct Anthropic {
    model: String,
    url: Url,
    headers: HeaderMap,
    http: HttpClient,
    stream: bool,
    request_timeout: std::time::Duration,
    retry: RetryPolicy,
}

impl Anthropic {
    pub fn new(model: &str, settings: &ProviderSettings) -> Result<Self, ProviderError> {
        Self::with_env(model, settings, |name| std::env::var(name).ok())
    }

    /// As [`Anthropic::new`], reading the key's variable through `env`.
    fn with_env(
        model: &str,
        settings: &ProviderSettings,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ProviderError> {
        if model.trim().is_empty() {
            return Err(ProviderError::Config("anthropic: no model named".into()));
        }
        let url = http::endpoint(&settings.anthropic_base_url, "v1/messages")?;
        let official = url.host_str() == Some(ANTHROPIC_HOST);
        let key = ApiKey::from_env(&settings.anthropic_api_key_env, official, env)?;
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = &key {
            headers.insert(
                HeaderName::from_static("x-api-key"),
                key.header("", &settings.anthropic_api_key_env)?,
            );
        }
        Ok(Anthropic {
            model: model.to_owned(),
            url,
            headers,
            http: HttpClient::new(key)?,
            stream: settings.stream,
            request_timeout: settings.request_timeout,
            retry: settings.retry,
        })
    }

    fn body(&self, request: &ModelRequest) -> Result<Bytes, ProviderError> {
        messages_body(&self.model, self.stream, request)
    }

    async fn attempt(
        &self,
        body: Bytes,
        events: &dyn ProviderEvents,
    ) -> Result<ModelResponse, Failure> {
        let request_bytes = body.len();
        let response = self
            .http
            .post(&self.url, &self.headers, body.clone())
            .await?;
        if self.stream && http::is_event_stream(&response) {
            let mut stream = self.http.events(response);
            let mut answer = StreamedAnswer::default();
            let mut recorded = events.wants_exchange().then(Vec::new);
            while let Some(event) = stream.next().await? {
                let complete = answer.apply(&event.data, events)?;
                if let Some(recorded) = recorded.as_mut() {
                    recorded.push(event.data);
                }
                if complete {
                    let response = answer.finish(request_bytes);
                    if let Some(recorded) = recorded {
                        let reply = WireReply::Stream(recorded);
                        exchange::report(WireFormat::Anthropic, &body, reply, events);
                    }
                    return Ok(response);
                }
            }
            // The connection closed mid-answer: worth another attempt.
            Err(Failure::from(ProviderError::Transport(
                "the answer stream ended before message_stop".into(),
            )))
        } else {
            let reply = self.http.body(response).await?;
            let response = parse_message(&reply, request_bytes)?;
            if events.wants_exchange() {
                let reply = exchange::whole(&reply)?;
                exchange::report(WireFormat::Anthropic, &body, reply, events);
            }
            Ok(response)
        }
    }
}

fn messages_body(
    model: &str,
    stream: bool,
    request: &ModelRequest,
) -> Result<Bytes, ProviderError> {
    let body = MessagesRequest {
        model,
        max_tokens: request.max_output_tokens,
        system: &request.system,
        messages: wire_messages(&request.messages),
        tools: request
            .tools
            .iter()
            .map(|tool| WireTool {
                name: &tool.name,
                description: &tool.description,
                input_schema: &tool.input_schema,
            })
            .collect(),
        temperature: request.temperature,
        stream,
    };
    serde_json::to_vec(&body)
        .map(Bytes::from)
        .map_err(|error| ProviderError::Config(format!("cannot encode the request: {error}")))
}

/// Answers `request` from a recorded exchange: the body is rebuilt as the recording was sent
/// (its model and streaming) and handed to `check` before the recorded reply is read as a
/// live one would be, its pieces reported as they were.
pub(super) fn replay(
    recorded: &Value,
    reply: &WireReply,
    request: &ModelRequest,
    check: impl Fn(&Value) -> Result<(), ProviderError>,
    events: &dyn ProviderEvents,
) -> Result<ModelResponse, ProviderError> {
    let sent = Sent(recorded);
    let body = messages_body(sent.model(), sent.flag("stream"), request)?;
    exchange::check_body(&body, check)?;
    match reply {
        WireReply::Whole(reply) => parse_message(&exchange::body_of(reply)?, body.len()),
        WireReply::Stream(data) => {
            let mut answer = StreamedAnswer::default();
            for data in data {
                if answer.apply(data, events)? {
                    return Ok(answer.finish(body.len()));
                }
            }
            Err(ProviderError::Malformed(
                "the recorded stream ends before message_stop".into(),
            ))
        }
    }
}

#[async_trait::async_trait]
impl ModelProvider for Anthropic {
    fn describe(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        events: &dyn ProviderEvents,
    ) -> Result<ModelResponse, ProviderError> {
        let body = self.body(request)?;
        self.retry
            .run(self.request_timeout, events, |_| {
                self.attempt(body.clone(), events)
            })
            .await
    }
}

#[derive(Serialize)]
struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

#[derive(Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// The conversation as the API wants it: roles alternate, so consecutive messages of one
/// role (the observations answering one assistant message, a user's words after them)
/// become one message, its `tool_result` blocks first as the API requires. Empty text is
/// left out, since the API rejects empty blocks.
fn wire_messages(messages: &[Message]) -> Vec<WireMessage<'_>> {
    let mut wire: Vec<WireMessage<'_>> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::User { text } => (Role::User, vec![Block::Text { text }]),
            Message::Assistant { text, tool_calls } => {
                let text = text.as_deref().map(|text| Block::Text { text });
                let calls = tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: tool_input(&call.arguments),
                });
                (Role::Assistant, text.into_iter().chain(calls).collect())
            }
            Message::Tool {
                call_id,
                content,
                is_error,
                ..
            } => (
                Role::User,
                vec![Block::ToolResult {
                    tool_use_id: call_id,
                    content,
                    is_error: *is_error,
                }],
            ),
        };
        let blocks: Vec<Block<'_>> = blocks
            .into_iter()
            .filter(|block| !matches!(block, Block::Text { text } if text.is_empty()))
            .collect();
        if blocks.is_empty() {
            continue;
        }
        match wire.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => wire.push(WireMessage {
                role,
                content: blocks,
            }),
        }
    }
    for message in &mut wire {
        // Stable: the results keep their order, and so does the text after them.
        message
            .content
            .sort_by_key(|block| !matches!(block, Block::ToolResult { .. }));
    }
    wire
}

/// A tool call's `input` from the arguments the model wrote. The API accepts only an
/// object; arguments that are not one (the model wrote bad JSON, which the observation
/// answering the call reports) are sent as an empty object.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) | Err(_) => Value::Object(serde_json::Map::new()),
    }
}

#[derive(Deserialize)]
struct MessageAnswer {
    #[serde(default)]
    content: Vec<ContentBlock>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Thinking, server tools and whatever comes next: not for the loop.
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl WireUsage {
    /// Input tokens in all: the API counts those read from or written to its prompt cache
    /// apart.
    fn input(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    }
}

fn parse_message(body: &[u8], request_bytes: usize) -> Result<ModelResponse, ProviderError> {
    let answer: MessageAnswer = serde_json::from_slice(body)
        .map_err(|error| ProviderError::Malformed(format!("message: {error}")))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in answer.content {
        match block {
            ContentBlock::Text { text: piece } => text.push_str(&piece),
            ContentBlock::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id,
                name,
                arguments: input_text(&input),
            }),
            ContentBlock::Other => {}
        }
    }
    Ok(response(
        text,
        tool_calls,
        answer.stop_reason.as_deref(),
        answer.usage.unwrap_or_default(),
        request_bytes,
    ))
}

/// `input` as arguments text; the API sends `{}` for a tool without arguments, or nothing.
fn input_text(input: &Value) -> String {
    match input {
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

/// Assembles a streamed answer from its events.
#[derive(Default)]
struct StreamedAnswer {
    /// By the index the events carry.
    blocks: BTreeMap<u64, StreamBlock>,
    stop_reason: Option<String>,
    usage: WireUsage,
}

enum StreamBlock {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The `input_json_delta` pieces.
        json: String,
        /// The input the block started with, used when no pieces came.
        start_input: Value,
    },
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: BlockDelta,
    },
    MessageDelta {
        delta: MessageDelta,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: Value,
    },
    /// `ping`, `content_block_stop`, and event types yet to come.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    /// Thinking and signatures.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    stop_reason: Option<String>,
}

impl StreamedAnswer {
    /// The ordinal among the answer's tool calls of the block at `index` (blocks of text
    /// count in the provider's numbering, not in the clients').
    fn tool_ordinal(&self, index: u64) -> u32 {
        let before = self
            .blocks
            .range(..index)
            .filter(|(_, block)| matches!(block, StreamBlock::ToolUse { .. }))
            .count();
        u32::try_from(before).unwrap_or(u32::MAX)
    }

    /// Applies one event's data; true once the message is complete.
    fn apply(&mut self, data: &str, events: &dyn ProviderEvents) -> Result<bool, ProviderError> {
        let event: StreamEvent = serde_json::from_str(data)
            .map_err(|error| ProviderError::Malformed(format!("stream event: {error}")))?;
        match event {
            StreamEvent::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.usage = usage;
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    ContentBlock::Text { text } => {
                        if !text.is_empty() {
                            events.event(ProviderEvent::TextDelta(text.clone()));
                        }
                        StreamBlock::Text(text)
                    }
                    ContentBlock::ToolUse { id, name, input } => {
                        events.event(ProviderEvent::ToolCallDelta {
                            index: self.tool_ordinal(index),
                            id: Some(id.clone()),
                            name: Some(name.clone()),
                            arguments: String::new(),
                        });
                        StreamBlock::ToolUse {
                            id,
                            name,
                            json: String::new(),
                            start_input: input,
                        }
                    }
                    ContentBlock::Other => StreamBlock::Other,
                };
                self.blocks.insert(index, block);
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                let ordinal = self.tool_ordinal(index);
                match (self.blocks.get_mut(&index), delta) {
                    (Some(StreamBlock::Text(text)), BlockDelta::TextDelta { text: piece }) => {
                        text.push_str(&piece);
                        events.event(ProviderEvent::TextDelta(piece));
                    }
                    (
                        Some(StreamBlock::ToolUse { json, .. }),
                        BlockDelta::InputJsonDelta { partial_json },
                    ) => {
                        json.push_str(&partial_json);
                        events.event(ProviderEvent::ToolCallDelta {
                            index: ordinal,
                            id: None,
                            name: None,
                            arguments: partial_json,
                        });
                    }
                    (Some(StreamBlock::Other), _) | (_, BlockDelta::Other) => {}
                    (None, _) => {
                        return Err(ProviderError::Malformed(format!(
                            "stream event: a delta for block {index}, which never started"
                        )));
                    }
                    (Some(_), _) => {
                        return Err(ProviderError::Malformed(format!(
                            "stream event: a delta of the wrong kind for block {index}"
                        )));
                    }
                }
            }
            StreamEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                // Counts here are cumulative: they replace those of message_start.
                if let Some(usage) = usage {
                    let merge = |new: Option<u64>, old: Option<u64>| new.or(old);
                    self.usage = WireUsage {
                        input_tokens: merge(usage.input_tokens, self.usage.input_tokens),
                        cache_creation_input_tokens: merge(
                            usage.cache_creation_input_tokens,
                            self.usage.cache_creation_input_tokens,
                        ),
                        cache_read_input_tokens: merge(
                            usage.cache_read_input_tokens,
                            self.usage.cache_read_input_tokens,
                        ),
                        output_tokens: merge(usage.output_tokens, self.usage.output_tokens),
                    };
                }
            }
            StreamEvent::MessageStop => return Ok(true),
            StreamEvent::Error { error } => return Err(stream_error(&error)),
            StreamEvent::Other => {}
        }
        Ok(false)
    }

    fn finish(self, request_bytes: usize) -> ModelResponse {
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                StreamBlock::Text(piece) => text.push_str(&piece),
                StreamBlock::ToolUse {
                    id,
                    name,
                    json,
                    start_input,
                } => tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: if json.is_empty() {
                        input_text(&start_input)
                    } else {
                        json
                    },
                }),
                StreamBlock::Other => {}
            }
        }
        response(
            text,
            tool_calls,
            self.stop_reason.as_deref(),
            self.usage,
            request_bytes,
        )
    }
}

/// An `error` event inside a stream, as the HTTP error its type stands for: the stream
/// began with 200, but an `overloaded_error` is a 529 all the same, and as transient.
fn stream_error(error: &Value) -> ProviderError {
    let status = match error.get("type").and_then(Value::as_str) {
        Some("invalid_request_error") => 400,
        Some("authentication_error") => 401,
        Some("permission_error") => 403,
        Some("not_found_error") => 404,
        Some("request_too_large") => 413,
        Some("rate_limit_error") => 429,
        Some("overloaded_error") => 529,
        Some(_) | None => 500,
    };
    let message = http::message_of(&serde_json::json!({ "error": error }))
        .unwrap_or_else(|| error.to_string());
    ProviderError::Http { status, message }
}

fn response(
    text: String,
    tool_calls: Vec<ToolCall>,
    stop_reason: Option<&str>,
    usage: WireUsage,
    request_bytes: usize,
) -> ModelResponse {
    let output_bytes = text.len()
        + tool_calls
            .iter()
            .map(|call| call.name.len() + call.arguments.len())
            .sum::<usize>();
    let finish = match stop_reason {
        Some("end_turn" | "stop_sequence") => FinishReason::Stop,
        Some("tool_use") => FinishReason::ToolCalls,
        Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
        Some("refusal") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
        None => FinishReason::Other("none given".to_owned()),
    };
    ModelResponse {
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        usage: Usage {
            // The API always reports usage; estimates are for gateways that drop it.
            input_tokens: usage
                .input()
                .unwrap_or_else(|| estimated_tokens(request_bytes)),
            output_tokens: usage
                .output_tokens
                .unwrap_or_else(|| estimated_tokens(output_bytes)),
        },
        finish,
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
