//! `airlock`, the command line of airlockd. Commands and exit codes are described in
//! `cli/README.md`.
//!
//! The modules: the grammar and dispatch (`cli`), what every subcommand shares (`server`,
//! `error`, `output`, `hints`, `interrupt`, `arguments`, `duration`, `settings`, `workspace`,
//! `pages`), and one module per subcommand. What it prints is `airlock-render`'s; the eval
//! harness behind `airlock eval` is `airlock-eval`; talking to the daemon is `airlock-client`'s.

mod approvals;
mod arguments;
mod ask;
mod attach;
mod audit;
mod author;
mod changes;
mod chat;
mod cli;
mod duration;
mod error;
mod eval;
mod exec;
mod follow;
mod full_output;
mod gc;
mod hints;
mod info;
mod input;
mod interrupt;
mod mcp;
mod mcp_add;
mod output;
mod pages;
mod policy;
mod run;
mod runs;
mod server;
mod sessions;
mod settings;
mod tools;
mod trace;
mod trust;
mod workspace;

use std::process::ExitCode;

use airlock_client::exit_code;
use clap::Parser;

use crate::output::Output;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // Help and version are answers, not errors; everything else clap reports is a
            // usage error, which exits EX_USAGE rather than clap's own 2 (a tool status).
            let code = if error.use_stderr() {
                exit_code::USAGE
            } else {
                exit_code::OK
            };
            // Nowhere left to report a failure to print the usage message.
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    let mut output = Output::detect();
    let code = match cli.run(&mut output) {
        Ok(code) => {
            output.finish();
            code
        }
        Err(error) => {
            output.error(&error);
            if let Some(hint) = hints::hint(&error) {
                output.error(&hint);
            }
            error.exit_code()
        }
    };
    ExitCode::from(code)
}
