//! `tool.toml`: what a tool is, what it may do, and how it runs. Parsing is strict: unknown
//! keys, a missing schema or an inconsistent engine section refuse the tool.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::domain::Risk;
use crate::engine::{Abi, Code, EngineKind, ListingWorkspace, McpServer, McpTransport, ToolImage};
use crate::output::OutputPolicy;
use crate::secrets::{SecretSource, Secrets};

/// A manifest is a page of TOML; anything larger is not one.
const MAX_MANIFEST_BYTES: u64 = 64 * 1024;

/// Schemas describe a handful of arguments; a megabyte is already absurd.
const MAX_SCHEMA_BYTES: u64 = 1 << 20;

/// Timeout of a tool that names none.
const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// No single call holds a sandbox for longer than an hour.
pub const MAX_TIMEOUT_MS: u64 = 60 * 60 * 1000;

/// Profile of a tool that names none: no files, no network.
const DEFAULT_PROFILE: &str = "strict";

/// A hosted server with no call for a minute is stopped; the next call starts it again.
const DEFAULT_IDLE_TIMEOUT_MS: u64 = 60_000;

/// Tool names become function names in model APIs, which allow `[a-zA-Z0-9_-]{1,64}`;
/// airlock keeps to the lowercase part of that.
const MAX_NAME_LEN: usize = 64;

/// A checked manifest: what the engine loads (its [`ToolImage`]), and what the daemon
/// decides by.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub image: ToolImage,
    pub version: String,
    pub description: String,
    pub risk: Risk,
    pub profile: String,
    pub timeout: Duration,
    pub idempotent: bool,
    /// The tool implements preview mode (`"preview": true` changes nothing).
    pub preview: bool,
    pub output: OutputPolicy,
    /// A server manifest's choices about its tools.
    pub mcp: Option<Arc<McpPolicy>>,
    /// For a tool of a hosted server: where it comes from.
    pub origin: Option<McpOrigin>,
    /// The argument holding a shell command line the tool runs (`[policy] shell`): the
    /// permission policy judges each command of that line.
    pub shell_argument: Option<String>,
}

/// What an operator decided about a hosted server's tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpPolicy {
    /// Only these tools are served (all when `None`).
    pub allow: Option<Vec<String>>,
    /// These tools are never served.
    pub deny: Vec<String>,
    /// Per tool: its risk, and whether a repeat is safe.
    pub tools: BTreeMap<String, McpToolSettings>,
}

impl McpPolicy {
    pub fn serves(&self, tool: &str) -> bool {
        !self.deny.iter().any(|denied| denied == tool)
            && self
                .allow
                .as_ref()
                .is_none_or(|allowed| allowed.iter().any(|name| name == tool))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpToolSettings {
    /// The tool's risk, whatever the server's annotations say.
    pub risk: Option<Risk>,
    /// The digest of the tool's listing that is trusted (see `airlock tools trust`).
    pub sha256: Option<String>,
    pub idempotent: Option<bool>,
}

/// A served tool's server, and its name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpOrigin {
    pub server: String,
    pub tool: String,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ManifestError {
    pub path: PathBuf,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    name: String,
    version: String,
    description: String,
    risk: Risk,
    engine: EngineKind,
    module: Option<PathBuf>,
    command: Option<Vec<String>>,
    abi: Option<Abi>,
    sha256: Option<String>,
    profile: Option<String>,
    timeout_ms: Option<u64>,
    #[serde(default)]
    idempotent: bool,
    #[serde(default)]
    preview: bool,
    input_schema: Option<SchemaSource>,
    #[serde(default)]
    output: OutputPolicy,
    mcp: Option<McpSection>,
    #[serde(default)]
    secrets: Vec<SecretSource>,
    /// For authors only (`airlock tools build`); the daemon serves what was built.
    #[serde(rename = "build")]
    _build: Option<BuildSection>,
    policy: Option<PolicySection>,
}

/// `[policy]`: what the permission policy needs to know of the tool's arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicySection {
    /// The argument (a string property of the input schema) that is a shell command line
    /// the tool runs: the policy judges each command in it, not the tool as a whole.
    shell: Option<String>,
}

/// `[build]`: how `airlock tools build` makes the module, from the tool's folder. Checked
/// here so that a typo in it is an error, not a silently skipped build.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildSection {
    /// The program and its arguments, run in the tool's folder, never through a shell.
    #[serde(rename = "command")]
    _command: Vec<String>,
}

