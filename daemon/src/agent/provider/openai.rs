//! `openai`: the Chat Completions API (`POST {base_url}/chat/completions`), as OpenAI serves
//! it and as local servers imitate it (vLLM, llama.cpp's server, Ollama).
//!
//! Answers stream by default (`"stream": true`, server-sent `data:` chunks, tool calls
//! assembled from their deltas by index, usage from the last chunk through
//! `stream_options.include_usage`); the text is reported as [`ProviderEvent::TextDelta`]s
//! as it arrives. A retried attempt streams its text again from the start, after the
//! [`ProviderEvent::Retrying`] that announces it.
//!
//! Local servers differ from OpenAI in small ways, each tolerated: no key is needed unless the
//! base URL is OpenAI's own; a tool call without an id gets `call_<turn>_<index>`; arguments
//! sent as a JSON object rather than a string are serialised; content sent as an array of
//! parts is joined; an answer without usage gets an estimate; a server that answers a
//! streaming request with plain JSON is read whole.

use std::collections::BTreeMap;

use bytes::Bytes;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap};
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

/// OpenAI's own API: the one host that needs a key, and that wants `max_completion_tokens`
/// (its newer models reject `max_tokens`, which local servers know better).
const OPENAI_HOST: &str = "api.openai.com";

#[derive(Debug)]
pub(super) struct OpenAi {
    model: String,
    url: Url,
    headers: HeaderMap,
    http: HttpClient,
    official: bool,
    stream: bool,
    request_timeout: std::time::Duration,
    retry: RetryPolicy,
}

impl OpenAi {
    pub fn new(model: &str, settings: &ProviderSettings) -> Result<Self, ProviderError> {
        Self::with_env(model, settings, |name| std::env::var(name).ok())
    }

    /// As [`OpenAi::new`], reading the key's variable through `env`.
    fn with_env(
        model: &str,
        settings: &ProviderSettings,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ProviderError> {
        if model.trim().is_empty() {
            return Err(ProviderError::Config("openai: no model named".into()));
        }
        let url = http::endpoint(&settings.openai_base_url, "chat/completions")?;
        let official = url.host_str() == Some(OPENAI_HOST);
        let key = ApiKey::from_env(&settings.openai_api_key_env, official, env)?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &key {
            headers.insert(
                AUTHORIZATION,
                key.header("Bearer ", &settings.openai_api_key_env)?,
            );
        }
        Ok(OpenAi {
            model: model.to_owned(),
            url,
            headers,
            http: HttpClient::new(key)?,
            official,
            stream: settings.stream,
            request_timeout: settings.request_timeout,
            retry: settings.retry,
        })
    }

    fn body(&self, request: &ModelRequest) -> Result<Bytes, ProviderError> {
        chat_body(&self.model, self.official, self.stream, request)
    }

    async fn attempt(
        &self,
        body: Bytes,
        turn: usize,
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
                let done = event.data.trim() == "[DONE]";
                if !done {
                    answer.apply(&event.data, events)?;
                }
                if let Some(recorded) = recorded.as_mut() {
                    recorded.push(event.data);
                }
                if done {
                    answer.done = true;
                    break;
                }
            }
            let response = answer.finish(turn, request_bytes)?;
            if let Some(recorded) = recorded {
                let reply = WireReply::Stream(recorded);
                exchange::report(WireFormat::Openai, &body, reply, events);
            }
            Ok(response)
        } else {
            let reply = self.http.body(response).await?;
            let response = parse_completion(&reply, turn, request_bytes)?;
            if events.wants_exchange() {
                let reply = exchange::whole(&reply)?;
                exchange::report(WireFormat::Openai, &body, reply, events);
            }
            Ok(response)
        }
    }
}

/// The request body of a call: `official` for OpenAI's own API, which wants
/// `max_completion_tokens`.
fn chat_body(
    model: &str,
    official: bool,
    stream: bool,
    request: &ModelRequest,
) -> Result<Bytes, ProviderError> {
    let max_tokens = Some(request.max_output_tokens);
    let body = ChatRequest {
        model,
        messages: wire_messages(request),
        tools: request
            .tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.input_schema,
                },
            })
            .collect(),
        max_tokens: max_tokens.filter(|_| !official),
        max_completion_tokens: max_tokens.filter(|_| official),
        temperature: request.temperature,
        stream,
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
    };
    serde_json::to_vec(&body)
        .map(Bytes::from)
        .map_err(|error| ProviderError::Config(format!("cannot encode the request: {error}")))
}

