//! The console's files — built into the daemon from `console/dist`, or read from a directory
//! on each request while the console is worked on — and the API's descriptor set, which the
//! console reads its messages and services from (so it is never out of step with the daemon
//! that serves it).
//!
//! Every answer carries the headers that keep the page to itself: a Content-Security-Policy
//! allowing only this origin's scripts, styles and calls (no inline script, no framing), and
//! no referrer or content sniffing. Files are revalidated on each load (`no-cache` with an
//! ETag), so a daemon upgrade never leaves a stale page talking to a newer API.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use axum::routing::get;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

/// Only this origin's files and calls; nothing inline, nothing framed, no form posts.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// A file the console is made of.
struct File {
    route: &'static str,
    /// Its name in `console/dist`.
    name: &'static str,
    content_type: &'static str,
    built_in: &'static [u8],
}

macro_rules! dist {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../console/dist/",
            $name
        ))
    };
}

const FILES: [File; 5] = [
    File {
        route: "/",
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        built_in: dist!("index.html"),
    },
    File {
        route: "/app.js",
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        built_in: dist!("app.js"),
    },
    File {
        route: "/app.css",
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        built_in: dist!("app.css"),
    },
    File {
        route: "/favicon.svg",
        name: "favicon.svg",
        content_type: "image/svg+xml",
        built_in: dist!("favicon.svg"),
    },
    File {
        route: "/licenses.txt",
        name: "licenses.txt",
        content_type: "text/plain; charset=utf-8",
        built_in: dist!("licenses.txt"),
    },
];

/// Where the console reads `airlock.v1`'s messages and services from.
const DESCRIPTOR_ROUTE: &str = "/airlock.binpb";

/// Content with its validator, computed once for what does not change.
#[derive(Clone)]
struct Served {
    content_type: &'static str,
    body: bytes::Bytes,
    etag: HeaderValue,
}

impl Served {
    fn new(content_type: &'static str, body: bytes::Bytes) -> Served {
        let digest = Sha256::digest(&body);
        let etag = HeaderValue::try_from(format!("\"{}\"", hex::encode(&digest[..16])))
            .unwrap_or_else(|_| HeaderValue::from_static("\"\""));
        Served {
            content_type,
            body,
            etag,
        }
    }

    fn respond(&self, request: &HeaderMap) -> Response {
        let fresh = request
            .get(header::IF_NONE_MATCH)
            .is_some_and(|tags| tags.as_bytes() == self.etag.as_bytes());
        let mut response = if fresh {
            status_response(StatusCode::NOT_MODIFIED, Body::empty())
        } else {
            let mut response = status_response(StatusCode::OK, Body::from(self.body.clone()));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(self.content_type),
            );
            response
        };
        let headers = response.headers_mut();
        headers.insert(header::ETAG, self.etag.clone());
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        response
    }
}

/// `router` with a route per console file and the descriptor set.
pub(super) fn add_routes(mut router: axum::Router, dir: Option<PathBuf>) -> axum::Router {
    for file in &FILES {
        router = match &dir {
            None => {
                let served = Arc::new(Served::new(
                    file.content_type,
                    bytes::Bytes::from_static(file.built_in),
                ));
                router.route(
                    file.route,
                    get(move |request: HeaderMap| async move { served.respond(&request) }),
                )
            }
            Some(dir) => {
                let path = dir.join(file.name);
                let content_type = file.content_type;
                router.route(
                    file.route,
                    get(move |request: HeaderMap| read_and_serve(path, content_type, request)),
                )
            }
        };
    }
    let descriptors = Arc::new(Served::new(
        "application/x-protobuf",
        bytes::Bytes::from_static(airlock_proto::v1::FILE_DESCRIPTOR_SET),
    ));
    router.route(
        DESCRIPTOR_ROUTE,
        get(move |request: HeaderMap| async move { descriptors.respond(&request) }),
    )
}

/// A file of `--console-dir`, as it is now.
async fn read_and_serve(path: PathBuf, content_type: &'static str, request: HeaderMap) -> Response {
    match tokio::fs::read(&path).await {
        Ok(body) => Served::new(content_type, body.into()).respond(&request),
        Err(err) => {
            tracing::warn!(path = %path.display(), %err, "cannot read a console file");
            status_response(
                StatusCode::NOT_FOUND,
                Body::from(format!("cannot read {}: {err}\n", path.display())),
            )
        }
    }
}

/// The answer to a path nobody serves: UNIMPLEMENTED to a gRPC client (as tonic answers an
/// unknown method), 404 to everyone else.
pub(super) async fn not_found(request: HeaderMap) -> Response {
    let grpc = request
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"application/grpc"));
    if grpc {
        return tonic::Status::unimplemented("no such service or method").into_http::<Body>();
    }
    let mut response = status_response(StatusCode::NOT_FOUND, Body::from("not found\n"));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A response with the headers every console answer carries.
fn status_response(status: StatusCode, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    response
}
