//! Opening the workspace directories a call's profile grants, for its preopens.
//!
//! wasmtime opens a preopen by path and follows every symlink on the way. The workspace and
//! the folders granted below it belong to whoever can write the workspace — tools among
//! them — so those are opened here instead: the workspace with no symlink allowed anywhere in
//! its path (the path was canonical when the request was checked, so a symlink now means it
//! was swapped since), a granted folder beneath the workspace and never through a symlink
//! that leads out of it. wasmtime is then handed `/proc/self/fd/<n>`, which names exactly the
//! directory opened here, whatever happens to the paths afterwards.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A workspace directory opened for one call's preopen; closed when dropped, which must not
/// happen before wasmtime has opened [`Opened::path`].
#[derive(Debug)]
pub struct Opened {
    fd: OwnedFd,
}

impl Opened {
    /// A path that leads to this directory and nowhere else while it is open.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }
}

/// Why a workspace grant could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path} contains a NUL byte")]
    Nul { path: PathBuf },
    #[error("the workspace {path} was replaced by a symlink after it was checked")]
    WorkspaceSwapped { path: PathBuf },
    #[error("`$WORKSPACE/{sub}` leads outside the workspace (a symlink or `..`)")]
    Outside { sub: String },
    #[error("cannot open {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Opens `sub` (empty for the workspace itself) of the canonical `workspace`.
pub fn open_in_workspace(workspace: &Path, sub: &Path) -> Result<Opened, OpenError> {
    let root = openat2(
        libc::AT_FDCWD,
        &cstring(workspace)?,
        libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    )
    .map_err(|source| match source.raw_os_error() {
        Some(libc::ELOOP) => OpenError::WorkspaceSwapped {
            path: workspace.to_owned(),
        },
        _ => OpenError::Io {
            path: workspace.to_owned(),
            source,
        },
    })?;
    if sub.as_os_str().is_empty() {
        return Ok(Opened { fd: root });
    }
    open_in_root(root.as_fd(), workspace, sub)
}

/// Opens `sub` (empty for the root itself) beneath `root`, an opened workspace or the root
/// of a call's overlay over `workspace`.
pub fn open_in_root(
    root: BorrowedFd<'_>,
    workspace: &Path,
    sub: &Path,
) -> Result<Opened, OpenError> {
    if sub.as_os_str().is_empty() {
        let fd = root.try_clone_to_owned().map_err(|source| OpenError::Io {
            path: workspace.to_owned(),
            source,
        })?;
        return Ok(Opened { fd });
    }
    let fd = openat2(
        root.as_raw_fd(),
        &cstring(sub)?,
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    )
    .map_err(|source| match source.raw_os_error() {
        Some(libc::EXDEV) => OpenError::Outside {
            sub: sub.display().to_string(),
        },
        _ => OpenError::Io {
            path: workspace.join(sub),
            source,
        },
    })?;
    Ok(Opened { fd })
}

fn cstring(path: &Path) -> Result<CString, OpenError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| OpenError::Nul {
        path: path.to_owned(),
    })
}

/// `openat2(dir, path, O_PATH | O_DIRECTORY | O_CLOEXEC, resolve)`.
fn openat2(dir: RawFd, path: &CString, resolve: u64) -> std::io::Result<OwnedFd> {
    crate::engine::process::openat2(
        dir,
        path,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        resolve,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_the_workspace_and_folders_beneath_it_but_never_through_a_link_out() {
        let base = tempfile::tempdir().expect("tempdir");
        let workspace = base.path().join("ws");
        let outside = base.path().join("outside");
        std::fs::create_dir_all(workspace.join("out")).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(workspace.join("out/inside.txt"), "inside").expect("write");
        std::os::unix::fs::symlink(&outside, workspace.join("link_out")).expect("symlink");
        std::os::unix::fs::symlink("out", workspace.join("link_in")).expect("symlink");
        std::os::unix::fs::symlink(&workspace, base.path().join("ws_link")).expect("symlink");

        let opened = open_in_workspace(&workspace, Path::new("out")).expect("out opens");
        assert_eq!(
            std::fs::read_to_string(opened.path().join("inside.txt")).expect("read"),
            "inside"
        );
        let through_inner_link =
            open_in_workspace(&workspace, Path::new("link_in")).expect("link_in opens");
        assert!(through_inner_link.path().join("inside.txt").exists());
        assert!(open_in_workspace(&workspace, Path::new("")).is_ok());

        for sub in ["link_out", "../outside", "out/../../outside"] {
            let err = open_in_workspace(&workspace, Path::new(sub)).expect_err(sub);
            assert!(matches!(err, OpenError::Outside { .. }), "{sub}: {err}");
        }
        let err = open_in_workspace(&base.path().join("ws_link"), Path::new(""))
            .expect_err("a workspace reached through a symlink");
        assert!(matches!(err, OpenError::WorkspaceSwapped { .. }), "{err}");
        let err = open_in_workspace(&workspace, Path::new("missing")).expect_err("missing");
        assert!(matches!(err, OpenError::Io { .. }), "{err}");
    }
}
