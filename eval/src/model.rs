//! A suite's `model`: a provider's model by name (`"openai:gpt-4o-mini"`), or a file played
//! instead of a model — `{scripted: scripts/fix.yaml}` (a transcript) or `{replay:
//! cassettes/read.json}` (a cassette, `airlock eval capture`). Files are read when the suite
//! is loaded, relative to the file that names them, so a missing one stops the suite before
//! anything runs.

use std::fmt;
use std::path::{Path, PathBuf};

use airlock_client::proto::ModelConfig;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::problem::Problem;
use airlock_client::model::{
    MAX_CASSETTE_BYTES, MAX_SCRIPT_BYTES, ModelChoice, ReadError, cassette_model, read_text,
    replay_config,
};

/// The model as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    Named(String),
    Scripted(PathBuf),
    Replay(PathBuf),
}

/// The map form: exactly one of the two.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    scripted: Option<PathBuf>,
    replay: Option<PathBuf>,
}

impl<'de> Deserialize<'de> for ModelSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpecVisitor;
        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = ModelSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a model: \"openai:MODEL\", \"anthropic:MODEL\", {scripted: FILE} or \
                     {replay: FILE}",
                )
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<ModelSpec, E> {
                match text.parse::<ModelChoice>().map_err(E::custom)? {
                    ModelChoice::Named(name) => Ok(ModelSpec::Named(name)),
                    ModelChoice::Scripted(path) => Ok(ModelSpec::Scripted(path)),
                    ModelChoice::Replay(path) => Ok(ModelSpec::Replay(path)),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ModelSpec, A::Error> {
                let file = ModelFile::deserialize(de::value::MapAccessDeserializer::new(map))?;
                match (file.scripted, file.replay) {
                    (Some(path), None) => Ok(ModelSpec::Scripted(path)),
                    (None, Some(path)) => Ok(ModelSpec::Replay(path)),
                    _ => Err(de::Error::custom(
                        "a model file is either {scripted: FILE} or {replay: FILE}",
                    )),
                }
            }
        }
        deserializer.deserialize_any(SpecVisitor)
    }
}

/// A model ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub config: ModelConfig,
    /// The model whose price a run costs when it is not the one the run reports: a
    /// cassette's recorded model.
    pub priced_as: Option<String>,
    /// How reports name it: `openai:gpt-4o`, `scripted:scripts/fix.yaml`, `replay:…`.
    pub name: String,
}

impl Model {
    /// Whether its answers can differ from one run to the next: a provider's model can, a
    /// script or a cassette cannot.
    pub fn live(&self) -> bool {
        !matches!(self.config.model.as_str(), "scripted" | "replay")
    }
}

impl ModelSpec {
    /// Reads the file the spec names, relative to `base`; `field` names the spec in errors.
    pub fn resolve(&self, base: &Path, field: &str) -> Result<Model, Problem> {
        match self {
            Self::Named(name) => Ok(Model {
                config: ModelConfig {
                    model: name.clone(),
                    ..ModelConfig::default()
                },
                priced_as: None,
                name: name.clone(),
            }),
            Self::Scripted(path) => {
                let script = read(base, path, field, "script", MAX_SCRIPT_BYTES)?;
                Ok(Model {
                    config: ModelConfig {
                        model: "scripted".to_owned(),
                        script,
                        ..ModelConfig::default()
                    },
                    priced_as: None,
                    name: format!("scripted:{}", path.display()),
                })
            }
            Self::Replay(path) => {
                let cassette = read(base, path, field, "cassette", MAX_CASSETTE_BYTES)?;
                let recorded = cassette_model(&cassette).map_err(|reason| {
                    Problem::invalid(field, format!("{}: {reason}", path.display()))
                })?;
                Ok(Model {
                    config: replay_config(cassette),
                    priced_as: Some(recorded),
                    name: format!("replay:{}", path.display()),
                })
            }
        }
    }
}

fn read(base: &Path, path: &Path, field: &str, what: &str, max: u64) -> Result<String, Problem> {
    let full = base.join(path);
    read_text(&full, what, max).map_err(|error| match error {
        ReadError::Unreadable(reason) => {
            Problem::unreadable(field, format!("{}: {reason}", full.display()))
        }
        ReadError::Unusable(reason) => {
            Problem::invalid(field, format!("{}: {reason}", full.display()))
        }
    })
}
