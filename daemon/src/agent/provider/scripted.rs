//! `scripted`: a deterministic model that plays a transcript, for the demo, tests and evals.
//!
//! A script is YAML (or JSON, which the same parser reads): a list of turns, each the answer
//! to one model call: tool calls (with optional text), or a final answer.
//!
//! ```yaml
//! turns:
//!   - text: "Let me look."                  # optional text with the calls
//!     tool_calls:
//!       - name: read_file
//!         arguments: {path: src/calc.py}     # any JSON value, serialised compactly
//!       - name: grep
//!         arguments_raw: '{"pattern": '      # exact text instead (malformed-JSON tests)
//!   - alternatives:                          # the first whose `when` matches the last observation
//!       - when: {status: OK, contains: "len(values) - 1", tool: read_file}
//!         tool_calls:
//!           - name: write_file
//!             arguments: {path: src/calc.py, content: "..."}
//!       - final: "I could not find the bug." # no `when`: always matches
//!   - final: "Fixed."                        # a final answer (no tool calls)
//!     usage: {input_tokens: 10, output_tokens: 3}   # optional; default: estimated (bytes/4)
//!     delay_ms: 50                           # optional: answer after this long
//! ```
//!
//! The model is stateless: the call that follows `i` answers of the run (the request's
//! `answers`, which counts answers compacted out of the conversation and not those of the
//! session's earlier runs) gets turn `i` (counting from 0), so a run resumed after a crash
//! replays identically, and the same request always gets the same answer. A tool call
//! without arguments gets `{}`; tool call ids are `call_<turn>_<index>`.
//!
//! Two optional top-level fields:
//!
//! ```yaml
//! stream: true          # report text and call arguments in pieces, as a streaming model does
//! compaction:           # how a request to summarise older steps is answered
//!   summary: "We read the notes; the secret is 42."   # default: a line naming what it covers
//!   fail: "overloaded"  # or: the call fails with this message (HTTP 400, not retried)
//! ```
//!
//! `when` looks at the last tool observation in the conversation; each condition given must
//! hold. `tool` is the tool's name; `contains` a substring of the observation's content;
//! `status` the `status` field of the content when that is a JSON object, where `OK` also
//! requires that the observation is not an error (and content without a `status` field has
//! status `OK` unless it is an error). A `when` with conditions never matches before the
//! first observation.
//!
//! A conversation past the last turn, or a turn whose alternatives all fail to match, gets
//! [`ProviderError::ScriptExhausted`]. A script that cannot be read is a
//! [`ProviderError::Config`] saying where: the path always (`turns[2].tool_calls[0]: …`),
//! and the line and column for syntax errors, unknown fields and wrong types.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::types::{
    Exchange, FinishReason, Message, ModelProvider, ModelRequest, ModelResponse, ProviderError,
    ProviderEvent, ProviderEvents, Purpose, ToolCall, Usage, WireFormat, WireReply,
    estimated_tokens,
};

/// The largest script, in bytes. Scripts arrive from clients; a megabyte holds thousands of
/// turns, and bounds what parsing one may allocate (the parser also refuses alias
/// expansions that would blow it up).
const MAX_SCRIPT_BYTES: usize = 1 << 20;

/// The longest `delay_ms`: ten minutes. Delays exist to test cancellation and slow models;
/// longer ones would only leave a run hanging.
const MAX_DELAY_MS: u64 = 10 * 60 * 1000;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Scripted {
    turns: Vec<Turn>,
    stream: bool,
    compaction: Compaction,
}

/// How the script answers a request to summarise older steps.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Compaction {
    summary: Option<String>,
    fail: Option<String>,
}

/// The size of the pieces a streaming script reports its text and arguments in: small
/// enough that a short answer streams in several pieces, as a real model's would.
const STREAM_PIECE_CHARS: usize = 8;

#[derive(Debug, Clone, PartialEq)]
enum Turn {
    Answer(Answer),
    Alternatives(Vec<Alternative>),
}

#[derive(Debug, Clone, PartialEq)]
struct Alternative {
    when: When,
    answer: Answer,
}

