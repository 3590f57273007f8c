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

/// An id range of a `uid_map` or `gid_map`: `count` ids from `inside` in the namespace, from
/// `outside` in its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Extent {
    inside: u64,
    outside: u64,
    count: u64,
}

/// The mapping, as `inside outside count` lines of `uid_map`: on-disk root is shown as
/// `nobody`; every other id but `nobody`'s own is shown as itself (files of other users in
/// the workspace keep their owners, and their permission bits still apply to the sandbox);
/// on-disk `nobody` is not mapped, so no file owned by it can pass as root's.
///
/// Only ids that exist in the daemon's own namespace can be mapped (`existing`, that
/// namespace's map): a daemon in a container's user namespace (Kubernetes' `hostUsers:
/// false` gives 65,536 ids) maps those, and the ids it does not have stay unmapped, so files
/// of theirs can be neither shown as another's nor written.
fn map_lines(existing: &[Extent]) -> String {
    const TOP: u64 = u32::MAX as u64; // (uid_t)-1 is never a valid id
    let nobody = u64::from(NOBODY);
    let wanted = [
        Extent {
            inside: 0,
            outside: nobody,
            count: 1,
        },
        Extent {
            inside: 1,
            outside: 1,
            count: nobody - 1,
        },
        Extent {
            inside: nobody + 1,
            outside: nobody + 1,
            count: TOP - (nobody + 1),
        },
    ];
    let mut lines = String::new();
    for line in wanted {
        for ours in existing {
            let start = line.outside.max(ours.inside);
            let end = (line.outside + line.count).min(ours.inside + ours.count);
            if start < end {
                let inside = line.inside + (start - line.outside);
                lines.push_str(&format!("{inside} {start} {}\n", end - start));
            }
        }
    }
    lines
}

/// The ids of the daemon's own namespace, from its `uid_map` or `gid_map` text.
fn existing_ids(map: &str) -> std::io::Result<Vec<Extent>> {
    map.lines()
        .map(|line| {
            let fields: Vec<u64> = line
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|_| std::io::Error::other(format!("an id map line reads {line:?}")))?;
            match fields[..] {
                [inside, outside, count] => Ok(Extent {
                    inside,
                    outside,
                    count,
                }),
                _ => Err(std::io::Error::other(format!(
                    "an id map line reads {line:?}"
                ))),
            }
        })
        .collect()
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
            for map in ["uid_map", "gid_map"] {
                let ours = existing_ids(&std::fs::read_to_string(format!("/proc/self/{map}"))?)?;
                std::fs::write(format!("/proc/{pid}/{map}"), map_lines(&ours))?;
            }
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

    const EVERY_ID: Extent = Extent {
        inside: 0,
        outside: 0,
        count: 4294967295,
    };

    #[test]
    fn the_map_covers_every_id_once_but_nobody() {
        assert_eq!(
            map_lines(&[EVERY_ID]),
            "0 65534 1\n1 1 65533\n65535 65535 4294901760\n"
        );
    }

    #[test]
    fn in_a_containers_namespace_only_its_ids_are_mapped() {
        // Kubernetes' hostUsers: false, podman's --userns: 65,536 ids from 0.
        let container = existing_ids("         0     300000      65536\n").unwrap();
        assert_eq!(
            map_lines(&container),
            "0 65534 1\n1 1 65533\n65535 65535 1\n"
        );
        // Without nobody, on-disk root stays unmapped rather than shown as anyone.
        let few = existing_ids("0 1000 1\n1 100000 1000\n").unwrap();
        assert_eq!(map_lines(&few), "1 1 1000\n");
        // Two ranges, one across nobody.
        let split = existing_ids("0 0 10\n65530 1065530 100\n").unwrap();
        assert_eq!(
            map_lines(&split),
            "0 65534 1\n1 1 9\n65530 65530 4\n65535 65535 95\n"
        );
    }

    #[test]
    fn a_map_that_does_not_parse_is_an_error() {
        for text in ["0 0\n", "0 0 x\n", "0 0 1 1\n"] {
            assert!(existing_ids(text).is_err(), "{text:?}");
        }
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
