//! `airlock info`: the daemon's version, the workspace roots this client may use, and the
//! limits its requests must keep.

use std::io::Write;

use airlock_client::exit_code;
use airlock_render as render;
use clap::Args;

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print the answer as one JSON object.
    #[arg(long)]
    json: bool,
}

pub async fn run<O: Write, E: Write>(
    args: InfoArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    let info = client.daemon_info().await?;
    if args.json {
        out.stdout(&render::daemon_info_json(&info))?;
    } else {
        out.stdout(&render::daemon_info_text(client.endpoint(), &info))?;
    }
    Ok(exit_code::OK)
}
