//! One OTLP export, over either transport: gRPC (tonic, a generic unary call on the signal's
//! `Export` method) or HTTP/protobuf (reqwest, a POST of the same message). Both carry the
//! configured headers, speak TLS with the configured CA (the Mozilla roots otherwise) and
//! client certificate, and classify failures as the OTLP specification does: what is worth
//! sending again, and after how long the collector asked for.

use std::str::FromStr as _;
use std::time::Duration;

use http::uri::PathAndQuery;
use tonic::Code;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::settings::{OtlpProtocol, TransportSettings};

/// How long connecting may take; an address that drops packets would otherwise hold a batch
/// for as long as the kernel retries the handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The largest response body read from an HTTP collector: a partial-success message is a
/// count and a sentence; anything longer is not worth the memory.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("invalid OTLP endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },
    #[error("OTLP {what} {path}: {reason}")]
    File {
        what: &'static str,
        path: String,
        reason: String,
    },
    #[error("OTLP header {name:?}: {reason}")]
    Header { name: String, reason: String },
}

/// Why an export failed, and whether sending it again may help.
#[derive(Debug, Clone)]
pub struct Failure {
    pub retryable: bool,
    /// The collector's own wait (`Retry-After`), when it gave one.
    pub retry_after: Option<Duration>,
    pub message: String,
}

enum Kind {
    Grpc(Channel),
    Http {
        client: reqwest::Client,
        url: reqwest::Url,
    },
}

/// A connection to one signal's collector.
pub struct Transport {
    kind: Kind,
    path: PathAndQuery,
    headers: Vec<(String, String)>,
    timeout: Duration,
    endpoint: String,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("endpoint", &self.endpoint)
            .field("headers", &self.headers.len())
            .finish_non_exhaustive()
    }
}

/// `endpoint` as it may be shown in a log line or an error: without the user and password a
/// URL may carry (`https://user:key@…`, which reqwest sends as Basic credentials) or its
/// query.
pub fn shown(endpoint: &str) -> String {
    let (scheme, rest) = match endpoint.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, endpoint),
    };
    let rest = rest.split_once('?').map_or(rest, |(before, _)| before);
    let rest = match rest.split_once('/') {
        Some((authority, path)) => {
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{host}/{path}")
        }
        None => rest
            .rsplit_once('@')
            .map_or(rest, |(_, host)| host)
            .to_owned(),
    };
    match scheme {
        Some(scheme) => format!("{scheme}://{rest}"),
        None => rest,
    }
}

