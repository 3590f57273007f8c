//! Putting a captured change set into the workspace.
//!
//! Removals go first, deepest first; then directories, files and symlinks, parents before
//! children. Each file and symlink is made under a temporary name in its directory, given its
//! mode and owner, and renamed over its path: a reader — or a crash — sees the path either as
//! it was or as the call left it, never half written. A file moves from the upper layer by
//! rename when both are on one filesystem, and is copied otherwise. Every directory on the
//! way is opened beneath the workspace with no symlink allowed, so a link a tool planted is
//! never followed. Each change is marked applied as it lands; the first failure stops the
//! rest and is reported with the change set, so what reached the workspace is always known.
//!
//! Nothing is fsynced here: a rename over a file is ordered after its data by the common Linux
//! filesystems (ext4's `auto_da_alloc`, xfs, btrfs), which is what keeps a path whole.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, Mode, OFlags};

use super::capture::{lower_stat, open_lower, split};
use super::overlay::Upper;
use super::{ChangeError, ChangeSet, Kind, Node, State};
use crate::pause::{self, Point};

/// How a file gets from the upper layer into the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Renamed out of the upper layer when it can be (the overlay is done with).
    Move,
    /// Copied: the overlay is still in use (a hosted server's), and the file must stay in
    /// its upper layer, where the server's next writes go.
    Copy,
}

pub fn apply(upper: &Upper, set: &mut ChangeSet, transfer: Transfer) -> Result<(), ChangeError> {
    let workspace = upper.workspace.as_fd();
    let mut removals: Vec<(usize, String, bool)> = Vec::new();
    for (index, change) in set.changes.iter().enumerate() {
        match change.kind {
            Kind::Deleted => {
                let node = change.before.as_ref().map(|state| state.node);
                removals.push((index, change.path.clone(), node == Some(Node::Dir)));
            }
            Kind::Renamed => {
                if let Some(from) = &change.from {
                    removals.push((index, from.clone(), false));
                }
            }
            Kind::Added | Kind::Modified => {}
        }
    }
    removals.sort_by(|a, b| depth(&b.1).cmp(&depth(&a.1)).then_with(|| b.1.cmp(&a.1)));
    for (index, path, is_dir) in removals {
        remove(workspace, &path, is_dir).map_err(|err| apply_error(&path, err))?;
        if set.changes[index].kind == Kind::Deleted {
            set.changes[index].applied = true;
            pause::reached(Point::ChangesApply);
        }
    }
    for change in &mut set.changes {
        let Some(after) = &change.after else { continue };
        let path = change.path.as_str();
        place(upper, workspace, path, change.kind, after, transfer)
            .map_err(|err| apply_error(path, err))?;
        change.applied = true;
        pause::reached(Point::ChangesApply);
    }
    Ok(())
}

fn apply_error(path: &str, err: std::io::Error) -> ChangeError {
    ChangeError::Apply(format!("{path}: {err}"))
}

fn depth(path: &str) -> usize {
    path.bytes().filter(|b| *b == b'/').count()
}

fn parent_dir(workspace: BorrowedFd<'_>, path: &str) -> std::io::Result<(OwnedFd, String)> {
    let (parent, name) = split(path);
    let dir = open_lower(workspace, parent, OFlags::DIRECTORY | OFlags::PATH).ok_or_else(|| {
        std::io::Error::other(format!(
            "its directory `{parent}` is missing or is a symlink in the workspace"
        ))
    })?;
    Ok((dir, name.to_owned()))
}

/// Removes `path`; a directory with everything beneath it when the change set recorded it
/// as one entry (an excluded tree).
fn remove(workspace: BorrowedFd<'_>, path: &str, is_dir: bool) -> std::io::Result<()> {
    let (dir, name) = parent_dir(workspace, path)?;
    let flags = if is_dir {
        AtFlags::REMOVEDIR
    } else {
        AtFlags::empty()
    };
    match rustix::fs::unlinkat(&dir, name.as_str(), flags) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) if is_dir => {
            // std's remove_dir_all never follows a symlink inside the tree; the path to the
            // tree is the directory opened above, whatever happens to its name.
            std::fs::remove_dir_all(fd_path(&dir).join(&name))
        }
        Err(err) => Err(err.into()),
    }
}