/// `[mcp]`: the server a manifest with `engine = "mcp"` hosts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct McpSection {
    transport: TransportKind,
    command: Option<Vec<String>>,
    url: Option<String>,
    /// For `transport = "http"`: the secret sent as the bearer token.
    bearer_secret: Option<String>,
    /// For `transport = "http"`: tokens from the client credentials grant instead.
    oauth: Option<OAuthSection>,
    #[serde(default)]
    workspace: WorkspaceAccess,
    idle_timeout_ms: Option<u64>,
    /// What the server is listed in at load: `"empty"` (the default) or `"git"`.
    #[serde(default)]
    listing_workspace: ListingWorkspace,
    /// `"first-use"` or `"explicit"` (nothing served until an operator accepts a listing);
    /// the daemon's `mcp_trust` when unset.
    trust: Option<crate::engine::mcp::trust::TrustMode>,
    /// `"prefixed"` (the default: `<server>__<tool>`) or `"bare"` (the tools' own names):
    /// for a gateway in front of one server whose clients know its tools by name.
    #[serde(default)]
    names: ServedNames,
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    tools: BTreeMap<String, McpToolSettings>,
}

/// How a hosted server's tools are named (`[mcp] names`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ServedNames {
    #[default]
    Prefixed,
    Bare,
}

/// `[mcp.oauth]`: how airlock gets tokens for a remote server (see `engine::mcp::oauth`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OAuthSection {
    /// The token endpoint; or
    token_url: Option<String>,
    /// the authorization server, whose RFC 8414 metadata names its token endpoint.
    issuer: Option<String>,
    client_id: String,
    /// The secret (of `[[secrets]]`, by its `env` name) that holds the client's password.
    client_secret_secret: String,
    #[serde(default)]
    scopes: Vec<String>,
    /// The RFC 8707 resource the token is for; the server's `url` when unset.
    resource: Option<String>,
    /// `"basic"` (the default) or `"post"`.
    #[serde(default)]
    client_auth: crate::engine::mcp::oauth::ClientAuth,
}

