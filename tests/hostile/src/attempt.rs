//! One attempt against the sandbox and what came of it, as the probing tools report it:
//! `{"attempt", "succeeded", "error"?, "kind"?, "content"?}`.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;

use serde::Serialize;

/// How much of what a successful attempt obtained goes into the report: enough to recognise
/// a leaked file (`root:x:0:0:` of /etc/passwd, a planted secret) or a directory's first
/// entries, small enough that a report of many attempts stays far below any output limit.
pub const CONTENT_LIMIT: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// What was tried: an operation and its operand, e.g. `read ../secret.txt`.
    pub attempt: String,
    pub succeeded: bool,
    /// The error as the guest's std reports it (WASI errno text and number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error's `std::io::ErrorKind`, for assertions that do not depend on errno text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// On success: the first `CONTENT_LIMIT` bytes obtained (UTF-8, lossily), possibly empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

impl Attempt {
    pub fn record(attempt: impl Into<String>, outcome: io::Result<Vec<u8>>) -> Self {
        let attempt = attempt.into();
        match outcome {
            Ok(bytes) => {
                let head = &bytes[..bytes.len().min(CONTENT_LIMIT)];
                Self {
                    attempt,
                    succeeded: true,
                    error: None,
                    kind: None,
                    content: Some(String::from_utf8_lossy(head).into_owned()),
                }
            }
            Err(error) => Self {
                attempt,
                succeeded: false,
                kind: Some(format!("{:?}", error.kind())),
                error: Some(error.to_string()),
                content: None,
            },
        }
    }
}

/// Reads at most `CONTENT_LIMIT` bytes of a file, so that a path like `/dev/zero` cannot turn
/// a probe into a hang.
pub fn read_head(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(CONTENT_LIMIT);
    File::open(path)?
        .take(CONTENT_LIMIT as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// Lists a directory: its entry names, sorted so that reports compare across runs, one a line.
pub fn list_dir(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let mut names = fs::read_dir(path)?
        .map(|entry| entry.map(|entry| entry.file_name().to_string_lossy().into_owned()))
        .collect::<io::Result<Vec<_>>>()?;
    names.sort();
    Ok(names.join("\n").into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_keeps_only_the_head_of_the_content() {
        let attempt = Attempt::record("read big", Ok(vec![b'x'; CONTENT_LIMIT * 3]));
        assert!(attempt.succeeded);
        assert_eq!(
            attempt.content.as_deref().map(str::len),
            Some(CONTENT_LIMIT)
        );
        assert_eq!(attempt.error, None);
    }

    #[test]
    fn failure_reports_error_and_kind_without_content() {
        let error = io::Error::from(io::ErrorKind::PermissionDenied);
        let attempt = Attempt::record("read secret", Err(error));
        assert!(!attempt.succeeded);
        assert_eq!(attempt.kind.as_deref(), Some("PermissionDenied"));
        assert!(attempt.error.is_some());
        assert_eq!(attempt.content, None);
    }

    #[test]
    fn probes_read_a_head_and_list_sorted_names() -> io::Result<()> {
        let dir = std::env::temp_dir().join(format!("airlock-hostile-{}", std::process::id()));
        fs::create_dir_all(&dir)?;
        fs::write(dir.join("b.txt"), vec![b'b'; CONTENT_LIMIT + 10])?;
        fs::write(dir.join("a.txt"), b"a")?;

        let head = read_head(dir.join("b.txt"));
        let listing = list_dir(&dir);
        fs::remove_dir_all(&dir)?;

        assert_eq!(head?.len(), CONTENT_LIMIT);
        assert_eq!(listing?, b"a.txt\nb.txt");
        Ok(())
    }
}
