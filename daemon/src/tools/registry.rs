//! The registry: every tool the daemon serves, loaded from the tools directories at start.
//!
//! A tools directory holds one folder per tool, each with a `tool.toml` (a directory that
//! itself holds a `tool.toml` is one tool). A tool that cannot be served — a bad manifest, a
//! missing module, a changed digest, a profile that doesn't exist or that its engine cannot
//! enforce — is refused alone, with an error naming its file; the rest are served.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::{Engines, LoadedTool};
use crate::profile::{Profile, Profiles};

use super::arguments::ArgumentSchema;
use super::manifest::Manifest;

const MANIFEST_FILE: &str = "tool.toml";

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
}

impl Registry {
    /// Loads every tool found in `dirs`, in order. Returns the registry and each refusal.
    pub fn load(
        dirs: &[PathBuf],
        profiles: &Profiles,
        engines: &Engines,
    ) -> (Registry, Vec<ToolLoadError>) {
        let mut registry = Registry::default();
        let mut errors = Vec::new();
        let mut origins: BTreeMap<String, PathBuf> = BTreeMap::new();
        let manifests: Vec<PathBuf> = dirs
            .iter()
            .flat_map(|dir| find_manifests(dir, &mut errors))
            .collect();
        for manifest_path in manifests {
            match load_tool(&manifest_path, profiles, engines) {
                Ok(tool) => {
                    if let Some(first) = origins.get(tool.name()) {
                        errors.push(ToolLoadError {
                            path: manifest_path,
                            message: format!(
                                "a tool named `{}` is already served from {}",
                                tool.name(),
                                first.display()
                            ),
                        });
                        continue;
                    }
                    origins.insert(tool.name().to_owned(), manifest_path);
                    registry
                        .tools
                        .insert(tool.name().to_owned(), Arc::new(tool));
                }
                Err(message) => errors.push(ToolLoadError {
                    path: manifest_path,
                    message,
                }),
            }
        }
        (registry, errors)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Tool>> {
        self.tools.get(name).cloned()
    }

    /// Tools in name order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.values()
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

fn load_tool(path: &Path, profiles: &Profiles, engines: &Engines) -> Result<Tool, String> {
    let manifest = Manifest::load(path).map_err(|err| err.message)?;
    let arguments = ArgumentSchema::compile(manifest.input_schema().clone())?;
    let profile = profiles
        .get(&manifest.profile)
        .map_err(|err| err.to_string())?;
    let engine = engines.get(manifest.engine()).ok_or_else(|| {
        format!(
            "the {} engine is not enabled in this daemon",
            manifest.engine()
        )
    })?;
    let loaded = engine
        .load(&manifest.image, &profile)
        .map_err(|err| err.to_string())?;
    Ok(Tool {
        manifest,
        arguments,
        profile,
        loaded,
    })
}
