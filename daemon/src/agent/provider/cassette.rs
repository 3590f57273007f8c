//! Cassettes: a run's model exchanges in the provider's own wire format, and `replay`, the
//! provider that plays one back.
//!
//! Every provider reports the exchange of the attempt that answered (see [`super::exchange`]);
//! the daemon keeps them with the run, and a finished run's exchanges, in order, are its
//! cassette:
//!
//! ```json
//! {"cassette": 1, "provider": "openai", "model": "openai:gpt-4o", "run_id": "run_…",
//!  "exchanges": [{"purpose": "step", "answers": 0,
//!                 "request": {"model": "gpt-4o", "messages": […], …},
//!                 "reply": {"stream": ["{\"choices\": …}", …, "[DONE]"]}}]}
//! ```
//!
//! `replay` answers the call that follows `answers` answers of the run (and is for
//! `purpose`) from the matching entry, the way the scripted model numbers its turns, so a
//! replayed run resumed after a crash carries on where it was. Before it answers it rebuilds
//! the request body the recorded provider would send now — with the model name, token
//! parameter and streaming the recording shows — and compares it with the recorded one: a
//! different system prompt, tool set, observation or budget makes a different request, and
//! the call fails with [`ProviderError::Diverged`] naming the first difference. That is the
//! point of a cassette: tools still run for real, so a tool or policy that now behaves
//! differently shows up as a divergence instead of passing unnoticed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::{
    Exchange, ModelProvider, ModelRequest, ModelResponse, ProviderError, ProviderEvent,
    ProviderEvents, Purpose, WireFormat, WireReply,
};
use super::{anthropic, openai, scripted};

/// The cassette format this daemon writes and reads.
pub const CASSETTE_VERSION: u32 = 1;

/// The largest cassette a client may send. A cassette holds every request of a run, each
/// the whole conversation so far; 64 MiB holds a few hundred steps of a large context, and
/// bounds what parsing one may allocate.
const MAX_CASSETTE_BYTES: usize = 64 << 20;

/// How much of a differing value a divergence message quotes: enough to recognise it.
const QUOTE_CHARS: usize = 160;

/// One model call of a cassette.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CassetteEntry {
    pub purpose: Purpose,
    /// The answers of the run before this call (the request's `answers`).
    pub answers: u32,
    pub request: Value,
    pub reply: WireReply,
}

/// A run's model exchanges, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cassette {
    /// The format version, [`CASSETTE_VERSION`].
    pub cassette: u32,
    pub provider: WireFormat,
    /// The model that answered (`openai:gpt-4o`, `scripted`).
    pub model: String,
    /// The run it was recorded from.
    pub run_id: String,
    pub exchanges: Vec<CassetteEntry>,
}

impl Cassette {
    /// Reads a cassette a client sent, saying where it is wrong.
    pub fn parse(text: &str) -> Result<Cassette, ProviderError> {
        let config = |reason: String| ProviderError::Config(format!("cassette: {reason}"));
        if text.len() > MAX_CASSETTE_BYTES {
            return Err(config(format!(
                "{} bytes, more than the {MAX_CASSETTE_BYTES} a cassette may have",
                text.len()
            )));
        }
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let cassette: Cassette = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|error| config(format!("{}: {}", error.path(), error.inner())))?;
        if cassette.cassette != CASSETTE_VERSION {
            return Err(config(format!(
                "format version {} is not the {CASSETTE_VERSION} this daemon reads",
                cassette.cassette
            )));
        }
        Ok(cassette)
    }
}

/// The provider that answers from a cassette.
#[derive(Debug)]
pub(super) struct Replay {
    cassette: Cassette,
}

impl Replay {
    pub fn parse(text: &str) -> Result<Replay, ProviderError> {
        Ok(Replay {
            cassette: Cassette::parse(text)?,
        })
    }
}

#[async_trait::async_trait]
impl ModelProvider for Replay {
    fn describe(&self) -> String {
        self.cassette.model.clone()
    }

    fn replayed(&self) -> bool {
        true
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        events: &dyn ProviderEvents,
    ) -> Result<ModelResponse, ProviderError> {
        let call = CallName(request.purpose, request.answers);
        let entry = self
            .cassette
            .exchanges
            .iter()
            .find(|entry| entry.purpose == request.purpose && entry.answers == request.answers)
            .ok_or_else(|| {
                ProviderError::Diverged(format!(
                    "the run makes the {call}, and the cassette recorded none ({} model calls, \
                     the last the {})",
                    self.cassette.exchanges.len(),
                    self.cassette
                        .exchanges
                        .last()
                        .map_or("none".to_owned(), |last| {
                            CallName(last.purpose, last.answers).to_string()
                        })
                ))
            })?;
        let check = |rebuilt: &Value| {
            first_difference(&entry.request, rebuilt, &mut String::new()).map_or(Ok(()), |at| {
                Err(ProviderError::Diverged(format!(
                    "the {call} asks something else than recorded: {at}"
                )))
            })
        };
        let response = match self.cassette.provider {
            WireFormat::Openai => {
                openai::replay(&entry.request, &entry.reply, request, check, events)
            }
            WireFormat::Anthropic => {
                anthropic::replay(&entry.request, &entry.reply, request, check, events)
            }
            WireFormat::Scripted => scripted::replay(&entry.reply, request, check, events),
        }?;
        if events.wants_exchange() {
            events.event(ProviderEvent::Exchange(Exchange {
                format: self.cassette.provider,
                request: entry.request.clone(),
                reply: entry.reply.clone(),
            }));
        }
        Ok(response)
    }
}

/// A model call named for messages: "model call after 2 answers".
struct CallName(Purpose, u32);

impl std::fmt::Display for CallName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let CallName(purpose, answers) = self;
        match purpose {
            Purpose::Step => write!(f, "model call after {answers} answer(s)"),
            Purpose::Compaction => write!(f, "compaction call after {answers} answer(s)"),
        }
    }
}

/// Where `now` first differs from `recorded`, as a JSON pointer with both values quoted;
/// `None` when they are equal. `path` is the pointer to the values compared.
fn first_difference(recorded: &Value, now: &Value, path: &mut String) -> Option<String> {
    let here = |path: &str| {
        if path.is_empty() {
            "/".to_owned()
        } else {
            path.to_owned()
        }
    };
    match (recorded, now) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                let found = match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => first_difference(x, y, path),
                    (Some(x), None) => Some(format!("{path}: recorded {}, now absent", quote(x))),
                    (None, Some(y)) => {
                        Some(format!("{path}: absent when recorded, now {}", quote(y)))
                    }
                    (None, None) => None,
                };
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                let len = path.len();
                path.push_str(&format!("/{index}"));
                let found = first_difference(x, y, path);
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            (a.len() != b.len()).then(|| {
                format!(
                    "{}: {} item(s) recorded, now {}",
                    here(path),
                    a.len(),
                    b.len()
                )
            })
        }
        (a, b) if a == b => None,
        (a, b) => Some(format!(
            "{}: recorded {}, now {}",
            here(path),
            quote(a),
            quote(b)
        )),
    }
}

/// `value` as compact JSON, cut to [`QUOTE_CHARS`] characters.
fn quote(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
#[path = "cassette_tests.rs"]
mod tests;
