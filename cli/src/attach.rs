//! `airlock attach RUN_ID`: follows a run from a point of its log, printed as `airlock run`
//! prints it, answering its approvals when asked; exits with the code of the run's stop reason.

use std::io::Write;

use clap::Args;

use super::follow::{FollowOptions, OnInterrupt, follow};
use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The run to follow.
    run_id: String,

    /// Start after this event (the last one seen); 0 replays the run from its start.
    #[arg(long, value_name = "N", default_value_t = 0)]
    after_seq: u64,

    /// Print each event as one JSON object per line instead of the transcript.
    #[arg(long)]
    json: bool,
}

pub async fn run<O: Write, E: Write>(
    args: AttachArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    // Where the run's log stands now: what comes before is history, and an approval in it is
    // asked only if it is still waiting once the history has been replayed.
    let info = client.get_run(&args.run_id).await?;
    let handle = client.attach_run(&args.run_id, args.after_seq).await?;
    let options = FollowOptions {
        json: args.json,
        answer_from: info.last_seq,
        on_interrupt: OnInterrupt::Detach,
        input: None,
    };
    follow(handle, options, out).await
}
