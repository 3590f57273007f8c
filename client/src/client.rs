//! Connecting to `airlockd` and the typed calls of its `Tools` service; those of its `Agent`
//! service are in [`agent`].

pub(crate) mod agent;
pub mod auth;
mod tls_probe;

use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use self::auth::BearerToken;

pub use self::tls_probe::speaks_tls;
use crate::error::{ClientError, Peer};
use crate::proto::agent_client::AgentClient;
use crate::proto::audit_client::AuditClient;
use crate::proto::daemon_client::DaemonClient;
use crate::proto::execute_tool_event::Event;
use crate::proto::policy_client::PolicyClient;
use crate::proto::tools_client::ToolsClient;
use crate::proto::{
    CancelExecutionRequest, CollectGarbageRequest, CollectGarbageResponse, DaemonInfo,
    ExecuteToolEvent, ExecuteToolRequest, ExecutionStarted, GetInfoRequest, ListToolsRequest,
    ReadOutputRequest, ReadOutputResponse, ToolInfo, ToolOutput, ToolResult,
};

/// Where `airlockd` listens unless configured otherwise.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:7411";

/// How long to wait for the daemon to accept the connection. A daemon on the same host answers
/// within milliseconds; without a bound, an address that drops packets would hang the caller
/// until the kernel gives up on the TCP handshake, minutes later.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A PEM file of certificates (a CA bundle, a client's chain) or a key is a few kilobytes; a
/// bound keeps a mistyped path (a log, a device) from being read whole.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// A channel that sends the token with every call.
pub type AuthedChannel = InterceptedService<Channel, BearerToken>;

/// How to connect beyond the address: the token, and for an `https://` daemon the CA its
/// certificate must chain to and this client's own certificate, when the daemon requires one.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// None: `$AIRLOCK_TOKEN`, else the token file of a daemon on this host
    /// ([`auth::discover_token`]).
    pub token: Option<String>,
    /// The CA that signed the daemon's certificate (PEM). Needed for `https://`.
    pub ca_cert: Option<PathBuf>,
    /// This client's certificate chain (PEM), for a daemon that requires client certificates
    /// (mutual TLS). Needs `client_key`.
    pub client_cert: Option<PathBuf>,
    /// The private key of `client_cert` (PEM).
    pub client_key: Option<PathBuf>,
}

/// Opens a connection to the daemon at `endpoint`, with the token found on this host.
///
/// `endpoint` is a URL such as `http://127.0.0.1:7411`, `https://host:7411` or
/// `unix:/run/airlock.sock`; a bare `host:port` is taken to mean `http://host:port`. The
/// connection is made now, so that an address where nothing listens is reported here, as
/// [`ClientError::Unreachable`], rather than by the first call; for `https://`, so is a
/// certificate the daemon refuses (or one of its own that this client does not trust), as
/// [`ClientError::Tls`].
pub async fn connect(endpoint: &str) -> Result<AirlockClient, ClientError> {
    connect_with(endpoint, &ConnectOptions::default()).await
}

/// [`connect`] with a given token or CA.
pub async fn connect_with(
    endpoint: &str,
    options: &ConnectOptions,
) -> Result<AirlockClient, ClientError> {
    let endpoint = normalize_endpoint(endpoint)?;
    let (token, token_source) = auth::discover_token(options.token.as_deref(), &endpoint)?;
    let bearer = BearerToken::new(token.as_deref())?;
    let mut builder = Endpoint::from_shared(endpoint.clone())
        .map_err(|error| ClientError::InvalidEndpoint {
            endpoint: endpoint.clone(),
            reason: innermost_reason(&error),
        })?
        .connect_timeout(CONNECT_TIMEOUT);
    if endpoint
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
    {
        let (config, files) = tls_config(&endpoint, options)?;
        builder = builder.tls_config(config).map_err(|error| {
            ClientError::Credentials(format!(
                "cannot use the TLS certificates and key given: {}",
                innermost_reason(&error)
            ))
        })?;
        tls_probe::check(&endpoint, files, CONNECT_TIMEOUT).await?;
    }
    let channel = builder.connect().await.map_err(|error| {
        ClientError::tls_refusal(&endpoint, &error).unwrap_or_else(|| ClientError::Unreachable {
            endpoint: endpoint.clone(),
            reason: innermost_reason(&error),
        })
    })?;
    let channel = InterceptedService::new(channel, bearer);
    Ok(AirlockClient {
        tools: ToolsClient::new(channel.clone()),
        agent: AgentClient::new(channel.clone()),
        daemon: DaemonClient::new(channel.clone()),
        policy: PolicyClient::new(channel.clone()),
        audit: AuditClient::new(channel).max_decoding_message_size(MAX_REPLY_BYTES),
        peer: Arc::new(Peer {
            endpoint,
            token: token_source,
        }),
    })
}

