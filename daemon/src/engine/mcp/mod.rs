//! The `mcp` engine: third-party MCP servers hosted in the process engine's sandbox, their
//! tools served like any other.
//!
//! A server's manifest (`engine = "mcp"`) names how it runs; the engine prepares its program
//! under the manifest's profile exactly as the process engine prepares a tool's (same
//! checks, same fail-closed refusals), starts it once at load to list its tools, checks the
//! listing against what is trusted (`trust.rs`), and returns each trusted tool under its
//! served name `<server>__<tool>`, or its own with `names = "bare"` (`names.rs`). From then
//! on instances run per tenant and workspace (`host.rs`), each call a `tools/call` over the
//! instance's connection (`tool.rs`);
//! a server's questions about a call go to the call's MCP client when it can answer them
//! (`questions.rs`), to airlock's own answers otherwise (`client.rs`).
//!
//! The MCP protocol itself is rmcp's, the maintained Rust SDK; airlock writes no JSON-RPC.

mod client;

pub use super::contract::{Hints, Imported, Imports};
pub use client::Asker;
pub use questions::Questions;
mod host;
mod instance;
mod listing;
mod names;
pub mod oauth;
/// Open to `engine`: the contract (`contract.rs`) gives a call's [`Questions`] in its `Launch`.
pub(super) mod questions;
mod tool;
pub mod trust;

use crate::audit::Auditor;
use crate::changes::Changes;
use std::path::PathBuf;
use std::sync::Arc;

use host::{Host, Origin};
use tool::McpTool;
use trust::TrustStore;

use super::contract::{Engine, EngineKind, LoadError, LoadedTool};
use super::image::{Code, McpTransport, ToolImage};
use super::process::ProcessEngine;
use crate::egress::{Resolver, Rules};
use crate::profile::NetworkPolicy;
use crate::profile::Profile;

/// Where the engine keeps what it owns in the state dir: the workspaces servers are listed
/// in at load (`listing.rs`).
const ENGINE_DIR: &str = "mcp";

pub struct McpEngine {
    process: Arc<ProcessEngine>,
    state_dir: PathBuf,
    /// Where servers' trust records are: the shared dir, so that a fleet's daemons trust
    /// alike (see `trust`).
    trust_dir: PathBuf,
    /// Resolves remote servers' names, with the operator's overrides.
    resolver: Arc<Resolver>,
    /// Who answers servers' questions, once the daemon has an approval broker.
    asker: client::AskerSlot,
    /// Where writing servers' changes are recorded.
    changes: Option<Changes>,
    /// How a server whose manifest does not say is trusted (`mcp_trust` of the config).
    default_trust: trust::TrustMode,
    /// Every server's first listing is taken as trusted, whatever its manifest says: an
    /// engine that only shows what a daemon would serve (`airlockd check-tool`), over trust
    /// records of its own.
    review_only: bool,
    /// The daemon's audit log, filled once the store is open.
    auditor: Auditor,
}

impl McpEngine {
    pub fn new(
        process: Arc<ProcessEngine>,
        state_dir: PathBuf,
        trust_dir: PathBuf,
        resolver: Arc<Resolver>,
        changes: Option<Changes>,
    ) -> McpEngine {
        McpEngine {
            process,
            state_dir,
            trust_dir,
            resolver,
            asker: Arc::default(),
            changes,
            default_trust: trust::TrustMode::default(),
            review_only: false,
            auditor: Auditor::default(),
        }
    }

    /// Takes every server's first listing as trusted, `trust = "explicit"` included: for an
    /// engine whose trust records are a scratch folder's, that shows what would be served.
    pub fn for_review(mut self) -> McpEngine {
        self.review_only = true;
        self
    }

    /// Trusts servers whose manifests do not say as `mode` (the daemon's `mcp_trust`).
    pub fn with_default_trust(mut self, mode: trust::TrustMode) -> McpEngine {
        self.default_trust = mode;
        self
    }

    /// Records hosted servers' listings, taken or withheld, in `auditor`'s log.
    pub fn with_auditor(mut self, auditor: Auditor) -> McpEngine {
        self.auditor = auditor;
        self
    }

