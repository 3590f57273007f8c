//! Authentication of every `Tools` and `Agent` call: the bearer token in the `authorization`
//! metadata names the calling tenant, which the services read back with [`caller`].
//!
//! gRPC health stays open (load balancers and supervisors probe it without credentials), and
//! so does server reflection: it describes the public `airlock.v1` schema, the same text as
//! the protos in the repository, and answers nothing about runs, tools or tenants.

use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::transport::server::UdsConnectInfo;
use tonic::{Request, Status};

use super::error::ApiError;
use super::tenants::{Tenant, Tenants};

/// Checks the token of each request and attaches its tenant.
#[derive(Clone)]
pub struct Authenticate {
    tenants: Arc<Tenants>,
    /// Requests on the Unix socket without a token act as `default` (`unix_socket_trust`).
    unix_socket_trust: bool,
}

impl Authenticate {
    pub fn new(tenants: Arc<Tenants>, unix_socket_trust: bool) -> Authenticate {
        Authenticate {
            tenants,
            unix_socket_trust,
        }
    }
}

impl Interceptor for Authenticate {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let header = match request.metadata().get("authorization") {
            Some(value) => Some(value.to_str().map_err(|_| {
                ApiError::Unauthenticated("the authorization metadata is not printable ASCII")
            })?),
            None => None,
        };
        let tenant = match header {
            Some(value) => {
                let token = value
                    .strip_prefix("Bearer ")
                    .or_else(|| value.strip_prefix("bearer "))
                    .ok_or(ApiError::Unauthenticated(
                        "the authorization metadata must be `Bearer <token>`",
                    ))?;
                self.tenants
                    .identify(token.trim())
                    .ok_or(ApiError::Unauthenticated(
                        "the access token is not valid for this daemon",
                    ))?
            }
            None if self.unix_socket_trust
                && request.extensions().get::<UdsConnectInfo>().is_some() =>
            {
                self.tenants.default_tenant().clone()
            }
            None => {
                return Err(ApiError::Unauthenticated(
                    "this daemon needs an access token: send `authorization: Bearer <token>` \
                     (the `airlock` CLI reads it from the daemon's state dir, `token`)",
                )
                .into());
            }
        };
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
            Authenticate::new(Arc::new(tenants), trust),
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
