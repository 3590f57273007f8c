//! Putting a captured change set into the workspace: all of it, or none of it.
//!
//! Apply is the daemon writing what a tool chose onto the host, so it writes plain data only:
//! files, directories and symlinks (capture refused everything else), each with the
//! workspace's owner (a changed path keeps its own), a mode capture already cleaned, never a
//! hard link to anything (a file with other names is copied, not moved), never through a
//! symlink (`paths.rs`).
//!
//! It runs in two phases, so that a failure leaves the workspace as it was:
//!
//! 1. **Stage**, where nobody looks: every file and symlink of the set is made whole in a
//!    staging directory at the workspace's root (`.airlock-apply-…`, the daemon's alone) —
//!    moved out of the upper layer when it can be, copied (holes kept) otherwise — with its
//!    owner and mode. Nothing in the workspace has changed yet; a failure here (a full disk,
//!    the deadline) removes the staging directory and nothing else.
//! 2. **Commit**, path by path, each by one atomic rename: what a change removes or replaces
//!    is swapped into the staging directory (`RENAME_EXCHANGE` for a replaced path), so a
//!    reader — or a crash — sees each path whole, before or after, and every step can be
//!    undone. A path whose content is not what capture saw there (someone edited it during
//!    the call) is a conflict: the steps taken are undone in reverse, the set is reported
//!    not applied, and the person's version stays.
//!
//! The staging directory, holding the versions replaced, is removed when the commit is done.
//! Nothing is fsynced here: a rename over a file is ordered after its data by the common
//! Linux filesystems (ext4's `auto_da_alloc`, xfs, btrfs), which is what keeps a path whole.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

use super::bounds::Deadline;
use super::lower::{lower_stat, open_lower, read_names};
use super::overlay::Upper;
use super::paths::{self, Owner};
use super::rel::RelPath;
use super::types::{ChangeError, ChangeSet, Kind, Node, State};
use super::{blobs, sparse};
use crate::pause::{self, Point};

/// The prefix of a staging directory's name at the workspace's root.
pub const STAGING_PREFIX: &str = ".airlock-apply-";

/// How a file gets from the upper layer into the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Renamed out of the upper layer when it can be (the overlay is done with).
    Move,
    /// Copied: the overlay is still in use (a hosted server's), and the file must stay in
    /// its upper layer, where the server's next writes go.
    Copy,
}

/// What was done in the workspace, to undo on a failure. Steps name paths, not descriptors:
/// a set of 100,000 paths would hold as many open directories.
enum Step {
    /// `path` was swapped with the staged entry `staged` (both exist).
    Exchanged { path: RelPath, staged: Vec<u8> },
    /// `path` was moved to `staged` (it was removed, or renamed away).
    Moved { path: RelPath, staged: Vec<u8> },
    /// `path` was made from `staged` (nothing was there).
    Placed { path: RelPath, staged: Vec<u8> },
    /// The directory `path` was made.
    Made { path: RelPath },
    /// The directory `path` had mode `mode`.
    Chmod { path: RelPath, mode: u32 },
}

/// Applies `set` from `upper` (blocking): every change lands, or none does and the error says
/// which path stopped it.
pub fn apply(
    upper: &Upper,
    set: &ChangeSet,
    transfer: Transfer,
    deadline: Deadline,
) -> Result<(), ChangeError> {
    if set.changes.is_empty() {
        return Ok(());
    }
    let workspace = upper.workspace.as_fd();
    let stage = Staging::make(workspace)?;
    let result = (|| {
        let staged = stage.stage(upper, set, transfer, deadline)?;
        let mut steps = Vec::new();
        let committed = commit(
            workspace,
            upper.owner,
            deadline,
            &stage,
            set,
            &staged,
            &mut steps,
        );
        if committed.is_err() {
            undo(workspace, &stage.dir, steps);
        }
        committed
    })();
    stage.remove();
    result
}

/// The staging directory of one apply.
struct Staging {
    dir: OwnedFd,
    name: String,
    root: OwnedFd,
}

