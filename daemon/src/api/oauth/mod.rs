//! The MCP endpoint as an OAuth 2.1 resource server (MCP's authorization spec): it takes JWT
//! access tokens an operator's authorization server issued, beside the daemon's own tokens,
//! and tells a client without one where to get one.
//!
//! - **Discovery.** A request without a usable token is answered 401 with
//!   `WWW-Authenticate: Bearer resource_metadata="…"`, naming the protected-resource metadata
//!   (RFC 9728) this module serves at `/.well-known/oauth-protected-resource[/mcp]`: the
//!   resource, its authorization server, the scopes to ask for. A client (the MCP SDKs, the
//!   Inspector) goes from there to the issuer's metadata and token endpoint.
//! - **Checks.** A token is taken only if its signature verifies with a key of the issuer's
//!   key set (`jwks.rs`) under an algorithm of the configured allow-list — asymmetric only,
//!   `none` never — and its `iss` is the issuer, its `aud` this resource, its `exp` ahead
//!   (and `nbf` behind), within [`LEEWAY`]. Each failure is a 401 `invalid_token`, its reason
//!   said in words and logged without the token.
//! - **Tenants.** The token's scopes (`scope`, or `scp`) and claims are matched against the
//!   configured rules; exactly one tenant must match. None, or two, is a 403
//!   `insufficient_scope`: a token is never widened to a tenant it does not name.
//!
//! Tokens of the daemon's own (`Tenants::identify`) are compared first, so a deployment that
//! turns OAuth on keeps its service accounts.

pub mod jwks;
#[cfg(test)]
mod oauth_tests;
mod urls;

use std::collections::BTreeSet;
use std::sync::Arc;

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

use super::tenants::{Tenant, Tenants};
use crate::config::{McpOAuthSettings, OAuthTenantRule};
pub use jwks::{KeySet, KeySource};
use urls::check_url;

/// Clock skew allowed on `exp` and `nbf`: the daemon's and the issuer's clocks are both on
/// NTP in any deployment that issues tokens; 30 s covers drift without keeping a token
/// alive noticeably past its end.
pub const LEEWAY_SECONDS: u64 = 30;

/// The longest token looked at. Access tokens are a few hundred bytes to a few KiB; past
/// this one is refused before it is decoded (base64 and JSON of an unbounded header cost
/// memory and time a stranger chooses).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Why a request was not served as a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No token, or not a bearer one.
    Missing,
    /// A token that is not one of the daemon's and does not pass the checks: why.
    Invalid(String),
    /// A valid token that maps to no tenant, or to more than one: why.
    Insufficient(String),
    /// The issuer's keys cannot be had now: the token can be neither taken nor refused.
    Unavailable(String),
}

/// The OAuth side of the MCP endpoint.
pub struct ResourceServer {
    settings: McpOAuthSettings,
    algorithms: Vec<Algorithm>,
    keys: KeySet,
    /// Each rule's tenant, resolved when the daemon starts.
    rules: Vec<(OAuthTenantRule, Arc<Tenant>)>,
}

impl std::fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceServer")
            .field("issuer", &self.settings.issuer)
            .field("resource", &self.settings.resource)
            .finish_non_exhaustive()
    }
}

impl ResourceServer {
    /// Checks `settings` against the daemon's tenants; the keys are fetched on first use.
    pub fn new(settings: McpOAuthSettings, tenants: &Tenants) -> Result<ResourceServer, String> {
        let source = KeySource::from_settings(&settings)?;
        ResourceServer::with_keys(settings, tenants, KeySet::new(source))
    }

