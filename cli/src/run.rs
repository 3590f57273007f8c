//! `airlock run "TASK"`: starts an agent run and follows it to its end, asking the approval
//! questions on the terminal; exits with the code of the run's stop reason.

use std::io::Write;
use std::path::PathBuf;

use airlock_client::proto::{ApprovalPolicy, StartRun};
use clap::Args;

use super::follow::{FollowOptions, OnInterrupt, follow};
use super::workspace::{Workspace, resolve as resolve_workspace};
use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;
use crate::settings::RunSettings;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What the agent is asked to do.
    task: String,

    /// The workspace the run works in [default: the current directory, when it lies inside
    /// the daemon's workspace roots]; with --session, the session's.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// Continue this session: its workspace and settings, its conversation so far, and what
    /// was approved "always" in it.
    #[arg(long, value_name = "ID")]
    session: Option<String>,

    #[command(flatten)]
    settings: RunSettings,

    /// Print each event as one JSON object per line instead of the transcript.
    #[arg(long)]
    json: bool,
}

pub async fn run<O: Write, E: Write>(
    args: RunArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let json = args.json;
    // Checked (and a script read) before anything is sent.
    let mut start = start_request(&args)?;
    let client = server.connect().await?;
    // A session has its workspace; a new run takes --workspace, else the current directory.
    let workspace = match (&args.session, &args.workspace) {
        (Some(_), None) => None,
        _ => Some(Workspace::choose(&client, args.workspace.as_deref()).await?),
    };
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
        input: None,
    };
    follow(handle, options, out).await
}

/// The first message of the run's stream, from the command line; reads the model's script
/// (so that it is checked before anything is sent) and resolves `--workspace`.
fn start_request(args: &RunArgs) -> Result<StartRun, CliError> {
    let mut start = args.settings.start_run(args.task.clone())?;
    match &args.session {
        // What the flags leave unset, the session's settings decide.
        Some(session) => start.session_id = session.clone(),
        None => {
            if start.model.is_none() {
                return Err(CliError::Usage(
                    "--model: a run outside a session needs a model: openai:MODEL, \
                     anthropic:MODEL, scripted:FILE or replay:FILE (a run in a --session has the \
                     session's)"
                        .to_owned(),
                ));
            }
            if start.approval_policy == ApprovalPolicy::Unspecified as i32 {
                start.approval_policy = ApprovalPolicy::Risky as i32;
            }
        }
    }
    if let Some(dir) = &args.workspace {
        start.workspace = resolve_workspace(dir)?;
    }
    Ok(start)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use airlock_client::proto::Budgets;
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
        let start = start_request(&parse(&["--model", "openai:m"])?)?;
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
        let start = start_request(&parse(&[
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
                ..Budgets::default()
            })
        );
        assert_eq!(start.approval_timeout_ms, 90_000);
        assert_eq!(start.instructions, "be brief");
        assert!(start.stop_on_denial);
        Ok(())
    }

    #[test]
    fn durations_in_milliseconds_and_bad_durations() -> anyhow::Result<()> {
        let start = start_request(&parse(&["--model", "openai:m", "--timeout", "1500"])?)?;
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
    fn the_model_is_required_outside_a_session_and_checked() -> anyhow::Result<()> {
        let Err(error) = start_request(&parse(&[])?) else {
            panic!("a run without a model or a session was started");
        };
        assert!(error.to_string().starts_with("--model: "), "{error}");
        assert_eq!(error.exit_code(), airlock_client::exit_code::USAGE);
        assert!(Wrapper::try_parse_from(["run", "task", "--model", "scripted"]).is_err());
        assert!(
            Wrapper::try_parse_from(["run", "task", "--model", "x", "--policy", "maybe"]).is_err()
        );
        Ok(())
    }

    #[test]
    fn a_run_in_a_session_leaves_what_is_not_given_to_the_session() -> anyhow::Result<()> {
        let start = start_request(&parse(&["--session", "ses_1"])?)?;
        assert_eq!(start.session_id, "ses_1");
        assert_eq!(start.model, None);
        assert_eq!(start.approval_policy, ApprovalPolicy::Unspecified as i32);
        assert_eq!(start.budgets, Some(Budgets::default()));
        let start = start_request(&parse(&["--session", "ses_1", "--policy", "always"])?)?;
        assert_eq!(start.approval_policy, ApprovalPolicy::Always as i32);
        Ok(())
    }
}
