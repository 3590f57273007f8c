//! OAuth 2.1 for remote hosted servers: airlock as a confidential client of the server's
//! authorization server, with the client credentials grant (RFC 6749 §4.4, OAuth 2.1 §4.2).
//!
//! A manifest's `[mcp.oauth]` names the token endpoint (`token_url`, or the authorization
//! server's `issuer`, whose RFC 8414 metadata names it, or neither: the server's own RFC 9728
//! protected-resource metadata names the issuer), the client (`client_id`, and the
//! secret of `[[secrets]]` that holds its password), the scopes, and the `resource` the token
//! is for (RFC 8707; the server's URL by default). [`TokenSource`] fetches a token when the
//! first request needs one, keeps it, and fetches the next one [`refresh_margin`] before the
//! current one expires; a server that answers 401 anyway gets one fresh token and one retry
//! ([`Authorized`]), never a loop.
//!
//! Every request of the grant — the metadata and the token — goes through the instance's
//! egress proxy, the same gate as the server's own traffic: the token endpoint's host must be
//! in the profile's allow-list like any other (checked at load, and again before each fetch so
//! that a refusal names the host). A client secret is never sent in clear text to a host
//! other than a loopback address.
//!
//! The access token is the daemon's: it goes in the `Authorization` header of the server's
//! requests and nowhere else. It never reaches a log, an event or a sandbox: errors name the
//! endpoint and the authorization server's `error` code, never a response body, and whatever
//! the server sends back (results, errors, notifications) has every token this source issued
//! replaced with `[redacted:oauth-token]` before rmcp parses it, so a server that echoes the
//! header cannot hand it to a model.
//!
//! Why not rmcp's `auth` feature: its `AuthorizationManager` does the grant with the
//! `oauth2` crate, but picks `client_secret_post` unless the metadata advertises basic alone
//! (airlock lets the operator choose), needs RFC 8414 metadata even with a known token
//! endpoint, reads token responses without a size bound, and adds a crate tree to every
//! build. The grant is one form POST and one JSON document: written here over the reqwest
//! client the transport already uses, with the bounds below.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::egress::{Rules, Verdict};

mod authorized;

pub use authorized::Authorized;

/// A token response is a few hundred bytes; a JWT access token with many claims a few KiB.
/// 64 KiB holds any real one and bounds what a broken or hostile endpoint can make the
/// daemon buffer.
pub const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;

/// RFC 8414 metadata is a page of JSON; the same bound as a token response.
pub const MAX_METADATA_BYTES: usize = 64 * 1024;

/// A token request (or a metadata request) that takes longer than this has failed: the call
/// waiting for it has a deadline of its own, and an endpoint this slow is not answering.
const TOKEN_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A token is replaced this long before it expires, at most: a request sent with it still
/// arrives while it is valid, whatever the clocks and the network do.
pub const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// ...and at most this fraction of its lifetime (1/10): a short-lived token is not
/// refreshed on every request.
const REFRESH_MARGIN_DIVISOR: u32 = 10;

/// The lifetime of a token whose response states none (`expires_in` is optional): fetched
/// again after this long rather than kept until a server rejects it.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// No token is kept longer than this, whatever `expires_in` claims: a revoked token stops
/// being used within a day even on a server that never answers 401.
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// The tokens redacted from what the server sends: the current one and those before it
/// (a slow response may still carry an older one). Tokens are replaced every few minutes at
/// most; a handful covers every response in flight.
const REDACTED_TOKENS: usize = 8;

/// What an `error_description` from the authorization server may add to a message: enough
/// for "client authentication failed", not a page of someone else's text.
const MAX_DESCRIPTION_CHARS: usize = 200;

/// What replaces a token in anything the server sends.
const REDACTED: &str = "[redacted:oauth-token]";

/// How airlock authenticates to the token endpoint (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    /// HTTP Basic (`client_secret_basic`): what every authorization server must support.
    #[default]
    Basic,
    /// In the form body (`client_secret_post`).
    Post,
}

/// Where the token endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenEndpoint {
    /// Named by the manifest.
    Url(String),
    /// Named by the RFC 8414 metadata of this issuer, read at the first fetch.
    Issuer(String),
    /// Named by the metadata of the issuer that this server's RFC 9728 protected-resource
    /// metadata names, both read at the first fetch. The server picks where the client's
    /// secret goes: only to a host of the profile's allow-list, over TLS (or loopback), and
    /// only when the metadata is this server's own (its `resource` is the server's URL).
    Discovered(String),
}

