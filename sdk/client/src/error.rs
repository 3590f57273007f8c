//! The one error type of the client library, and what each failure means for a caller.

use std::error::Error as _;

use tonic::Code;

use crate::exit_code;

/// Why a call to `airlockd` did not produce an answer.
///
/// A tool that ran and failed is not an error here: that is a `ToolResult` with a status other
/// than `OK`. These are the failures of the conversation with the daemon itself.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server address cannot be used to connect to anything.
    #[error("invalid server address {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },

    /// The token or a certificate could not be read.
    #[error("{0}")]
    Credentials(String),

    /// Nothing answered at the server address.
    #[error("cannot reach airlockd at {endpoint}: {reason} — is it running?")]
    Unreachable { endpoint: String, reason: String },

    /// The connection broke in the middle of a call: the daemon stopped, or the network
    /// between failed. Whether a running tool finished is unknown to this client.
    #[error("lost the connection to airlockd at {endpoint}: {reason}")]
    ConnectionLost { endpoint: String, reason: String },

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
    /// Classifies the status a call ended with.
    pub(crate) fn rpc(endpoint: &str, status: tonic::Status) -> Self {
        // A status the daemon sends never carries a source error. tonic attaches one when it
        // makes up an `UNKNOWN` status for a failure of the transport under the call (hyper
        // and h2 errors, which it does not classify further): the connection broke.
        if status.code() == Code::Unknown && status.source().is_some() {
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

    /// The process exit code for this failure; see [`exit_code`].
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::InvalidEndpoint { .. } | Self::Credentials(_) => exit_code::USAGE,
            Self::Unreachable { .. } | Self::ConnectionLost { .. } => exit_code::UNAVAILABLE,
            Self::Rpc { status, .. } => exit_code::for_rpc_code(status.code()),
            Self::IncompleteStream { .. }
            | Self::IncompleteRun { .. }
            | Self::StreamClosed { .. } => exit_code::SOFTWARE,
        }
    }

    /// The gRPC status the daemon answered with, when that is what went wrong.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Self::Rpc { status, .. } => Some(status),
            Self::InvalidEndpoint { .. }
            | Self::Credentials(_)
            | Self::Unreachable { .. }
            | Self::ConnectionLost { .. }
            | Self::IncompleteStream { .. }
            | Self::IncompleteRun { .. }
            | Self::StreamClosed { .. } => None,
        }
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

    #[test]
    fn rpc_errors_show_the_daemon_message() {
        let error = ClientError::rpc(
            "http://127.0.0.1:7411",
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
        let error = ClientError::rpc("http://h:1", tonic::Status::new(Code::Internal, ""));
        assert_eq!(error.to_string(), Code::Internal.description());
        assert_eq!(error.exit_code(), exit_code::SOFTWARE);
    }

    #[test]
    fn a_lost_connection_names_the_daemon() {
        let error = ClientError::rpc("http://h:1", tonic::Status::unavailable("broken pipe"));
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
        let error = ClientError::rpc("http://h:1", status);
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
        let error = ClientError::rpc("http://h:1", tonic::Status::unknown("tool registry lost"));
        assert_eq!(error.to_string(), "tool registry lost");
        assert_eq!(error.exit_code(), exit_code::SOFTWARE);
    }

    #[test]
    fn a_server_that_is_not_airlockd_is_suspected() {
        let error = ClientError::rpc("http://h:1", tonic::Status::unimplemented("HTTP 404"));
        assert_eq!(
            error.to_string(),
            "the server at http://h:1 does not implement this call (HTTP 404); is it airlockd, \
             and as recent as this client?"
        );
        assert_eq!(error.exit_code(), exit_code::SOFTWARE);
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
        assert_eq!(error.exit_code(), exit_code::SOFTWARE);
    }

    #[test]
    fn an_incomplete_stream_is_a_software_error() {
        let error = ClientError::IncompleteStream {
            endpoint: "http://h:1".to_owned(),
        };
        assert_eq!(error.exit_code(), exit_code::SOFTWARE);
    }
}
