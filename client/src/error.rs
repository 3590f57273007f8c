//! The one error type of the client library, and what each failure means for a caller.

use std::error::Error as StdError;

use rustls::AlertDescription;
use tonic::Code;

use crate::exit_code;
use crate::token::{TOKEN_ENV, TokenSource};

/// The daemon a client talks to, as its errors name it: the address, and where the token
/// sent to it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub endpoint: String,
    pub token: TokenSource,
}

/// Why a call to `airlockd` did not produce an answer.
///
/// A tool that ran and failed is not an error here: that is a `ToolResult` with a status other
/// than `OK`. These are the failures of the conversation with the daemon itself.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server address cannot be used to connect to anything.
    #[error("invalid server address {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },

    /// The token or the TLS files given cannot be used together or as they are.
    #[error("{0}")]
    Credentials(String),

    /// A file the caller names (a certificate, a key, the token file) cannot be read.
    #[error("{0}")]
    Unreadable(String),

    /// The TLS handshake failed over a certificate: the daemon requires a client certificate
    /// that was not sent or does not accept the one sent, or its own is not one this client
    /// trusts. The reason says which, and what to pass.
    #[error("TLS with airlockd at {endpoint} failed: {reason}")]
    Tls { endpoint: String, reason: String },

    /// Nothing answered at the server address.
    #[error("cannot reach airlockd at {endpoint}: {reason} — is it running?")]
    Unreachable { endpoint: String, reason: String },

    /// The connection broke in the middle of a call: the daemon stopped, or the network
    /// between failed. Whether a running tool finished is unknown to this client.
    #[error("lost the connection to airlockd at {endpoint}: {reason}")]
    ConnectionLost { endpoint: String, reason: String },

    /// The daemon refused the token: none was sent, or it is not one of this daemon's. Says
    /// where the token came from and how to give another.
    #[error("{}", describe_unauthenticated(endpoint, token, reason))]
    Unauthenticated {
        endpoint: String,
        token: TokenSource,
        /// The daemon's own words.
        reason: String,
    },

    /// The daemon answered a call with an error status.
    #[error("{}", describe_status(endpoint, status))]
    Rpc {
        endpoint: String,
        // Boxed because `tonic::Status` is large and would make every `Result` carrying this
        // error as large as it.
        status: Box<tonic::Status>,
    },

    /// The daemon closed a call's event stream before sending the call's result.
    #[error("airlockd at {endpoint} closed the call's stream before sending its result")]
    IncompleteStream { endpoint: String },

    /// The daemon closed a run's event stream before the run finished. The run belongs to the
    /// daemon, not to the stream: it may still be going, and can be followed again from the
    /// last event received.
    #[error(
        "airlockd at {endpoint} closed the stream of run {run_id} before the run finished \
         (last event received: {last_seq})"
    )]
    IncompleteRun {
        endpoint: String,
        run_id: String,
        last_seq: u64,
    },

    /// A message could not be sent on a stream the daemon has already closed.
    #[error("the stream to airlockd at {endpoint} is closed; the message was not sent")]
    StreamClosed { endpoint: String },
}

impl ClientError {
    /// Classifies the status a call to `peer` ended with.
    pub(crate) fn rpc(peer: &Peer, status: tonic::Status) -> Self {
        let endpoint = peer.endpoint.as_str();
        // With TLS 1.3 the daemon checks the client's certificate after the client considers
        // the handshake done, so its refusal may arrive only with the first call.
        if let Some(refusal) = Self::tls_refusal(endpoint, &status) {
            return refusal;
        }
        if status.code() == Code::Unauthenticated {
            return Self::Unauthenticated {
                endpoint: endpoint.to_owned(),
                token: peer.token.clone(),
                reason: status.message().to_owned(),
            };
        }
        // A status the daemon sends never carries a source error. tonic attaches one when it
        // makes up an `UNKNOWN` status for a failure of the transport under the call (hyper
        // and h2 errors, which it does not classify further): the connection broke.
        // tonic reports an HTTP/2 failure of the connection (the peer sent something that is
        // not HTTP/2: a TLS server addressed as plaintext, another protocol) as INTERNAL with
        // h2's error as the message; the daemon never sends that.
        let broken_connection =
            status.code() == Code::Internal && status.message().starts_with("h2 protocol error");
        if broken_connection || (status.code() == Code::Unknown && status.source().is_some()) {
            return Self::ConnectionLost {
                endpoint: endpoint.to_owned(),
                reason: status.message().to_owned(),
            };
        }
        Self::Rpc {
            endpoint: endpoint.to_owned(),
            status: Box::new(status),
        }
    }

