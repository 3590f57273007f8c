//! The eval harness behind `airlock eval`. A suite (YAML) names tasks — an input, a workspace
//! fixture, a model (often a cassette replayed, so that the case is deterministic), the run's
//! settings and graders; `eval run` runs every task's attempts through the daemon and writes
//! a report, `eval capture` turns a finished run into a case, `eval compare` puts two results
//! side by side with the statistics that say whether a difference is real.
//!
//! The modules, by responsibility: `suite` (loading and checking, with `model` and `problem`
//! below it and the graders), `fixture` and `tree`
//! (workspaces), `approver`, `daemon` (what is asked of airlockd), `attempt` (one attempt),
//! `outcome` (what a run did), `grader` (the verdicts), `price`, `stats`, `report`, `junit`,
//! `summary` and `text` (the outputs), one module per command (`run`, `capture`, `compare`),
//! and `error` (how a command fails, and the [`Console`] it writes to).
//!
//! The command-line grammar of these commands is `airlock-cli`'s; a command here takes plain
//! options, a connection and a [`Console`], so that it runs the same under any front end.

mod approver;
mod attempt;
pub mod capture;
pub mod compare;
mod daemon;
mod error;
mod fixture;
mod grader;
mod junit;
mod model;
mod outcome;
mod price;
mod problem;
mod report;
pub mod run;
mod stats;
mod suite;
mod summary;
mod text;
mod tree;

pub use error::{Console, EvalError};
