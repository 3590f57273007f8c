//! Reading a change set off a call's upper layer.
//!
//! With `redirect_dir`, `metacopy` and `index` off (see `overlay.rs`), the upper layer holds
//! exactly: every file and symlink the call created or changed (whole), every directory on
//! the way to one (overlayfs's opaque mark set when the call replaced a directory of the
//! workspace with a new one), and a whiteout — a character device 0:0 — for everything it
//! removed. Each entry is compared with the workspace (the lower layer), so a file copied up
//! and left as it was is no change. Contents before and after go to the blob store, except
//! for excluded paths; a path deleted and added elsewhere with the same content is a rename.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{FileType, OFlags};

use super::blobs::{self, Blobs};
use super::bounds::{self, ChangeRules, Deadline, Tally};
use super::exclude::Exclusions;
use super::lower::{lower_stat, open_lower, read_names};
use super::overlay::{Upper, private_xattrs};
use super::rel::RelPath;
use super::sparse;
use super::types::{Change, ChangeError, ChangeSet, Kind, Node, State};

/// What a capture reads a call's changes with.
pub struct Capture<'a> {
    pub exclusions: &'a Exclusions,
    pub blobs: &'a Blobs,
    pub modes: Modes,
    pub rules: &'a ChangeRules,
    pub deadline: Deadline,
}

/// Reads the change set off `upper` (blocking): first a survey of its size against the
/// rules (nothing is read or kept from a call over its bounds), then every entry.
pub fn capture(upper: &Upper, how: &Capture<'_>) -> Result<ChangeSet, ChangeError> {
    let root = upper
        .open()
        .map_err(|err| ChangeError::Capture(format!("cannot open the upper layer: {err}")))?;
    bounds::survey(&root, how.rules, how.deadline)?;
    let mut walk = Walk {
        upper: root.as_fd(),
        lower: upper.workspace.as_fd(),
        how,
        kept: Tally::default(),
        set: ChangeSet::default(),
    };
    walk.dir(&RelPath::root())?;
    let mut set = walk.set;
    pair_renames(&mut set.changes);
    set.changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(set)
}

/// Whether the tool could set file modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modes {
    /// A mode in the upper layer is what the tool chose.
    Tool,
    /// The tool had no way to set one (WASI has no chmod): a file it rewrote keeps the mode it
    /// had, rather than taking the default its replacement was created with.
    Kept,
}

struct Walk<'a> {
    /// The upper directory, opened.
    upper: BorrowedFd<'a>,
    lower: BorrowedFd<'a>,
    how: &'a Capture<'a>,
    /// What the blob store was given, counted against the byte bound.
    kept: Tally,
    set: ChangeSet,
}

fn capture_error(path: &RelPath, err: impl std::fmt::Display) -> ChangeError {
    ChangeError::Capture(format!("{path}: {err}"))
}

/// An I/O error placed at `path`; a deadline or a bound stays what it is.
fn at(path: &RelPath, err: ChangeError) -> ChangeError {
    match err {
        ChangeError::Io(err) => capture_error(path, err),
        other => other,
    }
}

