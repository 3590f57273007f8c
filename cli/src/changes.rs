//! `airlock changes RUN_ID`, `airlock revert RUN_ID --to-step N` and `airlock fork RUN_ID
//! --at-step N`: what a run's tool calls changed in its workspace, step by step (as a diff with
//! `--diff`), undoing it, and starting again from one of its steps.

use std::io::Write;

use airlock_client::proto::{FileChange, ForkRunRequest, NodeKind};
use airlock_client::{AirlockClient, exit_code};
use airlock_render as render;
use clap::Args;

use super::follow::{FollowOptions, OnInterrupt, follow};
use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;

/// Lines of context around each change in `--diff`, as git shows.
const DIFF_CONTEXT: usize = 3;

#[derive(Debug, Args)]
pub struct ChangesArgs {
    /// The run.
    run_id: String,

    /// Only this step (1-based), as `airlock runs attach` numbers them.
    #[arg(long)]
    step: Option<u32>,

    /// Show each file's change as a unified diff (text files whose contents were kept).
    #[arg(long)]
    diff: bool,
}

#[derive(Debug, Args)]
pub struct RevertArgs {
    /// The run, finished.
    run_id: String,

    /// Put the workspace back as it was before this step: its changes and every later
    /// step's are undone (1 undoes the whole run).
    #[arg(long)]
    to_step: u32,

    /// Revert paths that something other than the run changed since (those changes are lost).
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The run to fork.
    run_id: String,

    /// The new run's conversation is the old one's up to the start of this step (1-based);
    /// 0 takes all of it.
    #[arg(long, default_value_t = 0)]
    at_step: u32,

    /// Run in a copy of the workspace as it was before that step, made next to it (or in
    /// `--copy-into`).
    #[arg(long)]
    copy_workspace: bool,

    /// The directory to make the copy in, inside your workspace roots (needed when the
    /// workspace is a root itself: next to it is outside every root).
    #[arg(long, value_name = "DIR", requires = "copy_workspace")]
    copy_into: Option<String>,

    /// What to tell the agent next; by default the old run's input again.
    #[arg(long, default_value = "")]
    input: String,

    /// Print the new run's id and return instead of following it.
    #[arg(long)]
    detach: bool,

    /// Print each event as one JSON object per line instead of the transcript.
    #[arg(long)]
    json: bool,
}

pub async fn fork<O: Write, E: Write>(
    args: ForkArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    let forked = client
        .fork_run(ForkRunRequest {
            run_id: args.run_id.clone(),
            at_step: args.at_step,
            copy_workspace: args.copy_workspace,
            input: args.input,
            copy_into: args.copy_into.unwrap_or_default(),
        })
        .await?;
    out.line(&format!(
        "forked run {} from {} (workspace {})",
        forked.run_id, args.run_id, forked.workspace
    ))?;
    if args.detach {
        out.stdout(&format!("{}\n", forked.run_id))?;
        return Ok(exit_code::OK);
    }
    let handle = client.attach_run(&forked.run_id, 0).await?;
    let options = FollowOptions {
        json: args.json,
        answer_from: 0,
        on_interrupt: OnInterrupt::Detach,
        input: None,
    };
    follow(handle, options, out).await
}

pub async fn changes<O: Write, E: Write>(
    args: ChangesArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    let listed = client
        .list_changes(&args.run_id, args.step.unwrap_or(0))
        .await?;
    out.stdout_lines(&plain(render::changes_lines(
        &args.run_id,
        args.step,
        &listed,
    )))?;
    if !args.diff {
        return Ok(exit_code::OK);
    }
    for step in &listed.steps {
        let Some(set) = &step.change_set else {
            continue;
        };
        for change in &set.changes {
            let diff = file_diff(&client, &args.run_id, change).await?;
            out.stdout(&diff)?;
        }
    }
    Ok(exit_code::OK)
}

/// The unified diff of one file's change; a note where there is no text to compare.
async fn file_diff(
    client: &AirlockClient,
    run_id: &str,
    change: &FileChange,
) -> Result<String, CliError> {
    let old_path = if change.from.is_empty() {
        &change.path
    } else {
        &change.from
    };
    let header = format!("--- a/{old_path}\n+++ b/{}\n", change.path);
    if !change.digest_only.is_empty() {
        return Ok(format!(
            "{header}(contents not kept: {})\n",
            change.digest_only
        ));
    }
    let mut sides = Vec::with_capacity(2);
    for state in [&change.before, &change.after] {
        let text = match state {
            Some(state) if state.node == NodeKind::Dir as i32 => return Ok(String::new()),
            Some(state) if !state.digest.is_empty() => {
                let bytes = client.read_blob(run_id, &state.digest).await?;
                match String::from_utf8(bytes) {
                    Ok(text) => text,
                    Err(_) => return Ok(format!("{header}(binary)\n")),
                }
            }
            Some(_) | None => String::new(),
        };
        sides.push(text);
    }
    let (before, after) = (&sides[0], &sides[1]);
    if before == after {
        return Ok(String::new());
    }
    let diff = similar::TextDiff::from_lines(before.as_str(), after.as_str());
    Ok(format!(
        "{header}{}",
        diff.unified_diff().context_radius(DIFF_CONTEXT)
    ))
}

pub async fn revert<O: Write, E: Write>(
    args: RevertArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    let reverted = client
        .revert_run(&args.run_id, args.to_step, args.force)
        .await?;
    out.stdout_lines(&plain(render::revert_lines(&reverted)))?;
    Ok(if reverted.unrestorable.is_empty() {
        exit_code::OK
    } else {
        exit_code::REVERT_PARTIAL
    })
}

fn plain(lines: Vec<String>) -> Vec<render::StyledLine> {
    lines.into_iter().map(render::StyledLine::plain).collect()
}
