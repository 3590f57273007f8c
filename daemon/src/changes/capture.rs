//! Reading a change set off a call's upper layer.
//!
//! With `redirect_dir`, `metacopy` and `index` off (see `overlay.rs`), the upper layer holds
//! exactly: every file and symlink the call created or changed (whole), every directory on
//! the way to one (`trusted.overlay.opaque` set when the call replaced a directory of the
//! workspace with a new one), and a whiteout — a character device 0:0 — for everything it
//! removed. Each entry is compared with the workspace (the lower layer), so a file copied up
//! and left as it was is no change. Contents before and after go to the blob store, except
//! for excluded paths; a path deleted and added elsewhere with the same content is a rename.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

use super::blobs::{self, Blobs};
use super::exclude::Exclusions;
use super::overlay::Upper;
use super::{Change, ChangeError, ChangeSet, Kind, Node, State};

/// The xattr overlayfs sets on a directory that hides the lower directory's entries.
const OPAQUE_XATTR: &str = "trusted.overlay.opaque";

pub fn capture(
    upper: &Upper,
    exclusions: &Exclusions,
    blobs: &Blobs,
    modes: Modes,
) -> Result<ChangeSet, ChangeError> {
    let mut walk = Walk {
        upper: &upper.path,
        lower: upper.workspace.as_fd(),
        exclusions,
        blobs,
        modes,
        set: ChangeSet::default(),
    };
    walk.dir("")?;
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
    modes: Modes,
    upper: &'a Path,
    lower: BorrowedFd<'a>,
    exclusions: &'a Exclusions,
    blobs: &'a Blobs,
    set: ChangeSet,
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

fn capture_error(path: &str, err: impl std::fmt::Display) -> ChangeError {
    ChangeError::Capture(format!("{path}: {err}"))
}

impl Walk<'_> {
    fn dir(&mut self, rel: &str) -> Result<(), ChangeError> {
        let mut names: Vec<String> = Vec::new();
        for entry in
            std::fs::read_dir(self.upper.join(rel)).map_err(|err| capture_error(rel, err))?
        {
            let entry = entry.map_err(|err| capture_error(rel, err))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        for name in names {
            self.entry(&join(rel, &name))?;
        }
        Ok(())
    }

    fn entry(&mut self, path: &str) -> Result<(), ChangeError> {
        let host = self.upper.join(path);
        let meta = host
            .symlink_metadata()
            .map_err(|err| capture_error(path, err))?;
        let kind = meta.file_type();
        let lower = lower_stat(self.lower, path);
        if kind.is_char_device() && meta.rdev() == 0 {
            if let Some(lower) = lower {
                self.deleted(path, &lower)?;
            }
            return Ok(());
        }
        if kind.is_dir() {
            let mode = meta.mode() & 0o7777;
            match &lower {
                Some(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Directory => {
                    if stat.st_mode & 0o7777 != mode {
                        self.push_excluded(
                            path,
                            Kind::Modified,
                            Some(dir_state(stat.st_mode)),
                            Some(dir_state(meta.mode())),
                            None,
                        );
                    }
                    if is_opaque(&host) {
                        self.hidden_children(path)?;
                    }
                }
                other => {
                    if let Some(stat) = other {
                        // A directory the call made over something it removed is opaque; one
                        // that is not was there when the call started, and the workspace's
                        // entry has been replaced since, by something else. What the call
                        // wrote beneath it is not applied over that.
                        if !is_opaque(&host) {
                            self.set.skipped.push(format!(
                                "{path}/ (replaced in the workspace during the call; nothing the call wrote beneath it was applied)"
                            ));
                            return Ok(());
                        }
                        self.deleted(path, stat)?;
                    }
                    self.push_excluded(path, Kind::Added, None, Some(dir_state(meta.mode())), None);
                }
            }
            return self.dir(path);
        }
        if !(kind.is_file() || kind.is_symlink()) {
            self.set
                .skipped
                .push(format!("{path} (not a file, symlink or directory)"));
            return Ok(());
        }
        let excluded = self.exclusions.why(path, false);
        let after = self.upper_state(path, &host, &meta, excluded.is_none())?;
        match lower {
            Some(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Directory => {
                self.deleted(path, &stat)?;
                self.push_excluded(path, Kind::Added, None, Some(after), excluded);
            }
            Some(stat) => {
                let before = self.lower_state(path, &stat, excluded.is_none())?;
                let mut after = after;
                if self.modes == Modes::Kept && before.node == after.node {
                    after.mode = before.mode;
                }
                if before != after {
                    self.push_excluded(path, Kind::Modified, Some(before), Some(after), excluded);
                }
            }
            None => self.push_excluded(path, Kind::Added, None, Some(after), excluded),
        }
        Ok(())
    }

    /// Records `path` of the workspace, and everything beneath it, as deleted.
    fn deleted(&mut self, path: &str, stat: &rustix::fs::Stat) -> Result<(), ChangeError> {
        let is_dir = FileType::from_raw_mode(stat.st_mode) == FileType::Directory;
        let excluded = self.exclusions.why(path, is_dir);
        if is_dir {
            // An excluded tree goes as one entry: its contents are not kept anyway.
            if excluded.is_none() {
                self.hidden_children(path)?;
            }
            self.push_excluded(
                path,
                Kind::Deleted,
                Some(dir_state(stat.st_mode)),
                None,
                excluded,
            );
            return Ok(());
        }
        let before = self.lower_state(path, stat, excluded.is_none())?;
        self.push_excluded(path, Kind::Deleted, Some(before), None, excluded);
        Ok(())
    }

    /// Records as deleted every entry of the workspace's directory `path` that the upper
    /// layer's (opaque or whited-out) directory does not have.
    fn hidden_children(&mut self, path: &str) -> Result<(), ChangeError> {
        let Some(dir) = open_lower(self.lower, path, OFlags::DIRECTORY | OFlags::RDONLY) else {
            return Ok(());
        };
        let mut names = Vec::new();
        let entries = rustix::fs::Dir::read_from(&dir)
            .map_err(|err| capture_error(path, std::io::Error::from(err)))?;
        for entry in entries {
            let entry = entry.map_err(|err| capture_error(path, std::io::Error::from(err)))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
        }
        names.sort();
        for name in names {
            let child = join(path, &name);
            if self.upper.join(&child).symlink_metadata().is_ok() {
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
        &self,
        path: &str,
        host: &Path,
        meta: &std::fs::Metadata,
        keep: bool,
    ) -> Result<State, ChangeError> {
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(host).map_err(|err| capture_error(path, err))?;
            return self.link_state(path, target.as_os_str().as_encoded_bytes(), keep);
        }
        let file = File::open(host).map_err(|err| capture_error(path, err))?;
        let (digest, size) = self.content(path, file, keep)?;
        Ok(State {
            node: Node::File,
            digest: Some(digest),
            mode: meta.mode() & 0o7777,
            size,
        })
    }

    fn lower_state(
        &self,
        path: &str,
        stat: &rustix::fs::Stat,
        keep: bool,
    ) -> Result<State, ChangeError> {
        if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
            let (parent, name) = split(path);
            let dir = open_lower(self.lower, parent, OFlags::DIRECTORY | OFlags::PATH)
                .ok_or_else(|| capture_error(path, "vanished from the workspace"))?;
            let target = rustix::fs::readlinkat(&dir, name, Vec::new())
                .map_err(|err| capture_error(path, std::io::Error::from(err)))?;
            return self.link_state(path, target.as_bytes(), keep);
        }
        let file = open_lower(self.lower, path, OFlags::RDONLY | OFlags::NOFOLLOW)
            .ok_or_else(|| capture_error(path, "cannot be read in the workspace"))?;
        let (digest, size) = self.content(path, File::from(file), keep)?;
        Ok(State {
            node: Node::File,
            digest: Some(digest),
            mode: stat.st_mode & 0o7777,
            size,
        })
    }

    fn link_state(&self, path: &str, target: &[u8], keep: bool) -> Result<State, ChangeError> {
        let (digest, size) = self.content(path, target, keep)?;
        Ok(State {
            node: Node::Symlink,
            digest: Some(digest),
            mode: 0o777,
            size,
        })
    }

    fn content(
        &self,
        path: &str,
        reader: impl std::io::Read,
        keep: bool,
    ) -> Result<(String, u64), ChangeError> {
        if keep {
            self.blobs.put(reader)
        } else {
            blobs::digest(reader)
        }
        .map_err(|err| capture_error(path, err))
    }

    fn push_excluded(
        &mut self,
        path: &str,
        kind: Kind,
        before: Option<State>,
        after: Option<State>,
        digest_only: Option<String>,
    ) {
        self.set.changes.push(Change {
            path: path.to_owned(),
            kind,
            from: None,
            before,
            after,
            digest_only,
            applied: false,
        });
    }
}

fn dir_state(mode: u32) -> State {
    State {
        node: Node::Dir,
        digest: None,
        mode: mode & 0o7777,
        size: 0,
    }
}

fn is_opaque(dir: &Path) -> bool {
    let mut value = [0u8; 4];
    rustix::fs::lgetxattr(dir, OPAQUE_XATTR, &mut value).is_ok_and(|n| value[..n] == *b"y")
}

/// `path` split into its parent (possibly empty) and its last component.
pub(super) fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// Opens `path` beneath the workspace `root`, never through a symlink.
pub(super) fn open_lower(root: BorrowedFd<'_>, path: &str, flags: OFlags) -> Option<OwnedFd> {
    let path = if path.is_empty() { "." } else { path };
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
pub(super) fn lower_stat(root: BorrowedFd<'_>, path: &str) -> Option<rustix::fs::Stat> {
    let (parent, name) = split(path);
    let dir = open_lower(root, parent, OFlags::DIRECTORY | OFlags::PATH)?;
    rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()
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
