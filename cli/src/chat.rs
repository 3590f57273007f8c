//! `airlock chat`: a conversation with an agent in a session. Each line typed starts a run in
//! the session, which carries on from what was said and done before; its transcript streams
//! as `airlock run` prints it, approvals are asked the same way, and then the next line is
//! read. Without `--session` a session is made first, whose id continues the conversation
//! later.
//!
//! Ctrl-C during a run cancels that run, and the chat goes on; a second press while it is
//! being cancelled, or Ctrl-C at the prompt, leaves the chat.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use airlock_client::proto::{CreateSessionRequest, SessionSettings, StartRun};
use airlock_client::{AirlockClient, ClientError, exit_code};
use clap::Args;

use super::follow::{FollowOptions, Followed, OnInterrupt, follow_run};
use crate::error::CliError;
use crate::input::Input;
use crate::interrupt::Interrupts;
use crate::output::Output;
use crate::server::Server;
use crate::settings::RunSettings;
use crate::workspace::Workspace;

/// The prompt, on stderr, when a person types the messages.
const PROMPT: &str = "you> ";

/// The line that leaves the chat (as does the end of the input).
const EXIT: &str = "/exit";

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Continue this session (`airlock sessions list` shows them); without it, a new session
    /// is made.
    #[arg(long, value_name = "ID", conflicts_with = "workspace")]
    session: Option<String>,

    /// The new session's workspace [default: the current directory, when it lies inside the
    /// daemon's workspace roots].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// For a new session, what its runs inherit; in a given session, what each run asks for
    /// (a session allows narrowing: a stricter policy, lower budgets, fewer tools).
    #[command(flatten)]
    settings: RunSettings,
}

/// What the person said at the prompt.
#[derive(Debug, PartialEq, Eq)]
enum Said {
    Message(String),
    /// `/exit`, or the end of the input.
    Leave,
    /// Ctrl-C.
    Interrupted,
}

pub async fn run<O: Write, E: Write>(
    args: ChatArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    // Checked (and a script read) before anything is sent.
    let (settings, mut start) = match &args.session {
        None => (Some(args.settings.session_settings()?), StartRun::default()),
        Some(session) => {
            let mut start = args.settings.start_run(String::new())?;
            start.session_id = session.clone();
            (None, start)
        }
    };
    let client = server.connect().await?;
    open_session(
        &client,
        args.workspace.as_deref(),
        settings,
        &mut start,
        out,
    )
    .await?;
    let input = Input::stdin();
    if input.is_terminal() {
        out.line(&format!("{EXIT} or Ctrl-D leaves; Ctrl-C stops a run"))?;
    }
    let mut turns = 0u32;
    let code = loop {
        let message = match next_message(&input, out).await? {
            Said::Message(message) => message,
            Said::Leave => break exit_code::OK,
            Said::Interrupted => break exit_code::INTERRUPTED,
        };
        if turns > 0 {
            // One transcript after another: a blank line tells them apart.
            out.stdout("\n")?;
        }
        turns += 1;
        let run = StartRun {
            input: message,
            ..start.clone()
        };
        let followed = match client.start_run(run).await {
            Ok(handle) => {
                let options = FollowOptions {
                    json: false,
                    answer_from: 0,
                    on_interrupt: OnInterrupt::Cancel,
                    input: Some(input.clone()),
                };
                follow_run(handle, options, out).await
            }
            Err(error) => Err(error.into()),
        };
        match followed {
            // Whatever the run's end, the conversation goes on.
            Ok(Followed::Finished(_)) => {}
            Ok(Followed::Left(code)) => break code,
            Err(error) if refused(&error) => {
                out.error(&error);
                if let Some(hint) = crate::hints::hint(&error) {
                    out.error(&hint);
                }
            }
            Err(error) => {
                leave(&start.session_id, out)?;
                return Err(error);
            }
        }
    };
    leave(&start.session_id, out)?;
    Ok(code)
}

/// Makes the session, with `settings` (the flags) as what its runs inherit, or looks up the
/// one `start` names; either way `start` is then a run in it, and stderr says which it is.
async fn open_session<O: Write, E: Write>(
    client: &AirlockClient,
    workspace: Option<&Path>,
    settings: Option<SessionSettings>,
    start: &mut StartRun,
    out: &mut Output<O, E>,
) -> Result<(), CliError> {
    match settings {
        // The flags become the session's settings, which every run then inherits: a chat
        // continued later with only --session goes on with the same model and policy.
        Some(settings) => {
            let workspace = Workspace::choose(client, workspace).await?;
            let request = CreateSessionRequest {
                workspace: workspace.path.clone(),
                labels: HashMap::new(),
                settings: Some(settings),
            };
            let session = client
                .create_session(request)
                .await
                .map_err(|error| workspace.explain(error))?;
            out.line(&format!("new session {}", session.session_id))?;
            start.session_id = session.session_id;
        }
        None => {
            let session = client.get_session(&start.session_id).await?;
            let runs = match session.runs {
                1 => "1 run".to_owned(),
                runs => format!("{runs} runs"),
            };
            out.line(&format!("session {}: {runs} so far", session.session_id))?;
        }
    }
    Ok(())
}