    /// As [`ResourceServer::new`], with its keys from `keys`.
    pub fn with_keys(
        settings: McpOAuthSettings,
        tenants: &Tenants,
        keys: KeySet,
    ) -> Result<ResourceServer, String> {
        check_url("mcp_oauth.issuer", &settings.issuer)?;
        check_url("mcp_oauth.resource", &settings.resource)?;
        if let Some(uri) = &settings.jwks_uri {
            check_url("mcp_oauth.jwks_uri", uri)?;
        }
        let algorithms = settings
            .algorithms
            .iter()
            .map(|name| asymmetric(name))
            .collect::<Result<Vec<_>, _>>()?;
        if algorithms.is_empty() {
            return Err("mcp_oauth.algorithms: name at least one".into());
        }
        if settings.tenants.is_empty() {
            return Err(
                "mcp_oauth.tenants: map at least one scope or claim to a tenant, or no token \
                 would be served"
                    .into(),
            );
        }
        let mut rules = Vec::new();
        for rule in &settings.tenants {
            let tenant = tenants.named(&rule.tenant).ok_or_else(|| {
                format!(
                    "mcp_oauth.tenants: no tenant `{}` (declare it in [[auth.tenants]]; the \
                     daemon knows {})",
                    rule.tenant,
                    tenants.names().join(", ")
                )
            })?;
            match (&rule.scope, &rule.claim, &rule.value) {
                (Some(_), None, None) | (None, Some(_), Some(_)) => {}
                _ => {
                    return Err(format!(
                        "mcp_oauth.tenants: the rule for `{}` needs either `scope`, or `claim` \
                         and `value`",
                        rule.tenant
                    ));
                }
            }
            rules.push((rule.clone(), tenant));
        }
        Ok(ResourceServer {
            settings,
            algorithms,
            keys,
            rules,
        })
    }

    /// The tenant a presented token stands for.
    pub async fn tenant_for(&self, token: &str) -> Result<Arc<Tenant>, Refusal> {
        let claims = self.verify(token).await?;
        self.map(&claims)
    }

