//! `airlock eval …`: the grammar of the eval commands, run by the harness in `airlock-eval`
//! with this command line's connection, output and Ctrl-C.

use std::io::Write;
use std::path::PathBuf;

use airlock_eval::{Console, EvalError};
use clap::{Args, Subcommand};

use crate::error::CliError;
use crate::interrupt::Interrupts;
use crate::output::Output;
use crate::server::Server;

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Run a suite's tasks through the daemon, grade every attempt and write the report
    /// (report.json, junit.xml, summary.md).
    Run(RunArgs),
    /// Write a finished run's cassette and print a suite task that replays it.
    Capture(CaptureArgs),
    /// Compare two results of one suite: pass rates with their intervals, the difference and
    /// whether it is significant, steps, tokens, cost and wall time.
    Compare(CompareArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The suite file (YAML).
    suite: PathBuf,

    /// Attempts run at the same time.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,

    /// Attempts of every task, over the suite's `repeats`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    repeats: Option<u32>,

    /// Only this task (repeatable).
    #[arg(long = "task", value_name = "ID")]
    tasks: Vec<String>,

    /// A YAML file of settings (the fields of `defaults`) applied over every task: the
    /// configuration to compare with the suite's own.
    #[arg(long, value_name = "FILE")]
    variant: Option<PathBuf>,

    /// The configuration's name in the results [default: the variant file's name without
    /// its extension, else `base`].
    #[arg(long, value_name = "NAME")]
    label: Option<String>,

    /// Where results are written: DIR/<suite>/<result id>/.
    #[arg(long, value_name = "DIR", default_value = airlock_eval::run::DEFAULT_RESULTS)]
    results: PathBuf,

    /// Where attempts' workspaces are made, in DIR/<result id>/; must lie inside one of the
    /// daemon's workspace roots [default: <first root>/.airlock-eval].
    #[arg(long, value_name = "DIR")]
    scratch: Option<PathBuf>,

    /// Keep every attempt's workspace (by default only failed and unfinished ones are kept).
    #[arg(long)]
    keep_workspaces: bool,

    /// Print the report as JSON on stdout instead of the summary.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// The finished run to capture.
    run_id: String,

    /// Where the cassette is written [default: cassettes/RUN_ID.json].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The first result (the baseline): a report.json, a result directory, or a label.
    a: String,

    /// The second result, compared with the first.
    b: String,

    /// Where labels are looked for: DIR/<suite>/<result id>/report.json.
    #[arg(long, value_name = "DIR", default_value = airlock_eval::run::DEFAULT_RESULTS)]
    results: PathBuf,

    /// The suite whose results a label names, when labels of several suites are there.
    #[arg(long, value_name = "NAME")]
    suite: Option<String>,

    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run<O: Write, E: Write>(
    command: EvalCommand,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let code = match command {
        EvalCommand::Run(args) => {
            let options = airlock_eval::run::RunOptions {
                suite: args.suite,
                jobs: args.jobs,
                repeats: args.repeats,
                tasks: args.tasks,
                variant: args.variant,
                label: args.label,
                results: args.results,
                scratch: args.scratch,
                keep_workspaces: args.keep_workspaces,
                json: args.json,
            };
            // Installed when the attempts start, as the first press then means "stop and
            // write the report"; before, Ctrl-C ends the command as usual.
            let interrupts = || {
                let mut presses = Interrupts::new();
                async move { presses.next().await }
            };
            let connect = server.connect();
            airlock_eval::run::run(options, connect, &server.endpoint, interrupts, out).await
        }
        EvalCommand::Capture(args) => {
            let client = server.connect().await?;
            airlock_eval::capture::run(&client, &args.run_id, args.output, out).await
        }
        EvalCommand::Compare(args) => {
            let options = airlock_eval::compare::CompareOptions {
                a: args.a,
                b: args.b,
                results: args.results,
                suite: args.suite,
                json: args.json,
            };
            airlock_eval::compare::run(options, out).await
        }
    };
    Ok(code?)
}

impl From<EvalError> for CliError {
    fn from(error: EvalError) -> CliError {
        match error {
            EvalError::Client(error) => CliError::Client(error),
            EvalError::Usage(message) => CliError::Usage(message),
            EvalError::NoInput(message) => CliError::NoInput(message),
            EvalError::Protocol(message) => CliError::Protocol(message),
            EvalError::Output(error) => CliError::Output(error),
        }
    }
}

/// The harness writes through the command line's output: results on stdout, progress lines
/// on stderr (kept apart from a progress bar).
impl<O: Write, E: Write> Console for Output<O, E> {
    fn stdout(&mut self, text: &str) -> Result<(), EvalError> {
        Output::stdout(self, text).map_err(output_error)
    }

    fn line(&mut self, text: &str) -> Result<(), EvalError> {
        Output::line(self, text).map_err(output_error)
    }
}

/// Writing output fails only as `CliError::Output`; anything else would still be a failure
/// to write.
fn output_error(error: CliError) -> EvalError {
    match error {
        CliError::Output(error) => EvalError::Output(error),
        other => EvalError::Output(std::io::Error::other(other.to_string())),
    }
}
