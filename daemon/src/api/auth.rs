//! Authentication of every `Tools` and `Agent` call: the bearer token in the `authorization`
//! metadata names the calling tenant, which the services read back with [`caller`].
//!
//! gRPC health stays open (load balancers and supervisors probe it without credentials), and
//! so does server reflection: it describes the public `airlock.v1` schema, the same text as
//! the protos in the repository, and answers nothing about runs, tools or tenants.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tonic::service::Interceptor;
use tonic::transport::server::UdsConnectInfo;
use tonic::{Request, Status};

use super::error::ApiError;
use super::tenants::{DEFAULT_TENANT, Tenant, Tenants};
use crate::audit::{Act, Auditor};

/// How long a peer's token outcome stays in [`Audited`]: a peer that keeps calling or
/// connecting is recorded once in this window, and once more after it.
const AUDIT_WINDOW: Duration = Duration::from_secs(10 * 60);

/// The most peer-and-outcome pairs [`Audited`] remembers. Past it, those older than the
/// window go; if the rest are all fresh (thousands of addresses refused in ten minutes), a
/// new one is not recorded: a flood from many addresses costs the log a bounded number of
/// records, which say it began.
const AUDITED_PEERS: usize = 4096;

/// The peers whose token outcome was already recorded, by address (not port: each new
/// connection has its own), edge and outcome — the tenant accepted, or refused at all, never
/// the refusal's words, which may carry a client's bytes (a JWT's key id).
#[derive(Default)]
struct Audited(Mutex<HashMap<String, Instant>>);

impl Audited {
    /// Whether `key` is new in the window (and notes it).
    fn first(&self, key: String) -> bool {
        let now = Instant::now();
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if seen
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) < AUDIT_WINDOW)
        {
            return false;
        }
        if seen.len() >= AUDITED_PEERS {
            seen.retain(|_, at| now.duration_since(*at) < AUDIT_WINDOW);
            if seen.len() >= AUDITED_PEERS {
                return false;
            }
        }
        seen.insert(key, now);
        true
    }
}

/// Records each connection's token outcome in the audit log, once per connection: in the
/// tenant's chain when accepted, the operator's when refused. The gRPC edge and the MCP edge
/// both record through it.
#[derive(Clone, Default)]
pub struct ConnectionAudit {
    auditor: Auditor,
    audited: Arc<Audited>,
}

impl ConnectionAudit {
    pub fn new(auditor: Auditor) -> ConnectionAudit {
        ConnectionAudit {
            auditor,
            audited: Arc::default(),
        }
    }

    /// `peer` (an address, with its port) presented a token on `edge` that named
    /// `outcome`'s tenant, or was refused for `outcome`'s reason.
    pub fn record(&self, edge: &'static str, peer: &str, outcome: Result<&Tenant, &str>) {
        let address = peer.rsplit_once(':').map_or(peer, |(address, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                address
            } else {
                peer
            }
        });
        let key = match outcome {
            Ok(tenant) => format!("{edge}|{address}|ok|{}", tenant.name),
            Err(_) => format!("{edge}|{address}|refused"),
        };
        if !self.audited.first(key) {
            return;
        }
        let act = match outcome {
            Ok(tenant) => Act::new(&tenant.name, "auth.accepted")
                .actor(&tenant.name)
                .subject(peer)
                .reason("the connection's token names this tenant"),
            Err(why) => Act::new(DEFAULT_TENANT, "auth.refused")
                .actor("unknown")
                .subject(peer)
                .reason(why),
        };
        self.auditor.record(act.detail("edge", edge));
    }
}

/// Checks the token of each request and attaches its tenant.
#[derive(Clone)]
pub struct Authenticate {
    tenants: Arc<Tenants>,
    /// Requests on the Unix socket without a token act as `default` (`unix_socket_trust`).
    unix_socket_trust: bool,
    audit: ConnectionAudit,
}

impl Authenticate {
    pub fn new(tenants: Arc<Tenants>, unix_socket_trust: bool, auditor: Auditor) -> Authenticate {
        Authenticate {
            tenants,
            unix_socket_trust,
            audit: ConnectionAudit::new(auditor),
        }
    }

    fn audit(&self, request: &Request<()>, outcome: Result<&Tenant, &str>) {
        let peer = match (
            request.remote_addr(),
            request.extensions().get::<UdsConnectInfo>(),
        ) {
            (Some(addr), _) => addr.to_string(),
            (None, Some(unix)) => unix.peer_cred.map_or_else(
                || "unix socket".to_owned(),
                |cred| {
                    format!(
                        "unix socket, pid {}, uid {}",
                        cred.pid().unwrap_or_default(),
                        cred.uid()
                    )
                },
            ),
            (None, None) => "unknown peer".to_owned(),
        };
        self.audit.record("grpc", &peer, outcome);
    }
}

