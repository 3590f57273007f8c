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
//! per pair of ids into the engine's state directory, owned by root and not writable by the
//! sandbox, and opened once; each sandbox mounts a clone of them.

use std::collections::HashMap;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::plan::NOBODY;
use super::view;

/// The sandbox's user and group name.
pub const NAME: &str = "airlock";

/// The files' guest paths.
pub const PASSWD: &str = "/etc/passwd";
pub const GROUP: &str = "/etc/group";

/// The two files of one pair of ids, opened (`O_PATH`).
#[derive(Debug)]
pub struct Files {
    pub passwd: OwnedFd,
    pub group: OwnedFd,
}

/// Every pair of ids' files, made when first needed.
#[derive(Debug)]
pub struct Identities {
    dir: PathBuf,
    made: Mutex<HashMap<(u32, u32), Arc<Files>>>,
}

impl Identities {
    /// Files kept in `dir`, which is created if missing.
    pub fn new(dir: PathBuf) -> std::io::Result<Identities> {
        std::fs::create_dir_all(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        Ok(Identities {
            dir,
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
        let dir = self.dir.join(format!("{uid}-{gid}"));
        std::fs::create_dir_all(&dir)?;
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

/// Writes `content` to `dir/name` whole (a temporary file renamed over it) and opens it.
fn write(dir: &Path, name: &str, content: &str) -> std::io::Result<OwnedFd> {
    let path = dir.join(name);
    let temp = dir.join(format!(".{name}.{:016x}", fastrand::u64(..)));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&temp)?;
        file.write_all(content.as_bytes())?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&temp, &path)
    })();
    if let Err(err) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(err);
    }
    view::open_path(&path)
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
        let dir = tempfile::tempdir().unwrap();
        let identities = Identities::new(dir.path().join("identity")).unwrap();
        let first = identities.files(1000, 100).unwrap();
        let again = identities.files(1000, 100).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let path = dir.path().join("identity/1000-100/passwd");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), passwd(1000, 100));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("identity/1000-100/group")).unwrap(),
            group(100)
        );
    }
}
