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

use super::error::AgentError;
use super::provider::{
    CASSETTE_VERSION, Cassette, CassetteEntry, Exchange, ModelProvider, ModelRequest,
    ModelResponse, ProviderError, ProviderEvent, ProviderEvents, WireFormat,
};
use crate::ids::RunId;
use crate::store::{RunRecord, Store};

/// How an exchange is stored: the cassette entry, and what the cassette as a whole says.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    /// The provider's own description (`openai:gpt-4o`).
    model: String,
    format: WireFormat,
    entry: CassetteEntry,
}

/// A run's provider, with each call's exchange stored as the run's.
pub(super) struct Recording {
    inner: Arc<dyn ModelProvider>,
    store: Arc<dyn Store>,
    run_id: RunId,
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
            let stored = Stored {
                model: self.inner.describe(),
                format: exchange.format,
                entry: CassetteEntry {
                    purpose: request.purpose,
                    answers: request.answers,
                    request: exchange.request,
                    reply: exchange.reply,
                },
            };
            // Handed to the store's writer, which keeps the order of a run's writes, and not
            // waited for: the loop waits for the disk only before a call that must not run
            // twice, and a cassette is no reason to wait more. A run goes on without one;
            // GetCassette then refuses the run as incomplete.
            match serde_json::to_string(&stored) {
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
    let entries = stored
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