impl Staging {
    fn make(workspace: BorrowedFd<'_>) -> Result<Staging, ChangeError> {
        let name = format!("{STAGING_PREFIX}{:016x}", fastrand::u64(..));
        rustix::fs::mkdirat(workspace, name.as_str(), Mode::from_raw_mode(0o700))
            .map_err(|err| staging_error(err.into()))?;
        let dir = open_lower(
            workspace,
            name.as_bytes(),
            OFlags::DIRECTORY | OFlags::RDONLY,
        )
        .ok_or_else(|| staging_error(std::io::Error::other("it vanished")))?;
        let root = rustix::fs::openat(
            workspace,
            ".",
            OFlags::DIRECTORY | OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| staging_error(err.into()))?;
        Ok(Staging { dir, name, root })
    }

    /// Makes every file and symlink of `set` whole in the staging directory, named by its
    /// index in the set; returns those names (`None` for a change with nothing to place).
    fn stage(
        &self,
        upper: &Upper,
        set: &ChangeSet,
        transfer: Transfer,
        deadline: Deadline,
    ) -> Result<Vec<Option<Vec<u8>>>, ChangeError> {
        let upper_root = upper
            .open()
            .map_err(|err| ChangeError::Apply(format!("cannot open the upper layer: {err}")))?;
        let same_fs =
            rustix::fs::fstat(&upper_root)?.st_dev == rustix::fs::fstat(&self.dir)?.st_dev;
        let mut staged = Vec::with_capacity(set.changes.len());
        for (index, change) in set.changes.iter().enumerate() {
            deadline.check()?;
            let Some(after) = change
                .after
                .as_ref()
                .filter(|after| after.node != Node::Dir)
            else {
                staged.push(None);
                continue;
            };
            let name = format!("s{index}").into_bytes();
            let owner = owner(upper, change.kind, &change.path);
            self.stage_one(
                &upper_root,
                &change.path,
                after,
                &name,
                owner,
                transfer,
                same_fs,
                deadline,
            )
            .map_err(|err| match err {
                ChangeError::Io(err) => apply_error(&change.path, err),
                other => other,
            })?;
            staged.push(Some(name));
        }
        Ok(staged)
    }

