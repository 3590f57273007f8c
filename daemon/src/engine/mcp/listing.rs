//! The workspace a hosted stdio server is started in to list its tools when it loads, as its
//! manifest's `mcp.listing_workspace` asks: an empty folder (the default, shared by every
//! server), or an empty git repository of the server's own, made fresh at each load, for a
//! server that refuses to start in a workspace that is not a repository
//! (`mcp-server-git --repository /workspace`).
//!
//! The repository is written by hand — the layout `git init` makes, no commits — rather than
//! by running `git` on the host: no program to install, and nothing of the host's git
//! configuration (templates, hooks) in it.

use std::path::{Path, PathBuf};

use crate::engine::image::ListingWorkspace;

/// The empty folder, in the engine's dir of the state dir.
const EMPTY: &str = "listing-workspace";
/// Per server, in the engine's dir: its git repository.
const GIT: &str = "listing-git";

/// What `git init` writes that a repository needs: `HEAD` naming an unborn branch, and the
/// config of a repository with a work tree.
const HEAD: &str = "ref: refs/heads/main\n";
const CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n";
const DIRS: &[&str] = &["objects/info", "objects/pack", "refs/heads", "refs/tags"];

/// Makes the listing workspace `kind` of `server` under `engine_dir`; its path.
pub fn prepare(engine_dir: &Path, server: &str, kind: ListingWorkspace) -> Result<PathBuf, String> {
    let cannot =
        |path: &Path, err: std::io::Error| format!("cannot create {}: {err}", path.display());
    match kind {
        ListingWorkspace::Empty => {
            let dir = engine_dir.join(EMPTY);
            std::fs::create_dir_all(&dir).map_err(|err| cannot(&dir, err))?;
            Ok(dir)
        }
        ListingWorkspace::Git => {
            // Server names are `[a-z0-9_]+` (the manifest's rule): one plain component.
            let dir = engine_dir.join(GIT).join(server);
            // What the last listing left (a server may write its workspace) goes.
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(format!("cannot remove {}: {err}", dir.display())),
            }
            let git = dir.join(".git");
            for sub in DIRS {
                let path = git.join(sub);
                std::fs::create_dir_all(&path).map_err(|err| cannot(&path, err))?;
            }
            for (name, text) in [("HEAD", HEAD), ("config", CONFIG)] {
                let path = git.join(name);
                std::fs::write(&path, text).map_err(|err| cannot(&path, err))?;
            }
            Ok(dir)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_workspace_is_shared_and_a_git_one_is_fresh_per_server() {
        let state = tempfile::tempdir().expect("tempdir");
        let empty = prepare(state.path(), "fs", ListingWorkspace::Empty).expect("made");
        assert_eq!(empty, state.path().join(EMPTY));
        assert_eq!(std::fs::read_dir(&empty).expect("dir").count(), 0);

        let repo = prepare(state.path(), "repo", ListingWorkspace::Git).expect("made");
        assert_eq!(repo, state.path().join(GIT).join("repo"));
        std::fs::write(repo.join("left-by-the-server"), "x").expect("write");
        let again = prepare(state.path(), "repo", ListingWorkspace::Git).expect("made");
        assert!(!again.join("left-by-the-server").exists());
        assert_eq!(
            std::fs::read_to_string(again.join(".git/HEAD")).expect("HEAD"),
            HEAD
        );
        // Where git is installed, it takes the layout for a repository.
        if let Ok(out) = std::process::Command::new("git")
            .args(["rev-parse", "--is-inside-work-tree"])
            .current_dir(&again)
            .env("GIT_CEILING_DIRECTORIES", state.path())
            .output()
        {
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                "true",
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
