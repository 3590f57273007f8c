//! Turns a path a model wrote in its arguments into the path the tool opens.
//!
//! The WASI sandbox is the real boundary: nothing outside the preopened workspace can be
//! reached whatever path a tool opens. This check runs first so that a path aimed outside
//! gets a message a model can act on instead of an opaque `ENOTCAPABLE`. It is lexical:
//! it neither touches the file system nor follows symlinks.

use std::path::Component;
use std::path::Path;
use std::path::PathBuf;

use crate::ToolError;

/// Where the daemon preopens the workspace inside the guest (sdk/ABI.md, "Files").
pub const GUEST_ROOT: &str = "/workspace";

/// The directory workspace-relative paths are resolved against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

/// Why a path from the arguments was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the path is empty; use \".\" for the workspace root")]
    Empty,
    #[error("path {path:?} contains a NUL byte")]
    Nul { path: String },
    #[error(
        "path `{path}` is outside the workspace: an absolute path must start with `{root}`; \
         prefer a path relative to the workspace, such as `src/main.rs`"
    )]
    Outside { path: String, root: String },
    #[error(
        "path `{path}` climbs above the workspace root with `..`; only paths inside the \
         workspace can be reached"
    )]
    Escapes { path: String },
}

impl From<PathError> for ToolError {
    fn from(err: PathError) -> Self {
        ToolError::new(err.to_string())
    }
}

impl Workspace {
    /// The workspace as a tool sees it when it runs under airlock: `/workspace`.
    pub fn guest() -> Self {
        Self::at(GUEST_ROOT)
    }

    /// A workspace rooted at `root`, for running a tool's logic natively (tests).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `path` (`a/b`, `./a/b`, `<root>/a/b` or `.`) to a path under the root.
    ///
    /// `..` is applied lexically and may not climb above the root; an absolute path must
    /// lie under the root. The result has no `.` or `..` components.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        if path.is_empty() {
            return Err(PathError::Empty);
        }
        if path.contains('\0') {
            return Err(PathError::Nul {
                path: path.to_owned(),
            });
        }
        let outside = || PathError::Outside {
            path: path.to_owned(),
            root: self.root.display().to_string(),
        };
        let requested = Path::new(path);
        // `strip_prefix` compares whole components, so `/workspacefoo` is not under
        // `/workspace`, and a `..` left after the root is caught below.
        let relative = if requested.has_root() {
            requested.strip_prefix(&self.root).map_err(|_| outside())?
        } else {
            requested
        };

        let mut resolved = self.root.clone();
        let mut depth = 0usize;
        for component in relative.components() {
            match component {
                Component::Normal(name) => {
                    resolved.push(name);
                    depth += 1;
                }
                Component::CurDir => {}
                Component::ParentDir => {
                    if depth == 0 {
                        return Err(PathError::Escapes {
                            path: path.to_owned(),
                        });
                    }
                    resolved.pop();
                    depth -= 1;
                }
                // Only a path that still has a root (or a Windows prefix) after the
                // workspace root was stripped can get here.
                Component::RootDir | Component::Prefix(_) => return Err(outside()),
            }
        }
        Ok(resolved)
    }

    /// How to name `path` (a path under the root) in a tool's result: relative to the
    /// workspace, `/`-separated, `.` for the root itself, so the model can pass it back
    /// to another tool unchanged. A path outside the root is shown as it is.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(relative) => {
                let parts: Vec<_> = relative
                    .components()
                    .map(|component| component.as_os_str().to_string_lossy())
                    .collect();
                if parts.is_empty() {
                    ".".to_owned()
                } else {
                    parts.join("/")
                }
            }
            Err(_) => path.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(path: &str) -> Result<PathBuf, PathError> {
        Workspace::guest().resolve(path)
    }

    #[test]
    fn accepts_the_spellings_of_a_workspace_path() {
        let expected = Ok(PathBuf::from("/workspace/a/b"));
        assert_eq!(guest("a/b"), expected);
        assert_eq!(guest("./a/b"), expected);
        assert_eq!(guest("/workspace/a/b"), expected);
        assert_eq!(guest("a//b/"), expected);
        assert_eq!(guest("a/./c/../b"), expected);
    }

    #[test]
    fn dot_and_the_root_itself_resolve_to_the_root() {
        assert_eq!(guest("."), Ok(PathBuf::from("/workspace")));
        assert_eq!(guest("/workspace"), Ok(PathBuf::from("/workspace")));
        assert_eq!(guest("/workspace/"), Ok(PathBuf::from("/workspace")));
        assert_eq!(guest("a/.."), Ok(PathBuf::from("/workspace")));
    }

    #[test]
    fn refuses_absolute_paths_outside_the_root() {
        for path in ["/etc/passwd", "/", "/workspacefoo/a", "/work"] {
            let err = guest(path);
            assert!(
                matches!(err, Err(PathError::Outside { .. })),
                "{path}: {err:?}"
            );
        }
        let Err(err) = guest("/etc/passwd") else {
            panic!("/etc/passwd was accepted");
        };
        assert_eq!(
            err.to_string(),
            "path `/etc/passwd` is outside the workspace: an absolute path must start with \
             `/workspace`; prefer a path relative to the workspace, such as `src/main.rs`"
        );
    }

    #[test]
    fn refuses_dot_dot_above_the_root() {
        for path in [
            "..",
            "../x",
            "a/../../x",
            "/workspace/..",
            "/workspace/a/../../b",
        ] {
            let err = guest(path);
            assert!(
                matches!(err, Err(PathError::Escapes { .. })),
                "{path}: {err:?}"
            );
        }
        let Err(err) = guest("a/../../secret") else {
            panic!("a/../../secret was accepted");
        };
        assert!(err.to_string().contains("climbs above the workspace root"));
    }

    #[test]
    fn refuses_empty_and_nul() {
        assert_eq!(guest(""), Err(PathError::Empty));
        assert!(matches!(guest("a\0b"), Err(PathError::Nul { .. })));
    }

    #[test]
    fn a_native_root_works_the_same() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let workspace = Workspace::at(dir.path());
        assert_eq!(workspace.resolve("x/y")?, dir.path().join("x/y"));
        let absolute = dir.path().join("x").display().to_string();
        assert_eq!(workspace.resolve(&absolute)?, dir.path().join("x"));
        assert!(matches!(
            workspace.resolve("/workspace/x"),
            Err(PathError::Outside { .. })
        ));
        Ok(())
    }

    #[test]
    fn display_is_workspace_relative() {
        let workspace = Workspace::guest();
        assert_eq!(workspace.display(Path::new("/workspace/a/b.rs")), "a/b.rs");
        assert_eq!(workspace.display(Path::new("/workspace")), ".");
        assert_eq!(workspace.display(Path::new("/elsewhere/x")), "/elsewhere/x");
    }

    #[test]
    fn path_errors_become_non_retryable_tool_errors() {
        let tool = ToolError::from(PathError::Empty);
        assert_eq!(tool.message(), PathError::Empty.to_string());
        assert!(!tool.is_retryable());
    }
}