impl OAuthSection {
    /// The checked configuration of a server at `url` whose secrets are `secrets`.
    fn check(
        self,
        url: &str,
        secrets: &Secrets,
    ) -> Result<crate::engine::mcp::oauth::OAuthConfig, String> {
        use crate::engine::mcp::oauth::{OAuthConfig, TokenEndpoint, may_carry_secrets};
        let endpoint = match (self.token_url, self.issuer) {
            (Some(token_url), None) => TokenEndpoint::Url(token_url),
            (None, Some(issuer)) => TokenEndpoint::Issuer(issuer),
            // Neither: the server's own protected-resource metadata names its issuer.
            (None, None) => TokenEndpoint::Discovered(url.to_owned()),
            (Some(_), Some(_)) => {
                return Err(
                    "`[mcp.oauth]` takes `token_url` or `issuer` (whose RFC 8414 metadata names the token endpoint), not both; with neither, the server's RFC 9728 metadata names the issuer"
                        .into(),
                );
            }
        };
        let key = match endpoint {
            TokenEndpoint::Url(_) => "token_url",
            TokenEndpoint::Issuer(_) => "issuer",
            TokenEndpoint::Discovered(_) => "url",
        };
        let parsed = reqwest::Url::parse(endpoint.url())
            .map_err(|err| format!("`mcp.oauth.{key}` is not a URL: {err}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!(
                "`mcp.oauth.{key}` must be an http:// or https:// URL with a host"
            ));
        }
        if !may_carry_secrets(&parsed) {
            return Err(format!(
                "`mcp.oauth.{key}` must be https:// (a client secret is never sent in clear text; plain http is for loopback addresses only)"
            ));
        }
        if self.client_id.trim().is_empty() {
            return Err("`mcp.oauth.client_id` must not be empty".into());
        }
        if !secrets
            .iter()
            .any(|secret| secret.env == self.client_secret_secret)
        {
            return Err(format!(
                "`mcp.oauth.client_secret_secret = \"{}\"` names no secret of `[[secrets]]`",
                self.client_secret_secret
            ));
        }
        // RFC 6749 §3.3: scope tokens are printable ASCII without spaces, quotes or backslashes.
        if let Some(scope) = self.scopes.iter().find(|scope| {
            scope.is_empty()
                || !scope
                    .bytes()
                    .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
        }) {
            return Err(format!(
                "`mcp.oauth.scopes`: `{scope}` is not a scope (printable ASCII, no spaces or quotes)"
            ));
        }
        let resource = self.resource.unwrap_or_else(|| url.to_owned());
        // RFC 8707 §2: an absolute URI without a fragment.
        let parsed = reqwest::Url::parse(&resource)
            .map_err(|err| format!("`mcp.oauth.resource` is not a URL: {err}"))?;
        if parsed.fragment().is_some() {
            return Err("`mcp.oauth.resource` must not have a fragment (RFC 8707)".into());
        }
        Ok(OAuthConfig {
            endpoint,
            client_id: self.client_id,
            client_secret_secret: self.client_secret_secret,
            scopes: self.scopes,
            resource,
            client_auth: self.client_auth,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum TransportKind {
    Stdio,
    Http,
}

/// What a hosted server may do to the workspace of its instance. Read-only unless the
/// manifest says otherwise: a long-lived process sees every call of its instance.
#[derive(Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum WorkspaceAccess {
    #[default]
    ReadOnly,
    ReadWrite,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SchemaSource {
    Path(PathBuf),
    Inline(serde_json::Map<String, serde_json::Value>),
}

impl Manifest {
    pub fn name(&self) -> &str {
        &self.image.name
    }

    pub fn engine(&self) -> EngineKind {
        self.image.engine()
    }

    pub fn abi(&self) -> Abi {
        self.image.abi()
    }

    pub fn input_schema(&self) -> &serde_json::Value {
        &self.image.input_schema
    }

    /// The `tool.toml` this came from.
    pub fn path(&self) -> &Path {
        &self.image.source
    }

    /// Reads and checks the manifest at `path`.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        Manifest::load_with_text(path).map(|(manifest, _)| manifest)
    }

    /// As [`Manifest::load`], with the text it was read from: what a reload compares to
    /// tell a manifest unchanged.
    pub fn load_with_text(path: &Path) -> Result<(Manifest, String), ManifestError> {
        let fail = |message: String| ManifestError {
            path: path.to_owned(),
            message,
        };
        let text = read_capped(path, MAX_MANIFEST_BYTES).map_err(fail)?;
        let file: ManifestFile = toml::from_str(&text).map_err(|err| fail(err.to_string()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let manifest = Manifest::check(file, dir, path).map_err(fail)?;
        Ok((manifest, text))
    }

    fn check(file: ManifestFile, dir: &Path, path: &Path) -> Result<Manifest, String> {
        check_name(&file.name)?;
        for (key, value) in [
            ("version", &file.version),
            ("description", &file.description),
        ] {
            if value.trim().is_empty() {
                return Err(format!("`{key}` must not be empty"));
            }
        }
        let secrets = Secrets::resolve(&file.secrets)?;
        if file.engine == EngineKind::Mcp {
            return Manifest::check_server(file, secrets, path);
        }
        if file.mcp.is_some() {
            return Err("`[mcp]` is for MCP servers (`engine = \"mcp\"`)".into());
        }
        let code = match (file.engine, file.module, file.command) {
            (EngineKind::Wasm, Some(module), None) => {
                if file.abi.is_some_and(|abi| abi != Abi::JsonStdio) {
                    return Err("wasm tools use `abi = \"json-stdio\"`".into());
                }
                Code::Module(dir.join(module))
            }
            (EngineKind::Wasm, _, Some(_)) => {
                return Err("`command` is for process tools; wasm tools name a `module`".into());
            }
            (EngineKind::Wasm, None, None) => {
                return Err("wasm tools need `module`, the path of their .wasm file".into());
            }
            (EngineKind::Process, None, Some(command)) => {
                if command.is_empty() || command[0].is_empty() {
                    return Err("`command` must name a program: [\"/usr/bin/rg\", …]".into());
                }
                let abi = file
                    .abi
                    .ok_or("process tools need `abi`: \"json-stdio\" or \"argv\"".to_owned())?;
                Code::Command { argv: command, abi }
            }
            (EngineKind::Process, Some(_), _) => {
                return Err("`module` is for wasm tools; process tools name a `command`".into());
            }
            (EngineKind::Process, None, None) => {
                return Err("process tools need `command`, an argv array".into());
            }
            (EngineKind::Mcp, _, _) => {
                return Err("MCP servers are checked on their own path".into());
            }
        };
        let sha256 = file
            .sha256
            .map(|digest| check_sha256(&digest))
            .transpose()?;
        let timeout = check_timeout(file.timeout_ms)?;
        if file.output.max_bytes == 0 {
            return Err("`output.max_bytes` must be greater than 0".into());
        }
        let input_schema = match file.input_schema {
            None => {
                return Err(
                    "`input_schema` is missing: a path to a JSON Schema file or an inline table"
                        .into(),
                );
            }
            Some(SchemaSource::Inline(map)) => serde_json::Value::Object(map),
            Some(SchemaSource::Path(schema)) => {
                let schema_path = dir.join(schema);
                let text = read_capped(&schema_path, MAX_SCHEMA_BYTES)?;
                serde_json::from_str(&text)
                    .map_err(|err| format!("{} is not JSON: {err}", schema_path.display()))?
            }
        };
        if input_schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err(
                "`input_schema` must describe an object (`type = \"object\"`): arguments are one JSON object"
                    .into(),
            );
        }
        let shell_argument = file.policy.and_then(|policy| policy.shell);
        if let Some(shell) = &shell_argument
            && input_schema
                .pointer(&format!("/properties/{shell}/type"))
                .and_then(|t| t.as_str())
                != Some("string")
        {
            return Err(format!(
                "`[policy] shell` names `{shell}`, which must be a string property of the input schema"
            ));
        }
        Ok(Manifest {
            image: ToolImage {
                name: file.name,
                source: path.to_owned(),
                code,
                sha256,
                input_schema,
                secrets,
            },
            version: file.version,
            description: file.description,
            risk: file.risk,
            profile: file.profile.unwrap_or_else(|| DEFAULT_PROFILE.to_owned()),
            timeout,
            idempotent: file.idempotent,
            preview: file.preview,
            output: file.output,
            mcp: None,
            origin: None,
            shell_argument,
        })
    }

    /// A server manifest: `[mcp]` instead of a module or command, and no schema (each tool's
    /// comes from the server).
    fn check_server(file: ManifestFile, secrets: Secrets, path: &Path) -> Result<Manifest, String> {
        let section = file
            .mcp
            .ok_or("MCP servers need an `[mcp]` section: `transport` and a `command`")?;
        if file.module.is_some() || file.command.is_some() || file.abi.is_some() {
            return Err(
                "an MCP server names its program in `[mcp]`: `module`, `command` and `abi` are for other engines"
                    .into(),
            );
        }
        if file.policy.is_some() {
            return Err("`[policy]` is for tools with a schema of their own; drop it".into());
        }
        if file.input_schema.is_some() {
            return Err(
                "an MCP server's tools bring their own schemas: drop `input_schema`".into(),
            );
        }
        if file.preview {
            return Err("`preview` is not available for MCP servers".into());
        }
        let transport = match (section.transport, section.command, section.url) {
            (TransportKind::Stdio, Some(command), None) => {
                if command.is_empty() || command[0].is_empty() {
                    return Err("`mcp.command` must name a program: [\"/usr/bin/node\", …]".into());
                }
                if section.bearer_secret.is_some() || section.oauth.is_some() {
                    return Err("`bearer_secret` and `[mcp.oauth]` are for `transport = \"http\"`; a stdio server gets its secrets in its environment".into());
                }
                McpTransport::Stdio { command }
            }
            (TransportKind::Stdio, _, _) => {
                return Err("`transport = \"stdio\"` needs `command` (and no `url`)".into());
            }
            (TransportKind::Http, None, Some(url)) => {
                if section.listing_workspace != ListingWorkspace::Empty {
                    return Err("`listing_workspace` is for stdio servers; a remote server is listed without a workspace".into());
                }
                let parsed = reqwest::Url::parse(&url)
                    .map_err(|err| format!("`mcp.url` is not a URL: {err}"))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                    return Err("`mcp.url` must be an http:// or https:// URL with a host".into());
                }
                if let Some(name) = &section.bearer_secret
                    && !secrets.iter().any(|secret| secret.env == *name)
                {
                    return Err(format!(
                        "`bearer_secret = \"{name}\"` names no secret of `[[secrets]]`"
                    ));
                }
                let oauth = match (section.oauth, &section.bearer_secret) {
                    (Some(_), Some(_)) => {
                        return Err(
                            "a remote server takes `bearer_secret` or `[mcp.oauth]`, not both"
                                .into(),
                        );
                    }
                    (Some(oauth), None) => Some(oauth.check(&url, &secrets)?),
                    (None, _) => None,
                };
                McpTransport::Http {
                    url,
                    bearer_secret: section.bearer_secret,
                    oauth,
                }
            }
            (TransportKind::Http, _, _) => {
                return Err("`transport = \"http\"` needs `url` (and no `command`)".into());
            }
        };
        let idle_timeout_ms = section.idle_timeout_ms.unwrap_or(DEFAULT_IDLE_TIMEOUT_MS);
        if idle_timeout_ms == 0 {
            return Err("`mcp.idle_timeout_ms` must be greater than 0".into());
        }
        let mut pins = BTreeMap::new();
        for (tool, settings) in &section.tools {
            if let Some(digest) = &settings.sha256 {
                pins.insert(tool.clone(), check_sha256(digest)?);
            }
        }
        let sha256 = file
            .sha256
            .map(|digest| check_sha256(&digest))
            .transpose()?;
        let timeout = check_timeout(file.timeout_ms)?;
        Ok(Manifest {
            image: ToolImage {
                name: file.name,
                source: path.to_owned(),
                code: Code::Mcp(Arc::new(McpServer {
                    transport,
                    writes_workspace: section.workspace == WorkspaceAccess::ReadWrite,
                    idle_timeout: Duration::from_millis(idle_timeout_ms),
                    pins,
                    listing_workspace: section.listing_workspace,
                    trust: section.trust,
                    bare_names: section.names == ServedNames::Bare,
                })),
                sha256,
                input_schema: serde_json::json!({"type": "object"}),
                secrets,
            },
            version: file.version,
            description: file.description,
            risk: file.risk,
            profile: file.profile.unwrap_or_else(|| DEFAULT_PROFILE.to_owned()),
            timeout,
            idempotent: file.idempotent,
            preview: false,
            output: file.output,
            mcp: Some(Arc::new(McpPolicy {
                allow: section.allow,
                deny: section.deny,
                tools: section.tools,
            })),
            origin: None,
            shell_argument: None,
        })
    }

    /// The manifest of `imported`, a tool of this server's.
    pub fn for_imported(&self, imported: &crate::engine::mcp::Imported) -> Manifest {
        let settings = self
            .mcp
            .as_ref()
            .and_then(|policy| policy.tools.get(&imported.tool))
            .cloned()
            .unwrap_or_default();
        let mut manifest = self.clone();
        manifest.image.name = imported.name.clone();
        manifest.image.input_schema = imported.input_schema.clone();
        manifest.description = imported.description.clone();
        manifest.risk = settings
            .risk
            .unwrap_or_else(|| raised_risk(self.risk, imported.hints));
        manifest.idempotent = settings.idempotent.unwrap_or(self.idempotent);
        manifest.mcp = None;
        manifest.origin = Some(McpOrigin {
            server: self.name().to_owned(),
            tool: imported.tool.clone(),
        });
        manifest
    }
}

/// A server's annotations can make a tool riskier than the manifest's default, never safer.
fn raised_risk(default: Risk, hints: crate::engine::mcp::Hints) -> Risk {
    let mut risk = default;
    if hints.read_only == Some(false) {
        risk = risk.max(Risk::Write);
    }
    if hints.open_world == Some(true) {
        risk = risk.max(Risk::Network);
    }
    if hints.destructive == Some(true) && hints.read_only != Some(true) {
        risk = risk.max(Risk::Destructive);
    }
    risk
}

fn check_sha256(digest: &str) -> Result<String, String> {
    let digest = digest.to_ascii_lowercase();
    if digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(digest)
    } else {
        Err("`sha256` must be 64 hex digits".to_owned())
    }
}

fn check_timeout(timeout_ms: Option<u64>) -> Result<Duration, String> {
    let timeout_ms = timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        return Err(format!(
            "`timeout_ms` must be between 1 and {MAX_TIMEOUT_MS}"
        ));
    }
    Ok(Duration::from_millis(timeout_ms))
}

fn check_name(name: &str) -> Result<(), String> {
    let mut bytes = name.bytes();
    let valid = name.len() <= MAX_NAME_LEN
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`name` must match [a-z][a-z0-9_]{{0,{}}}, not `{name}`",
            MAX_NAME_LEN - 1
        ))
    }
}

/// Reads a small text file, refusing one larger than `max`. Only regular files are read (a
/// device, FIFO or `/proc` file reports no size and may never end), and the read itself
/// stops past `max`, whatever the size said.
fn read_capped(path: &Path, max: u64) -> Result<String, String> {
    let cannot = |err: std::io::Error| format!("cannot read {}: {err}", path.display());
    let metadata = std::fs::metadata(path).map_err(cannot)?;
    if !metadata.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let too_large = |size: u64| format!("{} is {size} bytes; the limit is {max}", path.display());
    if metadata.len() > max {
        return Err(too_large(metadata.len()));
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(max.saturating_add(1)).read_to_string(&mut text))
        .map_err(cannot)?;
    let read = u64::try_from(text.len()).unwrap_or(u64::MAX);
    if read > max {
        return Err(too_large(read));
    }
    Ok(text)
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
