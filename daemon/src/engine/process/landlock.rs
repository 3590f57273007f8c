//! Landlock: the file grants of a profile, mirrored as a ruleset the kernel enforces on top
//! of the mount view, plus the denial of every TCP bind and connect.
//!
//! The mounts already decide what a tool can see; Landlock decides what it may do with what
//! it sees, on inodes rather than paths, so it holds even where a bind mount would not (a
//! submount left writable, a hard link, a path reached another way). Read-only grants may be
//! read and executed; read-write grants may be changed but not executed (nothing the tool
//! writes can become a program it runs); `/tmp` likewise; `/proc` may only be read.
//!
//! Rulesets are built by the `landlock` crate (maintained by Landlock's author) in the
//! launcher, before the clone: the sandbox's first process only adds the rules of the paths
//! that exist inside it alone (its root, `/proc`, `/dev`, `/tmp`) and enforces the ruleset,
//! with raw calls (see `child.rs`). The crate's compatibility levels carry the profile's
//! fail-closed rule: what the sandbox relies on — every file right up to ABI 3 and TCP bind
//! and connect ([`REQUIRED_ABI`], so that `network = "none"` is enforced by Landlock as well
//! as by the network namespace) — is a hard requirement, and a kernel without it fails the
//! build with the crate's error instead of a weaker ruleset. Newer features (device ioctls,
//! abstract-socket and signal scoping) are best effort: they are applied when the kernel has
//! them, on top of namespaces that already provide the same isolation.

use std::os::fd::{BorrowedFd, OwnedFd};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, make_bitflags,
};

use super::sys;
use crate::profile::Access as Grant;

/// TCP bind and connect rules arrived in ABI 4 (Linux 6.7).
pub const REQUIRED_ABI: u32 = 4;
const REQUIRED: ABI = ABI::V4;
/// The newest feature used: device ioctls (ABI 5) and scoping (ABI 6).
const WANTED: ABI = ABI::V6;

/// What a read-only directory grant allows beneath it.
pub const READ_ONLY_DIR: BitFlags<AccessFs> =
    make_bitflags!(AccessFs::{ReadFile | ReadDir | Execute});
pub const READ_ONLY_FILE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile | Execute});
/// Everything but execution and creating device nodes.
pub const READ_WRITE_DIR: BitFlags<AccessFs> = make_bitflags!(AccessFs::{
    ReadFile | ReadDir | WriteFile | RemoveDir | RemoveFile | MakeDir | MakeReg | MakeSock
        | MakeFifo | MakeSym | Refer | Truncate
});
pub const READ_WRITE_FILE: BitFlags<AccessFs> =
    make_bitflags!(AccessFs::{ReadFile | WriteFile | Truncate});
/// A file the engine provides to be read alone (the synthesized `/etc/passwd`).
pub const READ_FILE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile});
/// `/proc` of the sandbox's own processes: readable, nothing more.
pub const PROC: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile | ReadDir});
/// `/` and `/dev` themselves: listable.
pub const LIST_ONLY: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadDir});
pub const EXECUTE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{Execute});

/// The Landlock ABI of the running kernel; 0 when Landlock is absent or disabled. (The crate
/// keeps its own probe private, by design: rules are written against a known ABI, which is
/// what [`Ruleset::create`] does; this number is for the host report and the engine's
/// refusal message.)
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

/// The file-system rights a ruleset handles on a kernel with `abi`: what no rule allows
/// beneath a path is denied there.
pub fn handled_fs(abi: u32) -> BitFlags<AccessFs> {
    AccessFs::from_all(ABI::from(i32::try_from(abi).unwrap_or(i32::MAX)))
        & AccessFs::from_all(WANTED)
}

/// The rights of a file grant, for a directory or a single file.
pub fn grant_rights(access: Grant, is_dir: bool) -> BitFlags<AccessFs> {
    match (access, is_dir) {
        (Grant::ReadOnly, true) => READ_ONLY_DIR,
        (Grant::ReadOnly, false) => READ_ONLY_FILE,
        (Grant::ReadWrite, true) => READ_WRITE_DIR,
        (Grant::ReadWrite, false) => READ_WRITE_FILE,
    }
}