impl Walk<'_> {
    fn dir(&mut self, rel: &RelPath) -> Result<(), ChangeError> {
        if rel.depth() >= bounds::MAX_DEPTH {
            return Err(ChangeError::Exceeded(format!(
                "the call wrote paths more than {} directories deep",
                bounds::MAX_DEPTH
            )));
        }
        let dir =
            open_dir(self.upper, rel).ok_or_else(|| capture_error(rel, "cannot be opened"))?;
        let mut names = read_names(&dir).map_err(|err| capture_error(rel, err))?;
        names.sort();
        for name in names {
            self.how.deadline.check()?;
            self.entry(&rel.join(&name))?;
        }
        Ok(())
    }

    fn entry(&mut self, path: &RelPath) -> Result<(), ChangeError> {
        let stat = stat_at(self.upper, path)
            .ok_or_else(|| capture_error(path, "vanished from the upper layer"))?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        let lower = lower_stat(self.lower, path);
        if kind == FileType::CharacterDevice && stat.st_rdev == 0 {
            if let Some(lower) = lower {
                self.deleted(path, &lower)?;
            }
            return Ok(());
        }
        if kind == FileType::Directory {
            let before = lower
                .as_ref()
                .filter(|before| FileType::from_raw_mode(before.st_mode) == FileType::Directory)
                .map(|before| before.st_mode);
            let mode = self.landed_mode(path, stat.st_mode, before, true);
            match &lower {
                Some(before) if FileType::from_raw_mode(before.st_mode) == FileType::Directory => {
                    if before.st_mode & 0o7777 != mode {
                        self.push(
                            path,
                            Kind::Modified,
                            Some(dir_state(before.st_mode)),
                            Some(dir_state(mode)),
                            None,
                        )?;
                    }
                    if self.is_opaque(path) {
                        self.hidden_children(path)?;
                    }
                }
                other => {
                    if let Some(before) = other {
                        // A directory the call made over something it removed is opaque; one
                        // that is not was there when the call started, and the workspace's
                        // entry has been replaced since, by something else. What the call
                        // wrote beneath it is not applied over that.
                        if !self.is_opaque(path) {
                            self.set.skipped.push(format!(
                                "{path}/ (replaced in the workspace during the call; nothing the call wrote beneath it was applied)"
                            ));
                            return Ok(());
                        }
                        self.deleted(path, before)?;
                    }
                    self.push(path, Kind::Added, None, Some(dir_state(mode)), None)?;
                }
            }
            return self.dir(path);
        }
        if !matches!(kind, FileType::RegularFile | FileType::Symlink) {
            // Devices, fifos and sockets never land: the daemon writes plain data only.
            self.set.skipped.push(format!(
                "{path} (refused: a {}, not a file, symlink or directory)",
                type_name(kind)
            ));
            return Ok(());
        }
        let excluded = self.how.exclusions.why(path.as_path(), false);
        let before_mode = lower
            .as_ref()
            .filter(|before| FileType::from_raw_mode(before.st_mode) == kind)
            .map(|before| before.st_mode);
        let mut after = self.upper_state(path, &stat, before_mode, excluded.is_none())?;
        match lower {
            Some(before) if FileType::from_raw_mode(before.st_mode) == FileType::Directory => {
                self.deleted(path, &before)?;
                self.push(path, Kind::Added, None, Some(after), excluded)?;
            }
            Some(stat) => {
                let before = self.lower_state(path, &stat, excluded.is_none())?;
                if self.how.modes == Modes::Kept && before.node == after.node {
                    after.mode = self.how.rules.landed(before.mode, Some(before.mode), false);
                }
                if before != after {
                    self.push(path, Kind::Modified, Some(before), Some(after), excluded)?;
                }
            }
            None => self.push(path, Kind::Added, None, Some(after), excluded)?,
        }
        Ok(())
    }

    /// The mode `path` lands with; what the rules took away is recorded.
    fn landed_mode(&mut self, path: &RelPath, mode: u32, before: Option<u32>, dir: bool) -> u32 {
        if let Some(dropped) = self.how.rules.dropped(mode, before, dir) {
            self.set.skipped.push(format!("{path} ({dropped})"));
        }
        self.how.rules.landed(mode, before, dir)
    }

    fn is_opaque(&self, path: &RelPath) -> bool {
        let Some(dir) = open_dir(self.upper, path) else {
            return false;
        };
        let mut value = [0u8; 4];
        rustix::fs::fgetxattr(&dir, private_xattrs().opaque, &mut value)
            .is_ok_and(|n| value[..n] == *b"y")
    }

    /// Records `path` of the workspace, and everything beneath it, as deleted.
    fn deleted(&mut self, path: &RelPath, stat: &rustix::fs::Stat) -> Result<(), ChangeError> {
        let is_dir = FileType::from_raw_mode(stat.st_mode) == FileType::Directory;
        let excluded = self.how.exclusions.why(path.as_path(), is_dir);
        if is_dir {
            // An excluded tree goes as one entry: its contents are not kept anyway.
            if excluded.is_none() {
                self.hidden_children(path)?;
            }
            self.push(
                path,
                Kind::Deleted,
                Some(dir_state(stat.st_mode)),
                None,
                excluded,
            )?;
            return Ok(());
        }
        let before = self.lower_state(path, stat, excluded.is_none())?;
        self.push(path, Kind::Deleted, Some(before), None, excluded)?;
        Ok(())
    }

    /// Records as deleted every entry of the workspace's directory `path` that the upper
    /// layer's (opaque or whited-out) directory does not have.
    fn hidden_children(&mut self, path: &RelPath) -> Result<(), ChangeError> {
        if path.depth() >= bounds::MAX_DEPTH {
            return Err(ChangeError::Exceeded(format!(
                "the call removed paths more than {} directories deep",
                bounds::MAX_DEPTH
            )));
        }
        let Some(dir) = open_lower(
            self.lower,
            path.as_bytes(),
            OFlags::DIRECTORY | OFlags::RDONLY,
        ) else {
            return Ok(());
        };
        let mut names = read_names(&dir).map_err(|err| capture_error(path, err))?;
        names.sort();
        for name in names {
            self.how.deadline.check()?;
            let child = path.join(&name);
            if stat_at(self.upper, &child).is_some() {
                // The upper layer has its own entry there, walked on its own.
                continue;
            }
            if let Some(stat) = lower_stat(self.lower, &child) {
                self.deleted(&child, &stat)?;
            }
        }
        Ok(())
    }

    fn upper_state(
        &mut self,
        path: &RelPath,
        stat: &rustix::fs::Stat,
        before_mode: Option<u32>,
        keep: bool,
    ) -> Result<State, ChangeError> {
        if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
            let target = read_link(self.upper, path)?;
            return self.link_state(path, &target, keep);
        }
        let file = open_file(self.upper, path)
            .ok_or_else(|| capture_error(path, "cannot be read in the upper layer"))?;
        let (digest, size) = self.content(path, &file, keep)?;
        Ok(State {
            node: Node::File,
            digest: Some(digest),
            mode: self.landed_mode(path, stat.st_mode, before_mode, false),
            size,
        })
    }

    fn lower_state(
        &mut self,
        path: &RelPath,
        stat: &rustix::fs::Stat,
        keep: bool,
    ) -> Result<State, ChangeError> {
        if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
            let target = read_link(self.lower, path)?;
            return self.link_state(path, &target, keep);
        }
        let file = open_file(self.lower, path)
            .ok_or_else(|| capture_error(path, "cannot be read in the workspace"))?;
        let (digest, size) = self.content(path, &file, keep)?;
        Ok(State {
            node: Node::File,
            digest: Some(digest),
            mode: stat.st_mode & 0o7777,
            size,
        })
    }

    fn link_state(
        &mut self,
        path: &RelPath,
        target: &[u8],
        keep: bool,
    ) -> Result<State, ChangeError> {
        let (digest, size) = if keep {
            self.count_kept(path, target.len() as u64)?;
            self.how.blobs.put(target)
        } else {
            blobs::digest(target)
        }
        .map_err(|err| capture_error(path, err))?;
        Ok(State {
            node: Node::Symlink,
            digest: Some(digest),
            mode: 0o777,
            size,
        })
    }

    /// The digest and size of a file's content, kept in the blob store when `keep`.
    fn content(
        &mut self,
        path: &RelPath,
        file: &File,
        keep: bool,
    ) -> Result<(String, u64), ChangeError> {
        if keep {
            let size = file
                .metadata()
                .map_err(|err| capture_error(path, err))?
                .len();
            self.count_kept(path, size)?;
            self.how.blobs.put_file(file, self.how.deadline)
        } else {
            sparse::digest(file, self.how.deadline)
        }
        .map_err(|err| at(path, err))
    }

    /// Counts `size` more bytes into the blob store against the call's byte bound.
    fn count_kept(&mut self, path: &RelPath, size: u64) -> Result<(), ChangeError> {
        let rules = ChangeRules {
            max_file_bytes: u64::MAX,
            ..*self.how.rules
        };
        bounds::check_size(&rules, &mut self.kept, size, || path.to_string()).map_err(|_| {
            ChangeError::Exceeded(format!(
                "keeping the call's changes (contents before and after, to undo them) would take more than {} bytes (changes.max_bytes)",
                self.how.rules.max_bytes
            ))
        })
    }

    /// Records a change; past the bound on paths, refuses the set (one whiteout can stand
    /// for a whole tree of the workspace, each of its paths a change).
    fn push(
        &mut self,
        path: &RelPath,
        kind: Kind,
        before: Option<State>,
        after: Option<State>,
        digest_only: Option<String>,
    ) -> Result<(), ChangeError> {
        if self.set.changes.len() as u64 >= self.how.rules.max_files {
            return Err(ChangeError::Exceeded(format!(
                "the call changed more than {} paths (changes.max_files)",
                self.how.rules.max_files
            )));
        }
        self.set.changes.push(Change {
            path: path.clone(),
            kind,
            from: None,
            before,
            after,
            digest_only,
            applied: false,
        });
        Ok(())
    }
}