fn fd_path(fd: &OwnedFd) -> std::path::PathBuf {
    std::path::PathBuf::from(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(fd)
    ))
}

fn place(
    upper: &Upper,
    workspace: BorrowedFd<'_>,
    path: &str,
    kind: Kind,
    after: &State,
    transfer: Transfer,
) -> std::io::Result<()> {
    let (dir, name) = parent_dir(workspace, path)?;
    // A changed path keeps its owner; a new one belongs to the workspace's owner, as it would
    // had the call written it in place.
    let owner = match lower_stat(workspace, path) {
        Some(stat) if kind == Kind::Modified => (stat.st_uid, stat.st_gid),
        _ => upper.owner,
    };
    let mode = Mode::from_raw_mode(after.mode);
    match after.node {
        Node::Dir => {
            match rustix::fs::mkdirat(&dir, name.as_str(), mode) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(err) => return Err(err.into()),
            }
            // Through a descriptor of the directory itself, opened with no symlink followed: a
            // name that is something else now (changed since) is refused, never chmod-ed through.
            let made = rustix::fs::openat2(
                &dir,
                name.as_str(),
                OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
                rustix::fs::ResolveFlags::BENEATH
                    | rustix::fs::ResolveFlags::NO_SYMLINKS
                    | rustix::fs::ResolveFlags::NO_MAGICLINKS,
            )?;
            rustix::fs::fchown(&made, Some(uid(owner.0)), Some(gid(owner.1)))?;
            rustix::fs::fchmod(&made, mode)?;
            Ok(())
        }
        Node::Symlink => {
            let target = std::fs::read_link(upper.path.join(path))?;
            let temp = temp_name();
            rustix::fs::symlinkat(target.as_os_str().as_bytes(), &dir, temp.as_str())?;
            finish(&dir, &temp, &name, owner, None)
        }
        Node::File => {
            let temp = temp_name();
            let source = upper.path.join(path);
            let moved = match transfer {
                Transfer::Move => {
                    rustix::fs::renameat(rustix::fs::CWD, &source, &dir, temp.as_str())
                }
                Transfer::Copy => Err(rustix::io::Errno::XDEV),
            };
            match moved {
                Ok(()) => {}
                Err(rustix::io::Errno::XDEV) => {
                    let mut from = File::open(&source)?;
                    let to = rustix::fs::openat(
                        &dir,
                        temp.as_str(),
                        OFlags::CREATE
                            | OFlags::EXCL
                            | OFlags::WRONLY
                            | OFlags::NOFOLLOW
                            | OFlags::CLOEXEC,
                        Mode::from_raw_mode(0o600),
                    )?;
                    let mut to = File::from(to);
                    if let Err(err) = std::io::copy(&mut from, &mut to) {
                        let _ = rustix::fs::unlinkat(&dir, temp.as_str(), AtFlags::empty());
                        return Err(err);
                    }
                }
                Err(err) => return Err(err.into()),
            }
            finish(&dir, &temp, &name, owner, Some(mode))
        }
    }
}

/// Gives the temporary `temp` its owner and mode and renames it over `name`.
fn finish(
    dir: &OwnedFd,
    temp: &str,
    name: &str,
    owner: (u32, u32),
    mode: Option<Mode>,
) -> std::io::Result<()> {
    let done = (|| -> rustix::io::Result<()> {
        rustix::fs::chownat(
            dir,
            temp,
            Some(uid(owner.0)),
            Some(gid(owner.1)),
            AtFlags::SYMLINK_NOFOLLOW,
        )?;
        if let Some(mode) = mode {
            rustix::fs::chmodat(dir, temp, mode, AtFlags::empty())?;
        }
        rustix::fs::renameat(dir, temp, dir, name)
    })();
    if let Err(err) = done {
        let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
        return Err(err.into());
    }
    Ok(())
}

fn temp_name() -> String {
    format!(".airlock-{:016x}", fastrand::u64(..))
}

pub(super) fn uid(id: u32) -> rustix::fs::Uid {
    rustix::fs::Uid::from_raw(id)
}

pub(super) fn gid(id: u32) -> rustix::fs::Gid {
    rustix::fs::Gid::from_raw(id)
}