/// A ruleset under construction, in the launcher.
#[derive(Debug)]
pub struct Ruleset {
    created: RulesetCreated,
    handled_fs: BitFlags<AccessFs>,
}

impl Ruleset {
    /// A ruleset that handles every file right and TCP bind and connect, with no rule yet:
    /// everything is denied. Fails when the kernel lacks what [`REQUIRED_ABI`] provides.
    pub fn create(abi: u32) -> Result<Ruleset, RulesetError> {
        let created = landlock::Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(REQUIRED))?
            .handle_access(AccessNet::from_all(REQUIRED))?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(WANTED))?
            .scope(Scope::from_all(WANTED))?
            .create()?;
        Ok(Ruleset {
            created,
            handled_fs: handled_fs(abi),
        })
    }

    /// Allows `rights` beneath the file `parent` names (those this kernel lacks are dropped
    /// by the crate, best effort: the required ones were checked at creation).
    pub fn allow(
        self,
        parent: BorrowedFd<'_>,
        rights: BitFlags<AccessFs>,
    ) -> Result<Ruleset, RulesetError> {
        let created = self.created.add_rule(PathBeneath::new(parent, rights))?;
        Ok(Ruleset { created, ..self })
    }

    /// Allows TCP connections to `port` (on any address: the sandbox's namespace has only
    /// its loopback, so this reaches the egress proxy and nothing else).
    pub fn allow_tcp_connect(self, port: u16) -> Result<Ruleset, RulesetError> {
        let created = self
            .created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
        Ok(Ruleset { created, ..self })
    }

    /// `rights` limited to what this ruleset handles, for the rules the first process adds
    /// itself (the kernel refuses a rule with a right the ruleset does not handle).
    pub fn mask(&self, rights: BitFlags<AccessFs>) -> u64 {
        (rights & self.handled_fs).bits()
    }

    /// The ruleset's descriptor, which the first process adds its rules to and enforces.
    /// Only a best-effort ruleset on a kernel without Landlock has none, and this one's
    /// requirements are hard.
    pub fn into_fd(self) -> Option<OwnedFd> {
        self.created.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_grow_with_the_abi() {
        let later = make_bitflags!(AccessFs::{Refer | Truncate | IoctlDev});
        assert!((handled_fs(1) & later).is_empty());
        assert!(handled_fs(2).contains(AccessFs::Refer));
        assert!(handled_fs(3).contains(AccessFs::Truncate));
        assert!(!handled_fs(4).contains(AccessFs::IoctlDev));
        assert!(handled_fs(7).contains(AccessFs::IoctlDev));
        assert!(handled_fs(1).contains(AccessFs::MakeSym));
    }

    #[test]
    fn grants_never_make_writable_places_executable() {
        for is_dir in [true, false] {
            assert!(!grant_rights(Grant::ReadWrite, is_dir).contains(AccessFs::Execute));
            assert!(grant_rights(Grant::ReadOnly, is_dir).contains(AccessFs::Execute));
            let writes = make_bitflags!(AccessFs::{WriteFile | Truncate | MakeReg | RemoveFile});
            assert!((grant_rights(Grant::ReadOnly, is_dir) & writes).is_empty());
        }
        // File rules may only carry file rights.
        let dir_only = make_bitflags!(AccessFs::{ReadDir | MakeReg | RemoveDir | Refer});
        assert!((grant_rights(Grant::ReadWrite, false) & dir_only).is_empty());
        assert!((grant_rights(Grant::ReadOnly, false) & dir_only).is_empty());
    }

    #[test]
    fn a_ruleset_masks_rights_to_what_the_kernel_handles() {
        let abi = abi_version();
        if abi < REQUIRED_ABI {
            panic!("Landlock ABI {abi} on this host; the process engine needs ABI {REQUIRED_ABI}");
        }
        let ruleset = Ruleset::create(abi).expect("create a ruleset");
        assert_eq!(ruleset.mask(BitFlags::all()), handled_fs(abi).bits());
        let dir = std::fs::File::open("/").expect("open /");
        use std::os::fd::AsFd;
        let ruleset = ruleset
            .allow(dir.as_fd(), READ_ONLY_DIR)
            .expect("a rule on a directory")
            .allow_tcp_connect(8080)
            .expect("a rule on a port");
        ruleset.into_fd().expect("a ruleset descriptor");
    }
}