    /// The TLS failure under a transport error, when a certificate caused it. rustls reports it
    /// several layers down (under tonic's, hyper's and an I/O error), as the alert the daemon
    /// sent or as its own verdict on the daemon's certificate.
    pub(crate) fn tls_refusal(endpoint: &str, error: &(dyn StdError + 'static)) -> Option<Self> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(reason) = tls_error_in(error).as_ref().and_then(certificate_problem) {
                return Some(Self::Tls {
                    endpoint: endpoint.to_owned(),
                    reason,
                });
            }
            next = error.source();
        }
        None
    }

    /// The process exit code for this failure; see [`exit_code`].
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::InvalidEndpoint { .. } | Self::Credentials(_) => exit_code::USAGE,
            Self::Unreadable(_) => exit_code::NO_INPUT,
            Self::Tls { .. } | Self::Unauthenticated { .. } => exit_code::NO_PERMISSION,
            Self::Unreachable { .. }
            | Self::ConnectionLost { .. }
            | Self::IncompleteStream { .. }
            | Self::IncompleteRun { .. }
            | Self::StreamClosed { .. } => exit_code::UNAVAILABLE,
            Self::Rpc { status, .. } => exit_code::for_rpc_code(status.code()),
        }
    }

    /// The endpoint of the daemon this error concerns.
    pub fn endpoint(&self) -> Option<&str> {
        match self {
            Self::InvalidEndpoint { endpoint, .. }
            | Self::Tls { endpoint, .. }
            | Self::Unreachable { endpoint, .. }
            | Self::ConnectionLost { endpoint, .. }
            | Self::Unauthenticated { endpoint, .. }
            | Self::Rpc { endpoint, .. }
            | Self::IncompleteStream { endpoint }
            | Self::IncompleteRun { endpoint, .. }
            | Self::StreamClosed { endpoint } => Some(endpoint),
            Self::Credentials(_) | Self::Unreadable(_) => None,
        }
    }

    /// The gRPC status the daemon answered with, when that is what went wrong.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Self::Rpc { status, .. } => Some(status),
            Self::InvalidEndpoint { .. }
            | Self::Credentials(_)
            | Self::Unreadable(_)
            | Self::Tls { .. }
            | Self::Unreachable { .. }
            | Self::ConnectionLost { .. }
            | Self::Unauthenticated { .. }
            | Self::IncompleteStream { .. }
            | Self::IncompleteRun { .. }
            | Self::StreamClosed { .. } => None,
        }
    }
}

/// The alerts a daemon sends when it refuses this client's certificate, or the lack of one.
/// `DecryptError` is what rustls answers a certificate whose signature does not verify against
/// the CA it names (a certificate of another CA with the same name); at the end of a
/// handshake it can only concern the client's certificate.
const CERTIFICATE_ALERTS: [AlertDescription; 9] = [
    AlertDescription::CertificateRequired,
    AlertDescription::DecryptError,
    AlertDescription::BadCertificate,
    AlertDescription::UnknownCA,
    AlertDescription::CertificateUnknown,
    AlertDescription::CertificateExpired,
    AlertDescription::CertificateRevoked,
    AlertDescription::UnsupportedCertificate,
    AlertDescription::AccessDenied,
];

/// The rustls error that `error` is or carries as an I/O error, if any.
fn tls_error_in(error: &(dyn StdError + 'static)) -> Option<rustls::Error> {
    if let Some(tls) = error.downcast_ref::<rustls::Error>() {
        return Some(tls.clone());
    }
    let inner = error.downcast_ref::<std::io::Error>()?.get_ref()?;
    if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
        return Some(tls.clone());
    }
    // h2 hands an I/O error from its connection task to the calls on it as a kind and a text
    // only, so under a failed call the daemon's alert survives as rustls's own wording of it;
    // it is recognised by comparing with that wording, not with a copy of it.
    let text = inner.to_string();
    CERTIFICATE_ALERTS
        .into_iter()
        .map(rustls::Error::AlertReceived)
        .find(|alert| alert.to_string() == text)
}

/// What to tell a person about a TLS error that a certificate caused; None for other TLS
/// errors, which are reported as they are.
fn certificate_problem(error: &rustls::Error) -> Option<String> {
    match error {
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => Some(
            "the daemon requires a client certificate: give --tls-cert and --tls-key \
             (or AIRLOCK_TLS_CERT and AIRLOCK_TLS_KEY)"
                .to_owned(),
        ),
        rustls::Error::AlertReceived(alert) if CERTIFICATE_ALERTS.contains(alert) => Some(format!(
            "the daemon does not accept this client's certificate ({alert:?}): is --tls-cert \
             signed by the CA the daemon trusts for clients?"
        )),
        rustls::Error::InvalidCertificate(reason) => Some(format!(
            "the daemon's certificate is not valid for this client ({reason:?}): is --tls-ca \
             the CA that signed it, and does it name the host in the address?"
        )),
        _ => None,
    }
}

