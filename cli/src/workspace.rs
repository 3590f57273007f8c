//! The workspace of `airlock run` and `airlock tools exec`: `--workspace DIR`, else the
//! current directory when it lies inside the workspace roots the daemon gives this client
//! (`Daemon.GetInfo`), else none. When the daemon then refuses for want of a workspace, the
//! error names `--workspace` and the roots.

use std::path::{Path, PathBuf};

use airlock_client::{AirlockClient, ClientError};
use tonic::Code;

use crate::error::CliError;

/// The workspace a command sends, and what it knows to explain a refusal.
#[derive(Debug)]
pub struct Workspace {
    /// Absolute, symlinks resolved; empty for none.
    pub path: String,
    /// Whether `--workspace` chose it.
    given: bool,
    /// The current directory, when no flag was given.
    current: Option<PathBuf>,
    /// The daemon's roots for this client, when it said.
    roots: Vec<String>,
}

impl Workspace {
    /// `--workspace`, else the current directory if the daemon's roots hold it, else none.
    pub async fn choose(
        client: &AirlockClient,
        given: Option<&Path>,
    ) -> Result<Workspace, CliError> {
        if let Some(dir) = given {
            return Ok(Workspace {
                path: resolve(dir)?,
                given: true,
                current: None,
                roots: Vec::new(),
            });
        }
        let roots = match client.daemon_info().await {
            Ok(info) => info.workspace_roots,
            // A daemon older than `GetInfo` says nothing about its roots: no default.
            Err(ClientError::Rpc { status, .. }) if status.code() == Code::Unimplemented => {
                Vec::new()
            }
            Err(error) => return Err(error.into()),
        };
        let current = std::env::current_dir().and_then(std::fs::canonicalize).ok();
        let inside = current
            .as_ref()
            .is_some_and(|dir| roots.iter().any(|root| dir.starts_with(root)));
        let path = match (&current, inside) {
            (Some(dir), true) => dir.to_str().unwrap_or_default().to_owned(),
            _ => String::new(),
        };
        Ok(Workspace {
            path,
            given: false,
            current,
            roots,
        })
    }

    /// The error for a call the daemon refused: when it was for want of a workspace this
    /// command did not give, a usage error that names `--workspace` and the roots.
    pub fn explain(&self, error: ClientError) -> CliError {
        let about_workspace = error.status().is_some_and(|status| {
            status.code() == Code::InvalidArgument
                && (status.message().starts_with("workspace: ")
                    || status.message().starts_with("start.workspace: "))
        });
        if !about_workspace || self.given || !self.path.is_empty() {
            return error.into();
        }
        let daemon_says = error
            .status()
            .map(|status| status.message().to_owned())
            .unwrap_or_default();
        let current = self.current.as_ref().map_or_else(
            || "the current directory".to_owned(),
            |dir| dir.display().to_string(),
        );
        let roots = if self.roots.is_empty() {
            "the daemon did not say which".to_owned()
        } else {
            self.roots.join(", ")
        };
        CliError::Usage(format!(
            "{daemon_says}; {current} is not inside the daemon's workspace roots ({roots}): \
             pass --workspace DIR with a directory inside one of them"
        ))
    }
}

/// The workspace as an absolute path with symlinks resolved, which is what the daemon checks
/// against its workspace roots.
pub fn resolve(dir: &Path) -> Result<String, CliError> {
    let absolute = std::fs::canonicalize(dir)
        .map_err(|error| CliError::Usage(format!("--workspace {}: {error}", dir.display())))?;
    if !absolute.is_dir() {
        return Err(CliError::Usage(format!(
            "--workspace {}: not a directory",
            dir.display()
        )));
    }
    absolute.into_os_string().into_string().map_err(|path| {
        CliError::Usage(format!(
            "--workspace {}: not valid UTF-8, which the API requires",
            Path::new(&path).display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use airlock_client::exit_code;

    use super::*;

    #[test]
    fn a_workspace_path_is_made_canonical() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("ws"))?;
        let relative = dir.path().join("ws/../ws/.");
        let resolved = resolve(&relative)?;
        assert_eq!(
            Path::new(&resolved),
            std::fs::canonicalize(dir.path())?.join("ws")
        );
        assert!(Path::new(&resolved).is_absolute());
        Ok(())
    }

    #[test]
    fn a_missing_or_non_directory_workspace_is_a_usage_error_naming_the_flag() -> anyhow::Result<()>
    {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("missing");
        let Err(error) = resolve(&missing) else {
            panic!("a missing workspace resolved");
        };
        assert!(
            error
                .to_string()
                .starts_with(&format!("--workspace {}: ", missing.display())),
            "{error}"
        );
        assert_eq!(error.exit_code(), exit_code::USAGE);

        let file = dir.path().join("file");
        std::fs::write(&file, "")?;
        let Err(error) = resolve(&file) else {
            panic!("a file resolved as a workspace");
        };
        assert_eq!(
            error.to_string(),
            format!("--workspace {}: not a directory", file.display())
        );
        Ok(())
    }
}
