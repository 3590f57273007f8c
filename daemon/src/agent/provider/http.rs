//! The HTTP side the `openai` and `anthropic` providers share: one client per provider, a
//! JSON POST whose HTTP errors become [`ProviderError`]s carrying the server's message and its
//! `Retry-After`, and bounded reading of answers, whole or as server-sent events.
//!
//! API keys stay out of everything printed: [`ApiKey`] has no readable `Debug`, the header
//! that carries it is marked sensitive, and every error message is scrubbed of it in case a
//! server echoes it back.

use std::collections::VecDeque;
use std::fmt;
use std::time::SystemTime;

use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Client, Response, StatusCode, Url};
use serde_json::Value;

use super::retry::{Failure, parse_retry_after};
use super::sse::{SseDecoder, SseEvent};
use super::types::ProviderError;

/// The most bytes one answer may take, whole or streamed. Real answers are tens of
/// kilobytes; the bound keeps a misbehaving server from filling the daemon's memory.
pub(super) const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// How much of an error answer is read: only its message is kept.
const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// The longest server message kept in an error, in characters: room for any real API's
/// message, short enough to travel in an event.
const MAX_ERROR_MESSAGE_CHARS: usize = 1000;

/// An API key. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct ApiKey(String);

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl ApiKey {
    /// The key from the variable `env_var` as `lookup` reads it (the process environment,
    /// outside tests). An empty value counts as unset. A key is `required` by the vendor's
    /// own API; local servers that speak the API usually need none.
    pub fn from_env(
        env_var: &str,
        required: bool,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ApiKey>, ProviderError> {
        match lookup(env_var).map(|v| v.trim().to_owned()) {
            Some(value) if !value.is_empty() => Ok(Some(ApiKey(value))),
            _ if required => Err(ProviderError::Config(format!(
                "no API key: set the environment variable {env_var}"
            ))),
            _ => Ok(None),
        }
    }

    /// A header value carrying `prefix` and the key, marked sensitive so that it is never
    /// logged. `env_var` names the key's source in the error; the key itself never appears.
    pub fn header(&self, prefix: &str, env_var: &str) -> Result<HeaderValue, ProviderError> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            ProviderError::Config(format!(
                "the API key in {env_var} is not a valid HTTP header value"
            ))
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// `base_url` (an http or https URL, with or without a trailing slash) joined with `path`.
pub(super) fn endpoint(base_url: &str, path: &str) -> Result<Url, ProviderError> {
    let joined = format!("{}/{}", base_url.trim_end_matches('/'), path);
    let url = Url::parse(&joined).map_err(|error| {
        ProviderError::Config(format!("invalid base URL `{base_url}`: {error}"))
    })?;
    match url.scheme() {
        "http" | "https" if url.host_str().is_some() => Ok(url),
        _ => Err(ProviderError::Config(format!(
            "invalid base URL `{base_url}`: an http or https URL is expected"
        ))),
    }
}

/// One provider's HTTP client.
#[derive(Debug)]
pub(super) struct HttpClient {
    client: Client,
    /// Scrubbed from error messages.
    key: Option<ApiKey>,
}

impl HttpClient {
    pub fn new(key: Option<ApiKey>) -> Result<Self, ProviderError> {
        crate::http_client::install_crypto_provider();
        let client = Client::builder()
            // A model call is one POST to a known endpoint. Following a redirect would turn
            // it into a GET, or carry the request to a host nobody configured.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("airlockd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| {
                ProviderError::Config(format!("cannot set up the HTTP client: {error}"))
            })?;
        Ok(HttpClient { client, key })
    }

    /// POSTs the JSON `body`. An answer with an HTTP error status becomes a [`Failure`] with
    /// the server's message and requested delay.
    pub async fn post(
        &self,
        url: &Url,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response, Failure> {
        let response = self
            .client
            .post(url.clone())
            .headers(headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|error| self.transport(&error))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let retry_after = parse_retry_after(
            header("retry-after-ms").as_deref(),
            header("retry-after").as_deref(),
            SystemTime::now(),
        );
        // The message is a courtesy: when the error body cannot be read, the status speaks.
        let body = read_up_to(response, MAX_ERROR_BODY_BYTES)
            .await
            .unwrap_or_default();
        Err(Failure {
            error: ProviderError::Http {
                status: status.as_u16(),
                message: self.scrub(error_message(status, &body)),
            },
            retry_after,
        })
    }

    /// The whole body of a successful answer.
    pub async fn body(&self, mut response: Response) -> Result<Vec<u8>, ProviderError> {
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| self.transport(&error))?
        {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(too_long());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The answer as server-sent events.
    pub fn events(&self, response: Response) -> EventStream<'_> {
        EventStream {
            http: self,
            response,
            decoder: SseDecoder::default(),
            queue: VecDeque::new(),
            received: 0,
            ended: false,
        }
    }

    fn transport(&self, error: &reqwest::Error) -> ProviderError {
        // reqwest's own message is terse ("error sending request"); the cause is in the chain.
        let mut message = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        ProviderError::Transport(self.scrub(message))
    }

    fn scrub(&self, text: String) -> String {
        match &self.key {
            Some(ApiKey(key)) if text.contains(key.as_str()) => text.replace(key, "<redacted>"),
            _ => text,
        }
    }
}

/// Whether the answer is an event stream. A server that ignores `"stream": true` answers
/// with plain JSON, which the providers then read whole.
pub(super) fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("text/event-stream"))
}