#[derive(Debug, Clone, PartialEq)]
struct Answer {
    reply: Reply,
    usage: Option<Usage>,
    delay: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Final(String),
    ToolCalls {
        text: Option<String>,
        calls: Vec<ScriptedCall>,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct ScriptedCall {
    name: String,
    arguments: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct When {
    status: Option<String>,
    contains: Option<String>,
    tool: Option<String>,
}

impl Scripted {
    pub fn parse(text: &str) -> Result<Self, ProviderError> {
        if text.len() > MAX_SCRIPT_BYTES {
            return Err(ProviderError::Config(format!(
                "script: {} bytes, more than the {MAX_SCRIPT_BYTES} allowed",
                text.len()
            )));
        }
        let file: ScriptFile = serde_norway::from_str(text)
            .map_err(|error| ProviderError::Config(format!("script: {error}")))?;
        if file.turns.is_empty() {
            return Err(ProviderError::Config("script: `turns` is empty".into()));
        }
        let turns = file
            .turns
            .into_iter()
            .enumerate()
            .map(|(index, turn)| {
                turn.check().map_err(|error| {
                    ProviderError::Config(format!("script: turns[{index}]{error}"))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Scripted {
            turns,
            stream: file.stream,
            compaction: file.compaction.unwrap_or_default(),
        })
    }

    fn answer(&self, request: &ModelRequest) -> Result<(usize, &Answer), ProviderError> {
        let turn = request.answers as usize;
        let Some(scripted) = self.turns.get(turn) else {
            return Err(ProviderError::ScriptExhausted(format!(
                "the conversation is at turn {turn}, the script has {} turns",
                self.turns.len()
            )));
        };
        match scripted {
            Turn::Answer(answer) => Ok((turn, answer)),
            Turn::Alternatives(alternatives) => {
                let observation = last_observation(request);
                alternatives
                    .iter()
                    .find(|alternative| alternative.when.matches(observation))
                    .map(|alternative| (turn, &alternative.answer))
                    .ok_or_else(|| {
                        ProviderError::ScriptExhausted(format!(
                            "no alternative of turns[{turn}] matches {}",
                            describe(observation)
                        ))
                    })
            }
        }
    }
}

#[async_trait::async_trait]
impl ModelProvider for Scripted {
    fn describe(&self) -> String {
        "scripted".to_owned()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        events: &dyn ProviderEvents,
    ) -> Result<ModelResponse, ProviderError> {
        let response = if request.purpose == Purpose::Compaction {
            self.summarise(request)?
        } else {
            let (turn, answer) = self.answer(request)?;
            if let Some(delay) = answer.delay {
                tokio::time::sleep(delay).await;
            }
            let response = answer.response(turn, request);
            if self.stream {
                stream(&response, events);
            }
            response
        };
        if events.wants_exchange() {
            let reply = serde_json::to_value(&response).map_err(|error| {
                ProviderError::Config(format!("cannot encode the answer: {error}"))
            })?;
            events.event(ProviderEvent::Exchange(Exchange {
                format: WireFormat::Scripted,
                request: wire_request(request)?,
                reply: WireReply::Whole(reply),
            }));
        }
        Ok(response)
    }
}

/// The scripted model's wire format for a request, as a cassette records it: the
/// provider-neutral request, as JSON.
fn wire_request(request: &ModelRequest) -> Result<Value, ProviderError> {
    #[derive(serde::Serialize)]
    struct WireRequest<'a> {
        system: &'a str,
        messages: &'a [Message],
        tools: &'a [super::types::ToolDefinition],
        max_output_tokens: u32,
        temperature: Option<f32>,
    }
    serde_json::to_value(WireRequest {
        system: &request.system,
        messages: &request.messages,
        tools: &request.tools,
        max_output_tokens: request.max_output_tokens,
        temperature: request.temperature,
    })
    .map_err(|error| ProviderError::Config(format!("cannot encode the request: {error}")))
}

/// Answers `request` from a recorded exchange of a scripted run, once `check` has the
/// request as the recording holds it.
pub(super) fn replay(
    reply: &WireReply,
    request: &ModelRequest,
    check: impl Fn(&Value) -> Result<(), ProviderError>,
    events: &dyn ProviderEvents,
) -> Result<ModelResponse, ProviderError> {
    check(&wire_request(request)?)?;
    let WireReply::Whole(reply) = reply else {
        return Err(ProviderError::Malformed(
            "a scripted exchange's reply is a whole answer, not a stream".into(),
        ));
    };
    let response: ModelResponse = serde_json::from_value(reply.clone())
        .map_err(|error| ProviderError::Malformed(format!("recorded answer: {error}")))?;
    stream(&response, events);
    Ok(response)
}

impl Scripted {
    fn summarise(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        if let Some(message) = &self.compaction.fail {
            return Err(ProviderError::Http {
                status: 400,
                message: message.clone(),
            });
        }
        let text = self.compaction.summary.clone().unwrap_or_else(|| {
            format!(
                "Summary of {} bytes of earlier work (scripted).",
                request_bytes(request)
            )
        });
        Ok(ModelResponse {
            usage: Usage {
                input_tokens: estimated_tokens(request_bytes(request)),
                output_tokens: estimated_tokens(text.len()),
            },
            text: Some(text),
            tool_calls: Vec::new(),
            finish: FinishReason::Stop,
        })
    }
}

/// Reports a response in pieces, as a streaming provider would have while it arrived.
fn stream(response: &ModelResponse, events: &dyn ProviderEvents) {
    for piece in pieces(response.text.as_deref().unwrap_or_default()) {
        events.event(ProviderEvent::TextDelta(piece.to_owned()));
    }
    for (index, call) in response.tool_calls.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        events.event(ProviderEvent::ToolCallDelta {
            index,
            id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            arguments: String::new(),
        });
        for piece in pieces(&call.arguments) {
            events.event(ProviderEvent::ToolCallDelta {
                index,
                id: None,
                name: None,
                arguments: piece.to_owned(),
            });
        }
    }
}

/// `text` in pieces of [`STREAM_PIECE_CHARS`] characters.
fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .char_indices()
            .nth(STREAM_PIECE_CHARS)
            .map_or(rest.len(), |(at, _)| at);
        let (piece, after) = rest.split_at(end);
        rest = after;
        Some(piece)
    })
}

impl Answer {
    fn response(&self, turn: usize, request: &ModelRequest) -> ModelResponse {
        let (text, tool_calls, finish) = match &self.reply {
            Reply::Final(text) => (Some(text.clone()), Vec::new(), FinishReason::Stop),
            Reply::ToolCalls { text, calls } => (
                text.clone(),
                calls
                    .iter()
                    .enumerate()
                    .map(|(index, call)| ToolCall {
                        id: format!("call_{turn}_{index}"),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                    })
                    .collect::<Vec<_>>(),
                FinishReason::ToolCalls,
            ),
        };
        let usage = self.usage.unwrap_or_else(|| {
            let output = text.as_ref().map_or(0, String::len)
                + tool_calls
                    .iter()
                    .map(|call| call.name.len() + call.arguments.len())
                    .sum::<usize>();
            Usage {
                input_tokens: estimated_tokens(request_bytes(request)),
                output_tokens: estimated_tokens(output),
            }
        });
        ModelResponse {
            text,
            tool_calls,
            usage,
            finish,
        }
    }
}

/// The text a real model would read: system prompt, messages, tool descriptions.
fn request_bytes(request: &ModelRequest) -> usize {
    let messages: usize = request
        .messages
        .iter()
        .map(|message| match message {
            Message::User { text } => text.len(),
            Message::Assistant { text, tool_calls } => {
                text.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|call| call.name.len() + call.arguments.len())
                        .sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|tool| tool.name.len() + tool.description.len() + tool.input_schema.to_string().len())
        .sum();
    request.system.len() + messages + tools
}

/// The last tool observation: its tool, content and error flag.
#[derive(Clone, Copy)]
struct Observation<'a> {
    tool: &'a str,
    content: &'a str,
    is_error: bool,
}

fn last_observation(request: &ModelRequest) -> Option<Observation<'_>> {
    request
        .messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::Tool {
                name,
                content,
                is_error,
                ..
            } => Some(Observation {
                tool: name,
                content,
                is_error: *is_error,
            }),
            Message::User { .. } | Message::Assistant { .. } => None,
        })
}

