//! `airlock sessions …`: sessions, whose runs carry one conversation on — `new` creates one
//! with the settings its runs inherit, `list` and `show` read them. `airlock chat` talks in
//! one; `airlock run --session` runs a task in one.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use airlock_client::proto::{CreateSessionRequest, ListSessionsRequest, Session};
use airlock_client::{AirlockClient, ClientError, exit_code};
use airlock_render as render;
use clap::{Args, Subcommand};

use crate::error::CliError;
use crate::follow::now_ms;
use crate::output::Output;
use crate::pages;
use crate::server::Server;
use crate::settings::RunSettings;
use crate::workspace::Workspace;

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Create a session: a workspace, and the settings its runs inherit (model, policy,
    /// budgets, tools, instructions); prints its id.
    New(Box<NewArgs>),
    /// List your sessions, most recently active first.
    List {
        /// List at most this many; 0 lists them all.
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: u32,
        /// Print JSON (`{"sessions": [...]}`) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one session: where it stands, and the settings its runs inherit.
    Show {
        /// The session.
        session_id: String,
        /// Print the session as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The workspace its runs work in [default: the current directory, when it lies inside
    /// the daemon's workspace roots].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,

    #[command(flatten)]
    settings: RunSettings,

    /// A label, KEY=VALUE; may be given again.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    labels: Vec<(String, String)>,

    /// Print the session as one JSON object instead of its id.
    #[arg(long)]
    json: bool,
}

fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("a label is KEY=VALUE, not {text:?}")),
    }
}

pub async fn run<O: Write, E: Write>(
    command: SessionsCommand,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    match command {
        SessionsCommand::New(args) => new(*args, server, out).await,
        SessionsCommand::List { limit, json } => {
            let client = server.connect().await?;
            let (sessions, more) = fetch(&client, limit).await?;
            list(&sessions, json, more, limit, now_ms(), out)?;
            Ok(exit_code::OK)
        }
        SessionsCommand::Show { session_id, json } => {
            let session = server.connect().await?.get_session(&session_id).await?;
            if json {
                out.stdout(&render::session_json(&session))?;
            } else {
                out.stdout(&render::session_details(&session, now_ms()))?;
            }
            Ok(exit_code::OK)
        }
    }
}

async fn new<O: Write, E: Write>(
    args: NewArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    // Checked (and a script read) before anything is sent.
    let settings = args.settings.session_settings()?;
    let client = server.connect().await?;
    let workspace = Workspace::choose(&client, args.workspace.as_deref()).await?;
    let request = CreateSessionRequest {
        workspace: workspace.path.clone(),
        labels: args.labels.into_iter().collect::<HashMap<_, _>>(),
        settings: Some(settings),
    };
    let session = client
        .create_session(request)
        .await
        .map_err(|error| workspace.explain(error))?;
    if args.json {
        out.stdout(&render::session_json(&session))?;
    } else {
        out.stdout(&format!("{}\n", session.session_id))?;
    }
    Ok(exit_code::OK)
}

/// Up to `limit` sessions (all of them for 0), page by page; and whether more were left out.
async fn fetch(client: &AirlockClient, limit: u32) -> Result<(Vec<Session>, bool), ClientError> {
    pages::collect(limit, |page_size, page_token| async move {
        let page = client
            .list_sessions(ListSessionsRequest {
                page_size,
                page_token,
            })
            .await?;
        Ok((page.sessions, page.next_page_token))
    })
    .await
}

fn list<O: Write, E: Write>(
    sessions: &[Session],
    json: bool,
    more: bool,
    limit: u32,
    now_ms: i64,
    out: &mut Output<O, E>,
) -> Result<(), CliError> {
    if json {
        out.stdout(&render::sessions_json(sessions))?;
    } else if sessions.is_empty() {
        // An empty table would look like a failure; say what it means instead.
        out.line("no sessions")?;
    } else {
        out.stdout(&render::sessions_table(sessions, now_ms, out.width()))?;
    }
    if more {
        out.line(&format!(
            "more sessions than --limit {limit}; --limit 0 lists them all"
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(subcommand)]
        command: SessionsCommand,
    }

    fn captured(out: Output<Vec<u8>, Vec<u8>>) -> (String, String) {
        let (stdout, stderr) = out.into_inner();
        (
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        )
    }

    #[test]
    fn new_takes_the_run_flags_and_labels() -> anyhow::Result<()> {
        let parsed = Wrapper::try_parse_from([
            "sessions",
            "new",
            "--model",
            "openai:gpt-4.1",
            "--policy",
            "never",
            "--context-tokens",
            "8000",
            "--label",
            "team=core",
            "--label",
            "note=a=b",
        ])?;
        let SessionsCommand::New(args) = parsed.command else {
            panic!("not `new`: {parsed:?}");
        };
        assert_eq!(
            args.labels,
            [
                ("team".to_owned(), "core".to_owned()),
                ("note".to_owned(), "a=b".to_owned())
            ]
        );
        let settings = args.settings.session_settings()?;
        assert_eq!(
            settings.model.map(|model| model.model).as_deref(),
            Some("openai:gpt-4.1")
        );
        assert_eq!(settings.budgets.unwrap_or_default().context_tokens, 8000);
        assert!(
            Wrapper::try_parse_from(["sessions", "new", "--label", "nokey"]).is_err(),
            "a label without `=`"
        );
        assert!(Wrapper::try_parse_from(["sessions", "new", "--label", "=v"]).is_err());
        Ok(())
    }

    #[test]
    fn no_sessions_says_so_on_stderr_and_json_stays_json() -> anyhow::Result<()> {
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        list(&[], false, false, 50, 0, &mut out)?;
        assert_eq!(captured(out), (String::new(), "no sessions\n".to_owned()));

        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        list(&[], true, false, 50, 0, &mut out)?;
        assert_eq!(
            captured(out),
            ("{\n  \"sessions\": []\n}\n".to_owned(), String::new())
        );
        Ok(())
    }

    #[test]
    fn a_cut_list_says_how_to_see_all() -> anyhow::Result<()> {
        let session = Session {
            session_id: "ses_1".to_owned(),
            ..Session::default()
        };
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        list(&[session], false, true, 1, 0, &mut out)?;
        let (stdout, stderr) = captured(out);
        assert!(stdout.starts_with("SESSION "), "{stdout}");
        assert!(stdout.contains("\nses_1 "), "{stdout}");
        assert_eq!(
            stderr,
            "more sessions than --limit 1; --limit 0 lists them all\n"
        );
        Ok(())
    }
}
