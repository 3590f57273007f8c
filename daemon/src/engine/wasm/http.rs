//! Outgoing HTTP for components whose profile has a network allow-list: wasi-http's
//! `send_request`, with every connection made by the call's egress gate.
//!
//! The guest hands over a request; this module reads its destination ([`Target`]), asks the
//! gate to connect there (the gate checks the allow-list, resolves the name in the daemon and
//! refuses forbidden addresses; the guest never resolves anything), then speaks HTTP/1.1 over
//! the gate's metered stream, inside TLS for `https`. Each request gets its own connection, so
//! no request can ride on a connection checked for another host, and wasi-http never follows
//! redirects: each hop is a new request, checked like the first.
//!
//! A refusal by the rules reaches the guest as `HTTP-request-denied` (a name that does not
//! resolve as `DNS-error`, a host that does not answer as `connection-refused`); the reason
//! goes to the daemon's log and, through the gate, to the call's ledger.
//!
//! WASI sockets stay closed even under an allow-list: a raw socket would bypass the
//! per-request check and the byte accounting, and its name lookups would not go through the
//! daemon's resolver.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Interval;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::authority::Target;
use crate::egress::{Gate, Refusal};

/// The future wasi-http keeps to drive a connection until its response body is read.
type Driver = Box<dyn Future<Output = Result<(), Error>> + Send>;

/// What `send_request` hands back to wasi-http.
type Sent = Result<(http::Response<WasiBody>, Driver), Error>;

/// The TLS client settings shared by every call: the Mozilla roots that webpki-roots carries,
/// so a tool trusts what a browser trusts and nothing from the host's own certificate store.
pub fn tls_config() -> Result<Arc<ClientConfig>, rustls::Error> {
    tls_config_with(RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    })
}

fn tls_config_with(roots: RootCertStore) -> Result<Arc<ClientConfig>, rustls::Error> {
    // The provider is named rather than taken from the process default, which depends on
    // which of rustls's features the whole build happens to enable.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// wasi-http's hooks for one call: where its requests may go.
pub struct Egress {
    /// `None` for a call without an allow-list, whose component is linked without wasi-http;
    /// should a request get here all the same, it is refused.
    connector: Option<Connector>,
}

#[derive(Clone)]
struct Connector {
    gate: Arc<Gate>,
    tls: Arc<ClientConfig>,
}

impl Egress {
    /// No request goes anywhere.
    pub fn closed() -> Egress {
        Egress { connector: None }
    }

    /// Requests go where `gate` lets them, over TLS configured by `tls` for `https`.
    pub fn through(gate: Arc<Gate>, tls: Arc<ClientConfig>) -> Egress {
        Egress {
            connector: Some(Connector { gate, tls }),
        }
    }
}

impl WasiHttpHooks for Egress {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _request_errors: Driver,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let connector = self.connector.clone();
        Box::new(async move {
            let Some(connector) = connector else {
                tracing::warn!(uri = %request.uri(), "wasi-http request without a network grant");
                return Err(Error::HttpRequestDenied);
            };
            send(&connector, request, options.unwrap_or_default()).await
        })
    }
}

/// Sends one request on a connection of its own and returns once the response head is in.
async fn send(
    connector: &Connector,
    mut request: http::Request<WasiBody>,
    options: RequestOptions,
) -> Sent {
    let target = Target::of(request.uri()).map_err(|err| {
        tracing::info!(uri = %request.uri(), error = %err, "wasi-http request refused");
        Error::HttpRequestUriInvalid
    })?;
    let (mut sender, connection) = within(
        options.connect_timeout,
        Error::ConnectionTimeout,
        connect(connector, &target),
    )
    .await?;
    // The URI carries the scheme and authority for the checks above; on the wire, to an
    // origin server, the request line has only the path (the Host header names the host).
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .parse()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    *request.uri_mut() = path;

    let mut response = std::pin::pin!(sender.send_request(request));
    let mut connection = Some(Box::pin(connection));
    let head = poll_fn(|cx| {
        if let Poll::Ready(response) = response.as_mut().poll(cx) {
            return Poll::Ready(response.map_err(Error::from));
        }
        // The connection does the reading and writing; it must run for the response to come.
        let Some(driving) = connection.as_mut() else {
            return Poll::Pending;
        };
        let ended = ready!(driving.as_mut().poll(cx));
        connection = None;
        match ended {
            // It may have delivered the response just before it closed.
            Ok(()) => response.as_mut().poll(cx).map_err(Error::from),
            Err(err) => Poll::Ready(Err(Error::from(err))),
        }
    });
    let head = within(
        options.first_byte_timeout,
        Error::ConnectionReadTimeout,
        head,
    )
    .await?;
    let idle = options.between_bytes_timeout.map(|limit| {
        // A zero interval panics in tokio; a nanosecond is as good as zero here.
        let mut interval = tokio::time::interval(limit.max(Duration::from_nanos(1)));
        interval.reset();
        interval
    });
    let driver: Driver = Box::new(async move {
        match connection {
            Some(connection) => connection.await.map_err(Error::from),
            None => Ok(()),
        }
    });
    Ok((
        head.map(|incoming| ResponseBody { incoming, idle }.boxed_unsync()),
        driver,
    ))
}

