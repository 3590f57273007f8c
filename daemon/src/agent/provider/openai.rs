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

use super::cassette::{self, Sent, WireFormat, WireReply};
use super::http::{self, ApiKey, HttpClient};
use super::retry::Failure;
use super::{
    FinishReason, Message, ModelProvider, ModelRequest, ModelResponse, ProviderError,
    ProviderEvent, ProviderEvents, ProviderSettings, RetryPolicy, ToolCall, Usage,
    estimated_tokens,
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
                cassette::report(WireFormat::Openai, &body, reply, events);
            }
            Ok(response)
        } else {
            let reply = self.http.body(response).await?;
            let response = parse_completion(&reply, turn, request_bytes)?;
            if events.wants_exchange() {
                let reply = cassette::whole(&reply)?;
                cassette::report(WireFormat::Openai, &body, reply, events);
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
    cassette::check_body(&body, check)?;
    let turn = assistant_turns(request);
    match reply {
        WireReply::Whole(reply) => parse_completion(&cassette::body_of(reply)?, turn, body.len()),
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
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::super::test_server::{
        Events, Recorded, Reply, TestServer, sample_request, settings,
    };
    use super::*;

    const TOOL_CALLS: &str = include_str!("testdata/openai_tool_calls.json");
    const FINAL: &str = include_str!("testdata/openai_final.json");
    const STREAM: &str = include_str!("testdata/openai_stream_tool_calls.sse");
    const ERROR_429: &str = include_str!("testdata/openai_error_429.json");
    const ERROR_400: &str = include_str!("testdata/openai_error_400.json");
    const ERROR_500: &str = include_str!("testdata/openai_error_500.json");

    const KEY: &str = "sk-test-0123456789abcdef";

    fn provider(settings: &ProviderSettings) -> OpenAi {
        OpenAi::with_env("gpt-4.1", settings, |name| {
            (name == "AIRLOCK_TEST_OPENAI_KEY").then(|| KEY.to_owned())
        })
        .expect("provider")
    }

    /// Completes `request`, bounding the call so that a bug cannot hang the suite.
    async fn complete(
        provider: &OpenAi,
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
    async fn request_shape_and_tool_calls() {
        let server = TestServer::start(vec![Reply::json(200, TOOL_CALLS)]).await;
        let openai = provider(&settings(&server.base_url));
        let request = sample_request(["call_a", "call_b"]);
        let (result, events) = complete(&openai, &request).await;
        let response = result.expect("answer");

        let [sent] = &server.requests()[..] else {
            panic!("one request expected: {:?}", server.requests())
        };
        assert_eq!(sent.method, "POST");
        assert_eq!(sent.path, "/v1/chat/completions");
        assert_eq!(
            header(sent, "authorization"),
            Some(&*format!("Bearer {KEY}"))
        );
        assert_eq!(header(sent, "content-type"), Some("application/json"));
        let Message::Tool {
            content: read_result,
            ..
        } = &request.messages[2]
        else {
            panic!("the sample's third message is an observation")
        };
        let expected = json!({
            "model": "gpt-4.1",
            "messages": [
                {"role": "system", "content": "You fix bugs in the workspace."},
                {"role": "user", "content": "test_mean fails. Fix it."},
                {"role": "assistant", "content": "Let me look at the code.", "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "read_file", "arguments": "{\"path\":\"src/calc.py\"}"}},
                    {"id": "call_b", "type": "function",
                     "function": {"name": "grep", "arguments": "{\"pattern\":\"mean(\",\"path\":\"tests\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": read_result},
                {"role": "tool", "tool_call_id": "call_b",
                 "content": "{\"status\":\"TOOL_ERROR\",\"error\":\"no such directory: tests\"}"}
            ],
            "tools": [
                {"type": "function", "function": {
                    "name": "read_file", "description": "Reads a file of the workspace.",
                    "parameters": request.tools[0].input_schema}},
                {"type": "function", "function": {
                    "name": "grep", "description": "Searches files for a pattern.",
                    "parameters": request.tools[1].input_schema}}
            ],
            "max_tokens": 1024,
            "temperature": 0.2
        });
        assert_eq!(sent.body, expected);

        assert_eq!(
            response,
            ModelResponse {
                text: None,
                tool_calls: vec![
                    ToolCall {
                        id: "call_XbV1rk2YJ0x7Qm3pLs9Tn4Ud".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"src/calc.py"}"#.into(),
                    },
                    // Invalid JSON, passed on exactly as the model wrote it.
                    ToolCall {
                        id: "call_Hq8WcN5eZr2Kt6Yb1Pv0Xs3M".into(),
                        name: "grep".into(),
                        arguments: r#"{"pattern": "mean(", "path": "#.into(),
                    },
                ],
                usage: Usage {
                    input_tokens: 412,
                    output_tokens: 57,
                },
                finish: FinishReason::ToolCalls,
            }
        );
        assert!(events.take().is_empty());
    }

    #[tokio::test]
    async fn a_final_answer() {
        let server = TestServer::start(vec![Reply::json(200, FINAL)]).await;
        let openai = provider(&settings(&server.base_url));
        let (result, _) = complete(&openai, &sample_request(["call_a", "call_b"])).await;
        let response = result.expect("answer");
        assert_eq!(
            response.text.as_deref(),
            Some(
                "The mean divided by `len(values) - 1`; it now divides by `len(values)` and the test passes."
            )
        );
        assert!(response.tool_calls.is_empty());
        assert_eq!(response.finish, FinishReason::Stop);
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 655,
                output_tokens: 26
            }
        );
    }

    #[tokio::test]
    async fn openais_own_api_gets_max_completion_tokens_and_needs_a_key() {
        let mut settings = settings("http://unused");
        settings.openai_base_url = "https://api.openai.com/v1/".into();
        let error = OpenAi::with_env("gpt-4.1", &settings, |_| None).expect_err("no key");
        assert_eq!(
            error,
            ProviderError::Config(
                "no API key: set the environment variable AIRLOCK_TEST_OPENAI_KEY".into()
            )
        );
        // The real environment, through `new`: the variable is one nobody sets.
        settings.openai_api_key_env = "AIRLOCK_TEST_UNSET_OPENAI_KEY_3f9c".into();
        let error = OpenAi::new("gpt-4.1", &settings).expect_err("no key");
        assert!(
            matches!(&error, ProviderError::Config(m) if m.contains("AIRLOCK_TEST_UNSET_OPENAI_KEY_3f9c")),
            "{error}"
        );

        let openai = OpenAi::with_env("gpt-4.1", &settings, |_| Some(KEY.into())).expect("key");
        assert!(!format!("{openai:?}").contains(KEY));
        assert_eq!(openai.describe(), "openai:gpt-4.1");
        let body: Value = serde_json::from_slice(
            &openai
                .body(&sample_request(["call_a", "call_b"]))
                .expect("body"),
        )
        .expect("json");
        assert_eq!(body["max_completion_tokens"], 1024);
        assert!(body.get("max_tokens").is_none());
    }

    #[tokio::test]
    async fn streaming_reports_text_and_assembles_tool_calls() {
        let server = TestServer::start(vec![Reply::stream(STREAM, 37)]).await;
        let mut settings = settings(&server.base_url);
        settings.stream = true;
        let openai = provider(&settings);
        let (result, events) = complete(&openai, &sample_request(["call_a", "call_b"])).await;
        let response = result.expect("answer");

        let sent = &server.requests()[0];
        assert_eq!(sent.body["stream"], true);
        assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            events.text(),
            [
                "I'll", " read", " the", " module", " and", " search", " its", " callers", "."
            ]
        );
        // The calls stream too, in pieces that add up to what the answer holds.
        let streamed: Vec<(String, String)> = events
            .calls()
            .into_iter()
            .map(|(_, name, arguments)| (name, arguments))
            .collect();
        let answered: Vec<(String, String)> = response
            .tool_calls
            .iter()
            .map(|call| (call.name.clone(), call.arguments.clone()))
            .collect();
        assert_eq!(streamed, answered);
        assert_eq!(
            response,
            ModelResponse {
                text: Some("I'll read the module and search its callers.".into()),
                tool_calls: vec![
                    ToolCall {
                        id: "call_5nJqV0LxW2eYb8Rk1Tz3Cm6H".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"src/calc.py"}"#.into(),
                    },
                    ToolCall {
                        id: "call_Pz7Dk4Qs1Vn9Ew2Lr6Ya0Xb3".into(),
                        name: "grep".into(),
                        arguments: r#"{"pattern": "mean(","path": "#.into(),
                    },
                ],
                usage: Usage {
                    input_tokens: 412,
                    output_tokens: 61,
                },
                finish: FinishReason::ToolCalls,
            }
        );
    }

    /// A caller that keeps no exchange gets none, and the reply's pieces are not kept.
    #[tokio::test]
    async fn no_exchange_is_built_unless_wanted() {
        let server = TestServer::start(vec![Reply::stream(STREAM, 37)]).await;
        let mut settings = settings(&server.base_url);
        settings.stream = true;
        let seen = std::sync::Mutex::new(Vec::new());
        let sink = |event: ProviderEvent| seen.lock().expect("lock").push(event);
        provider(&settings)
            .complete(&sample_request(["call_a", "call_b"]), &sink)
            .await
            .expect("answer");
        let seen = seen.into_inner().expect("lock");
        assert!(
            seen.iter()
                .any(|e| matches!(e, ProviderEvent::TextDelta(_)))
        );
        assert!(!seen.iter().any(|e| matches!(e, ProviderEvent::Exchange(_))));
    }

    /// The exchange of the attempt that answered is reported in the wire format, and answers
    /// the same request again with the same response and the same pieces; another request
    /// is handed to the check.
    #[tokio::test]
    async fn a_streamed_exchange_is_reported_and_replays() {
        for stream in [true, false] {
            let reply = if stream {
                Reply::stream(STREAM, 37)
            } else {
                Reply::json(200, TOOL_CALLS)
            };
            let server = TestServer::start(vec![reply]).await;
            let mut settings = settings(&server.base_url);
            settings.stream = stream;
            let request = sample_request(["call_a", "call_b"]);
            let (result, events) = complete(&provider(&settings), &request).await;
            let response = result.expect("answer");
            let exchanges = events.exchanges();
            assert_eq!(exchanges.len(), 1);
            let exchange = &exchanges[0];
            assert_eq!(exchange.format, WireFormat::Openai);
            assert_eq!(exchange.request, server.requests()[0].body);
            assert_eq!(matches!(exchange.reply, WireReply::Stream(_)), stream);

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
            // The check sees the request as it would be sent now.
            let mut other = request.clone();
            other.system = "Something else.".into();
            let refused = replay(
                &exchange.request,
                &exchange.reply,
                &other,
                |now| {
                    assert_eq!(now["messages"][0]["content"], "Something else.");
                    Err(ProviderError::Diverged("differs".into()))
                },
                &Events::default(),
            );
            assert_eq!(refused, Err(ProviderError::Diverged("differs".into())));
        }
    }

    /// As llama.cpp's server or Ollama may stream: no key, a tool call without id or
    /// index, no usage, no `[DONE]` (the finish reason ends the answer).
    #[tokio::test]
    async fn a_local_server_stream_without_ids_usage_or_done() {
        let stream = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\": \"}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"\\\"README.md\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        );
        let server = TestServer::start(vec![Reply::stream(stream, 64)]).await;
        let mut settings = settings(&server.base_url);
        settings.stream = true;
        let openai = OpenAi::with_env("qwen3:8b", &settings, |_| None).expect("no key needed");
        let (result, events) = complete(&openai, &sample_request(["call_a", "call_b"])).await;
        let response = result.expect("answer");
        assert_eq!(header(&server.requests()[0], "authorization"), None);
        assert!(events.text().is_empty());
        // The call streamed, and its pieces join up with no index given.
        assert_eq!(
            events.calls(),
            [(
                String::new(),
                "read_file".to_owned(),
                r#"{"path": "README.md"}"#.to_owned()
            )]
        );
        assert_eq!(
            response.tool_calls,
            vec![ToolCall {
                // The sample conversation holds one assistant message: this is turn 1.
                id: "call_1_0".into(),
                name: "read_file".into(),
                arguments: r#"{"path": "README.md"}"#.into(),
            }]
        );
        assert_eq!(response.text, None);
        assert_eq!(response.finish, FinishReason::ToolCalls);
        let request_bytes = openai
            .body(&sample_request(["call_a", "call_b"]))
            .expect("body")
            .len();
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: estimated_tokens(request_bytes),
                output_tokens: estimated_tokens(
                    "read_file".len() + r#"{"path": "README.md"}"#.len()
                ),
            }
        );
    }

    #[tokio::test]
    async fn a_server_that_ignores_stream_is_read_whole() {
        let server = TestServer::start(vec![Reply::json(200, FINAL)]).await;
        let mut settings = settings(&server.base_url);
        settings.stream = true;
        let (result, events) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
        assert_eq!(result.expect("answer").finish, FinishReason::Stop);
        assert!(events.take().is_empty());
    }

    #[tokio::test]
    async fn a_stream_cut_short_is_retried() {
        let cut = &STREAM[..STREAM
            .find("\"finish_reason\":\"tool_calls\"")
            .expect("finish chunk")];
        let cut = &cut[..cut.rfind("\n\n").expect("a whole chunk") + 2];
        let server =
            TestServer::start(vec![Reply::stream(cut, 512), Reply::stream(STREAM, 512)]).await;
        let mut settings = settings(&server.base_url);
        settings.stream = true;
        let (result, events) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
        assert_eq!(result.expect("answer").tool_calls.len(), 2);
        let events = events.take();
        let retries: Vec<_> = events
            .iter()
            .filter_map(|event| match event {
                ProviderEvent::Retrying { attempt, error, .. } => Some((*attempt, error.clone())),
                ProviderEvent::TextDelta(_)
                | ProviderEvent::ToolCallDelta { .. }
                | ProviderEvent::Exchange(_) => None,
            })
            .collect();
        assert_eq!(
            retries,
            [(
                1,
                ProviderError::Transport("the answer stream ended before the answer did".into())
                    .to_string()
            )]
        );
        // The text streams twice, the second time after the retry was announced.
        let retry_at = events
            .iter()
            .position(|event| matches!(event, ProviderEvent::Retrying { .. }))
            .expect("a retry");
        assert!(
            matches!(events[retry_at + 1], ProviderEvent::TextDelta(ref text) if text == "I'll")
        );
    }

    #[tokio::test]
    async fn an_error_inside_a_stream_is_an_http_error() {
        let stream = "data: {\"error\":{\"message\":\"model 'nope' not found\",\"type\":\"invalid_request_error\",\"code\":404}}\n\n";
        let server = TestServer::start(vec![Reply::stream(stream, 512)]).await;
        let mut settings = settings(&server.base_url);
        settings.stream = true;
        let (result, _) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
        assert_eq!(
            result,
            Err(ProviderError::Http {
                status: 404,
                message: "model 'nope' not found (invalid_request_error)".into()
            })
        );
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn rate_limited_then_answered() {
        let server = TestServer::start(vec![
            Reply::json(429, ERROR_429)
                .with_header("retry-after-ms", "20")
                .with_header("retry-after", "1"),
            Reply::json(200, FINAL),
        ])
        .await;
        let (result, events) = complete(
            &provider(&settings(&server.base_url)),
            &sample_request(["a", "b"]),
        )
        .await;
        assert_eq!(result.expect("answer").finish, FinishReason::Stop);
        assert_eq!(server.requests().len(), 2);
        assert_eq!(server.requests()[0].body, server.requests()[1].body);
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
        assert_eq!(*delay, Duration::from_millis(20));
        assert!(error.contains("HTTP 429"), "{error}");
        assert!(error.contains("Rate limit reached for gpt-4.1"), "{error}");
    }

    #[tokio::test]
    async fn server_errors_until_the_attempts_run_out() {
        let server = TestServer::start(vec![
            Reply::json(500, ERROR_500),
            Reply::json(500, ERROR_500),
            Reply::json(500, ERROR_500),
            Reply::json(200, FINAL),
        ])
        .await;
        let (result, events) = complete(
            &provider(&settings(&server.base_url)),
            &sample_request(["a", "b"]),
        )
        .await;
        assert_eq!(
            result,
            Err(ProviderError::RetriesExhausted {
                attempts: 3,
                last: Box::new(ProviderError::Http {
                    status: 500,
                    message: "The server had an error while processing your request. Sorry about that! (server_error)".into()
                }),
            })
        );
        assert_eq!(server.requests().len(), 3);
        let attempts: Vec<u32> = events
            .take()
            .iter()
            .map(|event| match event {
                ProviderEvent::Retrying { attempt, .. } => *attempt,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(attempts, [1, 2]);
    }

    #[tokio::test]
    async fn a_bad_request_is_not_retried() {
        let server =
            TestServer::start(vec![Reply::json(400, ERROR_400), Reply::json(200, FINAL)]).await;
        let (result, events) = complete(
            &provider(&settings(&server.base_url)),
            &sample_request(["a", "b"]),
        )
        .await;
        let Err(ProviderError::Http {
            status: 400,
            message,
        }) = result
        else {
            panic!("HTTP 400 expected: {result:?}")
        };
        assert!(
            message.starts_with("Invalid 'messages[3].tool_call_id'"),
            "{message}"
        );
        assert!(message.ends_with("(invalid_request_error)"), "{message}");
        assert_eq!(server.requests().len(), 1);
        assert!(events.take().is_empty());
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out() {
        let server = TestServer::start(vec![Reply::Hang, Reply::Hang]).await;
        let mut settings = settings(&server.base_url);
        settings.request_timeout = Duration::from_millis(200);
        settings.retry.max_attempts = 2;
        let (result, events) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
        assert_eq!(
            result,
            Err(ProviderError::RetriesExhausted {
                attempts: 2,
                last: Box::new(ProviderError::Timeout(Duration::from_millis(200))),
            })
        );
        assert_eq!(server.requests().len(), 2);
        assert_eq!(events.take().len(), 1);
    }

    #[tokio::test]
    async fn a_malformed_body_is_reported_not_retried() {
        let server = TestServer::start(vec![
            Reply::json(
                200,
                "{\"id\": \"chatcmpl-1\", \"choices\": [{\"index\": 0, \"message\": ",
            ),
            Reply::json(200, FINAL),
        ])
        .await;
        let (result, _) = complete(
            &provider(&settings(&server.base_url)),
            &sample_request(["a", "b"]),
        )
        .await;
        assert!(
            matches!(&result, Err(ProviderError::Malformed(m)) if m.starts_with("chat completion: EOF")),
            "{result:?}"
        );
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_transport_error() {
        // Bind a port, then free it: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("free port")
            .port();
        let mut settings = settings(&format!("http://127.0.0.1:{port}"));
        settings.retry.max_attempts = 1;
        let (result, _) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
        let Err(ProviderError::RetriesExhausted { attempts: 1, last }) = &result else {
            panic!("exhausted retries expected: {result:?}")
        };
        assert!(
            matches!(&**last, ProviderError::Transport(m) if m.contains("onnect")),
            "{last}"
        );
    }

    #[test]
    fn assistant_messages_without_text_or_calls_still_have_content() {
        let request = ModelRequest {
            system: String::new(),
            messages: vec![
                Message::User { text: "hi".into() },
                Message::Assistant {
                    text: None,
                    tool_calls: vec![],
                },
            ],
            tools: Vec::new().into(),
            max_output_tokens: 10,
            temperature: None,
            answers: 1,
            purpose: super::super::Purpose::Step,
        };
        let wire = serde_json::to_value(wire_messages(&request)).expect("json");
        assert_eq!(
            wire,
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": ""}
            ])
        );
    }
}
