//! `airlock`, the command line of airlockd. Commands and exit codes are described in
//! `sdk/client/README.md`.

mod cli;

use std::process::ExitCode;

use airlock_client::exit_code;
use clap::Parser;

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
    let mut output = cli::Output::detect();
    let code = match cli.run(&mut output) {
        Ok(code) => {
            output.finish();
            code
        }
        Err(error) => {
            output.error(&error);
            if let Some(hint) = error.hint() {
                output.error(&hint);
            }
            error.exit_code()
        }
    };
    ExitCode::from(code)
}
