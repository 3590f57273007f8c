//! The server's HTTP client with OAuth: every request carries the [`TokenSource`]'s current
//! token, a 401 gets one fresh token and one retry (never a loop), and every token the
//! source issued is redacted from what comes back before rmcp parses it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt as _;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use super::TokenSource;

/// The transport's HTTP client with tokens from a [`TokenSource`]: each request carries the
/// current token, a 401 is answered with one fresh token and one retry, and every token is
/// redacted from what comes back.
#[derive(Clone)]
pub struct Authorized {
    pub http: reqwest::Client,
    pub tokens: Arc<TokenSource>,
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl Authorized {
    fn token_error(why: String) -> StreamableHttpError<reqwest::Error> {
        StreamableHttpError::Io(std::io::Error::other(why))
    }

    /// Runs `call` with a token; on a 401, once more with a fresh one.
    async fn with_token<T, F, Fut>(&self, call: F) -> HttpResult<T>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = HttpResult<T>>,
    {
        let token = self
            .tokens
            .token(&self.http)
            .await
            .map_err(Self::token_error)?;
        match call(token.clone()).await {
            Err(StreamableHttpError::AuthRequired(_)) => {
                tracing::info!(server = %self.tokens.server, "the MCP server rejected its OAuth token; fetching a new one");
                let fresh = self
                    .tokens
                    .renew(&self.http, &token)
                    .await
                    .map_err(Self::token_error)?;
                call(fresh).await.map_err(|err| match err {
                    StreamableHttpError::AuthRequired(_) => Self::token_error(self.tokens.fail(
                        "the server rejected a freshly issued token (HTTP 401): check the `resource` and `scopes` the token is requested for",
                    )),
                    other => other,
                })
            }
            result => result,
        }
    }

    fn redact_message(&self, message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
        let Ok(text) = serde_json::to_string(&message) else {
            return message;
        };
        match self.tokens.redact(&text) {
            Cow::Borrowed(_) => message,
            Cow::Owned(redacted) => serde_json::from_str(&redacted).unwrap_or(message),
        }
    }

    fn redact_stream(&self, stream: BoxedSseResponse) -> BoxedSseResponse {
        let tokens = self.tokens.clone();
        stream
            .map(move |event| {
                event.map(|mut event| {
                    if let Some(data) = &event.data {
                        // Canonical JSON first: a token written with escapes (`\/`) is
                        // written plainly, and found.
                        let canonical = serde_json::from_str::<serde_json::Value>(data)
                            .ok()
                            .and_then(|value| serde_json::to_string(&value).ok());
                        let text = canonical.as_deref().unwrap_or(data);
                        if let Cow::Owned(redacted) = tokens.redact(text) {
                            event.data = Some(redacted);
                        }
                    }
                    event
                })
            })
            .boxed()
    }

    fn redact_response(&self, response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Json(message, session) => {
                StreamableHttpPostResponse::Json(self.redact_message(message), session)
            }
            StreamableHttpPostResponse::Sse(stream, session) => {
                StreamableHttpPostResponse::Sse(self.redact_stream(stream), session)
            }
            other => other,
        }
    }
}

// The `auth_header` rmcp passes is always `None` here (the config sets none): the token is
// this client's to choose, per request.
impl StreamableHttpClient for Authorized {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.with_token(|token| {
            self.http.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                Some(token),
                custom_headers.clone(),
            )
        })
        .await
        .map(|response| self.redact_response(response))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.with_token(|token| {
            self.http.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                Some(token),
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
        .map(|response| self.redact_response(response))
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.with_token(|token| {
            self.http.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                Some(token),
                custom_headers.clone(),
                limits,
            )
        })
        .await
        .map(|response| self.redact_response(response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.with_token(|token| {
            self.http.delete_session(
                uri.clone(),
                session_id.clone(),
                Some(token),
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxedSseResponse> {
        self.with_token(|token| {
            self.http.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                Some(token),
                custom_headers.clone(),
            )
        })
        .await
        .map(|stream| self.redact_stream(stream))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxedSseResponse> {
        self.with_token(|token| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                Some(token),
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
        .map(|stream| self.redact_stream(stream))
    }
}