    #[allow(clippy::too_many_arguments)]
    fn stage_one(
        &self,
        upper: &OwnedFd,
        path: &RelPath,
        after: &State,
        name: &[u8],
        owner: Owner,
        transfer: Transfer,
        same_fs: bool,
        deadline: Deadline,
    ) -> Result<(), ChangeError> {
        let (parent, leaf) = path.split();
        let source_dir = open_lower(upper.as_fd(), parent, OFlags::DIRECTORY | OFlags::PATH)
            .ok_or_else(|| ChangeError::Io(std::io::Error::other("gone from the upper layer")))?;
        let stat = rustix::fs::statat(&source_dir, leaf, AtFlags::SYMLINK_NOFOLLOW)?;
        match (after.node, FileType::from_raw_mode(stat.st_mode)) {
            (Node::Symlink, FileType::Symlink) => {
                let target = rustix::fs::readlinkat(&source_dir, leaf, Vec::new())?;
                rustix::fs::symlinkat(target.as_bytes(), &self.dir, name)?;
                rustix::fs::chownat(
                    &self.dir,
                    name,
                    Some(paths::uid(owner.0)),
                    Some(paths::gid(owner.1)),
                    AtFlags::SYMLINK_NOFOLLOW,
                )?;
            }
            (Node::File, FileType::RegularFile) => {
                // A file with other names is copied: the workspace never shares an inode with
                // anything outside it.
                let moved = transfer == Transfer::Move
                    && same_fs
                    && stat.st_nlink == 1
                    && rustix::fs::renameat(&source_dir, leaf, &self.dir, name).is_ok();
                let file = if moved {
                    File::from(rustix::fs::openat(
                        &self.dir,
                        name,
                        OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?)
                } else {
                    let source = File::from(rustix::fs::openat(
                        &source_dir,
                        leaf,
                        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?);
                    let copy = File::from(rustix::fs::openat(
                        &self.dir,
                        name,
                        OFlags::CREATE
                            | OFlags::EXCL
                            | OFlags::RDWR
                            | OFlags::NOFOLLOW
                            | OFlags::CLOEXEC,
                        Mode::from_raw_mode(0o600),
                    )?);
                    let (digest, _) = sparse::copy(&source, &copy, deadline)?;
                    if Some(&digest) != after.digest.as_ref() {
                        return Err(ChangeError::Io(std::io::Error::other(
                            "changed in the upper layer since it was recorded",
                        )));
                    }
                    copy
                };
                rustix::fs::fchown(&file, Some(paths::uid(owner.0)), Some(paths::gid(owner.1)))?;
                rustix::fs::fchmod(&file, Mode::from_raw_mode(after.mode))?;
            }
            _ => {
                return Err(ChangeError::Io(std::io::Error::other(
                    "its type changed in the upper layer since it was recorded",
                )));
            }
        }
        Ok(())
    }

    /// Removes the staging directory and what it holds (the versions replaced).
    fn remove(self) {
        if let Err(err) = paths::remove(self.root.as_fd(), &RelPath::from(self.name.as_str())) {
            tracing::warn!(dir = %self.name, error = %err, "cannot remove an apply's staging directory");
        }
    }
}

/// A changed path keeps its owner; a new one belongs to the workspace's owner, as it would
/// had the call written it in place.
fn owner(upper: &Upper, kind: Kind, path: &RelPath) -> Owner {
    match lower_stat(upper.workspace.as_fd(), path) {
        Some(stat) if kind == Kind::Modified => (stat.st_uid, stat.st_gid),
        _ => upper.owner,
    }
}

fn commit(
    workspace: BorrowedFd<'_>,
    owner: Owner,
    deadline: Deadline,
    stage: &Staging,
    set: &ChangeSet,
    staged: &[Option<Vec<u8>>],
    steps: &mut Vec<Step>,
) -> Result<(), ChangeError> {
    // Removals first, deepest first: each moved into the staging directory whole.
    // A directory recorded entry by entry must be empty once its entries are gone: what
    // else is in it appeared during the call, and is not the call's to remove. An excluded
    // tree (recorded as one entry) goes whole.
    let mut removals: Vec<(usize, &RelPath, &Option<State>)> = Vec::new();
    for (index, change) in set.changes.iter().enumerate() {
        match (change.kind, &change.from) {
            (Kind::Deleted, _) => removals.push((index, &change.path, &change.before)),
            (Kind::Renamed, Some(from)) => removals.push((index, from, &change.before)),
            _ => {}
        }
    }
    let whole = |index: usize| set.changes[index].digest_only.is_some();
    removals.sort_by(|a, b| b.1.depth().cmp(&a.1.depth()).then_with(|| b.1.cmp(a.1)));
    for (index, path, before) in removals {
        deadline.check()?;
        let (dir, name) = paths::parent(workspace, path).map_err(|err| apply_error(path, err))?;
        let kept = format!("r{index}").into_bytes();
        match rustix::fs::renameat(&dir, name.as_slice(), &stage.dir, kept.as_slice()) {
            Ok(()) => {}
            // Gone already: what the call wanted.
            Err(rustix::io::Errno::NOENT) => continue,
            Err(err) => return Err(apply_error(path, err.into())),
        }
        steps.push(Step::Moved {
            path: path.clone(),
            staged: kept.clone(),
        });
        check_unchanged(&stage.dir, &kept, before.as_ref(), path, !whole(index))?;
        pause::reached(Point::ChangesApply);
    }
    // Then what lands, parents before children.
    for (index, change) in set.changes.iter().enumerate() {
        let Some(after) = &change.after else { continue };
        deadline.check()?;
        let path = &change.path;
        let (dir, name) = paths::parent(workspace, path).map_err(|err| apply_error(path, err))?;
        if after.node == Node::Dir {
            make_dir(&dir, &name, after.mode, owner, path, steps)?;
        } else if let Some(Some(from)) = staged.get(index) {
            place(
                stage,
                dir,
                name,
                from,
                change.kind,
                change.before.as_ref(),
                path,
                steps,
            )?;
        }
        pause::reached(Point::ChangesApply);
    }
    Ok(())
}

/// Swaps the staged entry `from` into `name` in `dir`, or moves it there when nothing is.
#[allow(clippy::too_many_arguments)]
fn place(
    stage: &Staging,
    dir: OwnedFd,
    name: Vec<u8>,
    from: &[u8],
    kind: Kind,
    before: Option<&State>,
    path: &RelPath,
    steps: &mut Vec<Step>,
) -> Result<(), ChangeError> {
    let exists = rustix::fs::statat(&dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW).is_ok();
    if exists {
        if kind != Kind::Modified {
            return Err(conflict(path, "appeared in the workspace during the call"));
        }
        let exchanged = rustix::fs::renameat_with(
            &stage.dir,
            from,
            &dir,
            name.as_slice(),
            RenameFlags::EXCHANGE,
        );
        match exchanged {
            Ok(()) => {
                steps.push(Step::Exchanged {
                    path: path.clone(),
                    staged: from.to_vec(),
                });
                // What was there is now in the staging directory: it must be what capture saw.
                return check_unchanged(&stage.dir, from, before, path, false);
            }
            // A filesystem without RENAME_EXCHANGE (NFS, some FUSE): the old entry is moved
            // away first, then the new one moved in; the path is missing in between.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                let kept = [b"o", from].concat();
                rename_noreplace(&dir, &name, &stage.dir, &kept)
                    .map_err(|err| apply_error(path, err.into()))?;
                steps.push(Step::Moved {
                    path: path.clone(),
                    staged: kept.clone(),
                });
                check_unchanged(&stage.dir, &kept, before, path, false)?;
            }
            Err(err) => return Err(apply_error(path, err.into())),
        }
    } else if kind == Kind::Modified {
        return Err(conflict(
            path,
            "was removed from the workspace during the call",
        ));
    }
    rename_noreplace(&stage.dir, from, &dir, &name).map_err(|err| apply_error(path, err.into()))?;
    steps.push(Step::Placed {
        path: path.clone(),
        staged: from.to_vec(),
    });
    Ok(())
}

fn make_dir(
    dir: &OwnedFd,
    name: &[u8],
    mode: u32,
    owner: Owner,
    path: &RelPath,
    steps: &mut Vec<Step>,
) -> Result<(), ChangeError> {
    let made = match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700)) {
        Ok(()) => true,
        Err(rustix::io::Errno::EXIST) => false,
        Err(err) => return Err(apply_error(path, err.into())),
    };
    if made {
        steps.push(Step::Made { path: path.clone() });
    }
    // A name that is something else now (changed since) is refused, never chmod-ed through.
    let opened = open_lower(dir.as_fd(), name, OFlags::DIRECTORY | OFlags::RDONLY)
        .ok_or_else(|| conflict(path, "is no longer a directory in the workspace"))?;
    let old = rustix::fs::fstat(&opened)?.st_mode & 0o7777;
    if made {
        // The workspace's owner's, as a path the call added.
        rustix::fs::fchown(
            &opened,
            Some(paths::uid(owner.0)),
            Some(paths::gid(owner.1)),
        )?;
    }
    rustix::fs::fchmod(&opened, Mode::from_raw_mode(mode))?;
    if !made && old != mode {
        steps.push(Step::Chmod {
            path: path.clone(),
            mode: old,
        });
    }
    Ok(())
}