fn type_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::RegularFile => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Unknown => "file of unknown type",
    }
}

fn read_link(root: BorrowedFd<'_>, path: &RelPath) -> Result<Vec<u8>, ChangeError> {
    let (parent, name) = path.split();
    let dir = open_lower(root, parent, OFlags::DIRECTORY | OFlags::PATH)
        .ok_or_else(|| capture_error(path, "vanished"))?;
    rustix::fs::readlinkat(&dir, name, Vec::new())
        .map(|target| target.into_bytes())
        .map_err(|err| capture_error(path, std::io::Error::from(err)))
}

fn open_file(root: BorrowedFd<'_>, path: &RelPath) -> Option<File> {
    open_lower(root, path.as_bytes(), OFlags::RDONLY | OFlags::NOFOLLOW).map(File::from)
}

fn open_dir(root: BorrowedFd<'_>, path: &RelPath) -> Option<OwnedFd> {
    open_lower(root, path.as_bytes(), OFlags::DIRECTORY | OFlags::RDONLY)
}

fn stat_at(root: BorrowedFd<'_>, path: &RelPath) -> Option<rustix::fs::Stat> {
    lower_stat(root, path)
}

fn dir_state(mode: u32) -> State {
    State {
        node: Node::Dir,
        digest: None,
        mode: mode & 0o7777,
        size: 0,
    }
}

