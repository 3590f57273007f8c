//! Workspace roots: a call may only name a workspace that lies inside one of the directories
//! the operator configured.
//!
//! Both sides are canonicalised (symlinks resolved), so a link inside a root that points
//! elsewhere does not pass. The check and the later open of the directory are two steps; the
//! window between them could only be used by someone who can replace directories above the
//! workspace, which a tool cannot: it sees nothing above its workspace.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct WorkspaceRoots {
    roots: Vec<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceError {
    #[error("workspace `{0}` is not an absolute path")]
    NotAbsolute(String),
    #[error("workspace `{path}` cannot be opened: {message}")]
    Unreadable { path: String, message: String },
    #[error("workspace `{0}` is not a directory")]
    NotADirectory(String),
    #[error("workspace `{path}` is outside the daemon's workspace roots ({roots})")]
    OutsideRoots { path: String, roots: String },
}

impl WorkspaceRoots {
    /// Canonicalises each root; a root that does not exist is an error.
    pub fn new(roots: &[PathBuf]) -> std::io::Result<WorkspaceRoots> {
        let roots = roots
            .iter()
            .map(|root| {
                root.canonicalize().map_err(|err| {
                    std::io::Error::new(
                        err.kind(),
                        format!("workspace root {}: {err}", root.display()),
                    )
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(WorkspaceRoots { roots })
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Checks a requested workspace; empty means none.
    pub fn resolve(&self, requested: &str) -> Result<Option<PathBuf>, WorkspaceError> {
        if requested.is_empty() {
            return Ok(None);
        }
        let path = Path::new(requested);
        if !path.is_absolute() {
            return Err(WorkspaceError::NotAbsolute(requested.to_owned()));
        }
        let canonical = path
            .canonicalize()
            .map_err(|err| WorkspaceError::Unreadable {
                path: requested.to_owned(),
                message: err.to_string(),
            })?;
        if !canonical.is_dir() {
            return Err(WorkspaceError::NotADirectory(requested.to_owned()));
        }
        if self.roots.iter().any(|root| canonical.starts_with(root)) {
            Ok(Some(canonical))
        } else {
            Err(WorkspaceError::OutsideRoots {
                path: requested.to_owned(),
                roots: self
                    .roots
                    .iter()
                    .map(|root| root.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_inside_a_root_pass() {
        let base = tempfile::tempdir().expect("tempdir");
        let root = base.path().join("root");
        let inside = root.join("project");
        let outside = base.path().join("elsewhere");
        std::fs::create_dir_all(&inside).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(root.join("file"), "x").expect("write");
        std::os::unix::fs::symlink(&outside, root.join("link")).expect("symlink");
        let roots = WorkspaceRoots::new(std::slice::from_ref(&root)).expect("roots");

        let text = |p: &Path| p.to_str().expect("utf-8").to_owned();
        assert_eq!(roots.resolve(""), Ok(None));
        assert_eq!(
            roots.resolve(&text(&inside)),
            Ok(Some(inside.canonicalize().expect("canonical")))
        );
        assert!(matches!(
            roots.resolve("relative/dir"),
            Err(WorkspaceError::NotAbsolute(_))
        ));
        assert!(matches!(
            roots.resolve(&text(&outside)),
            Err(WorkspaceError::OutsideRoots { .. })
        ));
        assert!(matches!(
            roots.resolve(&text(&root.join("link"))),
            Err(WorkspaceError::OutsideRoots { .. })
        ));
        assert!(matches!(
            roots.resolve(&text(&root.join("project/../../elsewhere"))),
            Err(WorkspaceError::OutsideRoots { .. })
        ));
        assert!(matches!(
            roots.resolve(&text(&root.join("file"))),
            Err(WorkspaceError::NotADirectory(_))
        ));
        assert!(matches!(
            roots.resolve(&text(&root.join("missing"))),
            Err(WorkspaceError::Unreadable { .. })
        ));
    }
}