impl Interceptor for Authenticate {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        match self.identify(request) {
            Ok(request) => Ok(request),
            Err(refused) => Err(refused),
        }
    }
}

impl Authenticate {
    fn identify(&self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let refused = |request: &Request<()>, error: ApiError| -> Status {
            let status: Status = error.into();
            self.audit(request, Err(status.message()));
            status
        };
        let header = match request.metadata().get("authorization") {
            Some(value) => match value.to_str() {
                Ok(text) => Some(text.to_owned()),
                Err(_) => {
                    return Err(refused(
                        &request,
                        ApiError::Unauthenticated(
                            "the authorization metadata is not printable ASCII",
                        ),
                    ));
                }
            },
            None => None,
        };
        let tenant = match header {
            Some(value) => {
                let Some(token) = value
                    .strip_prefix("Bearer ")
                    .or_else(|| value.strip_prefix("bearer "))
                else {
                    return Err(refused(
                        &request,
                        ApiError::Unauthenticated(
                            "the authorization metadata must be `Bearer <token>`",
                        ),
                    ));
                };
                match self.tenants.identify(token.trim()) {
                    Some(tenant) => tenant,
                    None => {
                        return Err(refused(
                            &request,
                            ApiError::Unauthenticated(
                                "the access token is not valid for this daemon",
                            ),
                        ));
                    }
                }
            }
            None if self.unix_socket_trust
                && request.extensions().get::<UdsConnectInfo>().is_some() =>
            {
                self.tenants.default_tenant().clone()
            }
            None => {
                return Err(refused(
                    &request,
                    ApiError::Unauthenticated(
                        "this daemon needs an access token: send `authorization: Bearer <token>` \
                         (the `airlock` CLI reads it from the daemon's state dir, `token`)",
                    ),
                ));
            }
        };
        self.audit(&request, Ok(&tenant));
        request.extensions_mut().insert(Caller(tenant));
        Ok(request)
    }
}

/// The tenant a request was authenticated as.
#[derive(Debug, Clone)]
pub struct Caller(pub Arc<Tenant>);

/// The tenant of an authenticated request. A request that reached a service without one was
/// routed past [`Authenticate`], which is a bug of this crate; it is refused, not served.
pub fn caller<T>(request: &Request<T>) -> Result<Arc<Tenant>, Status> {
    request
        .extensions()
        .get::<Caller>()
        .map(|caller| caller.0.clone())
        .ok_or_else(|| ApiError::Unauthenticated("the request was not authenticated").into())
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;
    use crate::config::AuthSettings;
    use crate::workspace::WorkspaceRoots;

    fn authenticate(trust: bool) -> (Authenticate, String, tempfile::TempDir) {
        let state = tempfile::tempdir().expect("tempdir");
        let roots = WorkspaceRoots::new(&[state.path().to_owned()]).expect("roots");
        let tenants =
            Tenants::load(state.path(), &AuthSettings::default(), &roots).expect("tenants");
        let token = std::fs::read_to_string(state.path().join("token")).expect("token");
        (
            Authenticate::new(Arc::new(tenants), trust, Auditor::default()),
            token.trim().to_owned(),
            state,
        )
    }

    fn with_header(value: &str) -> Request<()> {
        let mut request = Request::new(());
        request
            .metadata_mut()
            .insert("authorization", value.parse().expect("ascii"));
        request
    }

    #[test]
    fn a_valid_bearer_token_names_the_tenant() {
        let (mut auth, token, _state) = authenticate(false);
        let request = auth
            .call(with_header(&format!("Bearer {token}")))
            .expect("accepted");
        assert_eq!(caller(&request).expect("caller").name, "default");
    }

    #[test]
    fn missing_malformed_and_wrong_tokens_are_unauthenticated() {
        let (mut auth, token, _state) = authenticate(false);
        for request in [
            Request::new(()),
            with_header(&token),
            with_header("Bearer nope"),
            with_header(&format!("Basic {token}")),
        ] {
            let status = auth.call(request).expect_err("refused");
            assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
        }
    }

    #[test]
    fn trust_applies_only_to_unix_socket_connections() {
        let (mut auth, _token, _state) = authenticate(true);
        let status = auth.call(Request::new(())).expect_err("tcp needs a token");
        assert_eq!(status.code(), Code::Unauthenticated);
    }
}
