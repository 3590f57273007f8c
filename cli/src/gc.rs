//! `airlock gc`: deletes what has grown old in the daemon — finished runs with everything
//! recorded for them, sessions left without runs, kept outputs — never anything of a run
//! that has not finished. The operator's command: only the default tenant may.

use std::io::Write;
use std::time::Duration;

use crate::duration::parse_duration;
use airlock_client::exit_code;
use airlock_render as render;
use clap::Args;

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Delete what is older than this: 30d, 12h, 90m… [default: the daemon's configured
    /// retention]
    #[arg(long, value_name = "DURATION", value_parser = age)]
    older_than: Option<Duration>,
    /// Print what was deleted as one JSON object.
    #[arg(long)]
    json: bool,
}

fn age(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

pub async fn run<O: Write, E: Write>(
    args: GcArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    let swept = client.collect_garbage(args.older_than).await?;
    if args.json {
        out.stdout(&render::garbage_json(&swept))?;
    } else {
        out.stdout(&render::garbage_text(&swept))?;
    }
    Ok(exit_code::OK)
}
