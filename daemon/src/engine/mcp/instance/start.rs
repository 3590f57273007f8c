//! Starting an instance: a server in its sandbox over stdio, or a connection to a remote
//! server through its gate; initializing the session, listing the tools, and following the
//! server's notices that its list changed.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, RoleClient, RunningService,
    serve_client_with_lifecycle,
};
use rmcp::transport::IntoTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::AsyncReadExt as _;
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use super::{Instance, Link, Recording, tail_note};
use crate::egress::Gate;
use crate::engine::mcp::client::{AskerSlot, Client};
use crate::engine::mcp::questions::Callers;
use crate::engine::process::{ServerProgram, ServerStart};

/// The largest JSON-RPC message accepted from a server; a longer line is dropped (and the
/// call it answered runs into its deadline). Well above any output limit a profile sets.
pub(super) const MAX_MESSAGE_BYTES: usize = 8 << 20;

/// How long a server gets to start and answer `initialize`: `npx` and `uvx` servers start an
/// interpreter and load a package first.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How a connection to a server starts: a `server/discover` for the revision without a
/// handshake (2026-07-28, per-request `_meta`); a server that answers it with a JSON-RPC
/// error (it does not know the method, so it is older) or not at all within rmcp's probe
/// time is greeted with `initialize` at 2025-11-25, the newest revision that has one, on
/// the same connection.
pub(super) fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Starts a session with a remote server over a transport `open` makes, as [`lifecycle`]
/// says. A server that answers `server/discover` with a result of another kind does not
/// speak 2026-07-28 either (the conformance suite's servers of the older revisions answer
/// every request they do not know with an empty result, where rmcp's fallback expects an
/// error): it is greeted with `initialize` over a fresh transport.
pub(super) async fn start_remote<T, E, A>(
    handler: Client,
    open: impl Fn() -> T,
) -> Result<RunningService<RoleClient, Client>, ClientInitializeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    match serve_client_with_lifecycle(handler.clone(), open(), lifecycle()).await {
        Err(ClientInitializeError::ExpectedInitResult(Some(_))) => {
            serve_client_with_lifecycle(handler, open(), ClientLifecycleMode::Initialize).await
        }
        started => started,
    }
}

/// Marks `changed` whenever a server of 2026-07-28 says its tool list changed, until the
/// connection ends. That revision sends `notifications/tools/list_changed` only on a
/// `subscriptions/listen` stream the client opened (an older one sends it unasked, to
/// [`Client`]); a server that offers no such stream is listed again only when the instance
/// starts, as one that never says.
pub(super) async fn follow_tool_changes(peer: rmcp::Peer<RoleClient>, changed: Arc<AtomicBool>) {
    let modern = peer
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize());
    if !modern {
        return;
    }
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = match peer.listen(filter).await {
        Ok(subscription) => subscription,
        Err(err) => {
            tracing::debug!(%err, "the MCP server offers no tool-list subscription");
            return;
        }
    };
    loop {
        match subscription.next().await {
            Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                changed.store(true, Ordering::SeqCst);
            }
            // The filter asks for nothing else; whatever else comes is not airlock's.
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(err) => {
                tracing::debug!(%err, "the MCP server's tool-list subscription ended");
                return;
            }
        }
    }
}

/// The end of a server's stderr kept for its logs and for the message of a call it failed.
pub(super) const STDERR_KEPT_BYTES: usize = 16 * 1024;

/// How long an ended server's stderr may take to reach its end before the server is said to
/// have ended: what it wrote as it died (often why) must be in the message, yet a process it
/// left behind holding the pipe must not delay the report for long.
pub(super) const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// Keeps the last [`STDERR_KEPT_BYTES`] of a server's stderr.
pub(super) async fn keep_stderr(mut stderr: pipe::Receiver, kept: Arc<Mutex<VecDeque<u8>>>) {
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Ok(mut kept) = kept.lock() {
                    kept.extend(&buf[..n]);
                    let excess = kept.len().saturating_sub(STDERR_KEPT_BYTES);
                    kept.drain(..excess);
                }
            }
        }
    }
}

