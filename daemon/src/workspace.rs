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
    /// The daemon's own directories (its state: the access tokens, the run store, kept
    /// outputs): never a workspace, nor inside or around one, wherever the roots are.
    reserved: Vec<PathBuf>,
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
    #[error("workspace `{path}` overlaps the daemon's own directory {reserved}")]
    Reserved { path: String, reserved: String },
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
        Ok(WorkspaceRoots {
            roots,
            reserved: Vec::new(),
        })
    }

    /// Keeps `dir` (which must exist) out of every workspace: a workspace may be neither
    /// inside it nor contain it.
    pub fn reserve(mut self, dir: &Path) -> std::io::Result<WorkspaceRoots> {
        self.reserved.push(dir.canonicalize()?);
        Ok(self)
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Checks a requested workspace.
    pub fn resolve(&self, requested: Option<&str>) -> Result<Option<PathBuf>, WorkspaceError> {
        let Some(requested) = requested else {
            return Ok(None);
        };
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
        if !self.roots.iter().any(|root| canonical.starts_with(root)) {
            return Err(WorkspaceError::OutsideRoots {
                path: requested.to_owned(),
                roots: self
                    .roots
                    .iter()
                    .map(|root| root.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if let Some(reserved) = self
            .reserved
            .iter()
            .find(|dir| canonical.starts_with(dir) || dir.starts_with(&canonical))
        {
            return Err(WorkspaceError::Reserved {
                path: requested.to_owned(),
                reserved: reserved.display().to_string(),
            });
        }
        Ok(Some(canonical))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_own_directory_is_never_a_workspace() {
        let root = tempfile::tempdir().expect("tempdir");
        let state = root.path().join("home/.local/state/airlock");
        let project = root.path().join("home/project");
        std::fs::create_dir_all(&state).expect("mkdir");
        std::fs::create_dir_all(&project).expect("mkdir");
        let roots = WorkspaceRoots::new(&[root.path().to_owned()])
            .expect("roots")
            .reserve(&state)
            .expect("reserved");
        let text = |p: &Path| p.to_str().expect("utf-8").to_owned();
        // The state dir itself, anything inside it, and anything around it are refused.
        for refused in [
            state.clone(),
            state.join("."),
            root.path().join("home"),
            root.path().to_owned(),
        ] {
            assert!(
                matches!(
                    roots.resolve(Some(&text(&refused))),
                    Err(WorkspaceError::Reserved { .. })
                ),
                "{}",
                refused.display()
            );
        }
        // A sibling is fine.
        assert!(
            roots
                .resolve(Some(&text(&project)))
                .expect("sibling")
                .is_some()
        );
    }

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
        assert_eq!(roots.resolve(None), Ok(None));
        assert_eq!(
            roots.resolve(Some(&text(&inside))),
            Ok(Some(inside.canonicalize().expect("canonical")))
        );
        assert!(matches!(
            roots.resolve(Some("relative/dir")),
            Err(WorkspaceError::NotAbsolute(_))
        ));
        assert!(matches!(
            roots.resolve(Some(&text(&outside))),
            Err(WorkspaceError::OutsideRoots { .. })
        ));
        assert!(matches!(
            roots.resolve(Some(&text(&root.join("link")))),
            Err(WorkspaceError::OutsideRoots { .. })
        ));
        assert!(matches!(
            roots.resolve(Some(&text(&root.join("project/../../elsewhere")))),
            Err(WorkspaceError::OutsideRoots { .. })
        ));
        assert!(matches!(
            roots.resolve(Some(&text(&root.join("file")))),
            Err(WorkspaceError::NotADirectory(_))
        ));
        assert!(matches!(
            roots.resolve(Some(&text(&root.join("missing")))),
            Err(WorkspaceError::Unreadable { .. })
        ));
    }
}