/// A file deleted at one path and added at another with the same content, each the only
/// one of its content on its side, was renamed.
fn pair_renames(changes: &mut Vec<Change>) {
    let content = |state: &Option<State>| {
        state
            .as_ref()
            .filter(|state| state.node != Node::Dir && state.size > 0)
            .and_then(|state| state.digest.clone())
    };
    let mut deleted: HashMap<String, Vec<usize>> = HashMap::new();
    let mut added: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (index, change) in changes.iter().enumerate() {
        if change.digest_only.is_some() {
            continue;
        }
        match change.kind {
            Kind::Deleted => {
                if let Some(digest) = content(&change.before) {
                    deleted.entry(digest).or_default().push(index);
                }
            }
            Kind::Added => {
                if let Some(digest) = content(&change.after) {
                    added.entry(digest).or_default().push(index);
                }
            }
            Kind::Modified | Kind::Renamed => {}
        }
    }
    let mut gone = Vec::new();
    for (digest, to) in added {
        let Some(from) = deleted.get(&digest) else {
            continue;
        };
        let ([to], [from]) = (to.as_slice(), from.as_slice()) else {
            continue;
        };
        let before = changes[*from].before.clone();
        let from_path = changes[*from].path.clone();
        let change = &mut changes[*to];
        change.kind = Kind::Renamed;
        change.before = before;
        change.from = Some(from_path);
        gone.push(*from);
    }
    gone.sort_unstable();
    for index in gone.into_iter().rev() {
        changes.remove(index);
    }
}
