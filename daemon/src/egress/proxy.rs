//! The egress proxy of the process engine: an HTTP/1.1 forward proxy that listens inside a
//! sandbox's network namespace and reaches the outside only through the call's [`Gate`].
//!
//! Two forms are served: `CONNECT host:port` (a tunnel, what HTTPS clients use) and
//! absolute-form requests `GET http://host:port/path` (plain HTTP). Each connection carries
//! exactly one request: the proxy asks the upstream to close after its response and then
//! closes too, so keep-alive can never carry a second request to a host nobody checked.
//! Request bodies are framed by `Content-Length` only, the one framing both sides agree on
//! without a parser (chunked bodies are refused; clients that need them can tunnel).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::gate::Gate;

/// Largest request head (request line and headers) accepted. Real clients send a few
/// hundred bytes; the bound keeps a tool from making the daemon buffer without end.
const MAX_HEAD_BYTES: usize = 32 * 1024;

/// Longest a client may take to send its request head, so an idle connection does not hold
/// a slot for the whole call.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections one sandbox may have open through the proxy at once: plenty for a package
/// manager's parallel downloads, and a bound on the daemon's descriptors per call.
const MAX_CONNECTIONS: usize = 64;

/// Serves the proxy on `listener` until `cancel` fires or the future is dropped; either
/// way every open connection is closed with it.
pub async fn serve(listener: TcpListener, gate: Arc<Gate>, cancel: CancellationToken) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept(), if connections.len() < MAX_CONNECTIONS => {
                match accepted {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        connections.spawn(handle(stream, gate.clone()));
                    }
                    Err(err) => {
                        // Out of descriptors or memory: wait for connections to end rather
                        // than spin on the error.
                        tracing::debug!(%err, "egress proxy cannot accept");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    }
}

