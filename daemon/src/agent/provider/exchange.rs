//! The helpers of the wire exchange of one model call ([`Exchange`], in `types`), shared by
//! every provider and by `replay`: whose wire format it is in, the request body sent and the
//! reply body read (or, for a streamed reply, each event's data), never a header — so never a
//! key. A provider reports the exchange of the attempt that answered
//! ([`ProviderEvent::Exchange`]) to a caller that wants it
//! ([`ProviderEvents::wants_exchange`]); a provider's `replay` rebuilds a recorded request with
//! the helpers here ([`Sent`], [`check_body`], [`body_of`]).

use serde_json::Value;

use super::types::{Exchange, ProviderError, ProviderEvent, ProviderEvents, WireFormat, WireReply};

/// Reports the exchange that answered, for the run's cassette: `request` is the body sent.
pub(super) fn report(
    format: WireFormat,
    request: &[u8],
    reply: WireReply,
    events: &dyn ProviderEvents,
) {
    // The body is the provider's own, encoded from a `Serialize` a moment ago: it parses.
    if let Ok(request) = serde_json::from_slice(request) {
        events.event(ProviderEvent::Exchange(Exchange {
            format,
            request,
            reply,
        }));
    }
}

/// A whole reply body for the cassette (it parsed as an answer, so it is JSON).
pub(super) fn whole(body: &[u8]) -> Result<WireReply, ProviderError> {
    serde_json::from_slice(body)
        .map(WireReply::Whole)
        .map_err(|error| ProviderError::Malformed(format!("reply body: {error}")))
}

/// How a recorded request was sent, as its body says: what a replay sends the same way.
pub(super) struct Sent<'a>(pub &'a Value);

impl Sent<'_> {
    pub fn model(&self) -> &str {
        self.0
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// A boolean field (`stream`), false when absent.
    pub fn flag(&self, name: &str) -> bool {
        self.0.get(name).and_then(Value::as_bool).unwrap_or(false)
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.get(name).is_some()
    }
}

/// Hands `body`, the request a replay would send now, to `check`.
pub(super) fn check_body(
    body: &[u8],
    check: impl Fn(&Value) -> Result<(), ProviderError>,
) -> Result<(), ProviderError> {
    let rebuilt: Value = serde_json::from_slice(body)
        .map_err(|error| ProviderError::Config(format!("cannot encode the request: {error}")))?;
    check(&rebuilt)
}

/// A recorded whole reply as the bytes a live one would be read from.
pub(super) fn body_of(reply: &Value) -> Result<Vec<u8>, ProviderError> {
    serde_json::to_vec(reply)
        .map_err(|error| ProviderError::Malformed(format!("reply body: {error}")))
}