impl TokenEndpoint {
    /// The URL the daemon contacts first: the endpoint, the issuer's, or the server's.
    pub fn url(&self) -> &str {
        match self {
            TokenEndpoint::Url(url)
            | TokenEndpoint::Issuer(url)
            | TokenEndpoint::Discovered(url) => url,
        }
    }
}

/// A checked `[mcp.oauth]`: names only, no secret values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    pub endpoint: TokenEndpoint,
    pub client_id: String,
    /// The `env` name of the secret (of `[[secrets]]`) that holds the client's password.
    pub client_secret_secret: String,
    pub scopes: Vec<String>,
    /// The RFC 8707 `resource`: the server's URL unless the manifest names another.
    pub resource: String,
    pub client_auth: ClientAuth,
}

/// Whether a client secret may be sent to `url`: over TLS, or to a loopback address (a
/// server on the daemon's own host, as in tests).
pub fn may_carry_secrets(url: &reqwest::Url) -> bool {
    url.scheme() == "https"
        || url
            .host_str()
            .map(|host| host.trim_start_matches('[').trim_end_matches(']'))
            .and_then(|host| host.parse::<std::net::IpAddr>().ok())
            .is_some_and(|ip| ip.is_loopback())
}

/// Why `url` cannot be reached under `rules`, if it cannot: the gate's decision, made before
/// anything is sent so that the refusal names the host.
pub fn refusal(rules: &Rules, url: &reqwest::Url) -> Option<String> {
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Some("the URL names no host".into());
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match rules.verdict(host, port) {
        Verdict::Listed { .. } => None,
        Verdict::Denied { pattern } => Some(format!(
            "{host}:{port} is denied by `{pattern}` in profile `{}`",
            rules.profile()
        )),
        Verdict::Unlisted => Some(format!(
            "{host}:{port} is not in the network allow-list of profile `{}`",
            rules.profile()
        )),
    }
}

/// What a remote server's requests carry in their `Authorization` header.
#[derive(Debug, Clone)]
pub enum Credential {
    /// A secret's value, the same on every request.
    Bearer(String),
    /// Tokens of the client credentials grant, fetched and refreshed as needed.
    OAuth(Arc<TokenSource>),
}

/// A token in use, and when to stop using it.
struct Cached {
    value: String,
    refresh_at: Instant,
}

#[derive(Default)]
struct State {
    /// The token endpoint, once known (read from the issuer's metadata at the first fetch).
    endpoint: Option<reqwest::Url>,
    token: Option<Cached>,
}

/// The tokens of one server: shared by all its instances (the grant is the daemon's, not a
/// tenant's), each fetch sent through the instance that needs it.
pub struct TokenSource {
    /// The server's name, for messages.
    server: String,
    config: OAuthConfig,
    client_secret: String,
    rules: Rules,
    /// Held while a token is fetched: requests that need one meanwhile wait for that one.
    state: tokio::sync::Mutex<State>,
    issued: Mutex<VecDeque<String>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("server", &self.server)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The standard fields of a token response (RFC 6749 §5.1); others are ignored.
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    token_type: String,
    /// A number by the RFC; some servers send it as a string.
    expires_in: Option<serde_json::Value>,
}

/// An error response (RFC 6749 §5.2).
#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
    error_description: Option<String>,
}

/// The fields of RFC 8414 metadata airlock uses.
#[derive(Deserialize)]
struct Metadata {
    issuer: String,
    token_endpoint: String,
}

/// The fields of RFC 9728 protected-resource metadata airlock uses.
#[derive(Deserialize)]
struct ResourceMetadata {
    resource: String,
    #[serde(default)]
    authorization_servers: Vec<String>,
}

impl TokenSource {
    pub fn new(
        server: &str,
        config: OAuthConfig,
        client_secret: String,
        rules: Rules,
    ) -> TokenSource {
        TokenSource {
            server: server.to_owned(),
            config,
            client_secret,
            rules,
            state: tokio::sync::Mutex::default(),
            issued: Mutex::default(),
        }
    }

    /// A token to send now: the kept one, or a new one when it is due for refresh.
    pub async fn token(&self, http: &reqwest::Client) -> Result<String, String> {
        let mut state = self.state.lock().await;
        if let Some(token) = &state.token
            && Instant::now() < token.refresh_at
        {
            return Ok(token.value.clone());
        }
        self.fetch(http, &mut state).await
    }

