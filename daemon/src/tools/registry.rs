//! The registry: every tool the daemon serves, loaded from the tools directories at start.
//!
//! A tools directory holds one folder per tool, each with a `tool.toml` (a directory that
//! itself holds a `tool.toml` is one tool). A tool that cannot be served — a bad manifest, a
//! missing module, a changed digest, a profile that doesn't exist or that its engine cannot
//! enforce — is refused alone, with an error naming its file; the rest are served.
//!
//! A hosted MCP server's manifest (`engine = "mcp"`) is one folder and many tools: the
//! engine lists them, the manifest's allow and deny lists pick those served, and each gets a
//! manifest of its own derived from the server's (its schema and description from the
//! server, its risk from the manifest, raised by the server's annotations).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::{Code, Engines, LoadedTool, ToolKind};
use crate::profile::{Profile, Profiles};
use crate::secrets::{Redactor, Secrets};

use super::arguments::ArgumentSchema;
use super::manifest::Manifest;

pub const MANIFEST_FILE: &str = "tool.toml";

/// A tool ready to be called.
pub struct Tool {
    pub manifest: Manifest,
    pub arguments: ArgumentSchema,
    pub profile: Arc<Profile>,
    pub loaded: Arc<dyn LoadedTool>,
}

impl Tool {
    pub fn name(&self) -> &str {
        self.manifest.name()
    }

    pub fn digest(&self) -> &str {
        self.loaded.digest()
    }

    /// The longest a call may run: its manifest's timeout within its profile's wall time.
    pub fn timeout(&self) -> std::time::Duration {
        self.manifest.timeout.min(self.profile.limits.wall_time)
    }
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.manifest.name())
            .field("digest", &self.loaded.digest())
            .finish_non_exhaustive()
    }
}

/// A tool that was refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool {path} refused: {message}")]
pub struct ToolLoadError {
    pub path: PathBuf,
    pub message: String,
}

#[derive(Debug, Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<Tool>>,
    /// Every secret a loaded tool receives, withheld tools' too: one trusted later is
    /// served at once, and its secrets must already be redacted then.
    redactor: Redactor,
    /// Each manifest as it was read, by its path, with what it gave: what a reload compares.
    sources: BTreeMap<PathBuf, Source>,
}

/// A manifest as loaded: what it was loaded from and what it gave.
#[derive(Debug)]
struct Source {
    text: String,
    secrets: Secrets,
    profile: Arc<Profile>,
    tools: Vec<Arc<Tool>>,
    refused: Vec<String>,
}

impl Source {
    /// Whether `manifest`, read as `text` under `profile`, is the manifest this was
    /// loaded from: the same text, secrets (a secret's file may change under the same
    /// manifest) and profile.
    fn loaded_from(&self, text: &str, manifest: &Manifest, profile: &Profile) -> bool {
        self.text == text && self.secrets == manifest.image.secrets && *self.profile == *profile
    }
}

impl Registry {
    /// Loads every tool found in `dirs`, in order. Returns the registry and each refusal.
    pub fn load(
        dirs: &[PathBuf],
        profiles: &Profiles,
        engines: &Engines,
    ) -> (Registry, Vec<ToolLoadError>) {
        Registry::load_over(dirs, profiles, engines, None)
    }

    /// Loads every tool found in `dirs` again, as [`Registry::load`] does, keeping this
    /// registry's tools (and hosted servers, with their instances) whose manifests and code
    /// did not change (see the module doc).
    pub fn reload(
        &self,
        dirs: &[PathBuf],
        profiles: &Profiles,
        engines: &Engines,
    ) -> (Registry, Vec<ToolLoadError>) {
        Registry::load_over(dirs, profiles, engines, Some(self))
    }

    fn load_over(
        dirs: &[PathBuf],
        profiles: &Profiles,
        engines: &Engines,
        previous: Option<&Registry>,
    ) -> (Registry, Vec<ToolLoadError>) {
        let mut registry = Registry::default();
        let mut errors = Vec::new();
        let mut origins: BTreeMap<String, PathBuf> = BTreeMap::new();
        let manifests: Vec<PathBuf> = dirs
            .iter()
            .flat_map(|dir| find_manifests(dir, &mut errors))
            .collect();
        let mut loaded = Vec::new();
        for manifest_path in manifests {
            let carried = previous.and_then(|previous| previous.sources.get(&manifest_path));
            let tools = match load_tools(&manifest_path, profiles, engines, carried) {
                Ok(source) => {
                    errors.extend(source.refused.iter().map(|message| ToolLoadError {
                        path: manifest_path.clone(),
                        message: message.clone(),
                    }));
                    let tools = source.tools.clone();
                    registry.sources.insert(manifest_path.clone(), source);
                    tools
                }
                Err(message) => {
                    errors.push(ToolLoadError {
                        path: manifest_path,
                        message,
                    });
                    continue;
                }
            };
            loaded.extend(tools.into_iter().map(|tool| (manifest_path.clone(), tool)));
        }
        // A hosted server's tools are named by a stranger (and, with `names = "bare"`, not
        // under the server's prefix): they are registered last, so that one never takes the
        // name of a tool airlock serves from a manifest of its own — the hosted one is
        // refused instead, whatever the order the folders were read in.
        // A bare-named one comes after the prefixed ones, which it cannot pose as anyway.
        loaded.sort_by_key(|(_, tool)| {
            let bare = matches!(&tool.manifest.image.code, Code::Mcp(server) if server.bare_names);
            (tool.loaded.kind() == ToolKind::McpTool, bare)
        });
        for (manifest_path, tool) in loaded {
            if let Some(first) = origins.get(tool.name()) {
                errors.push(ToolLoadError {
                    path: manifest_path.clone(),
                    message: format!(
                        "a tool named `{}` is already served from {}",
                        tool.name(),
                        first.display()
                    ),
                });
                continue;
            }
            origins.insert(tool.name().to_owned(), manifest_path.clone());
            registry.tools.insert(tool.name().to_owned(), tool);
        }
        registry.redactor = Redactor::new(
            registry
                .tools
                .values()
                .map(|tool| &tool.manifest.image.secrets),
        );
        (registry, errors)
    }