    /// Routes hosted servers' questions (elicitation) to `asker` from now on.
    pub fn set_asker(&self, asker: Arc<dyn Asker>) {
        let _ = self.asker.set(asker);
    }

    /// Prepares a server, lists its tools and checks them against what is trusted.
    pub fn import_server(
        &self,
        image: &ToolImage,
        profile: &Arc<Profile>,
    ) -> Result<Imports, LoadError> {
        let invalid = |message: String| LoadError::Invalid {
            path: image.source.clone(),
            message,
        };
        let Code::Mcp(spec) = &image.code else {
            return Err(invalid(
                "MCP servers are named in an `[mcp]` section".into(),
            ));
        };
        let origin = match &spec.transport {
            McpTransport::Stdio { command } => Origin::Program(self.process.prepare_server(
                &image.name,
                &image.source,
                command,
                image.sha256.as_deref(),
                profile,
            )?),
            McpTransport::Http {
                url,
                bearer_secret,
                oauth,
            } => self.remote(
                image,
                profile,
                url,
                bearer_secret.as_deref(),
                oauth.as_ref(),
            )?,
        };
        let listing_workspace = listing::prepare(
            &self.state_dir.join(ENGINE_DIR),
            &image.name,
            spec.listing_workspace,
        )
        .map_err(&invalid)?;
        let trust = TrustStore::new(
            &self.trust_dir,
            &image.name,
            spec.pins.clone(),
            if self.review_only {
                trust::TrustMode::FirstUse
            } else {
                spec.trust.unwrap_or(self.default_trust)
            },
        )
        .with_auditor(self.auditor.clone());
        let host = Arc::new(
            Host::new(
                image.name.clone(),
                origin,
                spec.clone(),
                profile.clone(),
                image.secrets.clone(),
                trust,
                self.asker.clone(),
            )
            .with_changes(self.changes.clone()),
        );
        let workspace = profile.grants_workspace().then_some(listing_workspace);
        let (first, listing) = host.list_once(workspace).map_err(&invalid)?;
        // The first listing the server ever gave is the record; a change it made while it
        // was being listed is a change like any later one.
        host.trust
            .check(&first.digests, &|| trust::definitions(&first.tools))
            .map_err(&invalid)?;
        let distrusted = host
            .trust
            .check(&listing.digests, &|| trust::definitions(&listing.tools))
            .map_err(&invalid)?;
        let mut imports = Imports {
            tools: Vec::new(),
            refused: Vec::new(),
        };
        for listed in &listing.tools {
            let tool = listed.name.to_string();
            // Imported all the same, and withheld (neither listed nor callable) until an
            // operator accepts it: then it is served without a restart.
            if let Some(verdict) = distrusted.get(&tool) {
                imports.refused.push(verdict.explain(&image.name, &tool));
            }
            let annotations = listed.annotations.clone().unwrap_or_default();
            let digest = listing.digests.get(&tool).cloned().unwrap_or_default();
            imports.tools.push(Imported {
                name: if spec.bare_names {
                    names::bare_name(&tool)
                } else {
                    names::served_name(&image.name, &tool)
                },
                description: listed
                    .description
                    .as_deref()
                    .map(str::to_owned)
                    .or(listed.title.clone())
                    .unwrap_or_else(|| format!("{tool} (from MCP server {})", image.name)),
                input_schema: serde_json::Value::Object((*listed.input_schema).clone()),
                hints: Hints {
                    read_only: annotations.read_only_hint,
                    destructive: annotations.destructive_hint,
                    idempotent: annotations.idempotent_hint,
                    open_world: annotations.open_world_hint,
                },
                loaded: Arc::new(McpTool {
                    host: host.clone(),
                    tool: tool.clone(),
                    digest,
                }),
                tool,
            });
        }
        Ok(imports)
    }
}

