//! Why an eval command stopped before its report: the failures a caller maps to its own
//! errors and exit codes (the command line's `CliError`).

use std::io;

use airlock_client::ClientError;

/// Why an eval command failed.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// Talking to the daemon failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// What the command was given cannot be used (a suite, a flag's value, a result); the
    /// message says what and how to fix it.
    #[error("{0}")]
    Usage(String),
    /// A file the command names cannot be read; the message names it.
    #[error("{0}")]
    NoInput(String),
    /// The daemon answered something that cannot be right; the message says what.
    #[error("airlockd broke the protocol: {0}")]
    Protocol(String),
    /// A report, a cassette or the console could not be written.
    #[error("cannot write output: {0}")]
    Output(io::Error),
}

/// Where an eval command writes: its result on standard output, its progress (a line per
/// attempt) on the console beside it.
pub trait Console {
    /// Writes `text` to standard output as it is.
    fn stdout(&mut self, text: &str) -> Result<(), EvalError>;
    /// Writes one line of progress.
    fn line(&mut self, text: &str) -> Result<(), EvalError>;
}
