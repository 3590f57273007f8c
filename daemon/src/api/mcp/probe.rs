//! The endpoint driven by arbitrary bytes, in-process: what the fuzz target `mcp_edge` runs
//! and what the tests replay its corpus and random inputs through.
//!
//! An input is split at NUL bytes into a method, a request target, header lines
//! (`name: value`, one per `\n`) and a body. A valid token is added unless the method starts
//! with `-` (then stripped), so that most inputs reach past authentication into rmcp and the
//! handler. A request that names no `Host` gets loopback's. The daemon behind it serves
//! no tools: what is searched is the edge's own parsing — the query, the session table, the
//! token, rmcp's requests — for a panic or a request that never gets an answer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;

use super::Endpoint;
use crate::api::direct_approval::DirectApprovals;
use crate::api::direct_call::DirectCalls;
use crate::api::tenants::Tenants;
use crate::tools::{Executor, Registry};

/// An answer's headers come at once (a stream's events follow later); longer is a hang.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

pub struct Probe {
    runtime: tokio::runtime::Runtime,
    endpoint: Endpoint,
    token: String,
    /// The state dir of its default tenant's token, removed with the probe.
    state: std::path::PathBuf,
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

impl Probe {
    /// An endpoint over no tools, its default tenant's token in a fresh state dir.
    pub fn new() -> Result<Probe, String> {
        let state = std::env::temp_dir().join(format!(
            "airlock-mcp-probe-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&state).map_err(|err| err.to_string())?;
        let token =
            crate::api::token_file::ensure_default_token(&state).map_err(|err| err.to_string())?;
        let roots = crate::workspace::WorkspaceRoots::new(std::slice::from_ref(&state))
            .map_err(|err| err.to_string())?;
        let tenants =
            Tenants::load(&state, &Default::default(), &roots).map_err(|err| err.to_string())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|err| err.to_string())?;
        let executor = Arc::new(Executor::new(Arc::new(Registry::default()), roots));
        let approvals = Arc::new(DirectApprovals {
            broker: Arc::default(),
            executor: executor.clone(),
            timeout: Duration::from_secs(1),
        });
        let calls = Arc::new(DirectCalls::new(executor, approvals, Arc::default()));
        let stop = tokio_util::sync::CancellationToken::new();
        let endpoint = {
            let _entered = runtime.enter();
            Endpoint::new(None, Arc::new(tenants), calls, &stop)
        };
        Ok(Probe {
            runtime,
            endpoint,
            token,
            state,
        })
    }

    /// Sends the request `input` encodes. Returns its status, or `None` when the input is no
    /// HTTP request at all (hyper refuses those before the edge sees them). Panics when the
    /// edge gives no answer in time.
    pub fn send(&self, input: &[u8]) -> Option<u16> {
        let mut parts = input.splitn(4, |byte| *byte == 0);
        let method = parts.next()?;
        let (method, token) = match method.strip_prefix(b"-") {
            Some(method) => (method, false),
            None => (method, true),
        };
        let method = http::Method::from_bytes(method).ok()?;
        let target = http::Uri::try_from(parts.next()?).ok()?;
        let mut request = http::Request::builder().method(method).uri(target);
        for line in parts
            .next()
            .unwrap_or_default()
            .split(|byte| *byte == b'\n')
        {
            let Some(colon) = line.iter().position(|byte| *byte == b':') else {
                continue;
            };
            let (name, value) = line.split_at(colon);
            let value = value.get(1..).unwrap_or_default();
            if let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(name),
                http::HeaderValue::from_bytes(value),
            ) {
                request = request.header(name, value);
            }
        }
        // The loopback `Host` a local client sends, unless the input names its own.
        if request
            .headers_ref()
            .is_some_and(|headers| !headers.contains_key(http::header::HOST))
        {
            request = request.header(http::header::HOST, "127.0.0.1");
        }
        if token {
            request = request.header("authorization", format!("Bearer {}", self.token));
        }
        let body = Bytes::copy_from_slice(parts.next().unwrap_or_default());
        let request = request.body(Full::new(body)).ok()?;
        let peer = SocketAddr::from(([127, 0, 0, 1], 1));
        let answer = self.runtime.block_on(async {
            tokio::time::timeout(ANSWER_WITHIN, self.endpoint.route(request, peer)).await
        });
        match answer {
            Ok(response) => Some(response.status().as_u16()),
            Err(_) => panic!(
                "the MCP edge gave no answer within {ANSWER_WITHIN:?} to {:?}",
                String::from_utf8_lossy(input)
            ),
        }
    }
}
