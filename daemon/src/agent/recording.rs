//! Each model call's wire exchange kept with its run, and a finished run's exchanges put
//! together as its cassette (`GetCassette`), which `replay` plays back.
//!
//! The recording sits around the run's provider rather than inside the loop: the provider
//! reports the exchange of the attempt that answered, and only here are the call's purpose
//! and place in the run known together with it. An exchange is handed to the store before
//! the loop sees the answer, so a run's cassette holds every answer its events show.

use std::sync::{Arc, Mutex, PoisonError};

use airlock_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::AgentError;
use super::provider::{
    CASSETTE_VERSION, Cassette, CassetteEntry, Exchange, ModelProvider, ModelRequest,
    ModelResponse, ProviderError, ProviderEvent, ProviderEvents, Purpose, WireFormat,
};
use super::request_delta::{self, Delta, Prints};
use crate::ids::RunId;
use crate::store::{RunRecord, Store};

/// How an exchange is stored: the cassette entry, and what the cassette as a whole says.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    /// The provider's own description (`openai:gpt-4o`).
    model: String,
    format: WireFormat,
    /// Its request is null when `delta` stands for it.
    entry: CassetteEntry,
    /// The request as its differences from the run's last exchange before it of the same
    /// purpose (`request_delta`); absent from exchanges kept before requests were, and from
    /// a run's first of each purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delta: Option<Delta>,
}

/// A run's provider, with each call's exchange stored as the run's.
pub(super) struct Recording {
    inner: Arc<dyn ModelProvider>,
    store: Arc<dyn Store>,
    run_id: RunId,
    kept: Kept,
}

/// What a run's recording remembers between its exchanges: the request of the exchange of
/// each purpose encoded last, which the next of that purpose is stored against (a step's
/// request shares little with a compaction's). Empty before the first of this daemon's part
/// of the run: a resumed run's first exchange here is stored whole.
#[derive(Default)]
struct Kept {
    previous: Mutex<Vec<(Purpose, Value, Prints)>>,
}

impl Kept {
    /// `exchange` of a call for `request` as the store keeps it.
    fn encode(
        &self,
        model: String,
        request: &ModelRequest,
        exchange: Exchange,
    ) -> Result<String, serde_json::Error> {
        let mut previous = self.previous.lock().unwrap_or_else(PoisonError::into_inner);
        let (delta, prints) = match previous
            .iter()
            .find(|(purpose, ..)| *purpose == request.purpose)
        {
            Some((_, before, printed)) => {
                request_delta::diff_printed(before, printed, &exchange.request)
            }
            None => (None, Prints::of(&exchange.request)),
        };
        let whole = match delta {
            Some(_) => Value::Null,
            None => exchange.request.clone(),
        };
        let encoded = serde_json::to_string(&Stored {
            model,
            format: exchange.format,
            entry: CassetteEntry {
                purpose: request.purpose,
                answers: request.answers,
                request: whole,
                reply: exchange.reply,
            },
            delta,
        });
        // The next request is stored against this one only if this one is stored.
        previous.retain(|(purpose, ..)| *purpose != request.purpose);
        if encoded.is_ok() {
            previous.push((request.purpose, exchange.request, prints));
        }
        encoded
    }
}

impl Recording {
    pub fn wrap(
        inner: Arc<dyn ModelProvider>,
        store: Arc<dyn Store>,
        run_id: RunId,
    ) -> Arc<dyn ModelProvider> {
        Arc::new(Recording {
            inner,
            store,
            run_id,
            kept: Kept::default(),
        })
    }
}