/// Answers `request` from a recorded exchange: the body is rebuilt as the recording was sent
/// (its model, token parameter and streaming) and handed to `check` before the recorded
/// reply is read as a live one would be, its pieces reported as they were.
pub(super) fn replay(
    recorded: &Value,
    reply: &WireReply,
    request: &ModelRequest,
    check: impl Fn(&Value) -> Result<(), ProviderError>,
    events: &dyn ProviderEvents,
) -> Result<ModelResponse, ProviderError> {
    let sent = Sent(recorded);
    let official = sent.has("max_completion_tokens");
    let body = chat_body(sent.model(), official, sent.flag("stream"), request)?;
    exchange::check_body(&body, check)?;
    let turn = assistant_turns(request);
    match reply {
        WireReply::Whole(reply) => parse_completion(&exchange::body_of(reply)?, turn, body.len()),
        WireReply::Stream(data) => {
            let mut answer = StreamedAnswer::default();
            for data in data {
                if data.trim() == "[DONE]" {
                    answer.done = true;
                    break;
                }
                answer.apply(data, events)?;
            }
            answer.finish(turn, body.len())
        }
    }
}

#[async_trait::async_trait]
impl ModelProvider for OpenAi {
    fn describe(&self) -> String {
        format!("openai:{}", self.model)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        events: &dyn ProviderEvents,
    ) -> Result<ModelResponse, ProviderError> {
        let body = self.body(request)?;
        let turn = assistant_turns(request);
        self.retry
            .run(self.request_timeout, events, |_| {
                self.attempt(body.clone(), turn, events)
            })
            .await
    }
}