fn describe(observation: Option<Observation<'_>>) -> String {
    match observation {
        None => "a conversation without observations".to_owned(),
        Some(observation) => format!(
            "the last observation (tool {}, status {}, error {})",
            observation.tool,
            observation.status().as_deref().unwrap_or("unknown"),
            observation.is_error
        ),
    }
}

impl Observation<'_> {
    /// The content's `status` field; `OK` for content without one, unless it is an error.
    fn status(&self) -> Option<String> {
        let content_status = serde_json::from_str::<Value>(self.content)
            .ok()
            .and_then(|json| json.get("status")?.as_str().map(str::to_owned));
        match content_status {
            Some(status) => Some(status),
            None if self.is_error => None,
            None => Some("OK".to_owned()),
        }
    }
}

impl When {
    fn matches(&self, observation: Option<Observation<'_>>) -> bool {
        let conditions = [&self.status, &self.contains, &self.tool];
        let Some(observation) = observation else {
            return conditions.iter().all(|condition| condition.is_none());
        };
        let status_matches = self.status.as_deref().is_none_or(|wanted| {
            observation.status().as_deref() == Some(wanted)
                && (wanted != "OK" || !observation.is_error)
        });
        status_matches
            && self
                .contains
                .as_deref()
                .is_none_or(|part| observation.content.contains(part))
            && self
                .tool
                .as_deref()
                .is_none_or(|tool| observation.tool == tool)
    }
}