/// TLS for an `https://` daemon: its certificate must chain to `--tls-ca` (this client trusts
/// no public roots: airlockd's certificates are the operator's own), and this client shows
/// its own certificate when given one.
fn tls_config(
    endpoint: &str,
    options: &ConnectOptions,
) -> Result<(ClientTlsConfig, tls_probe::TlsFiles), ClientError> {
    let Some(ca) = &options.ca_cert else {
        return Err(ClientError::InvalidEndpoint {
            endpoint: endpoint.to_owned(),
            reason: "an https:// daemon needs --tls-ca, the CA its certificate is signed by"
                .to_owned(),
        });
    };
    let ca = read_pem(ca, "CA")?;
    let config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&ca));
    let identity = match (&options.client_cert, &options.client_key) {
        (Some(cert), Some(key)) => Some((
            read_pem(cert, "client certificate")?,
            read_pem(key, "client key")?,
        )),
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => {
            return Err(ClientError::Credentials(
                "a client certificate goes with its key: give both --tls-cert and --tls-key"
                    .to_owned(),
            ));
        }
    };
    let config = match &identity {
        Some((cert, key)) => config.identity(Identity::from_pem(cert, key)),
        None => config,
    };
    Ok((config, tls_probe::TlsFiles { ca, identity }))
}

/// Reads one PEM file of at most [`MAX_PEM_BYTES`]; `what` names it in the error.
fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, ClientError> {
    let unreadable = |reason: String| {
        ClientError::Unreadable(format!(
            "cannot read the {what} {}: {reason}",
            path.display()
        ))
    };
    let size = std::fs::metadata(path)
        .map_err(|err| unreadable(err.to_string()))?
        .len();
    if size > MAX_PEM_BYTES {
        return Err(unreadable(format!("larger than {MAX_PEM_BYTES} bytes")));
    }
    std::fs::read(path).map_err(|err| unreadable(err.to_string()))
}

/// Adds the scheme people leave out, and refuses schemes this client cannot speak.
fn normalize_endpoint(raw: &str) -> Result<String, ClientError> {
    let raw = raw.trim();
    if raw.starts_with("unix:") {
        return Ok(raw.to_owned());
    }
    let endpoint = match raw.split_once("://") {
        None => format!("http://{raw}"),
        Some((scheme, _))
            if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") =>
        {
            raw.to_owned()
        }
        Some((scheme, _)) => {
            return Err(ClientError::InvalidEndpoint {
                endpoint: raw.to_owned(),
                reason: format!(
                    "unsupported scheme {scheme:?}; airlockd speaks http://, https:// and unix:"
                ),
            });
        }
    };
    Ok(endpoint)
}

