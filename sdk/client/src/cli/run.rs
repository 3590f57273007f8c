//! `airlock run "TASK"`: starts an agent run and follows it to its end, asking the approval
//! questions on the terminal; exits with the code of the run's stop reason.

use std::io::Write;
use std::path::PathBuf;

use airlock_client::duration::parse_millis;
use airlock_client::proto::{ApprovalPolicy, Budgets, StartRun};
use clap::{Args, ValueEnum};

use super::Server;
use super::follow::{FollowOptions, OnInterrupt, follow};
use super::model::ModelChoice;
use super::workspace::{Workspace, resolve as resolve_workspace};
use super::{CliError, Output};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What the agent is asked to do.
    task: String,

    /// The workspace the run works in [default: the current directory, when it lies inside
    /// the daemon's workspace roots]; with --session, the session's.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// The model: scripted:FILE (a transcript read here and sent), openai:MODEL or
    /// anthropic:MODEL.
    #[arg(long, value_name = "MODEL")]
    model: ModelChoice,

    /// Which calls are put to you: always (every call), risky (write, network, install,
    /// exec, destructive), never (nothing is asked; what would be is denied), auto (nothing is
    /// asked; what the tool's profile allows runs).
    #[arg(long, value_enum, default_value_t = Policy::Risky)]
    policy: Policy,

    /// The tools the model may call; all the daemon serves when not given.
    #[arg(long, value_name = "TOOL,...", value_delimiter = ',')]
    tools: Vec<String>,

    /// Continue this session (its workspace, and what was approved "always" in it).
    #[arg(long, value_name = "ID")]
    session: Option<String>,

    /// Model calls at most; the daemon's default when not given.
    #[arg(long, value_name = "N")]
    max_steps: Option<u32>,

    /// Input plus output tokens at most over the run; no limit when not given.
    #[arg(long, value_name = "N")]
    max_tokens: Option<u64>,

    /// Tool calls executed at most; the daemon's default when not given.
    #[arg(long, value_name = "N")]
    max_tool_calls: Option<u32>,

    /// Wall time of the run: 90s, 5m, 1h30m, or milliseconds; the daemon's default when not
    /// given.
    #[arg(long, value_name = "DURATION", value_parser = duration_millis)]
    timeout: Option<u64>,

    /// How long each approval waits for an answer before it counts as denied.
    #[arg(long, value_name = "DURATION", value_parser = duration_millis)]
    approval_timeout: Option<u64>,

    /// Instructions added to the daemon's system prompt.
    #[arg(long, value_name = "TEXT")]
    instructions: Option<String>,

    /// End the run at the first denied call instead of telling the model.
    #[arg(long)]
    stop_on_denial: bool,

    /// Print each event as one JSON object per line instead of the transcript.
    #[arg(long)]
    json: bool,
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

pub async fn run<O: Write, E: Write>(
    args: RunArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let json = args.json;
    let client = server.connect().await?;
    // A session has its workspace; a new run takes --workspace, else the current directory.
    let workspace = match (&args.session, &args.workspace) {
        (Some(_), None) => None,
        _ => Some(Workspace::choose(&client, args.workspace.as_deref()).await?),
    };
    let mut start = start_request(args)?;
    if let Some(workspace) = &workspace {
        start.workspace = workspace.path.clone();
    }
    let handle = match client.start_run(start).await {
        Ok(handle) => handle,
        Err(error) => {
            return Err(match &workspace {
                Some(workspace) => workspace.explain(error),
                None => error.into(),
            });
        }
    };
    let options = FollowOptions {
        json,
        // A new run has no past: every request it makes is asked.
        answer_from: 0,
        on_interrupt: OnInterrupt::Cancel,
    };
    follow(handle, options, out).await
}