/// Server-sent events read from an answer, bounded by [`MAX_RESPONSE_BYTES`].
pub(super) struct EventStream<'a> {
    http: &'a HttpClient,
    response: Response,
    decoder: SseDecoder,
    queue: VecDeque<SseEvent>,
    received: usize,
    ended: bool,
}

impl EventStream<'_> {
    /// The next event, or `None` when the server closed the stream.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            match self
                .response
                .chunk()
                .await
                .map_err(|error| self.http.transport(&error))?
            {
                Some(chunk) => {
                    self.received += chunk.len();
                    if self.received > MAX_RESPONSE_BYTES {
                        return Err(too_long());
                    }
                    self.queue.extend(self.decoder.push(&chunk));
                }
                None => {
                    self.ended = true;
                    self.queue.extend(self.decoder.finish());
                }
            }
        }
    }
}

fn too_long() -> ProviderError {
    ProviderError::Malformed(format!(
        "the answer is longer than {MAX_RESPONSE_BYTES} bytes"
    ))
}

/// Up to `limit` bytes of the body; the rest is left unread.
async fn read_up_to(mut response: Response, limit: usize) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while body.len() < limit {
        let Some(chunk) = response.chunk().await? else {
            break;
        };
        let room = limit - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    Ok(body)
}

/// The message of an error answer: `error.message` as OpenAI and Anthropic send it (with the
/// error's type when there is one), `error` or `message` as some local servers send it, else
/// the body's text, else the status's reason.
pub(super) fn error_message(status: StatusCode, body: &[u8]) -> String {
    let message = match serde_json::from_slice::<Value>(body) {
        Ok(json) => message_of(&json),
        Err(_) => None,
    };
    let message = message.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    let message = if message.is_empty() {
        status.canonical_reason().unwrap_or("no message").to_owned()
    } else {
        message
    };
    truncate_chars(message, MAX_ERROR_MESSAGE_CHARS)
}

/// The message in an API error object (`{"error": {"message", "type"}}` and its variants).
pub(super) fn message_of(json: &Value) -> Option<String> {
    let error = json.get("error").unwrap_or(json);
    if let Some(text) = error.as_str() {
        return Some(text.to_owned());
    }
    let message = error.get("message")?.as_str()?;
    Some(match error.get("type").and_then(Value::as_str) {
        Some(kind) if !kind.is_empty() => format!("{message} ({kind})"),
        _ => message.to_owned(),
    })
}

fn truncate_chars(mut text: String, max: usize) -> String {
    if let Some((cut, _)) = text.char_indices().nth(max) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_keys_are_an_error_only_where_required() {
        let unset = |_: &str| None;
        let blank = |_: &str| Some("  ".to_owned());
        assert_eq!(ApiKey::from_env("MY_KEY", false, unset), Ok(None));
        assert_eq!(ApiKey::from_env("MY_KEY", false, blank), Ok(None));
        let error = ApiKey::from_env("MY_KEY", true, blank).expect_err("required");
        assert!(
            matches!(&error, ProviderError::Config(m) if m.contains("MY_KEY")),
            "{error}"
        );
        let key = ApiKey::from_env("MY_KEY", true, |name| Some(format!("{name}-secret\n")))
            .expect("set")
            .expect("present");
        assert_eq!(key, ApiKey("MY_KEY-secret".into()));
        assert!(!format!("{key:?}").contains("secret"));
    }

    #[test]
    fn key_headers_are_sensitive_and_bad_keys_are_not_echoed() {
        let header = ApiKey("sk-1".into()).header("Bearer ", "K").expect("valid");
        assert!(header.is_sensitive());
        assert_eq!(header.to_str().expect("ascii"), "Bearer sk-1");
        let error = ApiKey("sk-\u{7}bell".into())
            .header("", "K")
            .expect_err("control character");
        assert!(!error.to_string().contains("bell"), "{error}");
    }

    #[test]
    fn endpoints_join_and_reject_non_http_urls() {
        let url = endpoint("http://127.0.0.1:8080/v1/", "chat/completions").expect("valid");
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/v1/chat/completions");
        let url = endpoint("https://api.anthropic.com", "v1/messages").expect("valid");
        assert_eq!(url.as_str(), "https://api.anthropic.com/v1/messages");
        for bad in ["ftp://host/v1", "not a url", "file:///tmp"] {
            assert!(
                matches!(endpoint(bad, "x"), Err(ProviderError::Config(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn error_messages_from_api_error_bodies() {
        let status = StatusCode::TOO_MANY_REQUESTS;
        let openai = br#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
        assert_eq!(
            error_message(status, openai),
            "Rate limit reached (requests)"
        );
        let ollama = br#"{"error":"model \"llama9\" not found"}"#;
        assert_eq!(error_message(status, ollama), "model \"llama9\" not found");
        assert_eq!(
            error_message(status, b"  upstream down \n"),
            "upstream down"
        );
        assert_eq!(error_message(status, b""), "Too Many Requests");
        let long = "é".repeat(MAX_ERROR_MESSAGE_CHARS + 5);
        let message = error_message(status, long.as_bytes());
        assert_eq!(message.chars().count(), MAX_ERROR_MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'));
    }

    #[test]
    fn scrub_removes_the_key() {
        let http = HttpClient::new(Some(ApiKey("sk-live-42".into()))).expect("client");
        assert_eq!(
            http.scrub("Incorrect API key provided: sk-live-42.".into()),
            "Incorrect API key provided: <redacted>."
        );
    }
}
