//! Which model drives a run, as a client names it: `openai:MODEL` and `anthropic:MODEL` name a
//! model of a provider the daemon is configured for; `scripted:FILE` plays a transcript and
//! `replay:FILE` a cassette (a recorded run's model exchanges, `airlock eval capture`), each
//! read here, on the client, and sent with the run (the daemon need not see the file).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::MAX_MESSAGE_BYTES;
use crate::proto::ModelConfig;

/// The name the API gives the scripted provider.
const SCRIPTED: &str = "scripted";

/// The name the API gives the provider that plays a cassette.
const REPLAY: &str = "replay";

/// The largest transcript read: the limit of one gRPC message with default settings, as for
/// `--args`; a larger start request would not reach the daemon.
pub const MAX_SCRIPT_BYTES: u64 = MAX_MESSAGE_BYTES;

/// The largest cassette read: the most the daemon takes (a cassette holds every request of a
/// run, each the whole conversation so far). One larger than the daemon's request limit is
/// refused by the daemon, which names the limit.
pub const MAX_CASSETTE_BYTES: u64 = 64 << 20;

/// The model of a run, as written on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// `scripted:FILE`.
    Scripted(PathBuf),
    /// `replay:FILE`.
    Replay(PathBuf),
    /// Any other name (`openai:MODEL`, `anthropic:MODEL`), passed to the daemon, which knows
    /// the providers it serves and says so when the name is not one of them.
    Named(String),
}

impl FromStr for ModelChoice {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err("the model is empty; use openai:MODEL, anthropic:MODEL, \
                        scripted:FILE or replay:FILE"
                .to_owned());
        }
        if raw == SCRIPTED {
            return Err("the scripted model plays a transcript file: scripted:FILE".to_owned());
        }
        if raw == REPLAY {
            return Err("the replay model plays a cassette file: replay:FILE".to_owned());
        }
        if let Some(path) = raw.strip_prefix("scripted:") {
            return match path {
                "" => Err("`scripted:` needs the transcript's file name after it".to_owned()),
                path => Ok(Self::Scripted(PathBuf::from(path))),
            };
        }
        match raw.strip_prefix("replay:") {
            Some("") => Err("`replay:` needs the cassette's file name after it".to_owned()),
            Some(path) => Ok(Self::Replay(PathBuf::from(path))),
            None => Ok(Self::Named(raw.to_owned())),
        }
    }
}

impl ModelChoice {
    /// The model configuration sent with the run; for `scripted:FILE` and `replay:FILE`,
    /// with the file's text.
    /// An error names the flag (`--model replay:FILE: …`).
    pub fn config(&self) -> Result<ModelConfig, ReadError> {
        match self {
            Self::Scripted(path) => Ok(ModelConfig {
                model: SCRIPTED.to_owned(),
                script: read_model_file(path, "scripted", "script", MAX_SCRIPT_BYTES)?,
                ..ModelConfig::default()
            }),
            Self::Replay(path) => {
                let cassette = read_model_file(path, "replay", "cassette", MAX_CASSETTE_BYTES)?;
                cassette_model(&cassette).map_err(|reason| {
                    ReadError::Unusable(format!("--model replay:{}: {reason}", path.display()))
                })?;
                Ok(replay_config(cassette))
            }
            Self::Named(name) => Ok(ModelConfig {
                model: name.clone(),
                ..ModelConfig::default()
            }),
        }
    }
}

/// The model configuration that plays `cassette` (its text, as `GetCassette` gave it).
pub fn replay_config(cassette: String) -> ModelConfig {
    ModelConfig {
        model: REPLAY.to_owned(),
        cassette,
        ..ModelConfig::default()
    }
}

/// The model a cassette was recorded from (its `model`: `openai:gpt-4o`), which is what a
/// replayed run costs; an error when the text is not a cassette. The rest of the cassette is
/// the daemon's to read.
pub fn cassette_model(text: &str) -> Result<String, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|error| format!("not a cassette (JSON): {error}"))?;
    if !value.get("cassette").is_some_and(serde_json::Value::is_u64) {
        return Err("not a cassette: no `cassette` format version".to_owned());
    }
    match value.get("model").and_then(serde_json::Value::as_str) {
        Some(model) => Ok(model.to_owned()),
        None => Err("not a cassette: no `model`".to_owned()),
    }
}

/// Reads the `what` file of `--model PREFIX:FILE`, of at most `max` bytes of UTF-8 text.
fn read_model_file(path: &Path, prefix: &str, what: &str, max: u64) -> Result<String, ReadError> {
    let flag = format!("--model {prefix}:{}", path.display());
    read_text(path, what, max).map_err(|error| match error {
        ReadError::Unreadable(reason) => ReadError::Unreadable(format!("{flag}: {reason}")),
        ReadError::Unusable(reason) => ReadError::Unusable(format!("{flag}: {reason}")),
    })
}

