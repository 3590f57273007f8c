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

use super::cassette::{self, Sent, WireFormat, WireReply};
use super::http::{self, ApiKey, HttpClient};
use super::retry::Failure;
use super::{
    FinishReason, Message, ModelProvider, ModelRequest, ModelResponse, ProviderError,
    ProviderEvent, ProviderEvents, ProviderSettings, RetryPolicy, ToolCall, Usage,
    estimated_tokens,
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
                        cassette::report(WireFormat::Anthropic, &body, reply, events);
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
                let reply = cassette::whole(&reply)?;
                cassette::report(WireFormat::Anthropic, &body, reply, events);
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
    cassette::check_body(&body, check)?;
    match reply {
        WireReply::Whole(reply) => parse_message(&cassette::body_of(reply)?, body.len()),
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
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::super::test_server::{
        Events, Recorded, Reply, TestServer, sample_request, settings,
    };
    use super::*;

    const TOOL_USE: &str = include_str!("testdata/anthropic_tool_use.json");
    const FINAL: &str = include_str!("testdata/anthropic_final.json");
    const STREAM: &str = include_str!("testdata/anthropic_stream_tool_use.sse");
    const ERROR_429: &str = include_str!("testdata/anthropic_error_429.json");
    const ERROR_529: &str = include_str!("testdata/anthropic_error_529.json");
    const ERROR_400: &str = include_str!("testdata/anthropic_error_400.json");

    const KEY: &str = "sk-ant-test-0123456789";
    const IDS: [&str; 2] = [
        "toolu_01D7FLrfh4GYq7yT1ULFeyMV",
        "toolu_01NCdQ5xU8Lq9fXfPUm1qRrT",
    ];

    fn provider(settings: &ProviderSettings) -> Anthropic {
        Anthropic::with_env("claude-sonnet-4-20250514", settings, |name| {
            (name == "AIRLOCK_TEST_ANTHROPIC_KEY").then(|| KEY.to_owned())
        })
        .expect("provider")
    }

    fn streaming(base_url: &str) -> ProviderSettings {
        let mut settings = settings(base_url);
        settings.stream = true;
        settings
    }

    /// Completes `request`, bounding the call so that a bug cannot hang the suite.
    async fn complete(
        provider: &Anthropic,
        request: &ModelRequest,
    ) -> (Result<ModelResponse, ProviderError>, Events) {
        let events = Events::default();
        let result =
            tokio::time::timeout(Duration::from_secs(60), provider.complete(request, &events))
                .await
                .expect("the call ends");
        (result, events)
    }

    fn header<'a>(request: &'a Recorded, name: &str) -> Option<&'a str> {
        request
            .headers
            .get(name)
            .map(|value| value.to_str().expect("ascii header"))
    }

    #[tokio::test]
    async fn request_shape_and_tool_use() {
        let server = TestServer::start(vec![Reply::json(200, TOOL_USE)]).await;
        let anthropic = provider(&settings(&server.base_url));
        let request = sample_request(IDS);
        let (result, events) = complete(&anthropic, &request).await;
        let response = result.expect("answer");

        let [sent] = &server.requests()[..] else {
            panic!("one request expected: {:?}", server.requests())
        };
        assert_eq!(sent.method, "POST");
        assert_eq!(sent.path, "/v1/messages");
        assert_eq!(header(sent, "x-api-key"), Some(KEY));
        assert_eq!(header(sent, "anthropic-version"), Some("2023-06-01"));
        assert_eq!(header(sent, "authorization"), None);
        assert_eq!(header(sent, "content-type"), Some("application/json"));
        let Message::Tool {
            content: read_result,
            ..
        } = &request.messages[2]
        else {
            panic!("the sample's third message is an observation")
        };
        let expected = json!({
            "model": "claude-sonnet-4-20250514",
            "max_tokens": 1024,
            "system": "You fix bugs in the workspace.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "test_mean fails. Fix it."}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me look at the code."},
                    {"type": "tool_use", "id": IDS[0], "name": "read_file",
                     "input": {"path": "src/calc.py"}},
                    {"type": "tool_use", "id": IDS[1], "name": "grep",
                     "input": {"pattern": "mean(", "path": "tests"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": IDS[0], "content": read_result},
                    {"type": "tool_result", "tool_use_id": IDS[1], "is_error": true,
                     "content": "{\"status\":\"TOOL_ERROR\",\"error\":\"no such directory: tests\"}"}
                ]}
            ],
            "tools": [
                {"name": "read_file", "description": "Reads a file of the workspace.",
                 "input_schema": request.tools[0].input_schema},
                {"name": "grep", "description": "Searches files for a pattern.",
                 "input_schema": request.tools[1].input_schema}
            ],
            "temperature": 0.2
        });
        assert_eq!(sent.body, expected);

        assert_eq!(
            response,
            ModelResponse {
                text: Some("I'll read the module and search for its callers.".into()),
                tool_calls: vec![
                    ToolCall {
                        id: "toolu_01D7FLrfh4GYq7yT1ULFeyMV".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"src/calc.py"}"#.into(),
                    },
                    ToolCall {
                        id: "toolu_01NCdQ5xU8Lq9fXfPUm1qRrT".into(),
                        name: "list_dir".into(),
                        arguments: "{}".into(),
                    },
                ],
                usage: Usage {
                    input_tokens: 472,
                    output_tokens: 112,
                },
                finish: FinishReason::ToolCalls,
            }
        );
        assert!(events.take().is_empty());
    }

    #[tokio::test]
    async fn a_final_answer_counts_cached_input() {
        let server = TestServer::start(vec![Reply::json(200, FINAL)]).await;
        let (result, _) =
            complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
        assert_eq!(
            result.expect("answer"),
            ModelResponse {
                text: Some("Fixed: `mean` now divides by `len(values)`.".into()),
                tool_calls: vec![],
                usage: Usage {
                    input_tokens: 690 + 128,
                    output_tokens: 18,
                },
                finish: FinishReason::Stop,
            }
        );
    }

    #[tokio::test]
    async fn a_streamed_exchange_is_reported_and_replays() {
        let server = TestServer::start(vec![Reply::stream(STREAM, 41)]).await;
        let request = sample_request(IDS);
        let (result, events) = complete(&provider(&streaming(&server.base_url)), &request).await;
        let response = result.expect("answer");
        let exchanges = events.exchanges();
        assert_eq!(exchanges.len(), 1);
        let exchange = &exchanges[0];
        assert_eq!(exchange.format, WireFormat::Anthropic);
        assert_eq!(exchange.request, server.requests()[0].body);
        let WireReply::Stream(data) = &exchange.reply else {
            panic!("a streamed reply is recorded as its events")
        };
        assert!(data.iter().any(|data| data.contains("message_stop")));
        let replayed = Events::default();
        let again = replay(
            &exchange.request,
            &exchange.reply,
            &request,
            |_| Ok(()),
            &replayed,
        )
        .expect("replays");
        assert_eq!(again, response);
        assert_eq!(replayed.text(), events.text());
    }

    #[tokio::test]
    async fn streaming_reports_text_and_assembles_tool_use() {
        let server = TestServer::start(vec![Reply::stream(STREAM, 41)]).await;
        let (result, events) = complete(
            &provider(&streaming(&server.base_url)),
            &sample_request(IDS),
        )
        .await;
        assert_eq!(server.requests()[0].body["stream"], true);
        assert_eq!(
            events.text(),
            ["I'll read", " the module", " and list", " the directory."]
        );
        assert_eq!(
            result.expect("answer"),
            ModelResponse {
                text: Some("I'll read the module and list the directory.".into()),
                tool_calls: vec![
                    ToolCall {
                        id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                        name: "read_file".into(),
                        // The pieces as streamed, not re-serialised.
                        arguments: r#"{"path": "src/calc.py"}"#.into(),
                    },
                    ToolCall {
                        id: "toolu_01VbD7k8hWq2pYc5s3RmNx4E".into(),
                        name: "list_dir".into(),
                        arguments: "{}".into(),
                    },
                ],
                usage: Usage {
                    input_tokens: 472,
                    output_tokens: 89,
                },
                finish: FinishReason::ToolCalls,
            }
        );
    }

    #[tokio::test]
    async fn an_overloaded_error_inside_a_stream_is_retried() {
        let overloaded = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-20250514\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"output_tokens\":1}}}\n\n",
            "event: error\n",
            "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
        );
        let server = TestServer::start(vec![
            Reply::stream(overloaded, 512),
            Reply::stream(STREAM, 512),
        ])
        .await;
        let (result, events) = complete(
            &provider(&streaming(&server.base_url)),
            &sample_request(IDS),
        )
        .await;
        assert_eq!(result.expect("answer").tool_calls.len(), 2);
        let events = events.take();
        let ProviderEvent::Retrying {
            attempt: 1, error, ..
        } = &events[0]
        else {
            panic!("a retry first: {events:?}")
        };
        assert_eq!(
            *error,
            ProviderError::Http {
                status: 529,
                message: "Overloaded (overloaded_error)".into()
            }
            .to_string()
        );
    }

    #[tokio::test]
    async fn a_stream_cut_before_message_stop_is_retried() {
        let cut = &STREAM[..STREAM.find("event: message_delta").expect("message_delta")];
        let server =
            TestServer::start(vec![Reply::stream(cut, 512), Reply::json(200, FINAL)]).await;
        let (result, events) = complete(
            &provider(&streaming(&server.base_url)),
            &sample_request(IDS),
        )
        .await;
        assert_eq!(result.expect("answer").finish, FinishReason::Stop);
        assert!(events.take().iter().any(|event| matches!(
            event,
            ProviderEvent::Retrying { attempt: 1, error, .. }
                if error.contains("ended before message_stop")
        )));
    }

    #[tokio::test]
    async fn rate_limited_then_answered() {
        let server = TestServer::start(vec![
            Reply::json(429, ERROR_429).with_header("retry-after", "1"),
            Reply::json(200, FINAL),
        ])
        .await;
        let (result, events) =
            complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
        assert_eq!(result.expect("answer").finish, FinishReason::Stop);
        assert_eq!(server.requests().len(), 2);
        let events = events.take();
        let [
            ProviderEvent::Retrying {
                attempt: 1,
                error,
                delay,
            },
        ] = &events[..]
        else {
            panic!("one retry expected: {events:?}")
        };
        assert_eq!(*delay, Duration::from_secs(1));
        assert!(error.contains("HTTP 429"), "{error}");
        assert!(error.contains("(rate_limit_error)"), "{error}");
    }

    #[tokio::test]
    async fn overloaded_until_the_attempts_run_out() {
        let server = TestServer::start(vec![
            Reply::json(529, ERROR_529),
            Reply::json(529, ERROR_529),
            Reply::json(529, ERROR_529),
        ])
        .await;
        let (result, events) =
            complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
        assert_eq!(
            result,
            Err(ProviderError::RetriesExhausted {
                attempts: 3,
                last: Box::new(ProviderError::Http {
                    status: 529,
                    message: "Overloaded (overloaded_error)".into()
                }),
            })
        );
        assert_eq!(server.requests().len(), 3);
        assert_eq!(events.take().len(), 2);
    }

    #[tokio::test]
    async fn a_bad_request_is_not_retried() {
        let server =
            TestServer::start(vec![Reply::json(400, ERROR_400), Reply::json(200, FINAL)]).await;
        let (result, events) =
            complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
        let Err(ProviderError::Http {
            status: 400,
            message,
        }) = result
        else {
            panic!("HTTP 400 expected: {result:?}")
        };
        assert!(
            message.starts_with("messages.2.content.0: unexpected `tool_use_id`"),
            "{message}"
        );
        assert_eq!(server.requests().len(), 1);
        assert!(events.take().is_empty());
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out() {
        let server = TestServer::start(vec![Reply::Hang]).await;
        let mut settings = settings(&server.base_url);
        settings.request_timeout = Duration::from_millis(200);
        settings.retry.max_attempts = 1;
        let (result, _) = complete(&provider(&settings), &sample_request(IDS)).await;
        assert_eq!(
            result,
            Err(ProviderError::RetriesExhausted {
                attempts: 1,
                last: Box::new(ProviderError::Timeout(Duration::from_millis(200))),
            })
        );
    }

    #[tokio::test]
    async fn a_malformed_body_is_reported_not_retried() {
        let server = TestServer::start(vec![
            Reply::json(
                200,
                "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":",
            ),
            Reply::json(200, FINAL),
        ])
        .await;
        let (result, _) =
            complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
        assert!(
            matches!(&result, Err(ProviderError::Malformed(m)) if m.starts_with("message: EOF")),
            "{result:?}"
        );
        assert_eq!(server.requests().len(), 1);
    }

    #[test]
    fn the_official_api_needs_a_key_others_may_not() {
        let mut settings = settings("http://127.0.0.1:9");
        let local = Anthropic::with_env("claude-x", &settings, |_| None).expect("no key needed");
        assert!(local.headers.get("x-api-key").is_none());
        settings.anthropic_base_url = "https://api.anthropic.com".into();
        assert_eq!(
            Anthropic::with_env("claude-x", &settings, |_| None).expect_err("no key"),
            ProviderError::Config(
                "no API key: set the environment variable AIRLOCK_TEST_ANTHROPIC_KEY".into()
            )
        );
        let anthropic = provider(&settings);
        assert_eq!(anthropic.describe(), "anthropic:claude-sonnet-4-20250514");
        assert!(!format!("{anthropic:?}").contains(KEY));
    }

    #[test]
    fn roles_alternate_and_tool_results_come_first() {
        let messages = vec![
            Message::User { text: "go".into() },
            Message::Assistant {
                text: Some(String::new()),
                tool_calls: vec![ToolCall {
                    id: "toolu_1".into(),
                    name: "grep".into(),
                    arguments: r#"{"pattern": "#.into(),
                }],
            },
            Message::User {
                text: "also check the docs".into(),
            },
            Message::Tool {
                call_id: "toolu_1".into(),
                name: "grep".into(),
                content: "{\"status\":\"INVALID_ARGUMENTS\"}".into(),
                is_error: true,
            },
            Message::Assistant {
                text: None,
                tool_calls: vec![],
            },
            Message::User {
                text: "well?".into(),
            },
        ];
        let wire = serde_json::to_value(wire_messages(&messages)).expect("json");
        assert_eq!(
            wire,
            json!([
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": [
                    // Invalid arguments cannot be an `input`; the observation says why.
                    {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                     "content": "{\"status\":\"INVALID_ARGUMENTS\"}"},
                    {"type": "text", "text": "also check the docs"},
                    {"type": "text", "text": "well?"}
                ]}
            ])
        );
    }
}
