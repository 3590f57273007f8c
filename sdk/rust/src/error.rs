//! The error a tool returns when it ran but could not do what was asked.
//!
//! Its message is read by a model as much as by a person, so the conversions from I/O
//! errors phrase the common failures as something to act on ("no such file: src/x.rs")
//! rather than as an OS error code.

use std::fmt::Display;
use std::io;
use std::path::Path;

use serde::Deserialize;
use serde::Serialize;

/// A tool's failure, written to stdout as `{"error": {"message", "retryable"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    message: String,
    retryable: bool,
}

impl ToolError {
    /// A failure that the same call would meet again.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: false,
        }
    }

    /// A failure that the same call may not meet later (a busy resource, a timeout of
    /// something the tool waited on).
    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: true,
        }
    }

    /// An I/O failure on `path`, with the path in the message so the model knows which of
    /// its arguments to fix. Pass the path as the caller named it (workspace-relative),
    /// not the resolved guest path.
    pub fn io(err: &io::Error, path: impl AsRef<Path>) -> Self {
        describe_io(err, Some(path.as_ref()))
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
}

/// Without a path the message can only say what happened, not to what; prefer
/// [`ToolError::io`] or [`IoResultExt::with_path`] where a path is known.
impl From<io::Error> for ToolError {
    fn from(err: io::Error) -> Self {
        describe_io(&err, None)
    }
}

/// Attaches the path an I/O operation was about to its error.
///
/// ```no_run
/// use airlock_sdk::{IoResultExt, ToolError};
/// fn size(path: &str) -> Result<u64, ToolError> {
///     Ok(std::fs::metadata(path).with_path(path)?.len())
/// }
/// ```
pub trait IoResultExt<T> {
    fn with_path(self, path: impl AsRef<Path>) -> Result<T, ToolError>;
}

impl<T> IoResultExt<T> for io::Result<T> {
    fn with_path(self, path: impl AsRef<Path>) -> Result<T, ToolError> {
        self.map_err(|err| ToolError::io(&err, path))
    }
}

fn describe_io(err: &io::Error, path: Option<&Path>) -> ToolError {
    use io::ErrorKind;

    let subject = |what: &str| match path {
        Some(path) => format!("{what}: {}", path.display()),
        None => what.to_owned(),
    };
    let with_detail = |what: &str, detail: &dyn Display| match path {
        Some(path) => format!("{}: {what}: {detail}", path.display()),
        None => format!("{what}: {detail}"),
    };
    // `ErrorKind` is non-exhaustive, so the kinds a model can act on get a sentence of
    // their own and everything else keeps the OS's wording.
    match err.kind() {
        ErrorKind::NotFound => ToolError::new(subject("no such file or directory")),
        ErrorKind::PermissionDenied => ToolError::new(format!(
            "{} (the tool's sandbox profile does not grant this access)",
            subject("permission denied")
        )),
        ErrorKind::ReadOnlyFilesystem => ToolError::new(format!(
            "{} (the tool's sandbox profile grants the workspace read-only)",
            subject("read-only file system")
        )),
        ErrorKind::AlreadyExists => ToolError::new(subject("already exists")),
        ErrorKind::IsADirectory => ToolError::new(subject("is a directory, not a file")),
        ErrorKind::NotADirectory => ToolError::new(subject("not a directory")),
        ErrorKind::DirectoryNotEmpty => ToolError::new(subject("directory not empty")),
        ErrorKind::InvalidFilename => ToolError::new(subject("invalid file name")),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge => {
            ToolError::new(with_detail("out of space", err))
        }
        ErrorKind::Interrupted | ErrorKind::TimedOut | ErrorKind::WouldBlock => {
            ToolError::retryable(with_detail("temporarily unavailable", err))
        }
        _ => ToolError::new(match path {
            Some(path) => format!("{}: {err}", path.display()),
            None => err.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_set_retryable() {
        let permanent = ToolError::new("bad input");
        assert_eq!(permanent.message(), "bad input");
        assert!(!permanent.is_retryable());

        let transient = ToolError::retryable("busy");
        assert_eq!(transient.message(), "busy");
        assert!(transient.is_retryable());
    }

    #[test]
    fn display_is_the_message() {
        assert_eq!(ToolError::new("x went wrong").to_string(), "x went wrong");
    }

    #[test]
    fn not_found_names_the_path() {
        let err = io::Error::from(io::ErrorKind::NotFound);
        let tool = ToolError::io(&err, "src/missing.rs");
        assert_eq!(tool.message(), "no such file or directory: src/missing.rs");
        assert!(!tool.is_retryable());
    }

    #[test]
    fn with_path_maps_the_real_error_of_a_missing_file() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("nope.txt");
        let Err(err) = std::fs::read(&missing).with_path("nope.txt") else {
            panic!("reading a missing file succeeded");
        };
        assert_eq!(err.message(), "no such file or directory: nope.txt");
        Ok(())
    }

    #[test]
    fn from_io_error_without_a_path() {
        let tool = ToolError::from(io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(tool.message(), "no such file or directory");
    }

    #[test]
    fn permission_denied_points_at_the_profile() {
        let err = io::Error::from(io::ErrorKind::PermissionDenied);
        let tool = ToolError::io(&err, "a.txt");
        assert!(tool.message().starts_with("permission denied: a.txt"));
        assert!(tool.message().contains("sandbox profile"));
    }

    #[test]
    fn transient_kinds_are_retryable() {
        for kind in [
            io::ErrorKind::Interrupted,
            io::ErrorKind::TimedOut,
            io::ErrorKind::WouldBlock,
        ] {
            assert!(
                ToolError::io(&io::Error::from(kind), "f").is_retryable(),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn other_kinds_keep_the_os_wording() {
        let err = io::Error::other("disk on fire");
        assert_eq!(ToolError::io(&err, "f").message(), "f: disk on fire");
        assert_eq!(ToolError::from(err).message(), "disk on fire");
    }

    #[test]
    fn serializes_as_the_abi_error_body() -> anyhow::Result<()> {
        let json = serde_json::to_value(ToolError::retryable("later"))?;
        assert_eq!(
            json,
            serde_json::json!({"message": "later", "retryable": true})
        );
        Ok(())
    }
}
