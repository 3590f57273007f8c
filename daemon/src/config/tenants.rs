//! Who may use the daemon: `[auth]`, the tenants whose tokens the daemon makes and what each
//! may do, and `[mcp_oauth]`, the MCP endpoint as an OAuth resource server whose tokens map
//! to tenants.

use std::path::PathBuf;

use serde::Deserialize;

/// `[mcp_oauth]`: the MCP endpoint as an OAuth 2.1 resource server. Clients that hold a JWT
/// access token from `issuer` for `resource` are served as the tenant its scopes or claims
/// map to; the daemon's own tokens keep working beside them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpOAuthSettings {
    /// The authorization server's issuer identifier (tokens' `iss`). Its metadata (RFC 8414,
    /// or OpenID discovery) names the key set unless `jwks_uri` does.
    pub issuer: String,
    /// Where the issuer's signing keys are, when its metadata is not to be read.
    pub jwks_uri: Option<String>,
    /// This endpoint's URL as clients reach it, e.g. `https://airlock.example.com/mcp`: the
    /// audience every token must name (RFC 8707), and what the protected-resource metadata
    /// (RFC 9728) says it is.
    pub resource: String,
    /// The signature algorithms accepted [default: RS256, ES256]. Asymmetric only: a key set
    /// is public, so a shared-secret (HS*) key in one would let anyone sign.
    #[serde(default = "default_jwt_algorithms")]
    pub algorithms: Vec<String>,
    /// The scopes the metadata advertises to clients (what they ask the issuer for).
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Which tenant a token stands for; a token that maps to none, or to two, is refused.
    pub tenants: Vec<OAuthTenantRule>,
}

fn default_jwt_algorithms() -> Vec<String> {
    vec!["RS256".to_owned(), "ES256".to_owned()]
}

/// One `[[mcp_oauth.tenants]]` rule: a token granted `scope`, or whose `claim` is `value`
/// (or an array holding it), is `tenant`'s.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthTenantRule {
    pub tenant: String,
    pub scope: Option<String>,
    pub claim: Option<String>,
    pub value: Option<String>,
}

/// `[auth]`: the tenants declared besides `default`, whose token the daemon creates.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// Clients on the Unix socket need no token: the socket's mode (0600) already limits it
    /// to the daemon's user, who can read the token file anyway. They act as `default`.
    #[serde(default)]
    pub unix_socket_trust: bool,
    #[serde(default)]
    pub tenants: Vec<TenantFile>,
}

/// One `[[auth.tenants]]` entry: a token and what its bearer may do. The token itself is
/// never written in the configuration, only where to find it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantFile {
    pub name: String,
    /// A file holding the token; it must be private to its owner (mode 0600 or stricter).
    pub token_file: Option<PathBuf>,
    /// An environment variable of the daemon holding the token.
    pub token_env: Option<String>,
    /// The tools it may list and run, by name; `"*"` for all.
    #[serde(default = "all_tools")]
    pub tools: Vec<String>,
    /// Where its workspaces may be; each inside one of the daemon's roots. Empty: the
    /// daemon's roots.
    #[serde(default)]
    pub workspace_roots: Vec<PathBuf>,
    #[serde(default)]
    pub approvals: ApprovalRights,
    pub max_concurrent_runs: Option<u32>,
    pub max_concurrent_executions: Option<u32>,
    /// Policy rule files for this tenant's calls, after the daemon's `[policy] files`.
    #[serde(default)]
    pub policy_files: Vec<PathBuf>,
}

fn all_tools() -> Vec<String> {
    vec!["*".to_owned()]
}

/// Which approval requests a tenant sees and may answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRights {
    /// None: its runs' risky calls wait for another approver (a tenant with `all`).
    None,
    /// Those of its own runs.
    #[default]
    Own,
    /// Those of every tenant's runs: an operator's approver console.
    All,
}