/// A collector's words (a partial success's message) cut for a log line: a collector must
/// not fill the daemon's log.
pub fn cut_message(message: &str) -> &str {
    const MAX: usize = 512;
    if message.len() <= MAX {
        return message;
    }
    let mut end = MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

fn read_file(what: &'static str, path: &std::path::Path) -> Result<Vec<u8>, TransportError> {
    std::fs::read(path).map_err(|err| TransportError::File {
        what,
        path: path.display().to_string(),
        reason: err.to_string(),
    })
}

impl Transport {
    /// Checks the settings and reads the TLS files; connecting is left to the first export
    /// (a collector that is not up yet is no reason to refuse to start). gRPC's channel spawns
    /// its connection task, so this runs inside a Tokio runtime.
    pub fn new(settings: &TransportSettings) -> Result<Transport, TransportError> {
        let invalid = |reason: String| TransportError::InvalidEndpoint {
            endpoint: shown(&settings.endpoint),
            reason,
        };
        let raw = settings.endpoint.trim();
        let (url, tls) = match raw.split_once("://") {
            // A bare `host:port` is plaintext, as airlock always read it; headers (an API
            // key) are not sent where nobody said whether they travel in the clear.
            None if !settings.headers.is_empty() => {
                return Err(invalid(
                    "headers are configured and the endpoint names no scheme: write https:// \
                     to send them encrypted, or http:// to send them in the clear"
                        .to_owned(),
                ));
            }
            None => (format!("http://{raw}"), false),
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("http") => (raw.to_owned(), false),
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("https") => (raw.to_owned(), true),
            Some((scheme, _)) => {
                return Err(invalid(format!(
                    "unsupported scheme {scheme:?}; OTLP is sent over http:// or https://"
                )));
            }
        };
        let ca = settings
            .ca_file
            .as_deref()
            .map(|path| read_file("CA file", path))
            .transpose()?;
        let identity = match (&settings.client_cert_file, &settings.client_key_file) {
            (Some(cert), Some(key)) => Some((
                read_file("client certificate", cert)?,
                read_file("client key", key)?,
            )),
            _ => None,
        };
        if !tls && (ca.is_some() || identity.is_some()) {
            return Err(invalid(
                "a CA file or client certificate is set, but the endpoint is http://: use https://"
                    .to_owned(),
            ));
        }
        let mut headers = Vec::with_capacity(settings.headers.len());
        for (name, value) in &settings.headers {
            if AsciiMetadataKey::from_str(name).is_err() {
                return Err(TransportError::Header {
                    name: name.clone(),
                    reason: "not a valid header name".to_owned(),
                });
            }
            if AsciiMetadataValue::try_from(value.0.as_str()).is_err() {
                return Err(TransportError::Header {
                    name: name.clone(),
                    reason: "its value is not printable ASCII".to_owned(),
                });
            }
            headers.push((name.clone(), value.0.clone()));
        }
        let kind = match settings.protocol {
            OtlpProtocol::Grpc => {
                let endpoint =
                    Endpoint::from_shared(url).map_err(|err| invalid(err.to_string()))?;
                let host = endpoint.uri().host().unwrap_or_default().to_owned();
                if host.is_empty() {
                    return Err(invalid("no host".to_owned()));
                }
                let mut endpoint = endpoint
                    .connect_timeout(CONNECT_TIMEOUT)
                    .timeout(settings.timeout);
                if tls {
                    let mut config =
                        ClientTlsConfig::new().domain_name(host.trim_matches(['[', ']']));
                    config = match &ca {
                        Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
                        None => config.with_webpki_roots(),
                    };
                    if let Some((cert, key)) = &identity {
                        config = config.identity(Identity::from_pem(cert, key));
                    }
                    endpoint = endpoint
                        .tls_config(config)
                        .map_err(|err| invalid(format!("TLS: {err}")))?;
                }
                Kind::Grpc(endpoint.connect_lazy())
            }
            OtlpProtocol::HttpProtobuf => {
                let url = reqwest::Url::parse(&url).map_err(|err| invalid(err.to_string()))?;
                if url.host_str().is_none_or(str::is_empty) {
                    return Err(invalid("no host".to_owned()));
                }
                crate::http_client::install_crypto_provider();
                let tls_config = crate::http_client::tls_config(ca.as_deref(), identity.as_ref())
                    .map_err(|reason| invalid(format!("TLS: {reason}")))?;
                let client = reqwest::Client::builder()
                    .tls_backend_preconfigured(tls_config)
                    // An export is one POST to a configured URL; a redirect would carry it
                    // (and its API key) somewhere nobody configured.
                    .redirect(reqwest::redirect::Policy::none())
                    .connect_timeout(CONNECT_TIMEOUT)
                    .timeout(settings.timeout)
                    .no_proxy()
                    .user_agent(concat!("airlockd/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|err| invalid(format!("cannot set up the HTTP client: {err}")))?;
                Kind::Http { client, url }
            }
        };
        Ok(Transport {
            kind,
            path: PathAndQuery::from_static(settings.signal.grpc_path()),
            headers,
            timeout: settings.timeout,
            endpoint: shown(&settings.endpoint),
        })
    }

    /// The collector's address, as configured.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends `request` once; the collector's answer, or why there is none.
    pub async fn export<Req, Resp>(&self, request: &Req) -> Result<Resp, Failure>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        match &self.kind {
            Kind::Grpc(channel) => self.export_grpc(channel.clone(), request).await,
            Kind::Http { client, url } => self.export_http(client, url, request).await,
        }
    }

    async fn export_grpc<Req, Resp>(&self, channel: Channel, request: &Req) -> Result<Resp, Failure>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.map_err(|err| Failure {
            retryable: true,
            retry_after: None,
            message: format!("cannot connect: {err}"),
        })?;
        let mut call = tonic::Request::new(request.clone());
        call.set_timeout(self.timeout);
        for (name, value) in &self.headers {
            // Both were checked in `new`.
            if let (Ok(name), Ok(value)) = (
                AsciiMetadataKey::from_str(name),
                AsciiMetadataValue::try_from(value.as_str()),
            ) {
                call.metadata_mut().insert(name, value);
            }
        }
        let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
        match grpc.unary(call, self.path.clone(), codec).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => Err(Failure {
                retryable: retryable_code(status.code()),
                retry_after: None,
                message: format!("{:?}: {}", status.code(), status.message()),
            }),
        }
    }

    async fn export_http<Req, Resp>(
        &self,
        client: &reqwest::Client,
        url: &reqwest::Url,
        request: &Req,
    ) -> Result<Resp, Failure>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let mut post = client
            .post(url.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(request.encode_to_vec());
        for (name, value) in &self.headers {
            post = post.header(name.as_str(), value.as_str());
        }
        let response = post.send().await.map_err(|err| Failure {
            retryable: true,
            retry_after: None,
            // Without the URL, which may carry credentials.
            message: format!("cannot send: {}", error_chain(&err.without_url())),
        })?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = read_bounded(response).await;
        if status.is_success() {
            return Resp::decode(body.as_slice()).map_err(|err| Failure {
                retryable: false,
                retry_after: None,
                message: format!("the collector's answer is not an OTLP response: {err}"),
            });
        }
        Err(Failure {
            // The OTLP/HTTP specification's retryable statuses.
            retryable: matches!(status.as_u16(), 429 | 502 | 503 | 504),
            retry_after,
            message: format!("HTTP {status}"),
        })
    }
}

/// Up to [`MAX_RESPONSE_BYTES`] of a response's body; what cannot be read is empty.
async fn read_bounded(mut response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            break;
        }
        body.extend_from_slice(&chunk);
    }
    body
}

/// An error with its causes: reqwest's own message names only the outermost.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether a failed gRPC `Export` may succeed if sent again, as the OTLP specification
/// classifies codes. `RESOURCE_EXHAUSTED` is retryable there only when the collector attaches
/// `RetryInfo`, which this exporter does not read: it is treated as final.
pub fn retryable_code(code: Code) -> bool {
    match code {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => true,
        Code::Ok
        | Code::Unknown
        | Code::InvalidArgument
        | Code::NotFound
        | Code::AlreadyExists
        | Code::PermissionDenied
        | Code::ResourceExhausted
        | Code::FailedPrecondition
        | Code::Unimplemented
        | Code::Internal
        | Code::Unauthenticated => false,
    }
}