/// A stream the HTTP client can speak over: the gate's, possibly inside TLS.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

type Connection = hyper::client::conn::http1::Connection<TokioIo<Box<dyn Io>>, WasiBody>;

/// Opens the connection for one request, through the gate.
async fn connect(
    connector: &Connector,
    target: &Target,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<WasiBody>,
        Connection,
    ),
    Error,
> {
    let stream = connector
        .gate
        .connect(&target.host, target.port)
        .await
        .map_err(|refusal| {
            tracing::warn!(
                host = %target.host,
                port = target.port,
                reason = %refusal,
                "wasi-http request refused"
            );
            error_of(&refusal)
        })?;
    let io: Box<dyn Io> = if target.tls {
        let name = server_name(target)?;
        let tls = TlsConnector::from(connector.tls.clone())
            .connect(name, stream)
            .await
            .map_err(Error::Tls)?;
        Box::new(tls)
    } else {
        Box::new(stream)
    };
    hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(Error::from)
}

/// The wasi-http error the guest sees for a refusal; the refusal's text is in the daemon's
/// log and the call's ledger.
fn error_of(refusal: &Refusal) -> Error {
    match refusal {
        Refusal::NotListed { .. }
        | Refusal::Denied { .. }
        | Refusal::NotApproved { .. }
        | Refusal::ForbiddenAddress { .. }
        | Refusal::DeniedAddress { .. }
        | Refusal::TooManyHosts { .. } => Error::HttpRequestDenied,
        Refusal::InvalidHost { .. } => Error::HttpRequestUriInvalid,
        Refusal::Unresolved { .. } => Error::DnsError {
            rcode: None,
            info_code: None,
        },
        Refusal::Unreachable { .. } => Error::ConnectionRefused,
    }
}

/// The name the server's certificate must carry: the host the guest asked for, which is also
/// the host the gate checked.
fn server_name(target: &Target) -> Result<ServerName<'static>, Error> {
    match target.ip() {
        Some(ip) => Ok(ServerName::from(ip)),
        None => ServerName::try_from(target.host.clone()).map_err(|_| Error::HttpRequestUriInvalid),
    }
}

/// Runs `work` within `limit`, when the guest set one; the call's own deadline bounds it
/// anyway.
async fn within<T>(
    limit: Option<Duration>,
    timed_out: Error,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match limit {
        None => work.await,
        Some(limit) => tokio::time::timeout(limit, work)
            .await
            .map_err(|_| timed_out)?,
    }
}

/// A response body as the guest reads it, failing when the server goes quiet for longer
/// than the guest's between-bytes timeout.
struct ResponseBody {
    incoming: Incoming,
    idle: Option<Interval>,
}