/// A refused token: where it came from, and what to do instead.
fn describe_unauthenticated(endpoint: &str, token: &TokenSource, reason: &str) -> String {
    match token {
        TokenSource::Missing { looked_in } => format!(
            "airlockd at {endpoint} needs an access token, and none was given: pass --token \
             TOKEN or set {TOKEN_ENV} (a daemon with the default state dir writes its token to \
             {}, which is not there)",
            looked_in.display()
        ),
        TokenSource::Withheld { path } => format!(
            "airlockd at {endpoint} needs an access token, and none was given: pass --token \
             TOKEN or set {TOKEN_ENV} ({} holds the token of a daemon on this host, which is \
             sent only to a Unix socket or a loopback address)",
            path.display()
        ),
        TokenSource::Given | TokenSource::Environment | TokenSource::File(_) => format!(
            "airlockd at {endpoint} does not accept {} ({reason}): pass this daemon's token \
             with --token or {TOKEN_ENV} (the file `token` in its state dir, or your tenant's \
             token file)",
            token.describe()
        ),
    }
}

/// The daemon's own message is written for people ("unknown tool 'x'"), so it is shown as is.
/// The codes whose message comes from the transport or from a server that is not airlockd get
/// the context that makes them actionable.
fn describe_status(endpoint: &str, status: &tonic::Status) -> String {
    let message = status.message().trim();
    let message = if message.is_empty() {
        status.code().description()
    } else {
        message
    };
    match status.code() {
        Code::Unavailable => format!("airlockd at {endpoint} is unavailable: {message}"),
        // What answers when the server is not airlockd, or an airlockd too old for the call.
        Code::Unimplemented => format!(
            "the server at {endpoint} does not implement this call ({message}); \
             is it airlockd, and as recent as this client?"
        ),
        _ => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(endpoint: &str) -> Peer {
        Peer {
            endpoint: endpoint.to_owned(),
            token: TokenSource::Given,
        }
    }

    #[test]
    fn rpc_errors_show_the_daemon_message() {
        let error = ClientError::rpc(
            &peer("http://127.0.0.1:7411"),
            tonic::Status::not_found("unknown tool 'nope'"),
        );
        assert_eq!(error.to_string(), "unknown tool 'nope'");
        assert_eq!(error.exit_code(), exit_code::USAGE);
        assert_eq!(
            error.status().map(tonic::Status::code),
            Some(Code::NotFound)
        );
    }

    #[test]
    fn rpc_errors_without_a_message_name_the_code() {
        let error = ClientError::rpc(&peer("http://h:1"), tonic::Status::new(Code::Internal, ""));
        assert_eq!(error.to_string(), Code::Internal.description());
        assert_eq!(error.exit_code(), exit_code::SOFTWARE);
    }

    #[test]
    fn a_lost_connection_names_the_daemon() {
        let error = ClientError::rpc(
            &peer("http://h:1"),
            tonic::Status::unavailable("broken pipe"),
        );
        assert_eq!(
            error.to_string(),
            "airlockd at http://h:1 is unavailable: broken pipe"
        );
        assert_eq!(error.exit_code(), exit_code::UNAVAILABLE);
    }

    #[test]
    fn a_transport_failure_mid_call_is_a_lost_connection() {
        let broken = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let status = tonic::Status::from_error(Box::new(broken));
        assert_eq!(status.code(), Code::Unknown);
        let error = ClientError::rpc(&peer("http://h:1"), status);
        assert!(
            matches!(error, ClientError::ConnectionLost { .. }),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("lost the connection to airlockd at http://h:1: "),
            "{error}"
        );
        assert_eq!(error.exit_code(), exit_code::UNAVAILABLE);
    }

    #[test]
    fn an_unknown_status_sent_by_the_daemon_stays_a_daemon_error() {
        let error = ClientError::rpc(
            &peer("http://h:1"),
            tonic::Status::unknown("tool registry lost"),
        );
        assert_eq!(error.to_string(), "tool registry lost");
        assert_eq!(error.exit_code(), exit_code::SOFTWARE);
    }

    #[test]
    fn a_server_that_is_not_airlockd_is_suspected() {
        let error = ClientError::rpc(
            &peer("http://h:1"),
            tonic::Status::unimplemented("HTTP 404"),
        );
        assert_eq!(
            error.to_string(),
            "the server at http://h:1 does not implement this call (HTTP 404); is it airlockd, \
             and as recent as this client?"
        );
        assert_eq!(error.exit_code(), exit_code::PROTOCOL);
    }

    #[test]
    fn an_unreachable_daemon_says_so_and_exits_unavailable() {
        let error = ClientError::Unreachable {
            endpoint: "http://127.0.0.1:7411".to_owned(),
            reason: "connection refused".to_owned(),
        };
        assert_eq!(
            error.to_string(),
            "cannot reach airlockd at http://127.0.0.1:7411: connection refused — is it running?"
        );
        assert_eq!(error.exit_code(), exit_code::UNAVAILABLE);
        assert!(error.status().is_none());
    }

    #[test]
    fn a_missing_client_certificate_under_a_transport_error_says_what_to_give() {
        let alert = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, alert);
        let status = tonic::Status::from_error(Box::new(io));
        let error = ClientError::rpc(&peer("https://h:1"), status);
        assert_eq!(
            error.to_string(),
            "TLS with airlockd at https://h:1 failed: the daemon requires a client certificate: \
             give --tls-cert and --tls-key (or AIRLOCK_TLS_CERT and AIRLOCK_TLS_KEY)"
        );
        assert_eq!(error.exit_code(), exit_code::NO_PERMISSION);
        // As h2 passes it on: the alert's text only.
        let text = rustls::Error::AlertReceived(AlertDescription::BadCertificate).to_string();
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, text);
        let Some(ClientError::Tls { reason, .. }) = ClientError::tls_refusal("https://h:1", &io)
        else {
            panic!("the alert's text is not recognised");
        };
        assert!(
            reason.starts_with("the daemon does not accept this client's certificate"),
            "{reason}"
        );
        let other = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(AlertDescription::DecodeError),
        );
        assert!(ClientError::tls_refusal("https://h:1", &other).is_none());
    }

    #[test]
    fn a_run_stream_that_ends_early_says_where_to_resume() {
        let error = ClientError::IncompleteRun {
            endpoint: "http://h:1".to_owned(),
            run_id: "run_1".to_owned(),
            last_seq: 7,
        };
        assert_eq!(
            error.to_string(),
            "airlockd at http://h:1 closed the stream of run run_1 before the run finished \
             (last event received: 7)"
        );
        assert_eq!(error.exit_code(), exit_code::UNAVAILABLE);
    }

    #[test]
    fn a_stream_the_daemon_ends_early_is_an_unavailable_daemon() {
        let error = ClientError::IncompleteStream {
            endpoint: "http://h:1".to_owned(),
        };
        assert_eq!(error.exit_code(), exit_code::UNAVAILABLE);
    }

    #[test]
    fn a_refused_token_says_where_it_came_from_and_what_to_pass() {
        let refused = |token| {
            ClientError::rpc(
                &Peer {
                    endpoint: "http://h:1".to_owned(),
                    token,
                },
                tonic::Status::unauthenticated("the access token is not valid for this daemon"),
            )
        };
        let missing = refused(TokenSource::Missing {
            looked_in: "/root/.local/state/airlock/token".into(),
        });
        assert_eq!(
            missing.to_string(),
            "airlockd at http://h:1 needs an access token, and none was given: pass --token \
             TOKEN or set AIRLOCK_TOKEN (a daemon with the default state dir writes its token \
             to /root/.local/state/airlock/token, which is not there)"
        );
        assert_eq!(missing.exit_code(), exit_code::NO_PERMISSION);
        let withheld = refused(TokenSource::Withheld {
            path: "/root/.local/state/airlock/token".into(),
        });
        assert_eq!(
            withheld.to_string(),
            "airlockd at http://h:1 needs an access token, and none was given: pass --token \
             TOKEN or set AIRLOCK_TOKEN (/root/.local/state/airlock/token holds the token of a \
             daemon on this host, which is sent only to a Unix socket or a loopback address)"
        );
        for (source, named) in [
            (TokenSource::Given, "the access token given with --token"),
            (
                TokenSource::Environment,
                "the access token in AIRLOCK_TOKEN",
            ),
            (
                TokenSource::File("/s/token".into()),
                "the access token read from /s/token",
            ),
        ] {
            let error = refused(source);
            let text = error.to_string();
            assert!(
                text.starts_with(&format!("airlockd at http://h:1 does not accept {named}")),
                "{text}"
            );
            assert!(text.contains("--token or AIRLOCK_TOKEN"), "{text}");
            assert_eq!(error.exit_code(), exit_code::NO_PERMISSION);
        }
    }
}
