//! Making a hosted server's merged view show what the workspace holds at a path: the write
//! half of a refresh (`sync.rs`). The view is the server's, and the server may be writing it
//! at the same moment: every directory is opened beneath the merged root with no symlink
//! followed, files are written whole under a temporary name with owner and mode set on the
//! open file (`paths.rs`), and what is copied counts against the profile's bounds.

use std::collections::HashSet;
use std::fs::File;
use std::os::fd::BorrowedFd;

use rustix::fs::{FileType, OFlags};

use super::bounds::{ChangeRules, Tally};
use super::idmap::NOBODY;
use super::lower::{lower_stat, open_lower, read_names};
use super::paths::{self, Owner};
use super::rel::RelPath;

/// The server's merged view and the workspace, for making one show the other.
pub(super) struct View<'a> {
    pub merged: BorrowedFd<'a>,
    pub upper: BorrowedFd<'a>,
    pub workspace: BorrowedFd<'a>,
    /// The workspace root's owner: root's ids are `nobody`'s in the overlay (`idmap.rs`).
    pub owner: Owner,
    pub rules: &'a ChangeRules,
    /// What showing has copied into the upper layer, against the rules' bounds.
    pub copied: Tally,
}

impl View<'_> {
    /// Makes the merged view's `path` what the workspace holds there.
    pub fn show(&mut self, path: &RelPath) -> std::io::Result<()> {
        let Some(host) = lower_stat(self.workspace, path) else {
            return paths::remove(self.merged, path);
        };
        let kind = FileType::from_raw_mode(host.st_mode);
        let mode = host.st_mode & 0o7777;
        let owner = self.seen_as(host.st_uid, host.st_gid);
        let there = lower_stat(self.merged, path).map(|stat| FileType::from_raw_mode(stat.st_mode));
        if there.is_some() && (there == Some(FileType::Directory)) != (kind == FileType::Directory)
        {
            paths::remove(self.merged, path)?;
        }
        let (dir, name) = paths::parent(self.merged, path)?;
        match kind {
            FileType::Directory => {
                paths::make_dir(&dir, &name, mode, owner)?;
                self.fill(path)
            }
            FileType::RegularFile => {
                self.count(u64::try_from(host.st_size).unwrap_or(u64::MAX))?;
                let file = open_lower(
                    self.workspace,
                    path.as_bytes(),
                    OFlags::RDONLY | OFlags::NOFOLLOW,
                )
                .ok_or_else(|| std::io::Error::other("it vanished while being read"))?;
                paths::write_file(&dir, &name, File::from(file), mode, owner)
            }
            FileType::Symlink => {
                self.count(0)?;
                let (parent, name_in) = path.split();
                let from = open_lower(self.workspace, parent, OFlags::DIRECTORY | OFlags::PATH)
                    .ok_or_else(|| std::io::Error::other("its directory vanished"))?;
                let target = rustix::fs::readlinkat(&from, name_in, Vec::new())?;
                paths::make_symlink(&dir, &name, target.as_bytes(), owner)
            }
            // A fifo, socket or device a person made: the server is not shown one.
            _ => paths::remove(self.merged, path),
        }
    }

    /// Shows the server, in the directory `path`, every entry the workspace has there that
    /// its view lacks: the upper directory hides them when the server replaced it (opaque).
    pub fn fill(&mut self, path: &RelPath) -> std::io::Result<()> {
        let Some(host) = open_lower(
            self.workspace,
            path.as_bytes(),
            OFlags::DIRECTORY | OFlags::RDONLY,
        ) else {
            return Ok(());
        };
        let merged = open_lower(
            self.merged,
            path.as_bytes(),
            OFlags::DIRECTORY | OFlags::RDONLY,
        )
        .ok_or_else(|| std::io::Error::other("it is not a directory in the server's view"))?;
        let shown: HashSet<Vec<u8>> = read_names(&merged)?.into_iter().collect();
        let mut missing: Vec<Vec<u8>> = read_names(&host)?
            .into_iter()
            .filter(|name| !shown.contains(name))
            .collect();
        missing.sort();
        for name in missing {
            self.show(&path.join(&name))?;
        }
        Ok(())
    }

    fn seen_as(&self, uid: u32, gid: u32) -> Owner {
        let idmapped = self.owner.0 == 0 || self.owner.1 == 0;
        let seen = |id: u32| if idmapped && id == 0 { NOBODY } else { id };
        (seen(uid), seen(gid))
    }

    /// Counts one entry of `bytes` copied, refusing past the rules' bounds.
    fn count(&mut self, bytes: u64) -> std::io::Result<()> {
        self.copied.entries += 1;
        self.copied.bytes = self.copied.bytes.saturating_add(bytes);
        if self.copied.entries > self.rules.max_files || self.copied.bytes > self.rules.max_bytes {
            return Err(std::io::Error::other(format!(
                "the workspace changed by more than the profile's [changes] bounds ({} files, {} bytes) since the server's last call",
                self.rules.max_files, self.rules.max_bytes
            )));
        }
        Ok(())
    }
}
