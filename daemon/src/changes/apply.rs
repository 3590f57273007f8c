//! Putting a captured change set into the workspace.
//!
//! Removals go first, deepest first; then directories, files and symlinks, parents before
//! children, each written whole and never through a symlink (`paths.rs`): a reader — or a
//! crash — sees a path either as it was or as the call left it, never half written. A file
//! moves out of the upper layer by rename when both are on one filesystem, and is copied
//! otherwise (and always for a hosted server's overlay, still in use). Each change is marked
//! applied as it lands; the first failure stops the rest and is reported with the change set,
//! so what reached the workspace is always known.
//!
//! Nothing is fsynced here: a rename over a file is ordered after its data by the common Linux
//! filesystems (ext4's `auto_da_alloc`, xfs, btrfs), which is what keeps a path whole.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

use super::capture::lower_stat;
use super::overlay::Upper;
use super::paths;
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
    let mut removals: Vec<(usize, String)> = Vec::new();
    for (index, change) in set.changes.iter().enumerate() {
        match change.kind {
            Kind::Deleted => removals.push((index, change.path.clone())),
            Kind::Renamed => {
                if let Some(from) = &change.from {
                    removals.push((index, from.clone()));
                }
            }
            Kind::Added | Kind::Modified => {}
        }
    }
    removals.sort_by(|a, b| depth(&b.1).cmp(&depth(&a.1)).then_with(|| b.1.cmp(&a.1)));
    for (index, path) in removals {
        paths::remove(workspace, &path).map_err(|err| apply_error(&path, err))?;
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

fn place(
    upper: &Upper,
    workspace: BorrowedFd<'_>,
    path: &str,
    kind: Kind,
    after: &State,
    transfer: Transfer,
) -> std::io::Result<()> {
    let (dir, name) = paths::parent(workspace, path)?;
    // A changed path keeps its owner; a new one belongs to the workspace's owner, as it would
    // had the call written it in place.
    let owner = match lower_stat(workspace, path) {
        Some(stat) if kind == Kind::Modified => (stat.st_uid, stat.st_gid),
        _ => upper.owner,
    };
    let source = upper.path.join(path);
    match (after.node, transfer) {
        (Node::Dir, _) => paths::make_dir(&dir, &name, after.mode, owner),
        (Node::Symlink, _) => {
            let target = std::fs::read_link(&source)?;
            paths::make_symlink(&dir, &name, target.as_os_str().as_bytes(), owner)
        }
        (Node::File, Transfer::Move) => paths::move_file(&source, &dir, &name, after.mode, owner),
        (Node::File, Transfer::Copy) => {
            paths::write_file(&dir, &name, File::open(&source)?, after.mode, owner)
        }
    }
}