    /// A token to retry with after the server rejected `rejected`: a new one, unless another
    /// request already replaced it.
    pub async fn renew(&self, http: &reqwest::Client, rejected: &str) -> Result<String, String> {
        let mut state = self.state.lock().await;
        if let Some(token) = &state.token
            && token.value != rejected
            && Instant::now() < token.refresh_at
        {
            return Ok(token.value.clone());
        }
        state.token = None;
        self.fetch(http, &mut state).await
    }

    /// `text` with every token this source issued replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Ok(issued) = self.issued.lock() else {
            return Cow::Borrowed(text);
        };
        let mut text = Cow::Borrowed(text);
        for token in issued.iter() {
            if text.contains(token.as_str()) {
                text = Cow::Owned(text.replace(token.as_str(), REDACTED));
            }
        }
        text
    }

    fn fail(&self, why: impl std::fmt::Display) -> String {
        format!("OAuth for MCP server `{}`: {why}", self.server)
    }

    async fn fetch(&self, http: &reqwest::Client, state: &mut State) -> Result<String, String> {
        let endpoint = match &state.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => {
                let endpoint = self.endpoint(http).await?;
                state.endpoint = Some(endpoint.clone());
                endpoint
            }
        };
        let sent = Instant::now();
        let (value, lifetime) =
            tokio::time::timeout(TOKEN_REQUEST_TIMEOUT, self.request_token(http, &endpoint))
                .await
                .map_err(|_| {
                    self.fail(format!(
                        "the token endpoint {endpoint} did not answer within {} s",
                        TOKEN_REQUEST_TIMEOUT.as_secs()
                    ))
                })??;
        if let Ok(mut issued) = self.issued.lock() {
            if issued.len() == REDACTED_TOKENS {
                issued.pop_front();
            }
            issued.push_back(value.clone());
        }
        // Counted from when the request left: the token's clock started no earlier.
        state.token = Some(Cached {
            value: value.clone(),
            refresh_at: sent + lifetime - refresh_margin(lifetime),
        });
        tracing::debug!(server = %self.server, lifetime_s = lifetime.as_secs(), "fetched an OAuth access token");
        Ok(value)
    }

    /// The token endpoint: the manifest's, or the one the issuer's metadata names (the
    /// issuer the manifest names, or the one the server's own metadata names).
    async fn endpoint(&self, http: &reqwest::Client) -> Result<reqwest::Url, String> {
        let issuer = match &self.config.endpoint {
            TokenEndpoint::Url(url) => {
                return reqwest::Url::parse(url)
                    .map_err(|err| self.fail(format!("`token_url` is not a URL: {err}")));
            }
            TokenEndpoint::Issuer(issuer) => issuer.clone(),
            TokenEndpoint::Discovered(server) => self.discover(http, server).await?,
        };
        let metadata_url = metadata_url(&issuer)
            .ok_or_else(|| self.fail(format!("`issuer` {issuer} is not an http(s) URL")))?;
        let metadata: Metadata = self
            .get_json(
                http,
                &metadata_url,
                "the authorization server's metadata",
                "not RFC 8414 metadata (a JSON object with `issuer` and `token_endpoint`)",
            )
            .await?;
        // RFC 8414 §3.3: metadata for another issuer is not this issuer's.
        if metadata.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
            return Err(self.fail(format!(
                "the metadata at {metadata_url} is for issuer `{}`, not `{issuer}`",
                clean(&metadata.issuer)
            )));
        }
        let endpoint = reqwest::Url::parse(&metadata.token_endpoint).map_err(|_| {
            self.fail(format!(
                "the metadata at {metadata_url} names a `token_endpoint` that is not a URL"
            ))
        })?;
        if !matches!(endpoint.scheme(), "http" | "https") || !may_carry_secrets(&endpoint) {
            return Err(self.fail(format!(
                "the metadata at {metadata_url} names token endpoint {endpoint}: not https (a client secret is never sent in clear text)"
            )));
        }
        Ok(endpoint)
    }

    /// The authorization server `server`'s protected-resource metadata (RFC 9728) names:
    /// the first it lists, when the metadata is this server's (§3.3: its `resource` is the
    /// server's URL) and the issuer may be sent a secret.
    async fn discover(&self, http: &reqwest::Client, server: &str) -> Result<String, String> {
        let metadata_url = resource_metadata_url(server)
            .ok_or_else(|| self.fail(format!("the server's URL {server} is not an http(s) URL")))?;
        let metadata: ResourceMetadata = self
            .get_json(
                http,
                &metadata_url,
                "the server's protected-resource metadata",
                "not RFC 9728 metadata (a JSON object with `resource` and `authorization_servers`)",
            )
            .await?;
        if metadata.resource.trim_end_matches('/') != server.trim_end_matches('/') {
            return Err(self.fail(format!(
                "the protected-resource metadata at {metadata_url} is for `{}`, not this server ({server})",
                clean(&metadata.resource)
            )));
        }
        let issuer = metadata.authorization_servers.first().ok_or_else(|| {
            self.fail(format!(
                "the protected-resource metadata at {metadata_url} names no authorization server"
            ))
        })?;
        let parsed = reqwest::Url::parse(issuer)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some());
        match parsed {
            Some(url) if may_carry_secrets(&url) => Ok(issuer.clone()),
            _ => Err(self.fail(format!(
                "the protected-resource metadata at {metadata_url} names authorization server `{}`: not an https URL (a client secret is never sent in clear text)",
                clean(issuer)
            ))),
        }
    }

    /// The JSON document at `url` (`what` it is, for messages; `shape` what it must be),
    /// through the gate, bounded in size and time.
    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        http: &reqwest::Client,
        url: &reqwest::Url,
        what: &str,
        shape: &str,
    ) -> Result<T, String> {
        if let Some(why) = refusal(&self.rules, url) {
            return Err(self.fail(format!("{what} at {url} cannot be reached: {why}")));
        }
        let read = async {
            let response = http
                .get(url.clone())
                .header(http::header::ACCEPT, "application/json")
                .send()
                .await
                .map_err(|err| without_url(&err))?;
            let status = response.status();
            let body = read_capped(response, MAX_METADATA_BYTES).await?;
            if !status.is_success() {
                return Err(format!("HTTP {status}"));
            }
            serde_json::from_slice::<T>(&body).map_err(|_| shape.to_owned())
        };
        tokio::time::timeout(TOKEN_REQUEST_TIMEOUT, read)
            .await
            .map_err(|_| format!("no answer within {} s", TOKEN_REQUEST_TIMEOUT.as_secs()))
            .and_then(|read| read)
            .map_err(|why| self.fail(format!("{what} at {url} is unusable: {why}")))
    }

    /// One token request: the access token and how long to use it.
    async fn request_token(
        &self,
        http: &reqwest::Client,
        endpoint: &reqwest::Url,
    ) -> Result<(String, Duration), String> {
        if let Some(why) = refusal(&self.rules, endpoint) {
            return Err(self.fail(format!(
                "the token endpoint {endpoint} cannot be reached: {why}"
            )));
        }
        let mut request = http
            .post(endpoint.clone())
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json");
        // Built whole before anything is awaited: the serializer is not `Send`.
        let body = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials");
            if !self.config.scopes.is_empty() {
                form.append_pair("scope", &self.config.scopes.join(" "));
            }
            form.append_pair("resource", &self.config.resource);
            match self.config.client_auth {
                // RFC 6749 §2.3.1: both parts form-encoded, then Basic.
                ClientAuth::Basic => {
                    let encode = |text: &str| {
                        form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>()
                    };
                    request = request.basic_auth(
                        encode(&self.config.client_id),
                        Some(encode(&self.client_secret)),
                    );
                }
                ClientAuth::Post => {
                    form.append_pair("client_id", &self.config.client_id);
                    form.append_pair("client_secret", &self.client_secret);
                }
            }
            form.finish()
        };
        let response = request.body(body).send().await.map_err(|err| {
            self.fail(format!(
                "the token endpoint {endpoint} could not be reached: {}",
                without_url(&err)
            ))
        })?;
        let status = response.status();
        let body = read_capped(response, MAX_TOKEN_RESPONSE_BYTES)
            .await
            .map_err(|why| self.fail(format!("the token endpoint {endpoint}: {why}")))?;
        if !status.is_success() {
            let detail = match serde_json::from_slice::<ErrorResponse>(&body) {
                Ok(error) => {
                    let mut detail = format!(": `{}`", clean(&error.error));
                    if let Some(description) = &error.error_description {
                        detail.push_str(&format!(" ({})", clean(description)));
                    }
                    if error.error == "invalid_client" {
                        detail.push_str(&format!(
                            " — check `client_id` and the secret `{}`",
                            self.config.client_secret_secret
                        ));
                    }
                    detail
                }
                Err(_) => String::new(),
            };
            return Err(self.fail(format!(
                "the token endpoint {endpoint} refused the client credentials grant: HTTP {status}{detail}"
            )));
        }
        let token: TokenResponse = serde_json::from_slice(&body).map_err(|_| {
            self.fail(format!(
                "the token endpoint {endpoint} answered with something other than a token response (a JSON object with `access_token` and `token_type`)"
            ))
        })?;
        if !token.token_type.eq_ignore_ascii_case("bearer") {
            return Err(self.fail(format!(
                "the token endpoint {endpoint} issued a `{}` token; airlock sends bearer tokens only",
                clean(&token.token_type)
            )));
        }
        // RFC 6750 §2.1's b64token, loosely: what fits in a header.
        if !token
            .access_token
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b))
        {
            return Err(self.fail(format!(
                "the token endpoint {endpoint} issued an access token that cannot be sent in a header"
            )));
        }
        // A token is redacted by exact match: one of a few bytes would take every
        // occurrence of them with it (and is no secret anyway).
        if token.access_token.len() < crate::secrets::MIN_SECRET_BYTES {
            return Err(self.fail(format!(
                "the token endpoint {endpoint} issued an access token shorter than {} bytes",
                crate::secrets::MIN_SECRET_BYTES
            )));
        }
        let lifetime = match token.expires_in {
            None => DEFAULT_LIFETIME,
            Some(serde_json::Value::Number(seconds)) => seconds
                .as_u64()
                .map(Duration::from_secs)
                .ok_or_else(|| self.fail(format!("the token endpoint {endpoint} gave an `expires_in` that is not a whole number of seconds")))?,
            Some(serde_json::Value::String(seconds)) => seconds
                .trim()
                .parse()
                .map(Duration::from_secs)
                .map_err(|_| self.fail(format!("the token endpoint {endpoint} gave an `expires_in` that is not a whole number of seconds")))?,
            Some(_) => {
                return Err(self.fail(format!(
                    "the token endpoint {endpoint} gave an `expires_in` that is not a number"
                )));
            }
        };
        Ok((token.access_token, lifetime.min(MAX_LIFETIME)))
    }
}