    /// The token's claims, once it passed every check.
    async fn verify(&self, token: &str) -> Result<Value, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Invalid(format!(
                "the token is longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|err| {
            Refusal::Invalid(format!("not a signed JWT the endpoint accepts ({err})"))
        })?;
        if !self.algorithms.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "the token is signed with {:?}, which the endpoint does not accept",
                header.alg
            )));
        }
        let jwk = self
            .keys
            .key(header.kid.as_deref())
            .await
            .map_err(|reason| match reason {
                jwks::Lookup::Unknown(why) => Refusal::Invalid(why),
                jwks::Lookup::Unavailable(why) => Refusal::Unavailable(why),
            })?;
        let key = decoding_key(&jwk, header.alg).map_err(Refusal::Invalid)?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|err| Refusal::Invalid(explain(&err)))
    }

    /// The one tenant `claims` map to.
    fn map(&self, claims: &Value) -> Result<Arc<Tenant>, Refusal> {
        let scopes = scopes(claims);
        let mut matched: Vec<&Arc<Tenant>> = Vec::new();
        for (rule, tenant) in &self.rules {
            let hit = match (&rule.scope, &rule.claim, &rule.value) {
                (Some(scope), _, _) => scopes.contains(scope.as_str()),
                (None, Some(claim), Some(value)) => claim_holds(claims, claim, value),
                _ => false,
            };
            if hit && !matched.iter().any(|seen| seen.name == tenant.name) {
                matched.push(tenant);
            }
        }
        match matched.as_slice() {
            [tenant] => Ok(Arc::clone(tenant)),
            [] => Err(Refusal::Insufficient(
                "the token grants no scope or claim this endpoint maps to a tenant".into(),
            )),
            [..] => Err(Refusal::Insufficient(format!(
                "the token maps to several tenants ({}); ask the issuer for one",
                matched
                    .iter()
                    .map(|tenant| tenant.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The protected-resource metadata (RFC 9728).
    pub fn metadata(&self) -> Value {
        let mut metadata = json!({
            "resource": self.settings.resource,
            "authorization_servers": [self.settings.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "airlock",
        });
        if !self.settings.scopes_supported.is_empty()
            && let Some(object) = metadata.as_object_mut()
        {
            object.insert(
                "scopes_supported".into(),
                json!(self.settings.scopes_supported),
            );
        }
        metadata
    }

    /// Where the metadata is, as the challenge names it: the resource's path appended to
    /// `/.well-known/oauth-protected-resource` on the resource's origin (RFC 9728 §3.1).
    pub fn metadata_url(&self) -> String {
        metadata_url(&self.settings.resource)
    }

    /// The `WWW-Authenticate` value of a refusal (RFC 6750 §3).
    pub fn challenge(&self, refusal: &Refusal) -> String {
        let mut challenge = format!("Bearer resource_metadata=\"{}\"", self.metadata_url());
        let (error, reason) = match refusal {
            Refusal::Missing | Refusal::Unavailable(_) => return challenge,
            Refusal::Invalid(reason) => ("invalid_token", reason),
            Refusal::Insufficient(reason) => ("insufficient_scope", reason),
        };
        challenge.push_str(&format!(
            ", error=\"{error}\", error_description=\"{}\"",
            quoted(reason)
        ));
        if matches!(refusal, Refusal::Insufficient(_)) && !self.settings.scopes_supported.is_empty()
        {
            challenge.push_str(&format!(
                ", scope=\"{}\"",
                quoted(&self.settings.scopes_supported.join(" "))
            ));
        }
        challenge
    }
}

/// The paths the metadata is served at: the RFC 9728 one for `resource`, and the bare one
/// that clients of older drafts ask first.
pub fn is_metadata_path(path: &str) -> bool {
    path == "/.well-known/oauth-protected-resource"
        || path
            .strip_prefix("/.well-known/oauth-protected-resource")
            .is_some_and(|rest| rest.starts_with('/'))
}

fn metadata_url(resource: &str) -> String {
    match reqwest::Url::parse(resource) {
        Ok(url) => {
            let origin = url.origin().ascii_serialization();
            let path = url.path().trim_end_matches('/');
            format!("{origin}/.well-known/oauth-protected-resource{path}")
        }
        // Checked when the daemon starts.
        Err(_) => String::new(),
    }
}

/// A header's quoted-string holds no `"` or `\` unescaped, and no control characters.
fn quoted(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .map(|c| if c == '"' || c == '\\' { '\'' } else { c })
        .collect()
}

/// `name` as an algorithm the endpoint may accept.
fn asymmetric(name: &str) -> Result<Algorithm, String> {
    let algorithm: Algorithm = name
        .parse()
        .map_err(|_| format!("mcp_oauth.algorithms: unknown algorithm `{name}`"))?;
    match algorithm {
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => Err(format!(
            "mcp_oauth.algorithms: {name} is a shared-secret algorithm; an issuer's key set is \
             public, so accept only asymmetric ones (RS*, PS*, ES*, EdDSA)"
        )),
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512
        | Algorithm::ES256
        | Algorithm::ES384
        | Algorithm::EdDSA => Ok(algorithm),
    }
}

/// The key to check a token signed with `alg` against, if `jwk` may serve for it: a signing
/// key (its `use`, when said), of the algorithm the token names (its `alg`, when said), never
/// a shared secret.
fn decoding_key(jwk: &Jwk, alg: Algorithm) -> Result<DecodingKey, String> {
    if matches!(&jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
        return Err("the issuer's key for this token is a shared secret, never accepted".into());
    }
    if let Some(key_use) = &jwk.common.public_key_use
        && *key_use != PublicKeyUse::Signature
    {
        return Err("the issuer's key for this token is not a signing key".into());
    }
    if let Some(key_alg) = jwk.common.key_algorithm
        && !same_algorithm(key_alg, alg)
    {
        return Err(format!("the token says {alg:?}, its key is for {key_alg}"));
    }
    DecodingKey::from_jwk(jwk).map_err(|err| format!("the issuer's key cannot be read ({err})"))
}

fn same_algorithm(key: KeyAlgorithm, alg: Algorithm) -> bool {
    key.to_string() == format!("{alg:?}")
}

/// A failed check in words a client's operator can act on.
fn explain(err: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match err.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => "the token is for another audience than this endpoint".into(),
        ErrorKind::InvalidIssuer => "the token is from another issuer".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
        other => format!("the token is not valid ({other:?})"),
    }
}

/// The scopes a token grants: `scope` (space-separated, RFC 9068) or `scp` (an array).
fn scopes(claims: &Value) -> BTreeSet<&str> {
    let mut scopes = BTreeSet::new();
    if let Some(scope) = claims.get("scope").and_then(Value::as_str) {
        scopes.extend(scope.split(' ').filter(|scope| !scope.is_empty()));
    }
    if let Some(scp) = claims.get("scp").and_then(Value::as_array) {
        scopes.extend(scp.iter().filter_map(Value::as_str));
    }
    scopes
}

/// Whether claim `name` is `value`, or an array holding it.
fn claim_holds(claims: &Value, name: &str, value: &str) -> bool {
    match claims.get(name) {
        Some(Value::String(held)) => held == value,
        Some(Value::Array(held)) => held.iter().any(|held| held.as_str() == Some(value)),
        _ => false,
    }
}