    /// What every call of this registry's tools has redacted from what it reports.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The tool named `name`, unless it is withheld (see [`Registry::tools`]).
    pub fn get(&self, name: &str) -> Option<Arc<Tool>> {
        self.tools
            .get(name)
            .filter(|tool| tool.loaded.withheld().is_none())
            .cloned()
    }

    /// Tools in name order.
    /// Every tool loaded, withheld ones included: what must hold for a tool before it is
    /// ever served (its secrets redacted from every output) is set up over these.
    pub fn loaded(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.values()
    }

    /// The tools served now, in name order. A hosted server's tool whose listing is not
    /// trusted is withheld: loaded, and neither listed nor callable until an operator
    /// accepts it, from then on at once (every edge and every run asks here).
    pub fn tools(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools
            .values()
            .filter(|tool| tool.loaded.withheld().is_none())
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

fn find_manifests(dir: &Path, errors: &mut Vec<ToolLoadError>) -> Vec<PathBuf> {
    let own = dir.join(MANIFEST_FILE);
    if own.is_file() {
        return vec![own];
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            errors.push(ToolLoadError {
                path: dir.to_owned(),
                message: format!("cannot read the tools directory: {err}"),
            });
            return Vec::new();
        }
    };
    let mut manifests: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path().join(MANIFEST_FILE)))
        .filter(|path| path.is_file())
        .collect();
    manifests.sort();
    manifests
}

/// The tools of one manifest (one, or a server's) and the refusals of single tools of a
/// server that are not served; `carried`, what this path gave before a reload, is kept when
/// nothing it was loaded from changed (see the module doc).
fn load_tools(
    path: &Path,
    profiles: &Profiles,
    engines: &Engines,
    carried: Option<&Source>,
) -> Result<Source, String> {
    let (manifest, text) = Manifest::load_with_text(path).map_err(|err| err.message)?;
    let profile = profiles
        .get(&manifest.profile)
        .map_err(|err| err.to_string())?;
    let engine = engines.get(manifest.engine()).ok_or_else(|| {
        format!(
            "the {} engine is not enabled in this daemon",
            manifest.engine()
        )
    })?;
    let carried = carried.filter(|source| source.loaded_from(&text, &manifest, &profile));
    let source = |tools: Vec<Arc<Tool>>, refused: Vec<String>, profile: Arc<Profile>| Source {
        text: text.clone(),
        secrets: manifest.image.secrets.clone(),
        profile,
        tools,
        refused,
    };
    let Some(policy) = manifest.mcp.clone() else {
        let arguments = ArgumentSchema::compile(manifest.input_schema().clone())?;
        let loaded = engine
            .load(&manifest.image, &profile)
            .map_err(|err| err.to_string())?;
        let kept = carried
            .and_then(|source| source.tools.first())
            .filter(|tool| tool.digest() == loaded.digest())
            .cloned();
        let tool = kept.unwrap_or_else(|| {
            Arc::new(Tool {
                manifest: manifest.clone(),
                arguments,
                profile: profile.clone(),
                loaded,
            })
        });
        return Ok(source(vec![tool], Vec::new(), profile));
    };
    if let Some(kept) = carried {
        engine
            .recheck(&manifest.image, &profile)
            .map_err(|err| err.to_string())?;
        tracing::info!(
            server = manifest.name(),
            "unchanged: its tools and instances are kept"
        );
        return Ok(source(
            kept.tools.clone(),
            kept.refused.clone(),
            kept.profile.clone(),
        ));
    }
    let imports = engine
        .import(&manifest.image, &profile)
        .map_err(|err| err.to_string())?;
    let mut refused = imports.refused;
    let mut tools = Vec::new();
    for imported in imports.tools {
        if !policy.serves(&imported.tool) {
            tracing::info!(server = manifest.name(), tool = %imported.tool, "not served: the manifest's allow or deny list leaves it out");
            continue;
        }
        let tool_manifest = manifest.for_imported(&imported);
        let arguments = match ArgumentSchema::compile(tool_manifest.input_schema().clone()) {
            Ok(arguments) => arguments,
            Err(message) => {
                refused.push(format!(
                    "tool `{}` of MCP server `{}`: {message}",
                    imported.tool,
                    manifest.name()
                ));
                continue;
            }
        };
        tools.push(Arc::new(Tool {
            manifest: tool_manifest,
            arguments,
            profile: profile.clone(),
            loaded: imported.loaded,
        }));
    }
    Ok(source(tools, refused, profile))
}