impl hyper::body::Body for ResponseBody {
    type Data = bytes::Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(idle) = self.idle.as_mut() {
                    idle.reset();
                }
                Poll::Ready(frame.map(|frame| frame.map_err(Error::from)))
            }
            Poll::Pending => match self.idle.as_mut() {
                Some(idle) => {
                    ready!(idle.poll_tick(cx));
                    Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
                }
                None => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::net::SocketAddr;

    use bytes::Bytes;
    use http_body_util::Empty;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::TlsAcceptor;
    use tokio_rustls::rustls::ServerConfig;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

    use super::*;
    use crate::egress::{Resolver, Rules};
    use crate::profile::NetworkPolicy;

    /// What the test server answers to every request.
    const BODY: &str = "over tls";

    /// A TLS server on loopback answering one request with [`BODY`]; returns its address,
    /// its certificate and, once it has answered, the request head it read.
    async fn tls_server() -> (
        SocketAddr,
        CertificateDer<'static>,
        tokio::task::JoinHandle<String>,
    ) {
        let certified =
            rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("cert");
        let cert = certified.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_no_client_auth()
                .with_single_cert(vec![cert.clone()], key)
                .expect("server config");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let served = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return String::new();
            };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                tls.read_exact(&mut byte).await.expect("read");
                head.push(byte[0]);
            }
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
                BODY.len()
            );
            tls.write_all(response.as_bytes()).await.expect("write");
            tls.shutdown().await.expect("shutdown");
            String::from_utf8(head).expect("utf-8")
        });
        (addr, cert, served)
    }

    /// A gate that lets `addr` through (listed by address, as loopback must be).
    fn gate_for(addr: SocketAddr) -> Arc<Gate> {
        let allow = vec![format!("{addr}").parse().expect("pattern")];
        Arc::new(Gate::new(
            Rules::new(&NetworkPolicy::AllowList {
                allow,
                deny: Vec::new(),
                ask_for_unlisted: false,
            }),
            Arc::new(Resolver::new(HashMap::new())),
            None,
        ))
    }

    fn get(uri: &str) -> http::Request<WasiBody> {
        http::Request::get(uri)
            .header(http::header::HOST, "127.0.0.1")
            .body(
                Empty::<Bytes>::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .expect("request")
    }

    async fn send_through(egress: &mut Egress, request: http::Request<WasiBody>) -> Sent {
        Pin::from(egress.send_request(request, None, Box::new(async { Ok(()) }))).await
    }

    #[tokio::test]
    async fn https_goes_through_the_gate_inside_tls() {
        let (addr, cert, served) = tls_server().await;
        let mut roots = RootCertStore::empty();
        roots.add(cert).expect("root");
        let gate = gate_for(addr);
        let mut egress = Egress::through(gate.clone(), tls_config_with(roots).expect("tls"));
        let (response, driver) = send_through(
            &mut egress,
            get(&format!("https://127.0.0.1:{}/tls?x=1", addr.port())),
        )
        .await
        .expect("sent");
        let driving = tokio::spawn(Pin::from(driver));
        assert_eq!(response.status(), 200);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(body, BODY);
        driving
            .await
            .expect("join")
            .expect("the connection ends cleanly");
        let head = served.await.expect("server");
        assert!(head.starts_with("GET /tls?x=1 HTTP/1.1\r\n"), "{head}");

        let contacts = gate.ledger().snapshot();
        assert_eq!(contacts.len(), 1, "{contacts:?}");
        assert_eq!(contacts[0].connections, 1);
        // The gate counts what crosses the wire: the handshake and records, more than the
        // plaintext either way.
        assert!(contacts[0].bytes_sent > head.len() as u64, "{contacts:?}");
        assert!(
            contacts[0].bytes_received > BODY.len() as u64,
            "{contacts:?}"
        );
    }

    #[tokio::test]
    async fn only_the_public_roots_are_trusted() {
        let (addr, _cert, served) = tls_server().await;
        let mut egress = Egress::through(gate_for(addr), tls_config().expect("tls"));
        let refused = send_through(
            &mut egress,
            get(&format!("https://127.0.0.1:{}/", addr.port())),
        )
        .await;
        assert!(matches!(refused, Err(Error::Tls(_))), "{:?}", refused.err());
        assert_eq!(served.await.expect("server"), "", "no request was sent");
    }

    #[tokio::test]
    async fn refusals_reach_the_guest_as_errors_and_nothing_is_sent() {
        let (addr, cert, served) = tls_server().await;
        let mut roots = RootCertStore::empty();
        roots.add(cert).expect("root");
        let tls = tls_config_with(roots).expect("tls");
        let url = format!("https://127.0.0.1:{}/", addr.port());

        let mut closed = Egress::closed();
        let refused = send_through(&mut closed, get(&url)).await;
        assert!(matches!(refused, Err(Error::HttpRequestDenied)));

        // Listed on another port only.
        let other = SocketAddr::new(addr.ip(), addr.port().wrapping_add(1).max(1));
        let gate = gate_for(other);
        let mut egress = Egress::through(gate.clone(), tls);
        let refused = send_through(&mut egress, get(&url)).await;
        assert!(matches!(refused, Err(Error::HttpRequestDenied)));
        let refused = send_through(&mut egress, get("https://a..test/")).await;
        assert!(matches!(refused, Err(Error::HttpRequestUriInvalid)));
        let contacts = gate.ledger().snapshot();
        assert_eq!(contacts.len(), 1, "{contacts:?}");
        assert!(contacts[0].refusal.contains("not in the allow-list"));
        assert_eq!(contacts[0].connections, 0);
        served.abort();
    }
}
