//! The flags that configure a run, shared by `airlock run`, `airlock chat` and `airlock
//! sessions new`: the model, the approval policy, the tools, the budgets and the
//! instructions. A flag left out leaves the setting to what is above it — a session's
//! settings for a run in a session, the daemon's defaults otherwise — so that one set of
//! flags means the same in each command.

use crate::duration::parse_millis;
use airlock_client::proto::{ApprovalPolicy, Budgets, ModelConfig, SessionSettings, StartRun};
use clap::{Args, ValueEnum};

use crate::error::CliError;
use airlock_client::model::ModelChoice;

#[derive(Debug, Args)]
pub struct RunSettings {
    /// The model: scripted:FILE (a transcript read here and sent), replay:FILE (a cassette
    /// from `airlock eval capture`), openai:MODEL or anthropic:MODEL; in a session, the
    /// session's when not given.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<ModelChoice>,

    /// Which calls are put to you: always (every call), risky (write, network, install,
    /// exec, destructive), never (nothing is asked; what would be is denied), auto (nothing is
    /// asked; what the tool's profile allows runs) [default: a session's policy, else risky].
    #[arg(long, value_enum)]
    pub policy: Option<Policy>,

    /// The tools the model may call; all the daemon serves (or the session allows) when not
    /// given.
    #[arg(long, value_name = "TOOL,...", value_delimiter = ',')]
    pub tools: Vec<String>,

    /// Model calls at most; the session's or the daemon's default when not given.
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,

    /// Input plus output tokens at most over a run; no limit when not given.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,

    /// Tool calls executed at most; the session's or the daemon's default when not given.
    #[arg(long, value_name = "N")]
    pub max_tool_calls: Option<u32>,

    /// Tokens of context sent to the model per step (older steps are compacted beyond it);
    /// the session's or the daemon's default when not given.
    #[arg(long, value_name = "N")]
    pub context_tokens: Option<u64>,

    /// Wall time of a run: 90s, 5m, 1h30m, or milliseconds; the session's or the daemon's
    /// default when not given.
    #[arg(long, value_name = "DURATION", value_parser = duration_millis)]
    pub timeout: Option<u64>,

    /// How long each approval waits for an answer before it counts as denied.
    #[arg(long, value_name = "DURATION", value_parser = duration_millis)]
    pub approval_timeout: Option<u64>,

    /// Instructions added to the daemon's system prompt.
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,

    /// End a run at the first denied call instead of telling the model.
    #[arg(long)]
    pub stop_on_denial: bool,

    /// A policy rule file (TOML, `ask` and `deny` rules only) to judge the run's — or the
    /// session's runs' — calls by, after the operator's rules: it may only narrow them.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<std::path::PathBuf>,
}

/// `--policy`: the API's approval policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    Always,
    Risky,
    Never,
    Auto,
}

impl From<Policy> for ApprovalPolicy {
    fn from(policy: Policy) -> Self {
        match policy {
            Policy::Always => ApprovalPolicy::Always,
            Policy::Risky => ApprovalPolicy::Risky,
            Policy::Never => ApprovalPolicy::Never,
            Policy::Auto => ApprovalPolicy::Auto,
        }
    }
}

fn duration_millis(text: &str) -> Result<u64, String> {
    parse_millis(text).map_err(|error| error.to_string())
}

impl RunSettings {
    /// The first message of a run's stream asking for `input`, with what the flags set and
    /// the rest unset (0, empty, unspecified): no session, no workspace. Reads a scripted
    /// model's file here, so that it is checked before anything is sent.
    pub fn start_run(&self, input: String) -> Result<StartRun, CliError> {
        Ok(StartRun {
            session_id: String::new(),
            workspace: String::new(),
            input,
            model: self.model_config()?,
            tools: self.tools.clone(),
            approval_policy: self.approval_policy() as i32,
            budgets: Some(self.budgets()),
            approval_timeout_ms: self.approval_timeout.unwrap_or(0),
            stop_on_denial: self.stop_on_denial,
            instructions: self.instructions.clone().unwrap_or_default(),
            rules: self.rules_text()?,
        })
    }