/// Checks that the entry `name` in the staging directory — what was at `path` — is what
/// capture recorded there (`before`; `None`: nothing was), and, for a directory whose
/// entries were removed one by one, that it is `empty`.
fn check_unchanged(
    stage: &OwnedFd,
    name: &[u8],
    before: Option<&State>,
    path: &RelPath,
    empty: bool,
) -> Result<(), ChangeError> {
    let Some(before) = before else {
        return Ok(());
    };
    let Ok(stat) = rustix::fs::statat(stage, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return Err(conflict(path, "vanished during the call"));
    };
    let now = FileType::from_raw_mode(stat.st_mode);
    let same = match (before.node, now) {
        (Node::Dir, FileType::Directory) => {
            !empty
                || open_lower(stage.as_fd(), name, OFlags::DIRECTORY | OFlags::RDONLY)
                    .and_then(|dir| read_names(&dir).ok())
                    .is_some_and(|names| names.is_empty())
        }
        (Node::Symlink, FileType::Symlink) => rustix::fs::readlinkat(stage, name, Vec::new())
            .ok()
            .and_then(|target| blobs::digest(target.as_bytes()).ok())
            .is_some_and(|(digest, _)| Some(digest) == before.digest),
        (Node::File, FileType::RegularFile) => {
            u64::try_from(stat.st_size).ok() == Some(before.size)
                && rustix::fs::openat(
                    stage,
                    name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ok()
                .and_then(|file| sparse::digest(&File::from(file), Deadline::none()).ok())
                .is_some_and(|(digest, _)| Some(digest) == before.digest)
        }
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(conflict(
            path,
            "was changed in the workspace during the call",
        ))
    }
}

/// Puts back what `steps` did, last first: each is a rename or a chmod of something this
/// apply made or moved, undone the same way, its directory opened again as it was found.
fn undo(workspace: BorrowedFd<'_>, stage: &OwnedFd, steps: Vec<Step>) {
    for step in steps.into_iter().rev() {
        let undone = match &step {
            Step::Exchanged { path, staged } => rename(workspace, stage, path, staged, true),
            Step::Moved { path, staged } => rename(workspace, stage, path, staged, false),
            Step::Placed { path, staged } => {
                paths::parent(workspace, path).and_then(|(dir, name)| {
                    rename_noreplace(&dir, &name, stage, staged).map_err(Into::into)
                })
            }
            Step::Made { path } => paths::parent(workspace, path).and_then(|(dir, name)| {
                rustix::fs::unlinkat(&dir, name.as_slice(), AtFlags::REMOVEDIR).map_err(Into::into)
            }),
            Step::Chmod { path, mode } => {
                match open_lower(
                    workspace,
                    path.as_bytes(),
                    OFlags::DIRECTORY | OFlags::RDONLY,
                ) {
                    Some(dir) => {
                        rustix::fs::fchmod(&dir, Mode::from_raw_mode(*mode)).map_err(Into::into)
                    }
                    None => Err(std::io::Error::other("no longer a directory")),
                }
            }
        };
        if let Err(err) = undone {
            tracing::warn!(error = %err, "cannot undo a step of a failed apply");
        }
    }
}

/// Moves the staged entry `staged` back to `path`, swapping it with what is there when
/// `exchange`.
fn rename(
    workspace: BorrowedFd<'_>,
    stage: &OwnedFd,
    path: &RelPath,
    staged: &[u8],
    exchange: bool,
) -> std::io::Result<()> {
    let (dir, name) = paths::parent(workspace, path)?;
    if exchange {
        rustix::fs::renameat_with(stage, staged, &dir, name.as_slice(), RenameFlags::EXCHANGE)?;
    } else {
        rename_noreplace(stage, staged, &dir, &name)?;
    }
    Ok(())
}

/// Renames `from` in `from_dir` to `to` in `to_dir`, never over something: by
/// `RENAME_NOREPLACE`, or where the filesystem lacks it, by a check and a plain rename.
fn rename_noreplace(
    from_dir: &OwnedFd,
    from: &[u8],
    to_dir: &OwnedFd,
    to: &[u8],
) -> rustix::io::Result<()> {
    match rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            if rustix::fs::statat(to_dir, to, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                return Err(rustix::io::Errno::EXIST);
            }
            rustix::fs::renameat(from_dir, from, to_dir, to)
        }
        other => other,
    }
}

fn staging_error(err: std::io::Error) -> ChangeError {
    ChangeError::Apply(format!(
        "cannot make a staging directory at the workspace's root: {err}"
    ))
}

fn apply_error(path: &RelPath, err: std::io::Error) -> ChangeError {
    ChangeError::Apply(format!("{path}: {err}; nothing was applied"))
}

fn conflict(path: &RelPath, what: &str) -> ChangeError {
    ChangeError::Apply(format!(
        "{path} {what}: the person's version is kept and nothing was applied"
    ))
}