/// Why a model's file could not be used; the message names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// It cannot be read.
    #[error("{0}")]
    Unreadable(String),
    /// It was read, and is too large, not text, or (for a cassette) not a cassette.
    #[error("{0}")]
    Unusable(String),
}

/// Reads `path` (a script or a cassette, `what`): at most `max` bytes of UTF-8 text.
pub fn read_text(path: &Path, what: &str, max: u64) -> Result<String, ReadError> {
    let unreadable =
        |error: std::io::Error| ReadError::Unreadable(format!("cannot read the {what}: {error}"));
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    // One byte past the limit tells "exactly at the limit" from "over it".
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::Unusable(format!(
            "the {what} is larger than {max} bytes"
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| ReadError::Unusable(format!("the {what} is not UTF-8 text")))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn providers_pass_through_and_scripted_names_a_file() {
        assert_eq!(
            "openai:gpt-4o-mini".parse(),
            Ok(ModelChoice::Named("openai:gpt-4o-mini".to_owned()))
        );
        assert_eq!(
            "anthropic:claude-sonnet-4-5".parse(),
            Ok(ModelChoice::Named("anthropic:claude-sonnet-4-5".to_owned()))
        );
        assert_eq!(
            "scripted:demo/fix.yaml".parse(),
            Ok(ModelChoice::Scripted(PathBuf::from("demo/fix.yaml")))
        );
    }

    #[test]
    fn replay_names_a_cassette_and_sends_its_text() -> anyhow::Result<()> {
        assert_eq!(
            "replay:cassettes/run_1.json".parse(),
            Ok(ModelChoice::Replay(PathBuf::from("cassettes/run_1.json")))
        );
        assert!("replay".parse::<ModelChoice>().is_err());
        assert!("replay:".parse::<ModelChoice>().is_err());
        let text = r#"{"cassette": 1, "model": "openai:gpt-4o", "exchanges": []}"#;
        let mut file = tempfile::NamedTempFile::new()?;
        file.write_all(text.as_bytes())?;
        let config = ModelChoice::Replay(file.path().to_owned()).config()?;
        assert_eq!(config.model, "replay");
        assert_eq!(config.cassette, text);
        assert_eq!(config.script, "");
        assert_eq!(cassette_model(text), Ok("openai:gpt-4o".to_owned()));
        Ok(())
    }

    #[test]
    fn a_file_that_is_no_cassette_is_refused_before_anything_is_sent() -> anyhow::Result<()> {
        let mut file = tempfile::NamedTempFile::new()?;
        file.write_all(b"turns: []\n")?;
        let Err(error) = ModelChoice::Replay(file.path().to_owned()).config() else {
            panic!("a script was sent as a cassette");
        };
        assert!(error.to_string().contains("not a cassette"), "{error}");
        assert!(matches!(error, ReadError::Unusable(_)), "{error:?}");
        assert!(cassette_model(r#"{"model": "x"}"#).is_err());
        Ok(())
    }

    #[test]
    fn scripted_without_a_file_is_refused() {
        assert_eq!(
            "scripted".parse::<ModelChoice>(),
            Err("the scripted model plays a transcript file: scripted:FILE".to_owned())
        );
        assert!("scripted:".parse::<ModelChoice>().is_err());
        assert!(" ".parse::<ModelChoice>().is_err());
    }

    #[test]
    fn a_script_is_sent_as_its_text() -> anyhow::Result<()> {
        let mut file = tempfile::NamedTempFile::new()?;
        file.write_all(b"steps:\n  - final: done\n")?;
        let config = ModelChoice::Scripted(file.path().to_owned()).config()?;
        assert_eq!(config.model, "scripted");
        assert_eq!(config.script, "steps:\n  - final: done\n");

        let config = ModelChoice::Named("openai:m".to_owned()).config()?;
        assert_eq!(config.model, "openai:m");
        assert_eq!(config.script, "");
        Ok(())
    }

    #[test]
    fn a_missing_script_is_a_missing_input_naming_the_flag_and_file() {
        let Err(error) = ModelChoice::Scripted(PathBuf::from("/nonexistent/s.yaml")).config()
        else {
            panic!("a missing script was read");
        };
        assert!(
            error
                .to_string()
                .starts_with("--model scripted:/nonexistent/s.yaml: cannot read the script: "),
            "{error}"
        );
        assert!(matches!(error, ReadError::Unreadable(_)), "{error:?}");
    }
}
