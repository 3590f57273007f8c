//! The issuer's signing keys (its JWKS), fetched when first needed and kept for a while.
//!
//! Keys rotate: an issuer publishes a new key, signs with it, and drops the old one. A token
//! naming a key (`kid`) the cache lacks makes one refetch — at most one per
//! [`MIN_REFETCH`], so a stream of made-up key ids cannot turn the daemon against the
//! issuer — and the cache is refetched once it is [`MAX_AGE`] old, so a key the issuer
//! dropped stops being accepted within that time even if no new one appears. When the keys
//! cannot be fetched, tokens are neither taken nor refused on old keys: the endpoint answers
//! 503 to OAuth clients until the issuer is back (the daemon's own tokens keep working).
//!
//! The key set is a stranger's document too (an issuer's URL can be misconfigured or taken
//! over): its size and its number of keys are bounded, and keys this module cannot read are
//! passed over rather than failing the set.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::McpOAuthSettings;

/// How long fetched keys are used before they are fetched again: an issuer that drops a key
/// (compromised, or rotated out) is heeded within this time.
pub const MAX_AGE: Duration = Duration::from_secs(10 * 60);

/// The shortest time between two fetches that an unknown key id causes: one fetch per
/// interval, whatever number of made-up key ids arrives; short enough that a token under a
/// key the issuer published a moment ago is taken within seconds.
pub const MIN_REFETCH: Duration = Duration::from_secs(5);

/// The largest key set or metadata document read: real ones are a few KiB.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// The most keys taken from one set: issuers publish two or three (current, next, previous).
pub const MAX_KEYS: usize = 64;

/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the keys come from.
pub enum KeySource {
    /// The issuer's metadata (RFC 8414, then OpenID discovery) names the key set's URL.
    Discover { issuer: String },
    /// The key set's URL, configured.
    Url(String),
    /// Keys held in memory: the tests', which they rotate.
    #[cfg(test)]
    Fixed(std::sync::Arc<std::sync::Mutex<jsonwebtoken::jwk::JwkSet>>),
}

impl KeySource {
    pub fn from_settings(settings: &McpOAuthSettings) -> Result<KeySource, String> {
        Ok(match &settings.jwks_uri {
            Some(uri) => KeySource::Url(uri.clone()),
            None => KeySource::Discover {
                issuer: settings.issuer.clone(),
            },
        })
    }
}

/// Why no key was found for a token.
#[derive(Debug)]
pub enum Lookup {
    /// The issuer has no such key (the token's fault).
    Unknown(String),
    /// The keys cannot be fetched (nobody's fault the client can fix).
    Unavailable(String),
}

struct Cached {
    keys: Vec<Jwk>,
    /// When `keys` were fetched; None before the first fetch.
    fetched: Option<Instant>,
    /// The key set's URL, once discovered.
    jwks_uri: Option<String>,
}

/// The issuer's keys, fetched and refreshed as tokens need them.
pub struct KeySet {
    source: KeySource,
    /// [`MIN_REFETCH`], but for tests.
    min_refetch: Duration,
    cached: Mutex<Cached>,
}

impl KeySet {
    pub fn new(source: KeySource) -> KeySet {
        KeySet::refetching_after(source, MIN_REFETCH)
    }

    /// A key set refetched for an unknown key id at most once per `min_refetch`.
    pub fn refetching_after(source: KeySource, min_refetch: Duration) -> KeySet {
        KeySet {
            source,
            min_refetch,
            cached: Mutex::new(Cached {
                keys: Vec::new(),
                fetched: None,
                jwks_uri: None,
            }),
        }
    }

    /// The key a token names (`kid`); without one, the issuer's only key.
    pub async fn key(&self, kid: Option<&str>) -> Result<Jwk, Lookup> {
        // One fetch at a time: requests that arrive during it wait for its keys.
        let mut cached = self.cached.lock().await;
        let fresh = cached
            .fetched
            .is_some_and(|fetched| fetched.elapsed() < MAX_AGE);
        if fresh && let Some(key) = find(&cached.keys, kid)? {
            return Ok(key);
        }
        let may_refetch = cached
            .fetched
            .is_none_or(|fetched| fetched.elapsed() >= self.min_refetch);
        if fresh && !may_refetch {
            return Err(unknown(kid));
        }
        self.refresh(&mut cached).await?;
        find(&cached.keys, kid)?.ok_or_else(|| unknown(kid))
    }