impl Instance {
    /// Starts the server in its sandbox, initializes it and lists its tools.
    pub async fn start(
        name: &str,
        program: &ServerProgram,
        start: ServerStart,
        serial: bool,
        asking: (Option<String>, AskerSlot),
        recording: Option<Recording>,
    ) -> Result<Instance, String> {
        let workspace = start.workspace.is_some();
        let egress = start.egress.clone();
        let mut server = program.start(start).await?;
        let (stdin, stdout, stderr) = server
            .streams
            .take()
            .ok_or("the server's standard streams are missing")?;
        let server = Arc::new(server);
        let kept = Arc::new(Mutex::new(VecDeque::new()));
        let stderr_read = tokio::spawn(keep_stderr(stderr, kept.clone()));
        let ended = CancellationToken::new();
        let exit = Arc::new(Mutex::new(None));
        {
            let (server, ended, exit) = (server.clone(), ended.clone(), exit.clone());
            tokio::spawn(async move {
                let how = server.wait().await;
                // The last words are read before anyone is told it ended.
                let _ = tokio::time::timeout(STDERR_DRAIN, stderr_read).await;
                if let Ok(mut slot) = exit.lock() {
                    *slot = Some(how);
                }
                ended.cancel();
            });
        }
        let tools_changed = Arc::new(AtomicBool::new(false));
        let callers = Arc::new(Callers::default());
        let client = Client {
            workspace,
            tools_changed: tools_changed.clone(),
            server: name.to_owned(),
            tenant: asking.0,
            asker: asking.1,
            callers: callers.clone(),
        };
        let transport =
            AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
        let started = tokio::select! {
            // A server run here is greeted with `initialize` (2025-11-25) whatever it speaks:
            // over stdio a `server/discover` probe that a server leaves unanswered costs
            // rmcp's 10 s wait at every start, and there is no second connection to fall
            // back on as there is over HTTP (see `start_remote`).
            started = tokio::time::timeout(
                START_TIMEOUT,
                serve_client_with_lifecycle(client, transport, ClientLifecycleMode::Initialize),
            ) => started,
            () = ended.cancelled() => {
                server.kill();
                return Err(format!(
                    "MCP server `{name}` exited while starting{}",
                    tail_note(&kept)
                ));
            }
        };
        let service = match started {
            Ok(Ok(service)) => service,
            Ok(Err(err)) => {
                server.kill();
                return Err(format!(
                    "MCP server `{name}` did not initialize: {err}{}",
                    tail_note(&kept)
                ));
            }
            Err(_) => {
                server.kill();
                return Err(format!(
                    "MCP server `{name}` did not answer `initialize` within {} s",
                    START_TIMEOUT.as_secs()
                ));
            }
        };
        let pid = server.pid();
        let instance = Instance {
            service,
            callers,
            link: Link::Process(server),
            ended,
            exit,
            listing: Mutex::default(),
            tools_changed,
            stderr: kept,
            in_flight: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
            started_at: Instant::now(),
            serial: serial.then(|| tokio::sync::Mutex::new(())),
            recording: recording.map(Arc::new),
            egress,
        };
        instance.relist(name).await?;
        tracing::info!(server = name, pid, "MCP server started");
        Ok(instance)
    }

    /// Connects to a remote server at `url` over Streamable HTTP, every connection through
    /// `gate`, and lists its tools.
    pub async fn connect(
        name: &str,
        url: &str,
        credential: Option<crate::engine::mcp::oauth::Credential>,
        gate: Arc<Gate>,
        asking: (Option<String>, AskerSlot),
    ) -> Result<Instance, String> {
        use rmcp::transport::streamable_http_client::{
            StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
        };
        crate::http_client::install_crypto_provider();
        let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|err| format!("cannot open the egress proxy for `{name}`: {err}"))?;
        let proxy_addr = listener
            .local_addr()
            .map_err(|err| format!("cannot open the egress proxy for `{name}`: {err}"))?;
        let proxy = tokio::spawn(crate::egress::proxy::serve(
            listener,
            gate.clone(),
            CancellationToken::new(),
        ));
        let client = reqwest::Client::builder()
            .proxy(
                reqwest::Proxy::all(format!("http://{proxy_addr}"))
                    .map_err(|err| format!("cannot use the egress proxy: {err}"))?,
            )
            // A redirect would carry the session to a host the gate decides about only at
            // the proxy; MCP servers do not redirect.
            .redirect(reqwest::redirect::Policy::none())
            // The egress proxy carries one request per connection (each is checked on its
            // own): a pooled connection would be reused after the proxy closed it.
            .pool_max_idle_per_host(0)
            .user_agent(concat!("airlockd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| format!("cannot set up the HTTP client: {err}"))?;
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        // OAuth tokens change: the client sets each request's header (see `oauth`).
        let oauth = match credential {
            Some(crate::engine::mcp::oauth::Credential::Bearer(token)) => {
                config = config.auth_header(token);
                None
            }
            Some(crate::engine::mcp::oauth::Credential::OAuth(tokens)) => Some(tokens),
            None => None,
        };
        let tools_changed = Arc::new(AtomicBool::new(false));
        let callers = Arc::new(Callers::default());
        let handler = Client {
            workspace: false,
            tools_changed: tools_changed.clone(),
            server: name.to_owned(),
            tenant: asking.0,
            asker: asking.1,
            callers: callers.clone(),
        };
        let serving = async move {
            match oauth {
                Some(tokens) => {
                    let http = crate::engine::mcp::oauth::Authorized {
                        http: client,
                        tokens,
                    };
                    start_remote(handler, || {
                        StreamableHttpClientTransport::with_client(http.clone(), config.clone())
                    })
                    .await
                }
                None => {
                    start_remote(handler, || {
                        StreamableHttpClientTransport::with_client(client.clone(), config.clone())
                    })
                    .await
                }
            }
        };
        let service = match tokio::time::timeout(START_TIMEOUT, serving).await {
            Ok(Ok(service)) => service,
            Ok(Err(err)) => {
                proxy.abort();
                return Err(format!(
                    "MCP server `{name}` at {url} did not initialize: {err}"
                ));
            }
            Err(_) => {
                proxy.abort();
                return Err(format!(
                    "MCP server `{name}` at {url} did not answer `server/discover` nor `initialize` within {} s",
                    START_TIMEOUT.as_secs()
                ));
            }
        };
        tokio::spawn(follow_tool_changes(
            service.peer().clone(),
            tools_changed.clone(),
        ));
        let instance = Instance {
            service,
            callers,
            link: Link::Remote(proxy),
            // A remote server has no process to end: a closed connection is its end.
            ended: CancellationToken::new(),
            exit: Arc::new(Mutex::new(None)),
            listing: Mutex::default(),
            tools_changed,
            stderr: Arc::new(Mutex::new(VecDeque::new())),
            in_flight: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
            started_at: Instant::now(),
            serial: None,
            recording: None,
            egress: Some(gate),
        };
        instance.relist(name).await?;
        tracing::info!(server = name, %url, "connected to a remote MCP server");
        Ok(instance)
    }
}
