//! `--model`: which model drives a run. `openai:MODEL` and `anthropic:MODEL` name a model of a
//! provider the daemon is configured for; `scripted:FILE` plays a transcript, which is read
//! here, on the client, and sent with the run (the daemon need not see the file).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use airlock_client::arguments::MAX_ARGUMENTS_BYTES;
use airlock_client::proto::ModelConfig;

use super::CliError;

/// The name the API gives the scripted provider.
const SCRIPTED: &str = "scripted";

/// The largest transcript read: the limit of one gRPC message with default settings, as for
/// `--args`; a larger start request would not reach the daemon.
const MAX_SCRIPT_BYTES: u64 = MAX_ARGUMENTS_BYTES;

/// The model of a run, as written on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// `scripted:FILE`.
    Scripted(PathBuf),
    /// Any other name (`openai:MODEL`, `anthropic:MODEL`), passed to the daemon, which knows
    /// the providers it serves and says so when the name is not one of them.
    Named(String),
}

impl FromStr for ModelChoice {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err("the model is empty; use openai:MODEL, anthropic:MODEL or \
                        scripted:FILE"
                .to_owned());
        }
        if raw == SCRIPTED {
            return Err("the scripted model plays a transcript file: scripted:FILE".to_owned());
        }
        match raw.strip_prefix("scripted:") {
            Some("") => Err("`scripted:` needs the transcript's file name after it".to_owned()),
            Some(path) => Ok(Self::Scripted(PathBuf::from(path))),
            None => Ok(Self::Named(raw.to_owned())),
        }
    }
}

impl ModelChoice {
    /// The model configuration sent with the run; for `scripted:FILE`, with the file's text.
    pub fn config(&self) -> Result<ModelConfig, CliError> {
        match self {
            Self::Scripted(path) => Ok(ModelConfig {
                model: SCRIPTED.to_owned(),
                script: read_script(path)?,
                ..ModelConfig::default()
            }),
            Self::Named(name) => Ok(ModelConfig {
                model: name.clone(),
                ..ModelConfig::default()
            }),
        }
    }
}

fn read_script(path: &Path) -> Result<String, CliError> {
    let unusable =
        |reason: String| CliError::Usage(format!("--model scripted:{}: {reason}", path.display()));
    let unreadable = |error: std::io::Error| {
        CliError::NoInput(format!(
            "--model scripted:{}: cannot read the script: {error}",
            path.display()
        ))
    };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    // One byte past the limit tells "exactly at the limit" from "over it".
    file.take(MAX_SCRIPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(unusable(format!(
            "the script is larger than {MAX_SCRIPT_BYTES} bytes"
        )));
    }
    String::from_utf8(bytes).map_err(|_| unusable("the script is not UTF-8 text".to_owned()))
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
        assert_eq!(error.exit_code(), airlock_client::exit_code::NO_INPUT);
    }
}