    async fn refresh(&self, cached: &mut Cached) -> Result<(), Lookup> {
        let keys = match &self.source {
            #[cfg(test)]
            KeySource::Fixed(keys) => keys
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .keys
                .clone(),
            KeySource::Url(uri) => fetch_keys(uri).await?,
            KeySource::Discover { issuer } => {
                let uri = match &cached.jwks_uri {
                    Some(uri) => uri.clone(),
                    None => discover(issuer).await?,
                };
                let keys = fetch_keys(&uri).await?;
                cached.jwks_uri = Some(uri);
                keys
            }
        };
        cached.keys = keys;
        cached.fetched = Some(Instant::now());
        Ok(())
    }
}

fn unknown(kid: Option<&str>) -> Lookup {
    Lookup::Unknown(match kid {
        Some(kid) => format!(
            "the issuer has no key `{}` (a key it dropped, or another issuer's)",
            kid.chars().take(64).collect::<String>()
        ),
        None => "the issuer has no key for this token".into(),
    })
}

/// The key `kid` names; without a `kid`, the set's only key (a set of several cannot say).
fn find(keys: &[Jwk], kid: Option<&str>) -> Result<Option<Jwk>, Lookup> {
    match kid {
        Some(kid) => Ok(keys
            .iter()
            .find(|key| key.common.key_id.as_deref() == Some(kid))
            .cloned()),
        None => match keys {
            [key] => Ok(Some(key.clone())),
            [] => Ok(None),
            [..] => Err(Lookup::Unknown(
                "the token names no key (`kid`) and the issuer has several".into(),
            )),
        },
    }
}

/// The key set's URL from the issuer's metadata: the OAuth one (RFC 8414, the well-known
/// path inserted before the issuer's own path), else OpenID discovery's. The metadata must
/// name the configured issuer (RFC 8414 §3.3): another's would hand out another's keys.
async fn discover(issuer: &str) -> Result<String, Lookup> {
    let url = reqwest::Url::parse(issuer)
        .map_err(|err| Lookup::Unavailable(format!("issuer {issuer}: {err}")))?;
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ),
    ];
    let mut failures = Vec::new();
    for candidate in candidates {
        let metadata = match fetch_json(&candidate).await {
            Ok(metadata) => metadata,
            Err(err) => {
                failures.push(format!("{candidate}: {err}"));
                continue;
            }
        };
        if metadata.get("issuer").and_then(Value::as_str) != Some(issuer) {
            return Err(Lookup::Unavailable(format!(
                "{candidate} names another issuer than {issuer}"
            )));
        }
        let Some(jwks_uri) = metadata.get("jwks_uri").and_then(Value::as_str) else {
            return Err(Lookup::Unavailable(format!(
                "{candidate} names no jwks_uri"
            )));
        };
        super::urls::check_url("the issuer's jwks_uri", jwks_uri).map_err(Lookup::Unavailable)?;
        return Ok(jwks_uri.to_owned());
    }
    Err(Lookup::Unavailable(format!(
        "cannot read the issuer's metadata: {}",
        failures.join("; ")
    )))
}

/// The readable keys of the set at `uri`, at most [`MAX_KEYS`].
async fn fetch_keys(uri: &str) -> Result<Vec<Jwk>, Lookup> {
    let set = fetch_json(uri).await.map_err(|err| {
        Lookup::Unavailable(format!("cannot fetch the issuer's keys from {uri}: {err}"))
    })?;
    let Some(listed) = set.get("keys").and_then(Value::as_array) else {
        return Err(Lookup::Unavailable(format!(
            "{uri} is not a key set (no `keys` array)"
        )));
    };
    Ok(listed
        .iter()
        .take(MAX_KEYS)
        .filter_map(|key| serde_json::from_value::<Jwk>(key.clone()).ok())
        .collect())
}

/// A JSON document, read to at most [`MAX_DOCUMENT_BYTES`].
async fn fetch_json(url: &str) -> Result<Value, String> {
    crate::http_client::install_crypto_provider();
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        // A redirect could lead a fetch off the https URL the operator configured.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("airlockd/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| err.to_string())?;
    let mut response = client
        .get(url)
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|err| err.to_string())?;
    if !response.status().is_success() {
        return Err(format!("answered {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|err| err.to_string())? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("longer than {MAX_DOCUMENT_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|err| format!("not JSON: {err}"))
}