/// How long before its expiry a token of `lifetime` is replaced: a tenth of its lifetime, at
/// most [`MAX_REFRESH_MARGIN`].
pub fn refresh_margin(lifetime: Duration) -> Duration {
    (lifetime / REFRESH_MARGIN_DIVISOR).min(MAX_REFRESH_MARGIN)
}

/// Where an issuer's metadata is (RFC 8414 §3.1).
fn metadata_url(issuer: &str) -> Option<reqwest::Url> {
    well_known(issuer, "oauth-authorization-server")
}

/// Where a protected resource's metadata is (RFC 9728 §3.1).
fn resource_metadata_url(resource: &str) -> Option<reqwest::Url> {
    well_known(resource, "oauth-protected-resource")
}

/// The well-known URI `name` of `url` as both RFCs place it: between the host and the
/// URL's path, without its query and fragment.
fn well_known(url: &str, name: &str) -> Option<reqwest::Url> {
    let mut url = reqwest::Url::parse(url).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return None;
    }
    let path = url.path().trim_end_matches('/').to_owned();
    url.set_path(&format!("/.well-known/{name}{path}"));
    url.set_query(None);
    url.set_fragment(None);
    Some(url)
}

/// A response's body, refused past `max` bytes (whatever its length header says).
async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let too_large = || format!("the response is larger than {max} bytes");
    if response
        .content_length()
        .is_some_and(|length| length > max as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| format!("the response broke off: {}", without_url(&err)))?
    {
        if body.len() + chunk.len() > max {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A reqwest error's message without the URL it names (the caller names it once).
fn without_url(err: &reqwest::Error) -> String {
    let mut shown = err.to_string();
    if let Some(url) = err.url() {
        shown = shown.replace(&format!(" ({url})"), "");
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        shown.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    shown
}

/// Text from the authorization server, fit for a message: printable, and short.
fn clean(text: &str) -> String {
    let mut cleaned: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    if text.chars().count() > MAX_DESCRIPTION_CHARS {
        cleaned.push('…');
    }
    cleaned
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod tests;
