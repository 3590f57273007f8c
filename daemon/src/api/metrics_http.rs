//! The Prometheus endpoint: `GET /metrics` on an address of its own, off unless
//! `[metrics] listen` (or `--metrics-listen`) sets one.
//!
//! Its token rule is its own, not the API's tenants': metrics name tenants and tools, so a
//! scrape that is not from this machine must carry the bearer token of `[metrics]
//! token_file` (compared in constant time), and a daemon asked to serve metrics on a
//! non-loopback address without one refuses to start. The answer is the Prometheus text
//! format (0.0.4), or OpenMetrics text for a scraper that asks for it.
//!
//! Plain hyper, as the MCP endpoint: one route, no body to read, nothing a router adds.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper_util::rt::{TokioIo, TokioTimer};
use subtle::ConstantTimeEq as _;
use tokio_util::sync::CancellationToken;

/// The path scrapes ask for: Prometheus's default.
pub const PATH: &str = "/metrics";

/// The OpenMetrics text format's content type, for a scraper whose `Accept` names it.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The longest token file read: a token is a line; anything longer is not one.
const MAX_TOKEN_BYTES: u64 = 4096;

/// Scrapes served at once: Prometheus scrapes a target one request at a time; a few
/// scrapers and a person's curl fit many times over. A connection past it is closed at once,
/// so a peer holding connections open cannot take the daemon's file descriptors.
const MAX_CONNECTIONS: usize = 64;

/// How long a connection may take to send its request's head, and how long one may stay
/// open at all: a scrape is one small request; a slow sender is a slowloris.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// The pause after a failed accept (out of file descriptors): without it the loop would
/// spin and log as fast as it can.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error(
        "[metrics] listen = {addr} is not a loopback address: set [metrics] token_file (or --metrics-token-file) so that scrapes must carry a token"
    )]
    NoToken { addr: SocketAddr },
    #[error("[metrics] token_file {path}: {reason}")]
    TokenFile { path: PathBuf, reason: String },
    #[error("cannot listen for metrics on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// What a scrape must carry.
#[derive(Clone)]
pub struct ScrapeToken(Option<Arc<[u8]>>);

impl ScrapeToken {
    /// The token of `file`, or none; refuses a non-loopback `addr` without one.
    pub fn load(addr: SocketAddr, file: Option<&Path>) -> Result<ScrapeToken, MetricsError> {
        let Some(path) = file else {
            if addr.ip().is_loopback() {
                return Ok(ScrapeToken(None));
            }
            return Err(MetricsError::NoToken { addr });
        };
        let invalid = |reason: String| MetricsError::TokenFile {
            path: path.to_owned(),
            reason,
        };
        let size = std::fs::metadata(path)
            .map_err(|err| invalid(err.to_string()))?
            .len();
        if size > MAX_TOKEN_BYTES {
            return Err(invalid(format!("{size} bytes is not a token")));
        }
        let text = std::fs::read_to_string(path).map_err(|err| invalid(err.to_string()))?;
        let token = text.trim();
        if token.is_empty() {
            return Err(invalid("the file is empty".to_owned()));
        }
        Ok(ScrapeToken(Some(token.as_bytes().into())))
    }

    fn admits(&self, request: &Request<hyper::body::Incoming>) -> bool {
        let Some(token) = &self.0 else {
            return true;
        };
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or_default();
        bool::from(given.as_bytes().ct_eq(token))
    }
}

fn answer(status: StatusCode, content_type: &str, body: String) -> Response<Full<bytes::Bytes>> {
    let mut response = Response::new(Full::new(bytes::Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

fn route(
    request: &Request<hyper::body::Incoming>,
    token: &ScrapeToken,
) -> Response<Full<bytes::Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if request.uri().path() != PATH {
        return answer(
            StatusCode::NOT_FOUND,
            TEXT,
            format!("metrics are at {PATH}\n"),
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return answer(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "GET only\n".to_owned(),
        );
    }
    if !token.admits(request) {
        let mut refused = answer(
            StatusCode::UNAUTHORIZED,
            TEXT,
            "this endpoint needs the bearer token of [metrics] token_file\n".to_owned(),
        );
        refused.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return refused;
    }
    let openmetrics = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| accept.contains("application/openmetrics-text"));
    let metrics = crate::metrics::global();
    let encoded = if openmetrics {
        metrics.openmetrics_text().map(|text| (OPENMETRICS, text))
    } else {
        metrics.prometheus_text().map(|text| {
            (
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                text,
            )
        })
    };
    match encoded {
        Ok((content_type, text)) => answer(StatusCode::OK, content_type, text),
        Err(_) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            TEXT,
            "the metrics could not be encoded\n".to_owned(),
        ),
    }
}

/// Serves `GET /metrics` on `listener` until `stop`.
pub async fn serve(listener: tokio::net::TcpListener, token: ScrapeToken, stop: CancellationToken) {
    let local = listener.local_addr().ok();
    tracing::info!(
        listen = ?local,
        path = PATH,
        token = token.0.is_some(),
        "serving Prometheus metrics"
    );
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(err) => {
                tracing::warn!(error = %err, "cannot accept a metrics connection");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Closed unanswered: every slot is held by a connection still open.
            continue;
        };
        let token = token.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let handle = hyper::service::service_fn(move |request| {
                let response = route(&request, &token);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), handle);
            tokio::pin!(connection);
            tokio::select! {
                _ = &mut connection => {}
                () = tokio::time::sleep(CONNECTION_LIFETIME) => {}
                () = stop.cancelled() => connection.as_mut().graceful_shutdown(),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_address_needs_a_token_and_a_token_file_must_hold_one() {
        let public: SocketAddr = "0.0.0.0:9464".parse().unwrap();
        let loopback: SocketAddr = "127.0.0.1:9464".parse().unwrap();
        assert!(matches!(
            ScrapeToken::load(public, None),
            Err(MetricsError::NoToken { .. })
        ));
        assert!(ScrapeToken::load(loopback, None).unwrap().0.is_none());
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        assert!(ScrapeToken::load(public, Some(&empty)).is_err());
        let huge = dir.path().join("huge");
        std::fs::write(&huge, "x".repeat(10_000)).unwrap();
        assert!(ScrapeToken::load(public, Some(&huge)).is_err());
        let good = dir.path().join("token");
        std::fs::write(&good, "  s3cret \n").unwrap();
        let token = ScrapeToken::load(public, Some(&good)).unwrap();
        assert_eq!(token.0.as_deref(), Some(&b"s3cret"[..]));
        assert!(ScrapeToken::load(public, Some(&dir.path().join("missing"))).is_err());
    }
}
