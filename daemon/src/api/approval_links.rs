//! The links webhooks carry (`notify`): `GET /approve/<token>` shows what the link would
//! decide and a button; only `POST /approve/<token>` decides. Chat apps, mail scanners and
//! browsers fetch links ahead of a person (unfurling, safe-browsing checks, prefetch), so a
//! fetch must never approve anything.
//!
//! A POST is the console's decision in every respect but its credential: the token's
//! signature and expiry are checked, its single use is taken before anything is decided,
//! and then the decision goes through `agent::decide_as` as the link's tenant — the same
//! rights check (may this tenant answer for the run's owner?), digest binding and deadline
//! as `DecideApproval`. An answer says in words what happened; nothing of the token's
//! payload is trusted before its signature is.
//!
//! The pages are plain HTML with their own policy: no script, no style, forms only to this
//! origin, no referrer (the URL is the credential), never cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use airlock_proto::v1 as pb;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};
use tonic::Code;

use super::agent::decide_as;
use super::tenants::Tenants;
use crate::agent::AgentRuntime;
use crate::audit::Act;
use crate::ids::now_ms;
use crate::notify::links::{Claims, LinkDecision, LinkError, LinkKey};

/// Nothing but this page's own form.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Links used, remembered until they expire (at most a day). The count is capped all the
/// same, since nothing bounds how many links are used in a day: past it, the links that
/// expire soonest are forgotten first — and a forgotten link's approval, decided once, still
/// refuses it.
const MAX_REMEMBERED: usize = 65_536;

#[derive(Clone)]
pub struct LinkState {
    key: Arc<LinkKey>,
    tenants: Arc<Tenants>,
    runtime: Arc<AgentRuntime>,
    /// The origin of the links (`[approvals] public_url`'s scheme, host and port): a POST
    /// a browser sends from any other page is refused.
    origin: String,
    /// Nonces of links used, with when each expires.
    used: Arc<Mutex<HashMap<String, i64>>>,
}

impl LinkState {
    /// `origin` is the links' origin (`NotifySettings::origin`).
    pub fn new(
        key: Arc<LinkKey>,
        tenants: Arc<Tenants>,
        runtime: Arc<AgentRuntime>,
        origin: String,
    ) -> LinkState {
        LinkState {
            key,
            tenants,
            runtime,
            origin,
            used: Arc::default(),
        }
    }

    /// Whether a POST carrying `headers` comes from the link's own page (or from no page at
    /// all: a client that is not a browser sends neither header). A browser says where a
    /// form was sent from: another site's page, knowing a link, must not make a person's
    /// browser (inside the network that reaches the daemon) use it. `Sec-Fetch-Site`, which
    /// every current browser sends, decides when present (`same-origin`: the link's page;
    /// `none`: typed or opened by the person); else `Origin`, when present, must be the
    /// links' own. (The page's referrer policy is `same-origin`, so its form's `Origin` is
    /// the real one, never `null`.)
    fn same_origin(&self, headers: &http::HeaderMap) -> bool {
        if let Some(site) = headers.get("sec-fetch-site") {
            return matches!(site.as_bytes(), b"same-origin" | b"none");
        }
        headers
            .get(header::ORIGIN)
            .is_none_or(|origin| origin.as_bytes() == self.origin.as_bytes())
    }

    /// Takes the single use of the link with `claims`; false when it was taken before.
    fn take(&self, claims: &Claims) -> bool {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        let now = now_ms();
        if used.len() >= MAX_REMEMBERED {
            used.retain(|_, expires| *expires > now);
        }
        if used.len() >= MAX_REMEMBERED
            && let Some(oldest) = used
                .iter()
                .min_by_key(|(_, expires)| **expires)
                .map(|(nonce, _)| nonce.clone())
        {
            used.remove(&oldest);
        }
        used.insert(claims.nonce.clone(), claims.expires_ms)
            .is_none()
    }
}

/// `router` with the approval links' routes.
pub fn add_routes(router: axum::Router, state: LinkState) -> axum::Router {
    router.merge(
        axum::Router::new()
            .route("/approve/{token}", get(show).post(decide))
            .with_state(state),
    )
}

/// What the link would do, and a button that does it.
async fn show(State(state): State<LinkState>, Path(token): Path<String>) -> Response {
    let claims = match state.key.verify(&token, now_ms()) {
        Ok(claims) => claims,
        Err(err) => return refused(&err),
    };
    let Some(request) = state.runtime.pending_approval(&claims.approval_id).await else {
        return page(
            StatusCode::GONE,
            "Nothing to decide",
            "This approval was already decided, or its deadline passed.",
            &[],
            None,
        );
    };
    if request.digest != claims.digest {
        return page(
            StatusCode::CONFLICT,
            "Not this call",
            "The call waiting under this approval is not the one the link was sent for.",
            &[],
            None,
        );
    }
    let verb = match claims.decision {
        LinkDecision::Approve => "Approve",
        LinkDecision::Deny => "Deny",
    };
    // The whole call, as the console shows it: what is decided is never cut from view
    // (a message's arguments are; this page is where a person sees all of them).
    let mut details = vec![
        ("Tool", request.tool.clone()),
        ("Tenant", claims.tenant.clone()),
        (
            "Run",
            if request.run_id.is_empty() {
                "— (a call outside any run)".to_owned()
            } else {
                request.run_id.clone()
            },
        ),
        (
            "Risk",
            pb::Risk::try_from(request.risk)
                .map(|risk| risk.as_str_name().to_owned())
                .unwrap_or_default(),
        ),
        ("Why it asks", request.reason.clone()),
    ];
    if let Some(network) = &request.network {
        details.push((
            "Connection to",
            format!("{}:{}", network.host, network.port),
        ));
    }
    details.push(("Arguments", request.arguments_json.clone()));
    page(
        StatusCode::OK,
        &format!("{verb} this call?"),
        &format!("{verb} exactly this call, once:"),
        &details,
        Some(verb),
    )
}