#[async_trait::async_trait]
impl ModelProvider for Recording {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn replayed(&self) -> bool {
        self.inner.replayed()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        events: &dyn ProviderEvents,
    ) -> Result<ModelResponse, ProviderError> {
        let sink = Sink {
            events,
            exchange: Mutex::new(None),
        };
        let response = self.inner.complete(request, &sink).await?;
        let exchange = sink
            .exchange
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(exchange) = exchange {
            // Handed to the store's writer, which keeps the order of a run's writes, and not
            // waited for: the loop waits for the disk only before a call that must not run
            // twice, and a cassette is no reason to wait more. A run goes on without one;
            // GetCassette then refuses the run as incomplete.
            match self.kept.encode(self.inner.describe(), request, exchange) {
                Ok(text) => {
                    let write = self.store.record_exchange(&self.run_id, &text);
                    let run_id = self.run_id.clone();
                    tokio::spawn(async move {
                        if let Err(error) = write.await {
                            tracing::warn!(%run_id, %error, "cannot keep a model exchange");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(run_id = %self.run_id, %error, "cannot encode a model exchange");
                }
            }
        }
        Ok(response)
    }
}

/// Passes a call's events on to the run's, keeping the exchange back.
struct Sink<'a> {
    events: &'a dyn ProviderEvents,
    exchange: Mutex<Option<Exchange>>,
}

impl ProviderEvents for Sink<'_> {
    fn event(&self, event: ProviderEvent) {
        match event {
            ProviderEvent::Exchange(recorded) => {
                *self.exchange.lock().unwrap_or_else(PoisonError::into_inner) = Some(recorded);
            }
            other => self.events.event(other),
        }
    }

    fn wants_exchange(&self) -> bool {
        true
    }
}

/// The cassette of a finished run, from its stored exchanges and its first event.
pub(super) fn cassette(
    run: &RunRecord,
    started: Option<&pb::RunStarted>,
    stored: &[String],
) -> Result<Cassette, AgentError> {
    let refuse = |reason: String| AgentError::NoCassette {
        run_id: run.run_id.to_string(),
        reason,
    };
    if let Some(started) = started.filter(|started| started.history_messages > 0) {
        let from = if started.continues_run_id.is_empty() {
            "the run it was forked from".to_owned()
        } else {
            format!("run `{}` of its session", started.continues_run_id)
        };
        return Err(refuse(format!(
            "it starts from {} message(s) of {from}, which a cassette does not hold; capture a \
             run that starts a session",
            started.history_messages
        )));
    }
    let mut entries = stored
        .iter()
        .map(|text| serde_json::from_str::<Stored>(text))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| refuse(format!("a stored exchange does not decode: {error}")))?;
    let Some(first) = entries.first() else {
        return Err(refuse(
            "it recorded no model exchange (it ended before its first model call, or its \
             daemon kept none: [runs] keep_exchanges = false)"
                .into(),
        ));
    };
    let made = usize::try_from(run.usage.model_calls).unwrap_or(usize::MAX);
    if entries.len() < made {
        return Err(refuse(format!(
            "it kept {} of its {made} model exchanges (the store failed to keep the others)",
            entries.len()
        )));
    }
    let (format, model) = (first.format, first.model.clone());
    // Each request stored as a delta follows from the last before it of the same purpose.
    // (Once the exchanges are known complete: a missing one is named as such.)
    for ordinal in 0..entries.len() {
        let (before, rest) = entries.split_at_mut(ordinal);
        let Some(stored) = rest.first_mut() else {
            break;
        };
        if let Some(delta) = stored.delta.take() {
            let purpose = stored.entry.purpose;
            let previous = before
                .iter()
                .rev()
                .find(|earlier| earlier.entry.purpose == purpose)
                .map(|earlier| &earlier.entry.request)
                .ok_or_else(|| {
                    refuse(format!(
                        "its exchange {ordinal} is kept as changes to one before it of its purpose, \
                         which it lacks"
                    ))
                })?;
            stored.entry.request = request_delta::apply(previous, delta)
                .map_err(|error| refuse(format!("its exchange {ordinal}: {error}")))?;
        }
    }
    if entries.iter().any(|stored| stored.format != format) {
        return Err(refuse(
            "its exchanges are in more than one wire format".into(),
        ));
    }
    Ok(Cassette {
        cassette: CASSETTE_VERSION,
        provider: format,
        model,
        run_id: run.run_id.to_string(),
        exchanges: entries.into_iter().map(|stored| stored.entry).collect(),
    })
}

/// The cassette as the JSON document clients keep and send back.
pub(super) fn encode(cassette: &Cassette, run: &RunRecord) -> Result<String, AgentError> {
    serde_json::to_string(cassette).map_err(|error| AgentError::NoCassette {
        run_id: run.run_id.to_string(),
        reason: format!("it does not encode: {error}"),
    })
}

#[cfg(test)]
#[path = "recording_tests.rs"]
mod tests;