/// The first message of the run's stream, from the command line; reads the model's script
/// (so that it is checked before anything is sent) and resolves `--workspace`.
fn start_request(args: RunArgs) -> Result<StartRun, CliError> {
    let workspace = match &args.workspace {
        Some(dir) => resolve_workspace(dir)?,
        None => String::new(),
    };
    Ok(StartRun {
        session_id: args.session.unwrap_or_default(),
        workspace,
        input: args.task,
        model: Some(args.model.config()?),
        tools: args.tools,
        approval_policy: ApprovalPolicy::from(args.policy) as i32,
        budgets: Some(Budgets {
            max_steps: args.max_steps.unwrap_or(0),
            max_tokens: args.max_tokens.unwrap_or(0),
            max_wall_time_ms: args.timeout.unwrap_or(0),
            max_tool_calls: args.max_tool_calls.unwrap_or(0),
            max_repeated_errors: 0,
            context_tokens: 0,
        }),
        approval_timeout_ms: args.approval_timeout.unwrap_or(0),
        stop_on_denial: args.stop_on_denial,
        instructions: args.instructions.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: RunArgs,
    }

    fn parse(extra: &[&str]) -> anyhow::Result<RunArgs> {
        let argv = ["run", "fix the test"].iter().chain(extra).copied();
        Ok(Wrapper::try_parse_from(argv)?.args)
    }

    #[test]
    fn defaults_leave_budgets_to_the_daemon_and_ask_about_risky_calls() -> anyhow::Result<()> {
        let start = start_request(parse(&["--model", "openai:m"])?)?;
        assert_eq!(start.input, "fix the test");
        assert_eq!(start.approval_policy, ApprovalPolicy::Risky as i32);
        assert_eq!(start.budgets, Some(Budgets::default()));
        assert_eq!(start.workspace, "");
        assert_eq!(start.session_id, "");
        assert!(start.tools.is_empty());
        assert!(!start.stop_on_denial);
        assert_eq!(
            start.model.map(|model| model.model).as_deref(),
            Some("openai:m")
        );
        Ok(())
    }

    #[test]
    fn every_flag_reaches_the_request() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let script = dir.path().join("script.yaml");
        std::fs::File::create(&script)?.write_all(b"steps: []\n")?;
        let workspace = dir.path().to_str().unwrap_or_default().to_owned();
        let model = format!("scripted:{}", script.display());
        let start = start_request(parse(&[
            "--workspace",
            &workspace,
            "--model",
            &model,
            "--policy",
            "never",
            "--tools",
            "read_file,write_file",
            "--session",
            "ses_1",
            "--max-steps",
            "7",
            "--max-tokens",
            "5000",
            "--max-tool-calls",
            "3",
            "--timeout",
            "5m",
            "--approval-timeout",
            "90s",
            "--instructions",
            "be brief",
            "--stop-on-denial",
        ])?)?;
        assert_eq!(
            std::path::Path::new(&start.workspace),
            std::fs::canonicalize(dir.path())?
        );
        let model = start.model.unwrap_or_default();
        assert_eq!(model.model, "scripted");
        assert_eq!(model.script, "steps: []\n");
        assert_eq!(start.approval_policy, ApprovalPolicy::Never as i32);
        assert_eq!(start.tools, ["read_file", "write_file"]);
        assert_eq!(start.session_id, "ses_1");
        assert_eq!(
            start.budgets,
            Some(Budgets {
                max_steps: 7,
                max_tokens: 5000,
                max_wall_time_ms: 300_000,
                max_tool_calls: 3,
                max_repeated_errors: 0,
                context_tokens: 0,
            })
        );
        assert_eq!(start.approval_timeout_ms, 90_000);
        assert_eq!(start.instructions, "be brief");
        assert!(start.stop_on_denial);
        Ok(())
    }

    #[test]
    fn durations_in_milliseconds_and_bad_durations() -> anyhow::Result<()> {
        let start = start_request(parse(&["--model", "openai:m", "--timeout", "1500"])?)?;
        assert_eq!(start.budgets.unwrap_or_default().max_wall_time_ms, 1500);
        let Err(error) = parse(&["--model", "openai:m", "--timeout", "soon"]) else {
            panic!("a bad duration parsed");
        };
        assert!(
            error.to_string().contains("invalid duration \"soon\""),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn the_model_is_required_and_checked() {
        assert!(Wrapper::try_parse_from(["run", "task"]).is_err());
        assert!(Wrapper::try_parse_from(["run", "task", "--model", "scripted"]).is_err());
        assert!(
            Wrapper::try_parse_from(["run", "task", "--model", "x", "--policy", "maybe"]).is_err()
        );
    }
}
