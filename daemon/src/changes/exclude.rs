//! Which paths a change set records by digest only.
//!
//! Generated trees (a build's `target/`, `node_modules/`) can hold more bytes than the rest
//! of a project together, and nobody wants them back byte for byte. Such paths are still
//! applied to the workspace, but their contents are not kept. They are named by the profile's
//! `[changes] exclude` patterns and by the workspace's ignore files — its top-level
//! `.gitignore` and `.git/info/exclude` — read when the run started (or, outside a run, before
//! the call), so a call that rewrites `.gitignore` cannot hide its own changes or a later
//! call's. `.git/` itself is always excluded: a commit is a pile of content-addressed
//! objects that git can rebuild, not something to undo file by file. Matching follows git's
//! rules exactly (the `ignore` crate, ripgrep's).

use std::path::Path;
use std::sync::Arc;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// A workspace's ignore files, read once: when a run starts (so that no call of the run can
/// widen them for the calls after it), or before a call outside a run.
#[derive(Debug, Clone)]
pub struct WorkspaceIgnores(Arc<Gitignore>);

impl WorkspaceIgnores {
    /// Reads `workspace`'s top-level `.gitignore` and `.git/info/exclude` (blocking).
    pub fn read(workspace: &Path) -> WorkspaceIgnores {
        let mut files = GitignoreBuilder::new(workspace);
        for file in [".gitignore", ".git/info/exclude"] {
            let path = workspace.join(file);
            // Never through a symlink: the file is the workspace's own.
            if path
                .symlink_metadata()
                .is_ok_and(|meta| meta.file_type().is_file())
                && let Some(err) = files.add(&path)
            {
                tracing::debug!(file = %path.display(), error = %err, "part of an ignore file was not understood");
            }
        }
        WorkspaceIgnores(Arc::new(
            files.build().unwrap_or_else(|_| Gitignore::empty()),
        ))
    }

    fn none() -> WorkspaceIgnores {
        WorkspaceIgnores(Arc::new(Gitignore::empty()))
    }
}

/// The matcher of one call's excluded paths.
#[derive(Debug, Clone)]
pub struct Exclusions {
    profile: Gitignore,
    workspace: WorkspaceIgnores,
}

impl Exclusions {
    /// Nothing excluded but `.git/`.
    pub fn none() -> Exclusions {
        Exclusions::new(&[], WorkspaceIgnores::none())
    }

    /// The exclusions of `workspace`, its ignore files read now (blocking), and of the
    /// profile's `patterns`.
    pub fn for_workspace(workspace: &Path, patterns: &[String]) -> Exclusions {
        Exclusions::new(patterns, WorkspaceIgnores::read(workspace))
    }

    /// The profile's `patterns` (gitignore syntax) and the workspace's `ignores`.
    pub fn new(patterns: &[String], ignores: WorkspaceIgnores) -> Exclusions {
        let mut profile = GitignoreBuilder::new("/");
        for pattern in std::iter::once(".git/").chain(patterns.iter().map(String::as_str)) {
            if let Err(err) = profile.add_line(None, pattern) {
                tracing::warn!(%pattern, error = %err, "an exclusion pattern is not valid gitignore syntax");
            }
        }
        Exclusions {
            profile: profile.build().unwrap_or_else(|_| Gitignore::empty()),
            workspace: ignores,
        }
    }

    /// Why `path` (relative) is recorded by digest only, if it is.
    pub fn why(&self, path: impl AsRef<Path>, is_dir: bool) -> Option<String> {
        let relative = path.as_ref();
        if self
            .profile
            .matched_path_or_any_parents(relative, is_dir)
            .is_ignore()
        {
            return Some("excluded by the profile".into());
        }
        if self
            .workspace
            .0
            .matched_path_or_any_parents(relative, is_dir)
            .is_ignore()
        {
            return Some("ignored by the workspace's ignore files".into());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_the_profile_and_the_ignore_file_exclude() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(".gitignore"), "target/\n*.o\n!keep.o\n").expect("write");
        let exclusions = Exclusions::for_workspace(dir.path(), &["node_modules/".into()]);
        assert_eq!(
            exclusions.why(".git/objects/ab/cd", false).as_deref(),
            Some("excluded by the profile")
        );
        assert!(exclusions.why("node_modules/x/index.js", false).is_some());
        assert_eq!(
            exclusions.why("target/debug/app", false).as_deref(),
            Some("ignored by the workspace's ignore files")
        );
        assert!(exclusions.why("target", true).is_some());
        assert!(exclusions.why("src/main.o", false).is_some());
        assert_eq!(exclusions.why("src/keep.o", false), None);
        assert_eq!(exclusions.why("src/main.rs", false), None);
        assert_eq!(exclusions.why(".gitignore", false), None);
        assert_eq!(Exclusions::none().why("target/x", false), None);
    }
}
