//! `airlock runs …`: everything about runs — `list`, `show`, `cancel`, and the dispatch of
//! `attach` (attach.rs) and `trace` (trace.rs).

use std::io::Write;

use airlock_client::proto::{ListRunsRequest, RunInfo, RunState};
use airlock_client::{AirlockClient, ClientError, exit_code};
use airlock_render as render;
use clap::{Subcommand, ValueEnum};

use crate::error::CliError;
use crate::output::Output;
use crate::pages;
use crate::server::Server;

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Only this session's runs.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Only runs in this state.
        #[arg(long, value_enum)]
        state: Option<StateFilter>,
        /// Only runs whose task (input) contains this text; ASCII letters match in either
        /// case.
        #[arg(long, value_name = "TEXT")]
        search: Option<String>,
        /// List at most this many; 0 lists them all.
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: u32,
        /// Print JSON (`{"runs": [...]}`) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one run's record: state, stop reason, usage, final text.
    Show {
        /// The run.
        run_id: String,
        /// Print the run as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Follow a run from a point of its log (and answer its approvals).
    Attach(super::attach::AttachArgs),
    /// Show a run's trace: its spans as a tree, with timings, tokens and resource use.
    Trace(super::trace::TraceArgs),
    /// Cancel a run: its model call and any running tool stop, and it ends CANCELLED.
    Cancel {
        /// The run.
        run_id: String,
        /// Why; recorded as the detail of the run's end.
        #[arg(
            long,
            value_name = "TEXT",
            default_value = "cancelled with airlock runs cancel"
        )]
        reason: String,
    },
}

/// `--state`: the states a run is listed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateFilter {
    Running,
    /// Waiting for an approval.
    Waiting,
    Finished,
}

impl From<StateFilter> for RunState {
    fn from(state: StateFilter) -> Self {
        match state {
            StateFilter::Running => RunState::Running,
            StateFilter::Waiting => RunState::WaitingForApproval,
            StateFilter::Finished => RunState::Finished,
        }
    }
}

pub async fn run<O: Write, E: Write>(
    command: RunsCommand,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    match command {
        RunsCommand::Attach(args) => super::attach::run(args, server, out).await,
        RunsCommand::Trace(args) => super::trace::run(args, server, out).await,
        RunsCommand::List {
            session,
            state,
            search,
            limit,
            json,
        } => {
            let client = server.connect().await?;
            let filter = ListRunsRequest {
                session_id: session.unwrap_or_default(),
                state: state.map_or(RunState::Unspecified, RunState::from) as i32,
                page_size: 0,
                page_token: String::new(),
                query: search.unwrap_or_default(),
            };
            let (runs, more) = fetch(&client, filter, limit).await?;
            list(&runs, json, more, limit, out)?;
            Ok(exit_code::OK)
        }
        RunsCommand::Show { run_id, json } => {
            let run = server.connect().await?.get_run(&run_id).await?;
            if json {
                out.stdout(&render::run_info_json(&run))?;
            } else {
                out.stdout(&render::run_details(&run))?;
            }
            Ok(exit_code::OK)
        }
        RunsCommand::Cancel { run_id, reason } => {
            let client = server.connect().await?;
            match client.cancel_run(&run_id, &reason).await {
                Ok(()) => out.line(&format!("cancel requested for {run_id}"))?,
                // What was asked for holds already: the run is not going.
                Err(ClientError::Rpc { status, .. })
                    if status.code() == tonic::Code::FailedPrecondition =>
                {
                    out.line(&format!("{run_id} has already finished; nothing to cancel"))?;
                }
                Err(error) => return Err(error.into()),
            }
            Ok(exit_code::OK)
        }
    }
}

/// Up to `limit` runs (all of them for 0), page by page; and whether more were left out.
async fn fetch(
    client: &AirlockClient,
    filter: ListRunsRequest,
    limit: u32,
) -> Result<(Vec<RunInfo>, bool), ClientError> {
    pages::collect(limit, |page_size, page_token| {
        let request = ListRunsRequest {
            page_size,
            page_token,
            ..filter.clone()
        };
        async move {
            let page = client.list_runs(request).await?;
            Ok((page.runs, page.next_page_token))
        }
    })
    .await
}

fn list<O: Write, E: Write>(
    runs: &[RunInfo],
    json: bool,
    more: bool,
    limit: u32,
    out: &mut Output<O, E>,
) -> Result<(), CliError> {
    if json {
        out.stdout(&render::runs_json(runs))?;
    } else if runs.is_empty() {
        // An empty table would look like a failure; say what it means instead.
        out.line("no runs")?;
    } else {
        out.stdout(&render::runs_table(runs, out.width()))?;
    }
    if more {
        out.line(&format!(
            "more runs than --limit {limit}; --limit 0 lists them all"
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(out: Output<Vec<u8>, Vec<u8>>) -> (String, String) {
        let (stdout, stderr) = out.into_inner();
        (
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        )
    }

    #[test]
    fn no_runs_says_so_on_stderr_and_json_stays_json() -> anyhow::Result<()> {
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        list(&[], false, false, 50, &mut out)?;
        assert_eq!(captured(out), (String::new(), "no runs\n".to_owned()));

        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        list(&[], true, false, 50, &mut out)?;
        assert_eq!(
            captured(out),
            ("{\n  \"runs\": []\n}\n".to_owned(), String::new())
        );
        Ok(())
    }

    #[test]
    fn a_cut_list_says_how_to_see_all() -> anyhow::Result<()> {
        let run = RunInfo {
            run_id: "run_1".to_owned(),
            ..RunInfo::default()
        };
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        list(&[run], false, true, 1, &mut out)?;
        let (stdout, stderr) = captured(out);
        assert!(stdout.starts_with("RUN "), "{stdout}");
        assert_eq!(
            stderr,
            "more runs than --limit 1; --limit 0 lists them all\n"
        );
        Ok(())
    }

    #[test]
    fn state_filters_are_the_api_states() {
        assert_eq!(
            RunState::from(StateFilter::Waiting),
            RunState::WaitingForApproval
        );
        assert_eq!(RunState::from(StateFilter::Running), RunState::Running);
        assert_eq!(RunState::from(StateFilter::Finished), RunState::Finished);
    }
}
