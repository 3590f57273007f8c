//! The id mapping that lets a sandbox write a workspace that root owns.
//!
//! A sandbox never runs as host root: in a root-owned workspace it runs as `nobody` (see the
//! process engine's `sandbox_identity`), and `nobody` cannot write root's files. Running it as
//! root with every capability dropped would work, but host uid 0 keeps powers no capability
//! set removes (it passes the owner checks of root's files anywhere it can reach, procfs's
//! sysctls among them). Instead the workspace's mount is *idmapped*: through it, files that
//! root owns appear owned by `nobody`, and what `nobody` creates is stored as root's. The
//! sandbox gets exactly the grant — the workspace — and nothing else changes owner.
//!
//! An idmapped mount takes its mapping from a user namespace. This one is made once, by a
//! child that does nothing but enter it and wait, and is kept open by its descriptor.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The host ids a sandbox runs as when its workspace belongs to root, or when it has none:
/// the conventional `nobody` and `nogroup`. A sandbox never runs as host root; through the
/// idmapped workspace, on-disk root appears as this id.
pub const NOBODY: u32 = 65534;

/// The mapping, as `inside outside count` lines of `uid_map`: on-disk root is shown as
/// `nobody`; every other id but `nobody`'s own is shown as itself (files of other users in
/// the workspace keep their owners, and their permission bits still apply to the sandbox);
/// on-disk `nobody` is not mapped, so no file owned by it can pass as root's.
fn map_lines() -> String {
    const TOP: u64 = u32::MAX as u64; // (uid_t)-1 is never a valid id
    let nobody = u64::from(NOBODY);
    format!(
        "0 {nobody} 1\n1 1 {}\n{} {} {}\n",
        nobody - 1,
        nobody + 1,
        nobody + 1,
        TOP - (nobody + 1)
    )
}

/// A user namespace holding the workspace id mapping.
#[derive(Debug)]
pub struct IdMap {
    userns: OwnedFd,
}

impl IdMap {
    pub fn create() -> std::io::Result<IdMap> {
        let (mut ready_read, ready_write) = std::io::pipe()?;
        let (go_read, mut go_write) = std::io::pipe()?;
        use std::os::fd::AsRawFd;
        let ready_fd = ready_write.as_raw_fd();
        let go_fd = go_read.as_raw_fd();
        // SAFETY: the child of a multi-threaded process may only make async-signal-safe
        // calls; it makes five raw system calls (unshare, prctl, write, read, _exit) on
        // descriptors it inherited, touches no lock and no allocator, and never returns.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: see above; the buffers are on this stack.
            unsafe {
                // Entering the namespace gains capabilities there, which makes the child
                // undumpable: its /proc files then belong to root, and a daemon that is not
                // root (the packaged service's user, holding only the capabilities it needs)
                // could not write its maps. The child runs nothing but this wait, as the
                // daemon's own user, which may trace it anyway.
                let ok: u8 = u8::from(
                    libc::unshare(libc::CLONE_NEWUSER) == 0
                        && libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) == 0,
                );
                libc::write(ready_fd, (&ok as *const u8).cast(), 1);
                let mut byte = 0u8;
                libc::read(go_fd, (&mut byte as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        drop(ready_write);
        drop(go_read);
        let result = (|| {
            let mut ok = [0u8];
            ready_read.read_exact(&mut ok)?;
            if ok[0] != 1 {
                return Err(std::io::Error::other(
                    "cannot create a user namespace (unshare CLONE_NEWUSER)",
                ));
            }
            let lines = map_lines();
            std::fs::write(format!("/proc/{pid}/uid_map"), &lines)?;
            std::fs::write(format!("/proc/{pid}/gid_map"), &lines)?;
            let userns = std::fs::File::open(format!("/proc/{pid}/ns/user"))?;
            Ok(OwnedFd::from(userns))
        })();
        let _ = go_write.write_all(&[1]);
        drop(go_write);
        let mut status = 0;
        // SAFETY: `pid` is our child; status is a valid out-pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        Ok(IdMap { userns: result? })
    }

    pub fn userns(&self) -> BorrowedFd<'_> {
        self.userns.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_covers_every_id_once_but_nobody() {
        assert_eq!(
            map_lines(),
            "0 65534 1\n1 1 65533\n65535 65535 4294901760\n"
        );
    }

    #[test]
    fn the_namespace_is_made() {
        let map = IdMap::create().expect("a user namespace with the workspace mapping");
        let link = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&map.userns())
        ))
        .expect("readlink");
        assert!(link.to_string_lossy().starts_with("user:["), "{link:?}");
    }
}
