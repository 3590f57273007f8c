//! `airlock eval …`: the eval harness. A suite (YAML) names tasks — an input, a workspace
//! fixture, a model (often a cassette replayed, so that the case is deterministic), the run's
//! settings and graders; `eval run` runs every task's attempts through the daemon and writes
//! a report, `eval capture` turns a finished run into a case, `eval compare` puts two results
//! side by side with the statistics that say whether a difference is real.
//!
//! The modules, by responsibility: `suite` (loading and checking), `fixture` and `tree`
//! (workspaces), `approver`, `daemon` (what is asked of airlockd), `attempt` (one attempt),
//! `outcome` (what a run did), `grader` (the verdicts), `price`, `stats`, `report`, `junit`,
//! `summary` and `text` (the outputs), and one module per command.

mod approver;
mod attempt;
mod capture;
mod compare;
mod daemon;
mod fixture;
mod grader;
mod junit;
mod outcome;
mod price;
mod report;
mod run;
mod stats;
mod suite;
mod summary;
mod text;
mod tree;

use std::io::Write;

use clap::Subcommand;

use super::{CliError, Output, Server};

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Run a suite's tasks through the daemon, grade every attempt and write the report
    /// (report.json, junit.xml, summary.md).
    Run(run::RunArgs),
    /// Write a finished run's cassette and print a suite task that replays it.
    Capture(capture::CaptureArgs),
    /// Compare two results of one suite: pass rates with their intervals, the difference and
    /// whether it is significant, steps, tokens, cost and wall time.
    Compare(compare::CompareArgs),
}

pub async fn run<O: Write, E: Write>(
    command: EvalCommand,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    match command {
        EvalCommand::Run(args) => run::run(args, server, out).await,
        EvalCommand::Capture(args) => capture::run(args, server, out).await,
        EvalCommand::Compare(args) => compare::run(args, out).await,
    }
}
