//! Refuses a call a browser makes on behalf of another site's page.
//!
//! The token already stops such a call: it lives in the console's session storage, which no
//! other origin can read, and is sent as a header, which a browser never adds by itself. This
//! check makes the refusal explicit and early: a browser names the page's origin in `Origin`
//! on every call a script makes, and a call whose origin is not the address it was sent to
//! (the `Host` it names) is answered 403 before any service sees it. gRPC clients send no
//! `Origin` and are not affected.

use std::convert::Infallible;
use std::task::{Context, Poll};

use futures::future::{Either, Ready, ready};
use http::{HeaderValue, Request, Response, StatusCode, header};
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::server::NamedService;

/// A service that refuses cross-origin browser calls.
#[derive(Debug, Clone)]
pub(in crate::api) struct SameOrigin<S> {
    inner: S,
}

impl<S> SameOrigin<S> {
    pub(super) fn new(inner: S) -> SameOrigin<S> {
        SameOrigin { inner }
    }
}

impl<S: NamedService> NamedService for SameOrigin<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<Request<Body>> for SameOrigin<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Either<S::Future, Ready<Result<Response<Body>, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if is_same_origin(&request) {
            Either::Left(self.inner.call(request))
        } else {
            Either::Right(ready(Ok(forbidden())))
        }
    }
}

/// Whether the request names no origin, or the one it was sent to.
fn is_same_origin<B>(request: &Request<B>) -> bool {
    let Some(origin) = request.headers().get(header::ORIGIN) else {
        return true;
    };
    // HTTP/1.1 names the address in `Host`, HTTP/2 in the `:authority` of the URI.
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.as_str())
        });
    let origin_authority = origin
        .to_str()
        .ok()
        .and_then(|origin| origin.split_once("://"))
        .map(|(_, authority)| authority);
    match (origin_authority, host) {
        (Some(origin), Some(host)) => origin.eq_ignore_ascii_case(host),
        // `Origin: null` (a sandboxed frame, a file) or no address to compare with.
        _ => false,
    }
}

fn forbidden() -> Response<Body> {
    let mut response = Response::new(Body::new(http_body_util::Full::new(
        bytes::Bytes::from_static(
            b"refused: this call comes from another site's page (its Origin is not this address)\n",
        ),
    )));
    *response.status_mut() = StatusCode::FORBIDDEN;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(origin: Option<&str>, host: Option<&str>, uri: &str) -> Request<()> {
        let mut builder = Request::builder().method("POST").uri(uri);
        if let Some(origin) = origin {
            builder = builder.header(header::ORIGIN, origin);
        }
        if let Some(host) = host {
            builder = builder.header(header::HOST, host);
        }
        builder.body(()).expect("request")
    }

    #[test]
    fn calls_without_an_origin_pass() {
        assert!(is_same_origin(&request(
            None,
            Some("127.0.0.1:7411"),
            "/a/B"
        )));
    }

    #[test]
    fn the_daemons_own_origin_passes_over_http1_and_http2() {
        assert!(is_same_origin(&request(
            Some("http://127.0.0.1:7411"),
            Some("127.0.0.1:7411"),
            "/a/B"
        )));
        assert!(is_same_origin(&request(
            Some("https://Airlock.example:8443"),
            None,
            "https://airlock.example:8443/a/B"
        )));
    }

    #[test]
    fn another_sites_page_and_opaque_origins_are_refused() {
        for (origin, host) in [
            ("http://evil.example", Some("127.0.0.1:7411")),
            ("http://127.0.0.1:8000", Some("127.0.0.1:7411")),
            ("null", Some("127.0.0.1:7411")),
            ("http://127.0.0.1:7411", None),
        ] {
            assert!(
                !is_same_origin(&request(Some(origin), host, "/a/B")),
                "{origin} to {host:?}"
            );
        }
    }
}
