//! Reading the workspace — the overlay's lower layer — from a descriptor of its root: every
//! path is opened beneath the root with no symlink or magic link followed, so a link planted
//! in the workspace never leads out of it. Capturing, bounding, applying, reverting and
//! showing changes all read the workspace this way.

use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};

use super::rel::RelPath;

/// Opens the workspace at `path`, never through a symlink.
pub fn open_workspace(path: &std::path::Path) -> std::io::Result<OwnedFd> {
    rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(Into::into)
}

/// The names in `dir`, as bytes, but `.` and `..`.
pub(super) fn read_names(dir: &OwnedFd) -> std::io::Result<Vec<Vec<u8>>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(name.to_vec());
        }
    }
    Ok(names)
}

/// Opens `path` beneath the workspace `root`, never through a symlink.
pub(super) fn open_lower(root: BorrowedFd<'_>, path: &[u8], flags: OFlags) -> Option<OwnedFd> {
    let path = if path.is_empty() { b"." } else { path };
    rustix::fs::openat2(
        root,
        path,
        flags | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .ok()
}

/// The workspace's `path`, not following a symlink at its end; none if it does not exist.
pub(super) fn lower_stat(root: BorrowedFd<'_>, path: &RelPath) -> Option<rustix::fs::Stat> {
    let (parent, name) = path.split();
    let dir = open_lower(root, parent, OFlags::DIRECTORY | OFlags::PATH)?;
    rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()
}
