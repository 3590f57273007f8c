//! The web console: its pages, served at `/` of the gRPC address beside the services, and the
//! gRPC-Web face of the services it calls.
//!
//! One address rather than a `--console-listen` of its own: the console's calls are the API's
//! calls (gRPC-Web translated in front of the same services, the same token check and tenant
//! walls), so a second listener would only be a second thing to secure, TLS-configure and
//! open in a firewall. A browser speaks HTTP/1.1 there; gRPC clients keep HTTP/2.
//!
//! The pages hold no secret: they are the same bytes for everyone, and every answer they show
//! comes from a call that carries the tenant's token, sent by the page as the `authorization`
//! header from session storage — never a cookie, so another site cannot make the browser call
//! with it (no CSRF), and never in a URL.

mod files;
mod same_origin;

use tonic::server::NamedService;
use tonic_web::{GrpcWebLayer, GrpcWebService};
use tower_layer::Layer;

use crate::config::ConsoleSettings;

pub(super) use same_origin::SameOrigin;

/// `service` as a browser may call it: gRPC-Web translated to gRPC, refused when another
/// site's page sends it.
pub(super) fn browser_facing<S: NamedService>(service: S) -> SameOrigin<GrpcWebService<S>> {
    SameOrigin::new(GrpcWebLayer::new().layer(service))
}

/// Adds the console's pages to `router` (when enabled) and answers paths nobody serves: 404
/// to a browser, UNIMPLEMENTED to a gRPC client.
pub(super) fn add_pages(router: axum::Router, settings: &ConsoleSettings) -> axum::Router {
    let router = if settings.enabled {
        files::add_routes(router, settings.dir.clone())
    } else {
        router
    };
    router.fallback(files::not_found)
}
