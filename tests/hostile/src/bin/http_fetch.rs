//! `http_fetch` (built as a wasm32-wasip2 component: wasi-http exists only for components):
//! fetches a URL through wasi-http and reports every hop.
//! Args: `{"url": string, "follow_redirects": bool?}` (`follow_redirects` defaults to false).
//!
//! Attacks the network allow-list from inside the guest: it asks for whatever URL the test
//! names, and, when told to, follows redirects itself (wasi-http never does), so a server
//! that redirects to an unlisted host tests that each hop is checked on its own. Returns
//! `{"ok": {"hops": [hop, …], "body": string?}}`: one hop per request made, each
//! `{"url", "status"?, "location"?, "error"?}` where `error` is the wasi-http error code the
//! host gave, as its debug name (e.g. `ErrorCode::HttpRequestDenied`); `body` is the last response's body (at most
//! [`BODY_LIMIT`] bytes, lossily UTF-8), absent when the last hop failed. Redirects are
//! followed only to absolute `Location`s.

use std::io::Read;
use std::process::ExitCode;

use airlock_hostile::{ToolError, run};
use serde::{Deserialize, Serialize};
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, IncomingResponse, Method, OutgoingRequest, Scheme};

/// Redirects followed before giving up, as browsers do (they allow about 20; tests need 2).
const MAX_HOPS: usize = 5;

/// How much of a body the tool keeps: the tests' servers answer a few bytes.
const BODY_LIMIT: u64 = 64 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    url: String,
    #[serde(default)]
    follow_redirects: bool,
}

#[derive(Serialize, Default)]
struct Hop {
    url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct Report {
    hops: Vec<Hop>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<String>,
}

/// The parts of an absolute `http(s)://authority/path?query` URL.
struct Url<'a> {
    scheme: Scheme,
    authority: &'a str,
    path_with_query: &'a str,
}

fn parse(url: &str) -> Result<Url<'_>, ToolError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| ToolError::new(format!("`{url}` is not an absolute URL")))?;
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_owned()),
    };
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path_with_query) = rest.split_at(split);
    Ok(Url {
        scheme,
        authority,
        path_with_query: if path_with_query.is_empty() {
            "/"
        } else {
            path_with_query
        },
    })
}

/// Sends one GET; `Err` is the wasi-http error, as its debug name.
fn get(url: &Url<'_>) -> Result<IncomingResponse, String> {
    let request = OutgoingRequest::new(Fields::new());
    let invalid = |what: &str| format!("the host refused the {what}");
    request
        .set_method(&Method::Get)
        .map_err(|()| invalid("method"))?;
    request
        .set_scheme(Some(&url.scheme))
        .map_err(|()| invalid("scheme"))?;
    request
        .set_authority(Some(url.authority))
        .map_err(|()| invalid("authority"))?;
    request
        .set_path_with_query(Some(url.path_with_query))
        .map_err(|()| invalid("path"))?;
    let pending = outgoing_handler::handle(request, None).map_err(|code| format!("{code:?}"))?;
    pending.subscribe().block();
    match pending.get() {
        Some(Ok(Ok(response))) => Ok(response),
        Some(Ok(Err(code))) => Err(format!("{code:?}")),
        Some(Err(())) => Err("the response was already taken".into()),
        None => Err("the response is not ready after waiting for it".into()),
    }
}

fn body(response: &IncomingResponse) -> Result<String, ToolError> {
    let body = response
        .consume()
        .map_err(|()| ToolError::new("the body was already taken"))?;
    let stream = body
        .stream()
        .map_err(|()| ToolError::new("the body stream was already taken"))?;
    let mut bytes = Vec::new();
    stream
        .take(BODY_LIMIT)
        .read_to_end(&mut bytes)
        .map_err(|err| ToolError::new(format!("reading the body: {err}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn location(response: &IncomingResponse) -> Option<String> {
    let values = response.headers().get("location");
    values
        .first()
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

fn fetch(args: Args) -> Result<Report, ToolError> {
    let mut hops = Vec::new();
    let mut url = args.url;
    loop {
        let parsed = parse(&url)?;
        let response = match get(&parsed) {
            Ok(response) => response,
            Err(error) => {
                hops.push(Hop {
                    url,
                    error: Some(error),
                    ..Hop::default()
                });
                return Ok(Report { hops, body: None });
            }
        };
        let status = response.status();
        let next = location(&response).filter(|_| (300..400).contains(&status));
        hops.push(Hop {
            url: url.clone(),
            status: Some(status),
            location: next.clone(),
            error: None,
        });
        match next {
            Some(next) if args.follow_redirects && hops.len() < MAX_HOPS => url = next,
            _ => {
                let body = body(&response)?;
                return Ok(Report {
                    hops,
                    body: Some(body),
                });
            }
        }
    }
}

fn main() -> ExitCode {
    run(fetch)
}