impl McpEngine {
    /// A remote server's origin: refused unless its profile's allow-list lets its URL's
    /// host and port through the gate (fail closed, before anything is sent) — and, for a
    /// server reached with OAuth, its token endpoint's (or issuer's) as well: the grant goes
    /// through the same gate as the server's traffic.
    fn remote(
        &self,
        image: &ToolImage,
        profile: &Profile,
        url: &str,
        bearer_secret: Option<&str>,
        oauth: Option<&oauth::OAuthConfig>,
    ) -> Result<Origin, LoadError> {
        let unreachable = |what: &str, url: &str, why: String| LoadError::Invalid {
            path: image.source.clone(),
            message: format!("{what} at {url} cannot be reached: {why}"),
        };
        let parsed = reqwest::Url::parse(url).map_err(|err| LoadError::Invalid {
            path: image.source.clone(),
            message: format!("`mcp.url` is not a URL: {err}"),
        })?;
        let rules = Rules::for_profile(profile);
        let mut endpoints = vec![("the server", url, parsed)];
        if let Some(oauth) = oauth {
            let endpoint = oauth.endpoint.url();
            let parsed = reqwest::Url::parse(endpoint).map_err(|err| LoadError::Invalid {
                path: image.source.clone(),
                message: format!("the OAuth endpoint {endpoint} is not a URL: {err}"),
            })?;
            let what = match oauth.endpoint {
                oauth::TokenEndpoint::Url(_) => Some("the OAuth token endpoint"),
                oauth::TokenEndpoint::Issuer(_) => Some("the OAuth authorization server"),
                // The server names its authorization server when first asked: its host is
                // checked against the allow-list then, before anything is sent to it.
                oauth::TokenEndpoint::Discovered(_) => None,
            };
            if let Some(what) = what {
                endpoints.push((what, endpoint, parsed));
            }
        }
        for (what, url, parsed) in &endpoints {
            let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default())
            else {
                return Err(unreachable(what, url, "the URL names no host".into()));
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if matches!(profile.network, NetworkPolicy::None) {
                return Err(unreachable(
                    what,
                    url,
                    format!(
                        "profile `{}` has network = \"none\"; list {host}:{port} in an allow-list",
                        profile.name
                    ),
                ));
            }
            if let Some(why) = oauth::refusal(&rules, parsed) {
                return Err(unreachable(what, url, why));
            }
        }
        let secret = |name: &str| {
            image
                .secrets
                .iter()
                .find(|secret| secret.env == name)
                .map(|secret| secret.value.clone())
        };
        let credential = match oauth {
            Some(config) => {
                let client_secret = secret(&config.client_secret_secret).ok_or_else(|| {
                    LoadError::Invalid {
                        path: image.source.clone(),
                        message: format!(
                            "`mcp.oauth.client_secret_secret = \"{}\"` names no secret of `[[secrets]]`",
                            config.client_secret_secret
                        ),
                    }
                })?;
                Some(oauth::Credential::OAuth(Arc::new(oauth::TokenSource::new(
                    &image.name,
                    config.clone(),
                    client_secret,
                    rules.clone(),
                ))))
            }
            None => bearer_secret
                .and_then(secret)
                .map(oauth::Credential::Bearer),
        };
        Ok(Origin::Remote {
            url: url.to_owned(),
            credential,
            rules,
            resolver: self.resolver.clone(),
        })
    }
}

impl Engine for McpEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Mcp
    }

    fn load(
        &self,
        image: &ToolImage,
        _profile: &Profile,
    ) -> Result<Arc<dyn LoadedTool>, LoadError> {
        Err(LoadError::Invalid {
            path: image.source.clone(),
            message: "an MCP server's manifest holds several tools; it is imported".into(),
        })
    }

    fn import(&self, image: &ToolImage, profile: &Arc<Profile>) -> Result<Imports, LoadError> {
        self.import_server(image, profile)
    }

    /// A stdio server's program is found and its pinned digest checked again, as an import
    /// does; a remote server names no file.
    fn recheck(&self, image: &ToolImage, profile: &Profile) -> Result<(), LoadError> {
        if let Code::Mcp(spec) = &image.code
            && let McpTransport::Stdio { command } = &spec.transport
        {
            self.process.prepare_server(
                &image.name,
                &image.source,
                command,
                image.sha256.as_deref(),
                profile,
            )?;
        }
        Ok(())
    }
}