/// Decides the approval the link names, once.
async fn decide(
    State(state): State<LinkState>,
    Path(token): Path<String>,
    headers: http::HeaderMap,
) -> Response {
    if !state.same_origin(&headers) {
        return page(
            StatusCode::FORBIDDEN,
            "Refused",
            "An approval link decides only from its own page: open the link and use its button.",
            &[],
            None,
        );
    }
    let claims = match state.key.verify(&token, now_ms()) {
        Ok(claims) => claims,
        Err(err) => return refused(&err),
    };
    if !state.take(&claims) {
        return page(
            StatusCode::GONE,
            "Link already used",
            "Each approval link works once; this one has been used.",
            &[],
            None,
        );
    }
    let Some(tenant) = state.tenants.named(&claims.tenant) else {
        return page(
            StatusCode::FORBIDDEN,
            "Refused",
            "The tenant this link decides for is not configured any more.",
            &[],
            None,
        );
    };
    let decision = pb::ApprovalDecision {
        approval_id: claims.approval_id.clone(),
        decision: match claims.decision {
            LinkDecision::Approve => pb::Decision::ApproveOnce,
            LinkDecision::Deny => pb::Decision::Deny,
        } as i32,
        reason: format!("by an approval link sent to webhook `{}`", claims.webhook),
        digest: claims.digest.clone(),
        ..pb::ApprovalDecision::default()
    };
    let decided = decide_as(&state.runtime, &tenant, &decision).await;
    state.runtime.auditor().record(
        Act::new(&tenant.name, "approval.link.used")
            .actor(format!("webhook:{}", claims.webhook))
            .subject(&claims.approval_id)
            .reason(match &decided {
                Ok(()) => "an approval link decided a call",
                Err(_) => "an approval link was refused",
            })
            .detail("decision", claims.decision.as_str())
            .detail(
                "outcome",
                match &decided {
                    Ok(()) => "decided".to_owned(),
                    Err(err) => err.to_string(),
                },
            ),
    );
    match decided {
        Ok(()) => match claims.decision {
            LinkDecision::Approve => page(
                StatusCode::OK,
                "Approved",
                "Approved once: the call runs.",
                &[],
                None,
            ),
            LinkDecision::Deny => page(
                StatusCode::OK,
                "Denied",
                "Denied: the call does not run, and the run is told so.",
                &[],
                None,
            ),
        },
        Err(err) => {
            let status = tonic::Status::from(err);
            let (code, title) = match status.code() {
                Code::NotFound => (StatusCode::GONE, "Nothing to decide"),
                Code::FailedPrecondition => (StatusCode::CONFLICT, "Not decided"),
                Code::PermissionDenied => (StatusCode::FORBIDDEN, "Refused"),
                Code::InvalidArgument => (StatusCode::BAD_REQUEST, "Not decided"),
                _ => (StatusCode::SERVICE_UNAVAILABLE, "Not decided"),
            };
            page(code, title, status.message(), &[], None)
        }
    }
}

fn refused(err: &LinkError) -> Response {
    match err {
        LinkError::Forged => page(
            StatusCode::FORBIDDEN,
            "Refused",
            &err.to_string(),
            &[],
            None,
        ),
        LinkError::Expired => page(
            StatusCode::GONE,
            "Link expired",
            &err.to_string(),
            &[],
            None,
        ),
    }
}

/// An HTML page saying `text` under `title`, then each of `details` (a label and its value,
/// shown whole, as preformatted text), with a button that posts to this same URL when
/// `button` names one.
fn page(
    status: StatusCode,
    title: &str,
    text: &str,
    details: &[(&str, String)],
    button: Option<&str>,
) -> Response {
    let form = button.map_or_else(String::new, |label| {
        format!(
            "<form method=\"post\"><button type=\"submit\">{}</button></form>",
            escape(label)
        )
    });
    let details = if details.is_empty() {
        String::new()
    } else {
        let rows: String = details
            .iter()
            .map(|(label, value)| {
                format!(
                    "<dt>{}</dt><dd><pre>{}</pre></dd>",
                    escape(label),
                    escape(value)
                )
            })
            .collect();
        format!("<dl>{rows}</dl>")
    };
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{title} · airlock</title></head>\
         <body><main><h1>{title}</h1><p>{text}</p>{details}{form}</main></body></html>",
        title = escape(title),
        text = escape(text),
    );
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    // The URL is the credential: it goes as a referrer only to this same origin (the form's
    // own POST), never to another site — and a form on a `no-referrer` page would send
    // `Origin: null`, which the POST could not be told apart by.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// Text as HTML: every character markup could start with, escaped.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_in_a_call_is_shown_as_text() {
        assert_eq!(
            escape(r#"<script>alert('x')</script>&"#),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;"
        );
    }
}