/// Prompts (when a person types) and reads the next message; empty lines are passed over.
async fn next_message<O: Write, E: Write>(
    input: &Input,
    out: &mut Output<O, E>,
) -> Result<Said, CliError> {
    // Made here, at each prompt, so that a press during the run before is not seen again.
    let mut interrupts = Interrupts::new();
    loop {
        if input.is_terminal() {
            out.prompt(PROMPT)?;
        }
        let mut pending = input.read_line();
        let read = tokio::select! {
            read = pending.wait() => read,
            () = interrupts.next() => {
                out.answered(Some(""))?;
                return Ok(Said::Interrupted);
            }
        };
        let line = match read {
            Ok(line) => line,
            Err(error) => {
                out.answered(Some(""))?;
                out.line(&format!(
                    "airlock: cannot read standard input: {error}; taking it as closed"
                ))?;
                None
            }
        };
        let Some(line) = line else {
            // Ctrl-D leaves the cursor after the prompt.
            out.answered(Some(""))?;
            return Ok(Said::Leave);
        };
        // The terminal has echoed the line and its end.
        out.answered(None)?;
        match line.trim() {
            "" => {}
            EXIT => return Ok(Said::Leave),
            message => return Ok(Said::Message(message.to_owned())),
        }
    }
}

/// A run the daemon refused to start (the session already has one going, a setting it does
/// not allow, a cap reached): said, and the chat goes on. A daemon that cannot be reached, or
/// a stream that broke, ends the chat.
fn refused(error: &CliError) -> bool {
    let CliError::Client(ClientError::Rpc { status, .. }) = error else {
        return false;
    };
    matches!(
        exit_code::for_rpc_code(status.code()),
        exit_code::USAGE | exit_code::TEMPORARY
    )
}

fn leave<O: Write, E: Write>(session_id: &str, out: &mut Output<O, E>) -> Result<(), CliError> {
    out.line(&format!(
        "continue with: airlock chat --session {session_id}"
    ))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use tonic::Code;

    use super::*;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: ChatArgs,
    }

    #[tokio::test]
    async fn messages_are_lines_empty_ones_skipped_and_exit_or_the_end_leaves() -> anyhow::Result<()>
    {
        let input = Input::from_bytes(b"\n   \nhello there \n/exit\nnever read\n")?;
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        assert_eq!(
            next_message(&input, &mut out).await?,
            Said::Message("hello there".to_owned())
        );
        assert_eq!(next_message(&input, &mut out).await?, Said::Leave);

        let input = Input::from_bytes(b"one\n")?;
        assert_eq!(
            next_message(&input, &mut out).await?,
            Said::Message("one".to_owned())
        );
        assert_eq!(next_message(&input, &mut out).await?, Said::Leave);
        // Piped messages are not prompted for.
        let (stdout, stderr) = out.into_inner();
        assert!(stdout.is_empty() && stderr.is_empty(), "{stderr:?}");
        Ok(())
    }

    #[test]
    fn a_refused_run_is_said_and_a_lost_daemon_ends_the_chat() {
        let rpc = |code| {
            CliError::Client(ClientError::Rpc {
                endpoint: "http://h:1".to_owned(),
                status: Box::new(tonic::Status::new(code, "session_id: a run is going on")),
            })
        };
        assert!(refused(&rpc(Code::FailedPrecondition)));
        assert!(refused(&rpc(Code::ResourceExhausted)));
        assert!(!refused(&rpc(Code::Unavailable)));
        assert!(!refused(&rpc(Code::Internal)));
        assert!(!refused(&CliError::Client(ClientError::Unreachable {
            endpoint: "http://h:1".to_owned(),
            reason: "connection refused".to_owned(),
        })));
    }

    #[test]
    fn a_session_or_a_workspace_not_both() -> anyhow::Result<()> {
        let args = Wrapper::try_parse_from(["chat", "--session", "ses_1", "--policy", "never"])?;
        assert_eq!(args.args.session.as_deref(), Some("ses_1"));
        assert!(
            Wrapper::try_parse_from(["chat", "--session", "ses_1", "--workspace", "/tmp"]).is_err()
        );
        Ok(())
    }
}