// The script as written. The parser reports what serde can check (unknown fields, types)
// with its path and position; the checks serde cannot express follow, reported with their
// path: errors below start with the path under the turn (`.alternatives[1]: …`, or `: …`
// for the turn itself).

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    turns: Vec<RawTurn>,
    #[serde(default)]
    stream: bool,
    compaction: Option<Compaction>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    alternatives: Option<Vec<RawAlternative>>,
    text: Option<String>,
    tool_calls: Option<Vec<RawCall>>,
    #[serde(rename = "final")]
    final_text: Option<String>,
    usage: Option<RawUsage>,
    delay_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAlternative {
    when: Option<When>,
    text: Option<String>,
    tool_calls: Option<Vec<RawCall>>,
    #[serde(rename = "final")]
    final_text: Option<String>,
    usage: Option<RawUsage>,
    delay_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    name: String,
    arguments: Option<Value>,
    arguments_raw: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct RawUsage {
    input_tokens: u64,
    output_tokens: u64,
}

impl RawTurn {
    fn check(self) -> Result<Turn, String> {
        let Some(alternatives) = self.alternatives else {
            return answer(
                self.text,
                self.tool_calls,
                self.final_text,
                self.usage,
                self.delay_ms,
            )
            .map(Turn::Answer);
        };
        let others = [
            ("text", self.text.is_some()),
            ("tool_calls", self.tool_calls.is_some()),
            ("final", self.final_text.is_some()),
            ("usage", self.usage.is_some()),
            ("delay_ms", self.delay_ms.is_some()),
        ];
        if let Some((field, _)) = others.iter().find(|(_, given)| *given) {
            return Err(format!(
                ": a turn with `alternatives` has nothing else; `{field}` belongs in an alternative"
            ));
        }
        if alternatives.is_empty() {
            return Err(": `alternatives` is empty".into());
        }
        alternatives
            .into_iter()
            .enumerate()
            .map(|(index, alternative)| {
                answer(
                    alternative.text,
                    alternative.tool_calls,
                    alternative.final_text,
                    alternative.usage,
                    alternative.delay_ms,
                )
                .map(|answer| Alternative {
                    when: alternative.when.unwrap_or_default(),
                    answer,
                })
                .map_err(|error| format!(".alternatives[{index}]{error}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Turn::Alternatives)
    }
}

fn answer(
    text: Option<String>,
    tool_calls: Option<Vec<RawCall>>,
    final_text: Option<String>,
    usage: Option<RawUsage>,
    delay_ms: Option<u64>,
) -> Result<Answer, String> {
    let reply = match (tool_calls, final_text) {
        (Some(_), Some(_)) => {
            return Err(": `tool_calls` and `final` exclude each other".into());
        }
        (None, None) => return Err(": an answer needs `tool_calls` or `final`".into()),
        (None, Some(_)) if text.is_some() => {
            return Err(": `text` goes with `tool_calls`; a final answer's text is `final`".into());
        }
        (None, Some(final_text)) => Reply::Final(final_text),
        (Some(calls), None) => {
            if calls.is_empty() {
                return Err(
                    ": `tool_calls` is empty; write `final` for an answer without calls".into(),
                );
            }
            let calls = calls
                .into_iter()
                .enumerate()
                .map(|(index, call)| {
                    call.into_call()
                        .map_err(|error| format!(".tool_calls[{index}]: {error}"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Reply::ToolCalls { text, calls }
        }
    };
    let delay = match delay_ms {
        Some(ms) if ms > MAX_DELAY_MS => {
            return Err(format!(
                ".delay_ms: {ms}, more than the {MAX_DELAY_MS} allowed"
            ));
        }
        Some(ms) => Some(Duration::from_millis(ms)),
        None => None,
    };
    Ok(Answer {
        reply,
        usage: usage.map(|usage| Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        }),
        delay,
    })
}

impl RawCall {
    fn into_call(self) -> Result<ScriptedCall, String> {
        if self.name.is_empty() {
            return Err("`name` is empty".into());
        }
        let arguments = match (self.arguments, self.arguments_raw) {
            (Some(_), Some(_)) => {
                return Err("`arguments` and `arguments_raw` exclude each other".into());
            }
            (Some(value), None) => value.to_string(),
            (None, Some(raw)) => raw,
            (None, None) => "{}".to_owned(),
        };
        Ok(ScriptedCall {
            name: self.name,
            arguments,
        })
    }
}

#[cfg(test)]
#[path = "scripted_tests.rs"]
mod tests;