/// The transport wraps the cause of a failed connection several layers deep (tonic, then
/// hyper, then the socket); the innermost error is the one a person understands. An OS error
/// is named by its kind ("connection refused") without the errno noise.
fn innermost_reason(error: &(dyn StdError + 'static)) -> String {
    let mut innermost = error;
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    match innermost.downcast_ref::<std::io::Error>() {
        Some(io) if io.raw_os_error().is_some() => io.kind().to_string(),
        Some(_) | None => innermost.to_string(),
    }
}

/// The largest audit page this client reads: the daemon's reply limit (16 MiB); its pages
/// end near 4 MiB, past tonic's 4 MiB default.
const MAX_REPLY_BYTES: usize = 16 << 20;

/// A connection to one daemon. Cloning is cheap and clones share the connection, so a clone
/// can cancel a call while another clone reads its events.
#[derive(Debug, Clone)]
pub struct AirlockClient {
    tools: ToolsClient<AuthedChannel>,
    agent: AgentClient<AuthedChannel>,
    daemon: DaemonClient<AuthedChannel>,
    policy: PolicyClient<AuthedChannel>,
    audit: AuditClient<AuthedChannel>,
    peer: Arc<Peer>,
}

impl AirlockClient {
    /// The URL this client is connected to.
    pub fn endpoint(&self) -> &str {
        &self.peer.endpoint
    }

    /// The daemon's version, the workspace roots this client's tenant may use, and the limits
    /// its requests must keep.
    pub async fn daemon_info(&self) -> Result<DaemonInfo, ClientError> {
        let response = self
            .daemon
            .clone()
            .get_info(GetInfoRequest {})
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// Deletes what is older than `older_than` (the daemon's configured retention when
    /// none): finished runs, kept outputs, sessions left empty. The default tenant's call.
    pub async fn collect_garbage(
        &self,
        older_than: Option<Duration>,
    ) -> Result<CollectGarbageResponse, ClientError> {
        let request = CollectGarbageRequest {
            older_than_ms: older_than
                .map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX).max(1))
                .unwrap_or(0),
        };
        let response = self
            .daemon
            .clone()
            .collect_garbage(request)
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// What the policy would decide for a call of `request.tool`, and every rule and level
    /// behind it. Runs and asks nothing.
    /// One page of this client's tenant's audit records after `after_seq`, from `since_ms`.
    pub async fn audit_records(
        &self,
        after_seq: u64,
        since_ms: i64,
        page_size: u32,
    ) -> Result<crate::proto::ListAuditRecordsResponse, ClientError> {
        let response = self
            .audit
            .clone()
            .list_audit_records(crate::proto::ListAuditRecordsRequest {
                after_seq,
                since_ms,
                page_size,
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// Verifies this client's tenant's audit chain; with `expect_head`, that it still holds
    /// that digest.
    pub async fn verify_audit(
        &self,
        expect_head: &str,
    ) -> Result<crate::proto::VerifyAuditResponse, ClientError> {
        let response = self
            .audit
            .clone()
            .verify_audit(crate::proto::VerifyAuditRequest {
                expect_head: expect_head.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    pub async fn check_policy(
        &self,
        request: crate::proto::CheckPolicyRequest,
    ) -> Result<crate::proto::PolicyVerdict, ClientError> {
        let response = self
            .policy
            .clone()
            .check_policy(request)
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// The rules in force for this client's tenant; with `session_id`, also the session's own
    /// rules and its grants.
    pub async fn policy_rules(
        &self,
        session_id: &str,
    ) -> Result<Vec<crate::proto::PolicyRule>, ClientError> {
        let response = self
            .policy
            .clone()
            .list_policy_rules(crate::proto::ListPolicyRulesRequest {
                session_id: session_id.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner().rules)
    }

    /// Withdraws grant `grant_id` (its first 16 characters will do) of session `session_id`.
    pub async fn revoke_grant(&self, session_id: &str, grant_id: &str) -> Result<(), ClientError> {
        self.policy
            .clone()
            .revoke_grant(crate::proto::RevokeGrantRequest {
                grant_id: grant_id.to_owned(),
                session_id: session_id.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(())
    }

    /// Accepts the tool listing hosted MCP server `server` last gave as trusted — with
    /// `reviewed` (a review's listing digest), only if it is still the listing that review
    /// showed; returns the tools whose trust changed. The default tenant's call.
    pub async fn trust_mcp_server(
        &self,
        server: &str,
        reviewed: Option<&str>,
    ) -> Result<Vec<String>, ClientError> {
        let response = self
            .daemon
            .clone()
            .trust_mcp_server(crate::proto::TrustMcpServerRequest {
                server: server.to_owned(),
                show: false,
                reviewed: reviewed.unwrap_or_default().to_owned(),
                refuse: false,
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner().accepted)
    }

    /// Refuses the tool listing hosted MCP server `server` last gave — with `reviewed`, only
    /// if it is still the listing that review showed: its changed and new tools stay refused,
    /// and reviews show the refusal until the server lists something else. The default
    /// tenant's call.
    pub async fn refuse_mcp_server(&self, server: &str, reviewed: &str) -> Result<(), ClientError> {
        self.daemon
            .clone()
            .trust_mcp_server(crate::proto::TrustMcpServerRequest {
                server: server.to_owned(),
                show: false,
                reviewed: reviewed.to_owned(),
                refuse: true,
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(())
    }

    /// What `airlock tools trust SERVER` would accept: each tool whose trusted and last seen
    /// definitions differ, and the digest of that listing (to bind an acceptance to). Trusts
    /// nothing.
    pub async fn review_mcp_server(
        &self,
        server: &str,
    ) -> Result<(Vec<crate::proto::McpToolDifference>, String), ClientError> {
        let response = self
            .daemon
            .clone()
            .trust_mcp_server(crate::proto::TrustMcpServerRequest {
                server: server.to_owned(),
                show: true,
                reviewed: String::new(),
                refuse: false,
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?
            .into_inner();
        Ok((response.differences, response.listing))
    }

    /// Every tool the daemon serves, in the daemon's order.
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, ClientError> {
        let response = self
            .tools
            .clone()
            .list_tools(ListToolsRequest {})
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner().tools)
    }

    /// Starts one tool call and returns its stream of events.
    ///
    /// Dropping the returned [`Execution`] before its result arrives cancels the call: the
    /// daemon stops the tool when the stream goes away.
    pub async fn execute_tool(
        &self,
        request: ExecuteToolRequest,
    ) -> Result<Execution, ClientError> {
        let response = self
            .tools
            .clone()
            .execute_tool(request)
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(Execution {
            events: response.into_inner(),
            peer: self.peer.clone(),
        })
    }

    /// Asks the daemon to stop a running call; the call's stream then ends with `CANCELLED`.
    pub async fn cancel_execution(&self, execution_id: &str) -> Result<(), ClientError> {
        self.tools
            .clone()
            .cancel_execution(CancelExecutionRequest {
                execution_id: execution_id.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(())
    }

    /// One page of the full output the daemon kept for a call whose result was cut: `length`
    /// bytes from `offset` (0 for the daemon's page size; the daemon caps it at its largest
    /// page). An id with no kept output is `NOT_FOUND`, an offset past the end `OUT_OF_RANGE`.
    pub async fn read_output(
        &self,
        execution_id: &str,
        offset: u64,
        length: u64,
    ) -> Result<ReadOutputResponse, ClientError> {
        let response = self
            .tools
            .clone()
            .read_output(ReadOutputRequest {
                execution_id: execution_id.to_owned(),
                offset,
                length,
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }
}

/// One event of a running tool call.
// Each event is read once off the stream and handed on: boxing the larger ones (a result, a
// question with its policy verdict) would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutionEvent {
    /// The tool started; carries the id that names the call.
    Started(ExecutionStarted),
    /// A chunk of what the tool wrote, as it wrote it.
    Output(ToolOutput),
    /// The call is over; always the last event.
    Finished(ToolResult),
    /// The call waits for a person's approval first (`require_approval`).
    Approval(crate::proto::ApprovalRequest),
}

/// The event stream of one tool call. Dropping it cancels the call if it is still running.
#[derive(Debug)]
pub struct Execution {
    events: tonic::Streaming<ExecuteToolEvent>,
    peer: Arc<Peer>,
}

impl Execution {
    /// Waits for the next event of the call.
    ///
    /// A call's last event is [`ExecutionEvent::Finished`]; there is nothing to read after it.
    /// A stream that ends without one is [`ClientError::IncompleteStream`].
    pub async fn next_event(&mut self) -> Result<ExecutionEvent, ClientError> {
        loop {
            let message = self
                .events
                .message()
                .await
                .map_err(|status| ClientError::rpc(&self.peer, status))?;
            let Some(message) = message else {
                return Err(ClientError::IncompleteStream {
                    endpoint: self.peer.endpoint.clone(),
                });
            };
            match message.event {
                Some(Event::Started(started)) => return Ok(ExecutionEvent::Started(started)),
                Some(Event::Output(output)) => return Ok(ExecutionEvent::Output(output)),
                Some(Event::Finished(result)) => return Ok(ExecutionEvent::Finished(result)),
                Some(Event::Approval(request)) => return Ok(ExecutionEvent::Approval(request)),
                // An event of a kind added to the API after this client was built decodes as
                // no event at all; skipping it is how an older client stays compatible.
                None => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_host_and_port_means_http() {
        let endpoint = normalize_endpoint(" 127.0.0.1:7411 ").ok();
        assert_eq!(endpoint.as_deref(), Some("http://127.0.0.1:7411"));
        let endpoint = normalize_endpoint("http://[::1]:7411").ok();
        assert_eq!(endpoint.as_deref(), Some("http://[::1]:7411"));
        let endpoint = normalize_endpoint("HTTP://localhost:7411").ok();
        assert_eq!(endpoint.as_deref(), Some("HTTP://localhost:7411"));
    }

    #[test]
    fn other_schemes_are_refused_with_the_reason() {
        let Err(error) = normalize_endpoint("ftp://example.com") else {
            panic!("ftp was accepted");
        };
        assert_eq!(
            error.to_string(),
            "invalid server address \"ftp://example.com\": unsupported scheme \"ftp\"; \
             airlockd speaks http://, https:// and unix:"
        );
        let endpoint = normalize_endpoint("unix:/run/airlock.sock").ok();
        assert_eq!(endpoint.as_deref(), Some("unix:/run/airlock.sock"));
        let endpoint = normalize_endpoint("https://h:1").ok();
        assert_eq!(endpoint.as_deref(), Some("https://h:1"));
        assert_eq!(error.exit_code(), crate::exit_code::USAGE);
    }

    #[tokio::test]
    async fn https_without_a_ca_is_a_usage_error() {
        let options = ConnectOptions {
            token: Some("t".to_owned()),
            ..ConnectOptions::default()
        };
        let Err(error) = connect_with("https://127.0.0.1:1", &options).await else {
            panic!("https without a CA connected");
        };
        assert!(error.to_string().contains("--tls-ca"), "{error}");
        assert_eq!(error.exit_code(), crate::exit_code::USAGE);
    }

    #[tokio::test]
    async fn a_client_certificate_without_its_key_is_a_usage_error() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let pem = dir.path().join("any.pem");
        std::fs::write(&pem, "")?;
        for (cert, key) in [(Some(pem.clone()), None), (None, Some(pem.clone()))] {
            let options = ConnectOptions {
                token: Some("t".to_owned()),
                ca_cert: Some(pem.clone()),
                client_cert: cert,
                client_key: key,
            };
            let Err(error) = connect_with("https://127.0.0.1:1", &options).await else {
                panic!("half a client identity connected");
            };
            assert_eq!(
                error.to_string(),
                "a client certificate goes with its key: give both --tls-cert and --tls-key"
            );
            assert_eq!(error.exit_code(), crate::exit_code::USAGE);
        }
        Ok(())
    }

    #[tokio::test]
    async fn a_missing_client_key_file_is_named() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let pem = dir.path().join("ca.pem");
        std::fs::write(&pem, "")?;
        let options = ConnectOptions {
            token: Some("t".to_owned()),
            ca_cert: Some(pem.clone()),
            client_cert: Some(pem),
            client_key: Some(dir.path().join("nope.key")),
        };
        let Err(error) = connect_with("https://127.0.0.1:1", &options).await else {
            panic!("a missing key connected");
        };
        assert!(
            error.to_string().starts_with("cannot read the client key "),
            "{error}"
        );
        assert!(error.to_string().contains("nope.key"), "{error}");
        assert_eq!(error.exit_code(), crate::exit_code::NO_INPUT);
        Ok(())
    }

    #[tokio::test]
    async fn a_malformed_address_is_invalid_not_unreachable() {
        let Err(error) = connect("http://exa mple:1").await else {
            panic!("a URL with a space connected");
        };
        assert!(
            matches!(error, ClientError::InvalidEndpoint { .. }),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_closed_port_is_reported_as_unreachable_connection_refused() -> anyhow::Result<()> {
        // Binding then dropping a listener yields a loopback port that nothing listens on;
        // on 127.0.0.2, where no test server binds, it stays unused.
        let port = std::net::TcpListener::bind("127.0.0.2:0")?
            .local_addr()?
            .port();
        let endpoint = format!("http://127.0.0.2:{port}");
        let Err(error) = connect(&endpoint).await else {
            panic!("connected to a closed port");
        };
        assert_eq!(
            error.to_string(),
            format!("cannot reach airlockd at {endpoint}: connection refused — is it running?")
        );
        assert_eq!(error.exit_code(), crate::exit_code::UNAVAILABLE);
        Ok(())
    }
}
