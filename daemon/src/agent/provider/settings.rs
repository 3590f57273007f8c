//! Which provider and model a run uses ([`ModelSpec`]) and the daemon's side of provider
//! configuration ([`ProviderSettings`]): what `mod.rs`'s `build` and the HTTP providers read.
//! Its own file so the providers take their settings without importing `mod.rs`.

use std::fmt;
use std::time::Duration;

use super::retry::RetryPolicy;

/// Which provider and model a run uses, as its client asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// `openai:MODEL` — Chat Completions at the configured base URL.
    OpenAi { model: String },
    /// `anthropic:MODEL` — the Messages API at the configured base URL.
    Anthropic { model: String },
    /// `scripted` — a transcript in YAML or JSON (see `scripted.rs`), sent by the client.
    Scripted { script: String },
    /// `replay` — a cassette (see `cassette.rs`), sent by the client.
    Replay { cassette: String },
}

/// The daemon's side of provider configuration: where the APIs are and which environment
/// variables hold their keys. Clients choose a provider and model, never a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    pub openai_base_url: String,
    pub openai_api_key_env: String,
    pub anthropic_base_url: String,
    pub anthropic_api_key_env: String,
    /// How long one HTTP attempt may take, a streamed answer's last byte included.
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    /// Whether `openai` and `anthropic` stream answers (reporting text as it arrives). Off
    /// for local servers whose streamed tool calls are unreliable.
    pub stream: bool,
}

impl Default for ProviderSettings {
    fn default() -> Self {
        ProviderSettings {
            openai_base_url: "https://api.openai.com/v1".into(),
            openai_api_key_env: "OPENAI_API_KEY".into(),
            anthropic_base_url: "https://api.anthropic.com".into(),
            anthropic_api_key_env: "ANTHROPIC_API_KEY".into(),
            request_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
            stream: true,
        }
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::OpenAi { model } => write!(f, "openai:{model}"),
            ModelSpec::Anthropic { model } => write!(f, "anthropic:{model}"),
            ModelSpec::Scripted { .. } => f.write_str("scripted"),
            ModelSpec::Replay { .. } => f.write_str("replay"),
        }
    }
}
