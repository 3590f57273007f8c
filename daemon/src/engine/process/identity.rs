//! The sandbox's user, named: a synthesized `/etc/passwd` and `/etc/group` in every sandbox.
//!
//! A sandbox runs as the workspace owner's ids, or `nobody`'s (see `plan::sandbox_identity`),
//! and without a name for them programs that ask who they are fail: Python's
//! `getpass.getuser()` raises, so GitPython cannot commit; `git` itself, `ssh`, `whoami` and
//! `id -un` refuse or print numbers. Granting the host's `/etc` would not help either: its
//! files name the host's users, not the sandbox's, and tell a tool who else the host has.
//!
//! So every sandbox gets the same two small files, mounted read-only over `/etc/passwd` and
//! `/etc/group` whatever the profile grants: `root`, the sandbox's user as `airlock` (home
//! `/tmp`, the one place it may always write) and `nobody`/`nogroup`. They are written once
//! per pair of ids into a tmpfs of the engine's own — mounted nowhere, held by its
//! descriptor, so a sandbox's `/proc/self/mountinfo` names no path of the host's (the state
//! directory's would tell where the daemon keeps its secrets) — owned by root and not
//! writable by the sandbox, and opened once; each sandbox mounts a clone of them.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use rustix::fs::{Mode, OFlags};
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, fsconfig_create, fsconfig_set_string, fsmount,
    fsopen,
};

use crate::changes::NOBODY;

/// The sandbox's user and group name.
pub const NAME: &str = "airlock";

/// The files' guest paths.
pub const PASSWD: &str = "/etc/passwd";
pub const GROUP: &str = "/etc/group";

/// The tmpfs's bounds: two files of under 200 bytes per pair of ids, so thousands of
/// workspace owners fit; past them a sandbox is refused, naming the cause.
const TMPFS_BYTES: &str = "4m";
const TMPFS_INODES: &str = "16384";

/// The two files of one pair of ids, opened (`O_PATH`).
#[derive(Debug)]
pub struct Files {
    pub passwd: OwnedFd,
    pub group: OwnedFd,
}

/// Every pair of ids' files, made when first needed.
#[derive(Debug)]
pub struct Identities {
    /// The root of the engine's detached tmpfs.
    root: OwnedFd,
    made: Mutex<HashMap<(u32, u32), Arc<Files>>>,
}

impl Identities {
    /// Makes the tmpfs the files are kept in.
    pub fn new() -> std::io::Result<Identities> {
        let fs = fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
        fsconfig_set_string(&fs, "size", TMPFS_BYTES)?;
        fsconfig_set_string(&fs, "nr_inodes", TMPFS_INODES)?;
        fsconfig_set_string(&fs, "mode", "0755")?;
        fsconfig_create(&fs)?;
        let root = fsmount(
            &fs,
            FsMountFlags::FSMOUNT_CLOEXEC,
            MountAttrFlags::MOUNT_ATTR_NOSUID
                | MountAttrFlags::MOUNT_ATTR_NODEV
                | MountAttrFlags::MOUNT_ATTR_NOEXEC,
        )?;
        Ok(Identities {
            root,
            made: Mutex::default(),
        })
    }

    /// The files that name `uid` and `gid`.
    pub fn files(&self, uid: u32, gid: u32) -> std::io::Result<Arc<Files>> {
        let mut made = self
            .made
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(files) = made.get(&(uid, gid)) {
            return Ok(files.clone());
        }
        let name = format!("{uid}-{gid}");
        match rustix::fs::mkdirat(&self.root, name.as_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(err) => return Err(err.into()),
        }
        let dir = rustix::fs::openat(
            &self.root,
            name.as_str(),
            OFlags::DIRECTORY | OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let files = Arc::new(Files {
            passwd: write(&dir, "passwd", &passwd(uid, gid))?,
            group: write(&dir, "group", &group(gid))?,
        });
        made.insert((uid, gid), files.clone());
        Ok(files)
    }
}

/// `/etc/passwd` for a sandbox running as `uid`:`gid`.
pub fn passwd(uid: u32, gid: u32) -> String {
    let mut lines = vec![
        "root:x:0:0:root:/root:/usr/sbin/nologin".to_owned(),
        format!("{NAME}:x:{uid}:{gid}:airlock sandbox:/tmp:/bin/sh"),
    ];
    if uid != NOBODY {
        lines.push(format!(
            "nobody:x:{NOBODY}:{NOBODY}:nobody:/nonexistent:/usr/sbin/nologin"
        ));
    }
    lines.join("\n") + "\n"
}

/// `/etc/group` for a sandbox running with group `gid`.
pub fn group(gid: u32) -> String {
    let mut lines = vec!["root:x:0:".to_owned(), format!("{NAME}:x:{gid}:")];
    if gid != NOBODY {
        lines.push(format!("nogroup:x:{NOBODY}:"));
    }
    lines.join("\n") + "\n"
}

/// Writes `content` to `dir/name` (made afresh) and opens it.
fn write(dir: &OwnedFd, name: &str, content: &str) -> std::io::Result<OwnedFd> {
    // A file left by a call that failed halfway is written again.
    match rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
        Err(err) => return Err(err.into()),
    }
    let file = rustix::fs::openat(
        dir,
        name,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    File::from(file).write_all(content.as_bytes())?;
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_user_has_a_name_and_nobody_is_named_once() {
        assert_eq!(
            passwd(1000, 1000),
            "root:x:0:0:root:/root:/usr/sbin/nologin\n\
             airlock:x:1000:1000:airlock sandbox:/tmp:/bin/sh\n\
             nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        );
        // getpwuid answers the first line with the uid: the sandbox's own name.
        assert_eq!(passwd(NOBODY, NOBODY).lines().count(), 2);
        assert_eq!(group(NOBODY), "root:x:0:\nairlock:x:65534:\n");
        assert_eq!(group(100), "root:x:0:\nairlock:x:100:\nnogroup:x:65534:\n");
    }

    #[test]
    fn files_are_written_once_per_pair_of_ids_and_read_only_to_others() {
        let identities = Identities::new().unwrap();
        let first = identities.files(1000, 100).unwrap();
        let again = identities.files(1000, 100).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let read = |fd: &OwnedFd| {
            std::fs::read_to_string(format!(
                "/proc/self/fd/{}",
                std::os::fd::AsRawFd::as_raw_fd(fd)
            ))
            .unwrap()
        };
        assert_eq!(read(&first.passwd), passwd(1000, 100));
        assert_eq!(read(&first.group), group(100));
        let stat = rustix::fs::fstat(&first.passwd).unwrap();
        assert_eq!((stat.st_mode & 0o777, stat.st_uid), (0o644, 0));
    }
}
