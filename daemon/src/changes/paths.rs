//! Writing one path of a workspace safely: what applying a change set and reverting one both
//! do, so they do it the same way.
//!
//! Every directory on the way is opened beneath the workspace with no symlink allowed, so a
//! link planted in the workspace is never followed; a file or symlink is made under a
//! temporary name in its directory, given its owner and mode, and renamed over its path, so a
//! reader — or a crash — sees the path whole, before or after; a directory gets its owner and
//! mode through a descriptor of itself, never through a name that may have become a symlink.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

use super::lower::open_lower;
use super::rel::RelPath;

/// Who a written path belongs to: `(uid, gid)`.
pub type Owner = (u32, u32);

/// The directory of `path` in the workspace, opened, and the path's last component.
pub fn parent(workspace: BorrowedFd<'_>, path: &RelPath) -> std::io::Result<(OwnedFd, Vec<u8>)> {
    let (parent, name) = path.split();
    let dir = open_lower(workspace, parent, OFlags::DIRECTORY | OFlags::PATH).ok_or_else(|| {
        std::io::Error::other(format!(
            "its directory `{}` is missing or is a symlink in the workspace",
            String::from_utf8_lossy(parent)
        ))
    })?;
    Ok((dir, name.to_vec()))
}

/// Removes whatever is at `path`: a directory with everything beneath it (never following a
/// symlink inside it: std's `remove_dir_all` does not). A path already gone is no error.
pub fn remove(workspace: BorrowedFd<'_>, path: &RelPath) -> std::io::Result<()> {
    let (dir, name) = parent(workspace, path)?;
    let name = name.as_slice();
    let is_dir = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => FileType::from_raw_mode(stat.st_mode) == FileType::Directory,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    if !is_dir {
        return match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(err) => Err(err.into()),
        };
    }
    match rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        // The path to the tree is the directory opened above, whatever happens to its name.
        Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) => {
            std::fs::remove_dir_all(fd_path(&dir).join(OsStr::from_bytes(name)))
        }
        Err(err) => Err(err.into()),
    }
}

/// Makes (or keeps) the directory `name` in `dir`, with `mode` and `owner`.
pub fn make_dir(dir: &OwnedFd, name: &[u8], mode: u32, owner: Owner) -> std::io::Result<()> {
    let mode = Mode::from_raw_mode(mode);
    match rustix::fs::mkdirat(dir, name, mode) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(err) => return Err(err.into()),
    }
    // A name that is something else now (changed since) is refused, never chmod-ed through.
    let made = rustix::fs::openat2(
        dir,
        name,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?;
    rustix::fs::fchown(&made, Some(uid(owner.0)), Some(gid(owner.1)))?;
    rustix::fs::fchmod(&made, mode)?;
    Ok(())
}

/// Writes `content` to `name` in `dir` as a whole file with `mode` and `owner`.
pub fn write_file(
    dir: &OwnedFd,
    name: &[u8],
    mut content: impl Read,
    mode: u32,
    owner: Owner,
) -> std::io::Result<()> {
    let temp = temp_name();
    let file = rustix::fs::openat(
        dir,
        temp.as_str(),
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = File::from(file);
    // Owner and mode through the descriptor, never the name: in a directory someone else
    // writes (a hosted server's view, while it is shown the workspace) the name may be a
    // symlink to anywhere by the time it is used again.
    let written = std::io::copy(&mut content, &mut file)
        .and_then(|_| {
            rustix::fs::fchown(&file, Some(uid(owner.0)), Some(gid(owner.1))).map_err(Into::into)
        })
        .and_then(|()| rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(Into::into));
    drop(file);
    if let Err(err) = written {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
        return Err(err);
    }
    rename_into_place(dir, &temp, name)
}

/// Makes `name` in `dir` a symlink to `target`, owned by `owner`; it is never followed.
pub fn make_symlink(
    dir: &OwnedFd,
    name: &[u8],
    target: &[u8],
    owner: Owner,
) -> std::io::Result<()> {
    let temp = temp_name();
    rustix::fs::symlinkat(target, dir, temp.as_str())?;
    // Never followed: it changes the link itself, whatever `temp` is by now.
    if let Err(err) = rustix::fs::chownat(
        dir,
        temp.as_str(),
        Some(uid(owner.0)),
        Some(gid(owner.1)),
        AtFlags::SYMLINK_NOFOLLOW,
    ) {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
        return Err(err.into());
    }
    rename_into_place(dir, &temp, name)
}

/// Renames the temporary `temp` over `name`, removing it on failure.
fn rename_into_place(dir: &OwnedFd, temp: &str, name: &[u8]) -> std::io::Result<()> {
    if let Err(err) = rustix::fs::renameat(dir, temp, dir, name) {
        let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
        return Err(err.into());
    }
    Ok(())
}

fn temp_name() -> String {
    format!(".airlock-{:016x}", fastrand::u64(..))
}

fn fd_path(fd: &OwnedFd) -> std::path::PathBuf {
    std::path::PathBuf::from(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(fd)
    ))
}

pub(super) fn uid(id: u32) -> rustix::fs::Uid {
    rustix::fs::Uid::from_raw(id)
}

pub(super) fn gid(id: u32) -> rustix::fs::Gid {
    rustix::fs::Gid::from_raw(id)
}
