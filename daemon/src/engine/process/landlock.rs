//! Landlock: the file grants of a profile, mirrored as a ruleset the kernel enforces on top
//! of the mount view, plus the denial of every TCP bind and connect.
//!
//! The mounts already decide what a tool can see; Landlock decides what it may do with what
//! it sees, on inodes rather than paths, so it holds even where a bind mount would not (a
//! submount left writable, a hard link, a path reached another way). Read-only grants may be
//! read and executed; read-write grants may be changed but not executed (nothing the tool
//! writes can become a program it runs); `/tmp` likewise; `/proc` may only be read.
//!
//! The host's Landlock ABI is read once. [`REQUIRED_ABI`] is what the sandbox needs to enforce
//! `network = "none"` with Landlock as well as with the network namespace; newer features
//! (device ioctls, abstract-socket and signal scoping) are applied when the kernel has them,
//! on top of namespaces that already provide the same isolation.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::sys::{self, LandlockNetPortAttr, LandlockPathBeneathAttr, LandlockRulesetAttr};
use crate::profile::Access;

pub const FS_EXECUTE: u64 = 1 << 0;
pub const FS_WRITE_FILE: u64 = 1 << 1;
pub const FS_READ_FILE: u64 = 1 << 2;
pub const FS_READ_DIR: u64 = 1 << 3;
pub const FS_REMOVE_DIR: u64 = 1 << 4;
pub const FS_REMOVE_FILE: u64 = 1 << 5;
pub const FS_MAKE_DIR: u64 = 1 << 7;
pub const FS_MAKE_REG: u64 = 1 << 8;
pub const FS_MAKE_SOCK: u64 = 1 << 9;
pub const FS_MAKE_FIFO: u64 = 1 << 10;
pub const FS_MAKE_SYM: u64 = 1 << 12;
/// ABI 2: renaming and linking across directories.
pub const FS_REFER: u64 = 1 << 13;
/// ABI 3.
pub const FS_TRUNCATE: u64 = 1 << 14;
/// ABI 5.
pub const FS_IOCTL_DEV: u64 = 1 << 15;

/// ABI 4.
const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;

/// ABI 6.
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// TCP bind and connect rules arrived in ABI 4 (Linux 6.7).
pub const REQUIRED_ABI: u32 = 4;

/// What a read-only directory grant allows beneath it.
pub const READ_ONLY_DIR: u64 = FS_READ_FILE | FS_READ_DIR | FS_EXECUTE;
pub const READ_ONLY_FILE: u64 = FS_READ_FILE | FS_EXECUTE;
/// Everything but execution and creating device nodes.
pub const READ_WRITE_DIR: u64 = FS_READ_FILE
    | FS_READ_DIR
    | FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_SYM
    | FS_REFER
    | FS_TRUNCATE;
pub const READ_WRITE_FILE: u64 = FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE;
/// `/proc` of the sandbox's own processes: readable, nothing more.
pub const PROC: u64 = FS_READ_FILE | FS_READ_DIR;
/// `/` and `/dev` themselves: listable.
pub const LIST_ONLY: u64 = FS_READ_DIR;

/// The Landlock ABI of the running kernel; 0 when Landlock is absent or disabled.
pub fn abi_version() -> u32 {
    // SAFETY: with the VERSION flag the kernel reads no attribute; the null pointer and zero
    // size are what it requires.
    let ret = unsafe {
        sys::syscall(
            libc::SYS_landlock_create_ruleset,
            [0, 0, sys::LANDLOCK_CREATE_RULESET_VERSION as usize, 0, 0, 0],
        )
    };
    sys::result(ret).map_or(0, |version| u32::try_from(version).unwrap_or(0))
}

/// The file-system rights the kernel with `abi` knows.
pub fn handled_fs(abi: u32) -> u64 {
    let mut rights = (1 << 13) - 1;
    if abi >= 2 {
        rights |= FS_REFER;
    }
    if abi >= 3 {
        rights |= FS_TRUNCATE;
    }
    if abi >= 5 {
        rights |= FS_IOCTL_DEV;
    }
    rights
}

/// The rights of a file grant, for a directory or a single file.
pub fn grant_rights(access: Access, is_dir: bool) -> u64 {
    match (access, is_dir) {
        (Access::ReadOnly, true) => READ_ONLY_DIR,
        (Access::ReadOnly, false) => READ_ONLY_FILE,
        (Access::ReadWrite, true) => READ_WRITE_DIR,
        (Access::ReadWrite, false) => READ_WRITE_FILE,
    }
}

/// A ruleset under construction.
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
    handled_fs: u64,
}

