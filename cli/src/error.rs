//! The errors a command can end with before it reports a tool's result, and the exit code of
//! each (the table in `airlock_client::exit_code`).

use std::io;

use airlock_client::model::ReadError;
use airlock_client::{ClientError, exit_code};

use crate::arguments::ArgumentsError;

/// Why a command failed before it could report a tool's result.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Arguments(#[from] ArgumentsError),
    /// The command line names something that cannot be used; the message says what, and
    /// which flag or command fixes it.
    #[error("{0}")]
    Usage(String),
    /// A file the command line names cannot be read; the message names it.
    #[error("{0}")]
    NoInput(String),
    /// The daemon answered something that cannot be right; the message says what.
    #[error("airlockd broke the protocol: {0}")]
    Protocol(String),
    #[error("cannot write output: {0}")]
    Output(io::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(io::Error),
    /// Installing a package failed (`airlock mcp add`); the message holds the installer's.
    #[error("{0}")]
    Install(String),
}

impl CliError {
    /// The exit code: the table in `airlock_client::exit_code`.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Client(error) => error.exit_code(),
            Self::Arguments(ArgumentsError::Read { .. }) | Self::NoInput(_) => exit_code::NO_INPUT,
            Self::Arguments(_) | Self::Usage(_) => exit_code::USAGE,
            Self::Protocol(_) => exit_code::PROTOCOL,
            Self::Output(_) => exit_code::IO_ERROR,
            Self::Runtime(_) => exit_code::SOFTWARE,
            Self::Install(_) => exit_code::UNAVAILABLE,
        }
    }
}

impl From<ReadError> for CliError {
    fn from(error: ReadError) -> CliError {
        match error {
            ReadError::Unreadable(reason) => CliError::NoInput(reason),
            ReadError::Unusable(reason) => CliError::Usage(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_with_ex_usage_and_unreadable_files_with_ex_noinput() {
        let error = CliError::Usage("workspace /nope is not a directory".to_owned());
        assert_eq!(error.exit_code(), exit_code::USAGE);
        let error = CliError::from(ArgumentsError::EmptyFileName);
        assert_eq!(error.exit_code(), exit_code::USAGE);
        let error = CliError::from(ArgumentsError::Read {
            origin: "args.json".to_owned(),
            source: io::Error::from(io::ErrorKind::NotFound),
        });
        assert_eq!(error.exit_code(), exit_code::NO_INPUT);
    }
}