    /// What a new session's runs inherit, from the same flags.
    pub fn session_settings(&self) -> Result<SessionSettings, CliError> {
        Ok(SessionSettings {
            model: self.model_config()?,
            approval_policy: self.approval_policy() as i32,
            budgets: Some(self.budgets()),
            tools: self.tools.clone(),
            instructions: self.instructions.clone().unwrap_or_default(),
            approval_timeout_ms: self.approval_timeout.unwrap_or(0),
            stop_on_denial: self.stop_on_denial,
            rules: self.rules_text()?,
        })
    }

    /// The rule file's text, read here so that a missing file is told before anything is
    /// sent (the daemon checks the rules themselves).
    fn rules_text(&self) -> Result<String, CliError> {
        match &self.rules {
            None => Ok(String::new()),
            Some(path) => std::fs::read_to_string(path)
                .map_err(|error| CliError::Usage(format!("--rules {}: {error}", path.display()))),
        }
    }

    fn model_config(&self) -> Result<Option<ModelConfig>, CliError> {
        let config = self.model.as_ref().map(ModelChoice::config).transpose()?;
        Ok(config)
    }

    fn approval_policy(&self) -> ApprovalPolicy {
        self.policy
            .map_or(ApprovalPolicy::Unspecified, ApprovalPolicy::from)
    }

    fn budgets(&self) -> Budgets {
        Budgets {
            max_steps: self.max_steps.unwrap_or(0),
            max_tokens: self.max_tokens.unwrap_or(0),
            max_wall_time_ms: self.timeout.unwrap_or(0),
            max_tool_calls: self.max_tool_calls.unwrap_or(0),
            context_tokens: self.context_tokens.unwrap_or(0),
            ..Budgets::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        settings: RunSettings,
    }

    fn parse(argv: &[&str]) -> anyhow::Result<RunSettings> {
        let argv = std::iter::once("test").chain(argv.iter().copied());
        Ok(Wrapper::try_parse_from(argv)?.settings)
    }

    #[test]
    fn nothing_given_leaves_everything_to_the_session_or_the_daemon() -> anyhow::Result<()> {
        let settings = parse(&[])?;
        let start = settings.start_run("hello".to_owned())?;
        assert_eq!(start.input, "hello");
        assert_eq!(start.model, None);
        assert_eq!(start.approval_policy, ApprovalPolicy::Unspecified as i32);
        assert_eq!(start.budgets, Some(Budgets::default()));
        assert!(start.tools.is_empty());
        assert_eq!(
            settings.session_settings()?,
            SessionSettings {
                budgets: Some(Budgets::default()),
                ..SessionSettings::default()
            }
        );
        Ok(())
    }

    #[test]
    fn a_session_inherits_every_flag() -> anyhow::Result<()> {
        let settings = parse(&[
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--policy",
            "auto",
            "--tools",
            "grep,read_file",
            "--max-steps",
            "30",
            "--max-tokens",
            "9000",
            "--context-tokens",
            "4000",
            "--timeout",
            "10m",
            "--approval-timeout",
            "1m",
            "--instructions",
            "answer in French",
            "--stop-on-denial",
        ])?;
        let session = settings.session_settings()?;
        assert_eq!(
            session.model.map(|model| model.model).as_deref(),
            Some("anthropic:claude-sonnet-4-5")
        );
        assert_eq!(session.approval_policy, ApprovalPolicy::Auto as i32);
        assert_eq!(session.tools, ["grep", "read_file"]);
        assert_eq!(
            session.budgets,
            Some(Budgets {
                max_steps: 30,
                max_tokens: 9000,
                max_wall_time_ms: 600_000,
                context_tokens: 4000,
                ..Budgets::default()
            })
        );
        assert_eq!(session.approval_timeout_ms, 60_000);
        assert_eq!(session.instructions, "answer in French");
        assert!(session.stop_on_denial);
        Ok(())
    }
}