impl Ruleset {
    /// A ruleset that handles every right the kernel with `abi` knows: what no rule allows is
    /// denied. TCP bind and connect get no rule at all.
    pub fn create(abi: u32) -> io::Result<Ruleset> {
        let handled_fs = handled_fs(abi);
        let attr = LandlockRulesetAttr {
            handled_access_fs: handled_fs,
            handled_access_net: if abi >= 4 {
                NET_BIND_TCP | NET_CONNECT_TCP
            } else {
                0
            },
            scoped: if abi >= 6 {
                SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
            } else {
                0
            },
        };
        // SAFETY: `attr` is a valid ruleset attribute of the size passed; the kernel only reads
        // it.
        let ret = unsafe {
            sys::syscall(
                libc::SYS_landlock_create_ruleset,
                [
                    &attr as *const LandlockRulesetAttr as usize,
                    std::mem::size_of::<LandlockRulesetAttr>(),
                    0,
                    0,
                    0,
                    0,
                ],
            )
        };
        let fd = sys::io_result(ret)?;
        // SAFETY: the kernel returned a new file descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(Ruleset { fd, handled_fs })
    }

    /// Allows `rights` (masked to what this kernel handles) beneath the file `parent` names.
    pub fn allow(&self, parent: BorrowedFd<'_>, rights: u64) -> io::Result<()> {
        let attr = LandlockPathBeneathAttr {
            allowed_access: self.mask(rights),
            parent_fd: parent.as_raw_fd(),
        };
        // SAFETY: both descriptors are open for the duration of the call and `attr` is a valid
        // path-beneath attribute.
        let ret = unsafe {
            sys::syscall(
                libc::SYS_landlock_add_rule,
                [
                    self.fd.as_raw_fd() as usize,
                    sys::LANDLOCK_RULE_PATH_BENEATH as usize,
                    &attr as *const LandlockPathBeneathAttr as usize,
                    0,
                    0,
                    0,
                ],
            )
        };
        sys::io_result(ret).map(|_| ())
    }

    /// Allows TCP connections to `port` (on any address: the sandbox's namespace has only
    /// its loopback, so this reaches the egress proxy and nothing else).
    pub fn allow_tcp_connect(&self, port: u16) -> io::Result<()> {
        let attr = LandlockNetPortAttr {
            allowed_access: NET_CONNECT_TCP,
            port: u64::from(port),
        };
        // SAFETY: the ruleset descriptor is open and `attr` is a valid net-port attribute.
        let ret = unsafe {
            sys::syscall(
                libc::SYS_landlock_add_rule,
                [
                    self.fd.as_raw_fd() as usize,
                    sys::LANDLOCK_RULE_NET_PORT as usize,
                    &attr as *const LandlockNetPortAttr as usize,
                    0,
                    0,
                    0,
                ],
            )
        };
        sys::io_result(ret).map(|_| ())
    }

    /// `rights` limited to what this ruleset handles (a rule with an unhandled right is
    /// refused by the kernel).
    pub fn mask(&self, rights: u64) -> u64 {
        rights & self.handled_fs
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_grow_with_the_abi() {
        assert_eq!(handled_fs(1) & (FS_REFER | FS_TRUNCATE | FS_IOCTL_DEV), 0);
        assert_ne!(handled_fs(2) & FS_REFER, 0);
        assert_ne!(handled_fs(3) & FS_TRUNCATE, 0);
        assert_eq!(handled_fs(4) & FS_IOCTL_DEV, 0);
        assert_ne!(handled_fs(7) & FS_IOCTL_DEV, 0);
        assert_eq!(handled_fs(1) & FS_MAKE_SYM, FS_MAKE_SYM);
    }

    #[test]
    fn grants_never_make_writable_places_executable() {
        for is_dir in [true, false] {
            assert_eq!(grant_rights(Access::ReadWrite, is_dir) & FS_EXECUTE, 0);
            assert_ne!(grant_rights(Access::ReadOnly, is_dir) & FS_EXECUTE, 0);
            assert_eq!(
                grant_rights(Access::ReadOnly, is_dir)
                    & (FS_WRITE_FILE | FS_TRUNCATE | FS_MAKE_REG | FS_REMOVE_FILE),
                0
            );
        }
        // File rules may only carry file rights.
        let dir_only = FS_READ_DIR | FS_MAKE_REG | FS_REMOVE_DIR | FS_REFER;
        assert_eq!(grant_rights(Access::ReadWrite, false) & dir_only, 0);
        assert_eq!(grant_rights(Access::ReadOnly, false) & dir_only, 0);
    }

    #[test]
    fn a_ruleset_masks_rights_to_what_the_kernel_handles() {
        let abi = abi_version();
        if abi == 0 {
            panic!("Landlock is not available on this host; the process engine needs it");
        }
        let ruleset = Ruleset::create(abi).expect("create a ruleset");
        assert_eq!(ruleset.mask(u64::MAX), handled_fs(abi));
        let dir = std::fs::File::open("/").expect("open /");
        use std::os::fd::AsFd;
        ruleset
            .allow(dir.as_fd(), READ_ONLY_DIR)
            .expect("a rule on a directory");
    }
}