/// How many answers the model already gave: the turn this call asks for, which keeps the
/// ids made up for id-less tool calls unique in the conversation.
fn assistant_turns(request: &ModelRequest) -> usize {
    request
        .messages
        .iter()
        .filter(|message| matches!(message, Message::Assistant { .. }))
        .count()
}

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` beside tool calls; the API requires a string otherwise.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn wire_messages(request: &ModelRequest) -> Vec<WireMessage<'_>> {
    let system = (!request.system.is_empty()).then_some(WireMessage::System {
        content: &request.system,
    });
    let conversation = request.messages.iter().map(|message| match message {
        Message::User { text } => WireMessage::User { content: text },
        Message::Assistant { text, tool_calls } => WireMessage::Assistant {
            content: match (text.as_deref(), tool_calls.is_empty()) {
                (Some(text), _) => Some(text),
                (None, true) => Some(""),
                (None, false) => None,
            },
            tool_calls: tool_calls
                .iter()
                .map(|call| WireCall {
                    id: &call.id,
                    kind: "function",
                    function: WireCallFunction {
                        name: &call.name,
                        arguments: &call.arguments,
                    },
                })
                .collect(),
        },
        // The API has no error flag for tool results: the content, which the loop writes
        // with the observation's status, tells the model.
        Message::Tool {
            call_id, content, ..
        } => WireMessage::Tool {
            tool_call_id: call_id,
            content,
        },
    });
    system.into_iter().chain(conversation).collect()
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Value,
    refusal: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: Option<String>,
    function: WireToolCallFunction,
}

#[derive(Deserialize)]
struct WireToolCallFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Deserialize, Clone, Copy)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

fn parse_completion(
    body: &[u8],
    turn: usize,
    request_bytes: usize,
) -> Result<ModelResponse, ProviderError> {
    let completion: Completion = serde_json::from_slice(body)
        .map_err(|error| ProviderError::Malformed(format!("chat completion: {error}")))?;
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err(ProviderError::Malformed(
            "chat completion: no choices".into(),
        ));
    };
    let text = text_of(&choice.message.content).or(choice.message.refusal);
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(index, call)| ToolCall {
            id: call_id(call.id, turn, index),
            name: call.function.name,
            arguments: arguments_text(call.function.arguments),
        })
        .collect();
    Ok(response(
        text,
        tool_calls,
        choice.finish_reason.as_deref(),
        completion.usage,
        request_bytes,
    ))
}

/// Assembles a streamed answer from its chunks.
#[derive(Default)]
struct StreamedAnswer {
    text: String,
    /// By the index the deltas carry.
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
    /// `[DONE]` came.
    done: bool,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    index: u64,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<DeltaCall>>,
}

#[derive(Deserialize)]
struct DeltaCall {
    index: Option<u64>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    #[serde(default)]
    arguments: Value,
}

impl StreamedAnswer {
    fn apply(&mut self, data: &str, events: &dyn ProviderEvents) -> Result<(), ProviderError> {
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|error| ProviderError::Malformed(format!("stream chunk: {error}")))?;
        if let Some(error) = chunk.error {
            return Err(stream_error(&error));
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        // Only one choice is asked for; index 0 is it.
        for choice in chunk.choices.into_iter().filter(|choice| choice.index == 0) {
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
                self.text.push_str(&text);
                events.event(ProviderEvent::TextDelta(text));
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.apply_call(call, events);
            }
        }
        Ok(())
    }

    /// Adds one tool call delta. The first delta of a call brings its id and name, later
    /// ones pieces of its arguments; strings are appended, as OpenAI's own SDKs do. A delta
    /// without an index (some local servers) continues the last call unless it brings a new
    /// id.
    fn apply_call(&mut self, delta: DeltaCall, events: &dyn ProviderEvents) {
        let index = match (delta.index, self.calls.last_key_value()) {
            (Some(index), _) => index,
            (None, None) => 0,
            (None, Some((&last, call))) => {
                let new_id = delta
                    .id
                    .as_ref()
                    .is_some_and(|id| !id.is_empty() && !call.id.is_empty() && *id != call.id);
                if new_id { last.saturating_add(1) } else { last }
            }
        };
        // The ordinal among the answer's calls, as clients number them.
        let ordinal = self.calls.range(..index).count();
        let call = self.calls.entry(index).or_default();
        let mut streamed = None;
        if let Some(id) = delta.id.filter(|id| !id.is_empty())
            && call.id.is_empty()
        {
            call.id.clone_from(&id);
            streamed = Some(id);
        }
        let mut name = None;
        let mut piece = String::new();
        if let Some(function) = delta.function {
            if let Some(part) = function.name {
                call.name.push_str(&part);
                name = Some(part);
            }
            piece = match function.arguments {
                Value::Null => String::new(),
                Value::String(piece) => piece,
                whole => whole.to_string(),
            };
            call.arguments.push_str(&piece);
        }
        if streamed.is_some() || name.is_some() || !piece.is_empty() {
            events.event(ProviderEvent::ToolCallDelta {
                index: u32::try_from(ordinal).unwrap_or(u32::MAX),
                id: streamed,
                name,
                arguments: piece,
            });
        }
    }

    fn finish(self, turn: usize, request_bytes: usize) -> Result<ModelResponse, ProviderError> {
        if !self.done && self.finish_reason.is_none() {
            // The connection closed mid-answer: worth another attempt.
            return Err(ProviderError::Transport(
                "the answer stream ended before the answer did".into(),
            ));
        }
        let tool_calls = self
            .calls
            .into_values()
            .enumerate()
            .map(|(index, call)| ToolCall {
                id: call_id(Some(call.id), turn, index),
                name: call.name,
                arguments: if call.arguments.is_empty() {
                    "{}".to_owned()
                } else {
                    call.arguments
                },
            })
            .collect();
        Ok(response(
            (!self.text.is_empty()).then_some(self.text),
            tool_calls,
            self.finish_reason.as_deref(),
            self.usage,
            request_bytes,
        ))
    }
}

/// An error sent inside a stream (`{"error": {...}}`): as an HTTP error of its `code` when
/// that is a status, else as a server error, which is worth retrying.
fn stream_error(error: &Value) -> ProviderError {
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..600).contains(code))
        .unwrap_or(500);
    let message = http::message_of(&serde_json::json!({ "error": error }))
        .unwrap_or_else(|| error.to_string());
    ProviderError::Http { status, message }
}

fn response(
    text: Option<String>,
    tool_calls: Vec<ToolCall>,
    finish_reason: Option<&str>,
    usage: Option<WireUsage>,
    request_bytes: usize,
) -> ModelResponse {
    let output_bytes = text.as_ref().map_or(0, String::len)
        + tool_calls
            .iter()
            .map(|call| call.name.len() + call.arguments.len())
            .sum::<usize>();
    let usage = Usage {
        input_tokens: usage
            .and_then(|usage| usage.prompt_tokens)
            .unwrap_or_else(|| estimated_tokens(request_bytes)),
        output_tokens: usage
            .and_then(|usage| usage.completion_tokens)
            .unwrap_or_else(|| estimated_tokens(output_bytes)),
    };
    let finish = match finish_reason {
        Some("stop") => FinishReason::Stop,
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
        None => FinishReason::Other("none given".to_owned()),
    };
    ModelResponse {
        text,
        tool_calls,
        usage,
        finish,
    }
}

/// Message content: a string, or (some servers) an array of `{"type": "text", "text"}`
/// parts. Empty content is no content.
fn text_of(content: &Value) -> Option<String> {
    let text = match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    (!text.is_empty()).then_some(text)
}

fn call_id(id: Option<String>, turn: usize, index: usize) -> String {
    match id {
        Some(id) if !id.is_empty() => id,
        _ => format!("call_{turn}_{index}"),
    }
}

/// The arguments as the model wrote them: OpenAI sends a string, passed on unchanged;
/// some servers send the object itself, serialised here; none at all means no arguments.
fn arguments_text(arguments: Value) -> String {
    match arguments {
        Value::String(text) => text,
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