/// The arguments the conformance client calls `tool` with: two numbers for `add_numbers`;
/// for `json_schema_echo`, the input schema of `json_schema_2020_12_tool` as airlock keeps
/// it (the suite checks what a listing preserved of it); none for the others.
#[cfg(feature = "testing")]
fn arguments_for(
    tool: &rmcp::model::Tool,
    listed: &[rmcp::model::Tool],
) -> serde_json::Map<String, serde_json::Value> {
    let mut arguments = serde_json::Map::new();
    match tool.name.as_ref() {
        "add_numbers" => {
            arguments.insert("a".into(), 2.into());
            arguments.insert("b".into(), 3.into());
        }
        "json_schema_echo" => {
            if let Some(focal) = listed
                .iter()
                .find(|tool| tool.name == "json_schema_2020_12_tool")
            {
                arguments.insert(
                    "schema".into(),
                    serde_json::Value::Object((*focal.input_schema).clone()),
                );
            }
        }
        _ => {}
    }
    arguments
}

/// airlock's MCP client against a server at `url`, as it reaches a remote hosted server
/// (through an egress gate allowing that server alone): start a session (2026-07-28 when the
/// server offers it, else `initialize` at 2025-11-25), list the tools, then make `calls`
/// (each a tool's name and arguments) or, when there are none, call each listed tool
/// with what [`arguments_for`] gives it, a person approving every question the server asks,
/// in a call or in an `input_required` result. Returns each call's answer as text, or why it
/// failed: only a session that cannot start or list is an error. What the conformance
/// suite's client scenarios launch (see `tests/src/bin/mcp-conformance-client.rs`).
#[cfg(feature = "testing")]
pub async fn conformance_client(
    url: &str,
    calls: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
) -> Result<Vec<String>, String> {
    let mut parsed = reqwest::Url::parse(url).map_err(|err| format!("{url}: {err}"))?;
    // The suite's servers listen on loopback under the name `localhost`: a name the gate
    // never lets resolve to loopback. Its address, listed as such, is let through.
    if parsed.host_str() == Some("localhost") {
        parsed
            .set_host(Some("127.0.0.1"))
            .map_err(|err| format!("{url}: {err}"))?;
    }
    let port = parsed.port_or_known_default().unwrap_or(80);
    let policy = NetworkPolicy::AllowList {
        allow: vec![format!("127.0.0.1:{port}").parse()?],
        deny: Vec::new(),
        ask_for_unlisted: false,
    };
    let gate = Arc::new(crate::egress::Gate::new(
        Rules::new(&policy),
        Arc::default(),
        None,
    ));
    /// A person who says yes.
    struct Yes;
    impl Asker for Yes {
        fn ask(
            &self,
            _tenant: Option<String>,
            _server: String,
            _message: String,
        ) -> futures::future::BoxFuture<'static, bool> {
            Box::pin(std::future::ready(true))
        }
    }
    let asker: client::AskerSlot = Arc::default();
    let _ = asker.set(Arc::new(Yes));
    let instance =
        instance::Instance::connect("conformance", parsed.as_str(), None, gate, (None, asker))
            .await?;
    let listing = instance.current_listing("conformance").await?;
    let calls = if calls.is_empty() {
        listing
            .tools
            .iter()
            .map(|tool| (tool.name.to_string(), arguments_for(tool, &listing.tools)))
            .collect()
    } else {
        calls
    };
    let mut answers = Vec::new();
    for (tool, arguments) in calls {
        let mut params = rmcp::model::CallToolRequestParams::new(tool.clone());
        params.arguments = Some(arguments);
        // A call the server fails is what a scenario may test: it is reported, and the
        // next call made all the same.
        let answer = match instance.call_tool(params, None).await {
            Ok(answer) => answer
                .content
                .iter()
                .filter_map(|block| block.as_text().map(|text| text.text.clone()))
                .collect::<Vec<_>>()
                .join("\n"),
            Err(err) => format!("calling `{tool}` failed: {err}"),
        };
        answers.push(answer);
    }
    Ok(answers)
}