/// A parsed request head.
#[derive(Debug)]
struct Head {
    method: String,
    target: String,
    /// Names as sent, values trimmed.
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> impl Iterator<Item = &str> {
        self.headers
            .iter()
            .filter(move |(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// A reply the proxy itself gives, before any upstream is involved.
struct Reply {
    status: u16,
    reason: &'static str,
    body: String,
}

impl Reply {
    fn new(status: u16, reason: &'static str, body: impl Into<String>) -> Reply {
        Reply {
            status,
            reason,
            body: body.into(),
        }
    }

    async fn send(&self, client: &mut TcpStream) {
        let body = format!("{}\n", self.body);
        let head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.status,
            self.reason,
            body.len()
        );
        let _ = client.write_all(head.as_bytes()).await;
        let _ = client.write_all(body.as_bytes()).await;
        let _ = client.shutdown().await;
    }
}

async fn handle(mut client: TcpStream, gate: Arc<Gate>) {
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(Some(read))) => read,
        Ok(Ok(None)) | Err(_) => return,
        Ok(Err(reply)) => return reply.send(&mut client).await,
    };
    let outcome = if head.method.eq_ignore_ascii_case("CONNECT") {
        tunnel(&mut client, &gate, &head, &rest).await
    } else {
        forward(&mut client, &gate, &head, rest).await
    };
    if let Err(reply) = outcome {
        reply.send(&mut client).await;
    }
}

/// Reads the request head; returns it with whatever the client sent after it. `None` when
/// the client went away first.
async fn read_head(client: &mut TcpStream) -> Result<Option<(Head, Vec<u8>)>, Reply> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let end = loop {
        let read = client.read(&mut chunk).await.unwrap_or(0);
        if read == 0 {
            return Ok(None);
        }
        let searched_from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..read]);
        if let Some(at) = find(&buf[searched_from..], b"\r\n\r\n") {
            break searched_from + at + 4;
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(Reply::new(
                431,
                "Request Header Fields Too Large",
                format!("the request head is over {MAX_HEAD_BYTES} bytes"),
            ));
        }
    };
    let rest = buf.split_off(end);
    let text = std::str::from_utf8(&buf)
        .map_err(|_| Reply::new(400, "Bad Request", "the request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Reply::new(400, "Bad Request", "malformed request line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Reply::new(
            505,
            "HTTP Version Not Supported",
            "the egress proxy speaks HTTP/1.x",
        ));
    }
    let mut headers = Vec::new();
    for line in lines.filter(|line| !line.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .filter(|(name, _)| !name.is_empty() && !name.contains([' ', '\t']))
            .ok_or_else(|| Reply::new(400, "Bad Request", "malformed header line"))?;
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(Some((
        Head {
            method: method.to_owned(),
            target: target.to_owned(),
            headers,
        },
        rest,
    )))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// `CONNECT host:port`: a tunnel through the gate.
async fn tunnel(
    client: &mut TcpStream,
    gate: &Gate,
    head: &Head,
    rest: &[u8],
) -> Result<(), Reply> {
    let (host, port) = split_authority(&head.target, None)
        .ok_or_else(|| Reply::new(400, "Bad Request", "CONNECT needs host:port"))?;
    let mut upstream = gate
        .connect(&host, port)
        .await
        .map_err(|refusal| Reply::new(403, "Forbidden", refusal.to_string()))?;
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_err()
        || upstream.write_all(rest).await.is_err()
    {
        return Ok(());
    }
    let _ = tokio::io::copy_bidirectional(client, &mut upstream).await;
    Ok(())
}

/// An absolute-form request: forwarded in origin form over a connection through the gate,
/// its response relayed until the upstream closes.
async fn forward(
    client: &mut TcpStream,
    gate: &Gate,
    head: &Head,
    rest: Vec<u8>,
) -> Result<(), Reply> {
    let target = &head.target;
    let after_scheme = match target.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("http://") => &target[7..],
        _ if target.starts_with('/') => {
            return Err(Reply::new(
                400,
                "Bad Request",
                "this is an egress proxy: send absolute-form requests (http://host/path) or CONNECT",
            ));
        }
        _ => {
            return Err(Reply::new(
                400,
                "Bad Request",
                "only http:// URLs are forwarded; use CONNECT for anything else",
            ));
        }
    };
    let authority_end = after_scheme
        .find(['/', '?', '#'])
        .unwrap_or(after_scheme.len());
    let authority = &after_scheme[..authority_end];
    let path = match &after_scheme[authority_end..] {
        "" => "/".to_owned(),
        path if path.starts_with('/') => path.to_owned(),
        query => format!("/{query}"),
    };
    let path = path.split('#').next().unwrap_or("/");
    let (host, port) = split_authority(authority, Some(80))
        .ok_or_else(|| Reply::new(400, "Bad Request", format!("bad authority `{authority}`")))?;
    if head.header("transfer-encoding").next().is_some() {
        return Err(Reply::new(
            501,
            "Not Implemented",
            "the egress proxy forwards request bodies with Content-Length only; use CONNECT",
        ));
    }
    let mut lengths = head.header("content-length");
    let length = match (lengths.next(), lengths.next()) {
        (None, _) => 0,
        // Digits only: `parse` would also take `+5`, which an upstream may read otherwise.
        (Some(value), None) => Some(value)
            .filter(|value| !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|value| value.parse::<u64>().ok())
            .ok_or_else(|| Reply::new(400, "Bad Request", "bad Content-Length"))?,
        (Some(_), Some(_)) => {
            return Err(Reply::new(
                400,
                "Bad Request",
                "more than one Content-Length",
            ));
        }
    };
    // Headers the proxy owns: the hop-by-hop ones, those `Connection` names, and `Host`,
    // which is set from the URL so the upstream sees the host the gate checked.
    let named_by_connection: Vec<String> = head
        .header("connection")
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut upstream_head = format!("{} {path} HTTP/1.1\r\nHost: {authority}\r\n", head.method);
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        let hop_by_hop = matches!(
            lower.as_str(),
            "host"
                | "connection"
                | "proxy-connection"
                | "keep-alive"
                | "proxy-authorization"
                | "proxy-authenticate"
                | "te"
                | "trailer"
                | "upgrade"
        );
        if !hop_by_hop && !named_by_connection.contains(&lower) {
            upstream_head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    upstream_head.push_str("Connection: close\r\n\r\n");
    let mut upstream = gate
        .connect(&host, port)
        .await
        .map_err(|refusal| Reply::new(403, "Forbidden", refusal.to_string()))?;
    let early = usize::try_from(length).map_or(rest.len(), |length| length.min(rest.len()));
    if upstream.write_all(upstream_head.as_bytes()).await.is_err()
        || upstream.write_all(&rest[..early]).await.is_err()
    {
        return Err(Reply::new(
            502,
            "Bad Gateway",
            "the upstream closed the connection",
        ));
    }
    let remaining = length - early as u64;
    if remaining > 0 {
        let mut body = (&mut *client).take(remaining);
        if tokio::io::copy(&mut body, &mut upstream).await.is_err() {
            return Ok(());
        }
    }
    relay_response(&mut upstream, client).await;
    Ok(())
}

async fn relay_response(
    upstream: &mut (impl AsyncRead + Unpin),
    client: &mut (impl AsyncWrite + Unpin),
) {
    let _ = tokio::io::copy(upstream, client).await;
    let _ = client.shutdown().await;
}

/// `host:port`, `[v6]:port`, or (with a default port) `host` / `[v6]`.
fn split_authority(authority: &str, default_port: Option<u16>) -> Option<(String, u16)> {
    if authority.contains('@') {
        return None;
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => port.parse::<u16>().ok().filter(|port| *port != 0)?,
        None => default_port?,
    };
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::egress::{Resolver, Rules};
    use crate::profile::NetworkPolicy;

    /// A proxy for a gate allowing `allow`; returns its address.
    async fn proxy(allow: &[String]) -> (std::net::SocketAddr, Arc<Gate>, CancellationToken) {
        let gate = Arc::new(Gate::new(
            Rules::new(&NetworkPolicy::AllowList {
                allow: allow.iter().map(|p| p.parse().expect("pattern")).collect(),
                deny: Vec::new(),
                ask_for_unlisted: false,
            }),
            Arc::new(Resolver::new(HashMap::from([(
                "named-loopback.test".to_owned(),
                vec!["127.0.0.1".parse().expect("ip")],
            )]))),
            None,
        ));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let cancel = CancellationToken::new();
        tokio::spawn(serve(listener, gate.clone(), cancel.clone()));
        (addr, gate, cancel)
    }

    /// An upstream that records each connection's bytes and answers with `answer`.
    async fn upstream(
        answer: &'static [u8],
    ) -> (u16, tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    // Read the head (and a short body), then answer and close.
                    loop {
                        let read = stream.read(&mut buf).await.unwrap_or(0);
                        got.extend_from_slice(&buf[..read]);
                        if read == 0
                            || find(&got, b"\r\n\r\n")
                                .is_some_and(|at| got.len() >= at + 4 + body_len(&got))
                        {
                            break;
                        }
                    }
                    let _ = stream.write_all(answer).await;
                    let _ = stream.shutdown().await;
                    let _ = tx.send(got);
                });
            }
        });
        (port, rx)
    }

    fn body_len(head: &[u8]) -> usize {
        let text = String::from_utf8_lossy(head).to_ascii_lowercase();
        text.split("content-length:")
            .nth(1)
            .and_then(|rest| rest.split("\r\n").next())
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    }

    async fn exchange(proxy: std::net::SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(proxy).await.expect("connect");
        stream.write_all(request).await.expect("write");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.expect("read");
        String::from_utf8_lossy(&answer).into_owned()
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

    #[tokio::test]
    async fn absolute_requests_are_forwarded_in_origin_form_and_counted() {
        let (port, mut seen) = upstream(OK).await;
        let (proxy, gate, _cancel) = proxy(&[format!("127.0.0.1:{port}")]).await;
        let request = format!(
            "POST http://127.0.0.1:{port}/p?q=1 HTTP/1.1\r\nHost: elsewhere.test\r\nProxy-Connection: keep-alive\r\nContent-Length: 4\r\n\r\nbody"
        );
        let answer = exchange(proxy, request.as_bytes()).await;
        assert!(answer.ends_with("hello"), "{answer}");
        let sent = String::from_utf8(seen.recv().await.expect("upstream saw it")).expect("utf8");
        assert!(sent.starts_with("POST /p?q=1 HTTP/1.1\r\n"), "{sent}");
        assert!(
            sent.contains(&format!("Host: 127.0.0.1:{port}\r\n")),
            "{sent}"
        );
        assert!(!sent.contains("elsewhere.test"), "{sent}");
        assert!(
            !sent.to_ascii_lowercase().contains("proxy-connection"),
            "{sent}"
        );
        assert!(sent.contains("Connection: close\r\n"), "{sent}");
        assert!(sent.ends_with("\r\n\r\nbody"), "{sent}");
        let contacts = gate.ledger().snapshot();
        assert_eq!(contacts.len(), 1);
        assert_eq!(contacts[0].connections, 1);
        assert_eq!(contacts[0].bytes_sent, sent.len() as u64);
        assert_eq!(contacts[0].bytes_received, OK.len() as u64);
    }

    #[tokio::test]
    async fn connect_tunnels_to_allowed_hosts_only() {
        let (port, mut seen) = upstream(OK).await;
        let (proxy, gate, _cancel) = proxy(&[format!("127.0.0.1:{port}")]).await;
        let answer = exchange(
            proxy,
            format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n\r\n")
                .as_bytes(),
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 200 Connection established\r\n\r\n"),
            "{answer}"
        );
        assert!(answer.ends_with("hello"), "{answer}");
        assert_eq!(
            seen.recv().await.expect("tunnelled"),
            b"GET / HTTP/1.1\r\n\r\n"
        );

        let refused = exchange(proxy, b"CONNECT other.test:443 HTTP/1.1\r\n\r\n").await;
        assert!(refused.starts_with("HTTP/1.1 403 Forbidden"), "{refused}");
        assert!(
            refused.contains("egress to other.test:443 refused: not in the allow-list"),
            "{refused}"
        );
        let named = exchange(
            proxy,
            format!("GET http://named-loopback.test:{port}/ HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(named.starts_with("HTTP/1.1 403"), "{named}");
        let contacts = gate.ledger().snapshot();
        assert_eq!(contacts.iter().map(|c| c.refused).sum::<u64>(), 2);
    }

    #[tokio::test]
    async fn one_request_per_connection_so_keep_alive_cannot_switch_hosts() {
        let (port, mut seen) = upstream(OK).await;
        let (proxy, _gate, _cancel) = proxy(&[format!("127.0.0.1:{port}")]).await;
        let two = format!(
            "GET http://127.0.0.1:{port}/a HTTP/1.1\r\n\r\nGET http://127.0.0.1:{port}/b HTTP/1.1\r\n\r\n"
        );
        let answer = exchange(proxy, two.as_bytes()).await;
        assert_eq!(answer.matches("HTTP/1.1 200").count(), 1, "{answer}");
        let sent = String::from_utf8(seen.recv().await.expect("first")).expect("utf8");
        assert!(
            !sent.contains("/b"),
            "the second request went upstream: {sent}"
        );
    }

    #[tokio::test]
    async fn malformed_and_oversized_requests_get_proxy_errors() {
        let (proxy, _gate, _cancel) = proxy(&[]).await;
        let origin = exchange(proxy, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(origin.starts_with("HTTP/1.1 400"), "{origin}");
        let https = exchange(proxy, b"GET https://a.test/ HTTP/1.1\r\n\r\n").await;
        assert!(https.starts_with("HTTP/1.1 400"), "{https}");
        let chunked = exchange(
            proxy,
            b"POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        )
        .await;
        assert!(chunked.starts_with("HTTP/1.1 501"), "{chunked}");
        let signed = exchange(
            proxy,
            b"POST http://a.test/ HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
        )
        .await;
        assert!(signed.starts_with("HTTP/1.1 400"), "{signed}");
        let userinfo = exchange(proxy, b"CONNECT user@a.test:443 HTTP/1.1\r\n\r\n").await;
        assert!(userinfo.starts_with("HTTP/1.1 400"), "{userinfo}");
        let mut huge = b"GET http://a.test/ HTTP/1.1\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'x', MAX_HEAD_BYTES + 10));
        let oversized = exchange(proxy, &huge).await;
        assert!(oversized.starts_with("HTTP/1.1 431"), "{oversized}");
    }

    #[tokio::test]
    async fn cancelling_stops_the_listener() {
        let (proxy, _gate, cancel) = proxy(&[]).await;
        cancel.cancel();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(TcpStream::connect(proxy).await.is_err());
    }

    #[test]
    fn authorities_split_with_and_without_ports() {
        assert_eq!(
            split_authority("a.test:8080", None),
            Some(("a.test".into(), 8080))
        );
        assert_eq!(
            split_authority("a.test", Some(80)),
            Some(("a.test".into(), 80))
        );
        assert_eq!(
            split_authority("[::1]:443", None),
            Some(("::1".into(), 443))
        );
        assert_eq!(split_authority("[::1]", Some(80)), Some(("::1".into(), 80)));
        assert_eq!(split_authority("a.test", None), None);
        assert_eq!(split_authority("a.test:0", None), None);
        assert_eq!(split_authority("u@a.test:1", None), None);
        assert_eq!(split_authority(":80", None), None);
    }
}
