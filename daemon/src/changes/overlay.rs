//! The overlay a writing call works in.
//!
//! The daemon builds it with the new mount API, detached: `fsopen("overlay")` with the
//! layers passed as descriptors, `fsmount`, and no attachment anywhere on the host — the
//! mount exists only as a descriptor, handed to the engine (the process engine attaches it
//! in the sandbox's own mount namespace; the WebAssembly engine opens its preopens beneath
//! it), and it goes away with the last reference. The lower layer is a read-only clone of
//! the workspace, idmapped when root owns the workspace (see `idmap.rs`); the upper and work
//! directories are the call's own, in the daemon's state directory.
//!
//! The mount is made by the daemon, in its own user namespace, so that copying a file up
//! works whoever owns it. `redirect_dir` (neither made nor followed), `metacopy` and `index`
//! are off: every change is then a plain file, directory, symlink or whiteout in the upper
//! layer, which is what `capture.rs` reads (renaming a directory fails with EXDEV, and
//! programs fall back to copying, as they do across filesystems).
//!
//! overlayfs keeps its own marks on the upper layer in extended attributes
//! ([`private_xattrs`]): `trusted.overlay.*`, which only the initial user namespace may use,
//! or, for a daemon in a container's user namespace (Kubernetes' `hostUsers: false`), the
//! `user.overlay.*` of the `userxattr` option. A name of the namespace in use written
//! through the merged view is refused, or stored escaped (`*.overlay.overlay.*`, Linux 6.7
//! on), so a call cannot forge the marks the capture reads.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, OpenTreeFlags, fsconfig_create, fsconfig_set_fd,
    fsconfig_set_flag, fsconfig_set_string, fsmount, fsopen, open_tree,
};

use super::idmap::{IdMap, NOBODY};
use super::types::ChangeError;

/// `MOUNT_ATTR_RDONLY` and `MOUNT_ATTR_IDMAP` of `linux/mount.h`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `PROC_USER_INIT_INO` of `linux/proc_ns.h`: the inode number of the initial user
/// namespace's `/proc/<pid>/ns/user`, the same on every boot.
const PROC_USER_INIT_INO: u64 = 0xEFFF_FFFD;

/// The names of overlayfs's own extended attributes on the layers, as the daemon's overlays
/// are mounted (see the module docs).
#[derive(Debug)]
pub struct PrivateXattrs {
    /// On a directory that hides the lower directory's entries.
    pub opaque: &'static str,
    /// On a file copied up from a lower file that was still linked.
    pub origin: &'static str,
    /// Whether the overlays are mounted with `userxattr`.
    user: bool,
}

/// The daemon's user namespace is fixed for its life, so this is decided once. A daemon
/// that cannot tell uses `userxattr`, which works in any namespace.
static PRIVATE_XATTRS: std::sync::LazyLock<PrivateXattrs> = std::sync::LazyLock::new(|| {
    let initial =
        rustix::fs::stat("/proc/self/ns/user").is_ok_and(|stat| stat.st_ino == PROC_USER_INIT_INO);
    if initial {
        PrivateXattrs {
            opaque: "trusted.overlay.opaque",
            origin: "trusted.overlay.origin",
            user: false,
        }
    } else {
        PrivateXattrs {
            opaque: "user.overlay.opaque",
            origin: "user.overlay.origin",
            user: true,
        }
    }
});

/// Where overlayfs keeps its marks on this daemon's upper layers.
pub fn private_xattrs() -> &'static PrivateXattrs {
    &PRIVATE_XATTRS
}

/// A call's overlay, mounted and detached.
#[derive(Debug)]
pub struct Overlay {
    merged: OwnedFd,
    upper: Upper,
}

/// A call's upper layer, after the overlay: the record of what the call changed. Removed
/// when dropped.
#[derive(Debug)]
pub struct Upper {
    /// The call's folder (upper and work directories).
    dir: PathBuf,
    /// The upper directory.
    pub path: PathBuf,
    /// The workspace, opened when the overlay was made (never through a symlink).
    pub workspace: OwnedFd,
    /// The host path of the workspace, for messages.
    pub workspace_path: PathBuf,
    /// The workspace root's owner and group: what files the call adds belong to.
    pub owner: (u32, u32),
}

impl Upper {
    /// An upper layer in `dir` over `workspace` with no overlay on it: what a test fills by
    /// hand, as a tool never could (`boundary.rs`).
    #[cfg(any(test, feature = "testing"))]
    pub fn detached(dir: PathBuf, workspace: &Path) -> std::io::Result<Upper> {
        let root = super::lower::open_workspace(workspace)?;
        let meta = rustix::fs::fstat(&root)?;
        let path = dir.join("upper");
        std::fs::create_dir_all(&path)?;
        Ok(Upper {
            dir,
            path,
            workspace: root,
            workspace_path: workspace.to_owned(),
            owner: (meta.st_uid, meta.st_gid),
        })
    }

    /// The upper directory, opened.
    pub fn open(&self) -> std::io::Result<OwnedFd> {
        Ok(rustix::fs::open(
            &self.path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }
}

impl Drop for Upper {
    fn drop(&mut self) {
        if let Err(err) = remove_tree(&self.dir)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), error = %err, "cannot remove a call's upper layer");
        }
    }
}

/// Removes `dir` and all below it. overlayfs leaves its work directory's own `work` with no
/// permission bits: a daemon that is root removes it all the same, one that is not (holding
/// `CAP_DAC_OVERRIDE` or, lacking it, failing to mount at all) opens the directories it owns
/// to itself first.
pub(super) fn remove_tree(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
            open_to_owner(dir, OPEN_TO_OWNER_DEPTH);
            std::fs::remove_dir_all(dir)
        }
        other => other,
    }
}

/// How deep [`open_to_owner`] goes: overlayfs's closed directory is two levels below a
/// call's directory (`work/work`), and what a tool made in its upper layer is never the
/// daemon's to open (its own rights decide): a bound keeps a deep tree from costing more.
const OPEN_TO_OWNER_DEPTH: u32 = 4;

/// Gives the owner every right on the directories below `dir` it owns, `depth` levels down;
/// what it cannot change is left for the removal to report.
fn open_to_owner(dir: &Path, depth: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let mode = meta.permissions().mode();
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700));
    if depth == 0 {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            open_to_owner(&entry.path(), depth - 1);
        }
    }
}

impl Overlay {
    /// Mounts an overlay over `workspace` whose upper layer lives in `dir` (blocking).
    pub fn mount(workspace: &Path, dir: PathBuf, idmap: &IdMap) -> Result<Overlay, ChangeError> {
        let overlay = |what: &str, err: rustix::io::Errno| {
            ChangeError::Overlay(format!("{what}: {}", std::io::Error::from(err)))
        };
        let root = rustix::fs::openat2(
            rustix::fs::CWD,
            workspace,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|err| {
            ChangeError::Overlay(format!(
                "cannot open the workspace {}: {}",
                workspace.display(),
                std::io::Error::from(err)
            ))
        })?;
        let meta =
            rustix::fs::fstat(&root).map_err(|err| overlay("cannot inspect the workspace", err))?;
        let owner = (meta.st_uid, meta.st_gid);
        let idmapped = owner.0 == 0 || owner.1 == 0;
        let seen = |id: u32| if idmapped && id == 0 { NOBODY } else { id };

        let upper = dir.join("upper");
        let work = dir.join("work");
        std::fs::create_dir_all(&upper)?;
        std::fs::create_dir_all(&work)?;
        // The merged root is the upper directory: it must look like the workspace root, to
        // the sandbox, or the call could not create files at the top.
        std::os::unix::fs::chown(&upper, Some(seen(owner.0)), Some(seen(owner.1))).map_err(
            |err| {
                ChangeError::Overlay(format!(
                    "cannot give the call's layer the owner of the workspace {} ({}:{}): a workspace of another user than the daemon's needs CAP_CHOWN and CAP_FOWNER: give the workspace to the daemon's user, or grant those: {err}",
                    workspace.display(),
                    owner.0,
                    owner.1
                ))
            },
        )?;
        std::fs::set_permissions(
            &upper,
            std::os::unix::fs::PermissionsExt::from_mode(meta.st_mode & 0o7777),
        )?;
        let upper = Upper {
            dir,
            path: upper,
            workspace: root,
            workspace_path: workspace.to_owned(),
            owner,
        };

        let lower = open_tree(
            &upper.workspace,
            "",
            OpenTreeFlags::OPEN_TREE_CLONE
                | OpenTreeFlags::OPEN_TREE_CLOEXEC
                | OpenTreeFlags::AT_EMPTY_PATH,
        )
        .map_err(|err| overlay("cannot clone the workspace's mount", err))?;
        let mut flags = MOUNT_ATTR_RDONLY;
        if idmapped {
            flags |= MOUNT_ATTR_IDMAP;
        }
        set_attributes(lower.as_fd(), flags, idmapped.then(|| idmap.userns())).map_err(|err| {
            ChangeError::Overlay(if idmapped && private_xattrs().user {
                format!(
                    "cannot idmap the workspace {} (root owns it, and the sandbox may only write it through an idmapped mount, which a daemon in a user namespace of its own cannot make on a filesystem mounted outside it: give the workspace to the daemon's user): {err}",
                    workspace.display()
                )
            } else if idmapped {
                format!(
                    "cannot idmap the workspace {} (root owns it, and the sandbox may only write it through an idmapped mount; does its filesystem support idmapped mounts?): {err}",
                    workspace.display()
                )
            } else {
                format!("cannot make the workspace's lower layer read-only: {err}")
            })
        })?;
        let calls = open_tree(
            rustix::fs::CWD,
            &upper.dir,
            OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
        )
        .map_err(|err| overlay("cannot clone the state directory's mount", err))?;
        let open_layer = |name: &str| {
            rustix::fs::openat(
                &calls,
                name,
                OFlags::DIRECTORY | OFlags::PATH | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|err| overlay("cannot open a layer", err))
        };
        let upper_fd = open_layer("upper")?;
        let work_fd = open_layer("work")?;

        let fs = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC)
            .map_err(|err| overlay("overlayfs is not available (fsopen)", err))?;
        let configure = || -> rustix::io::Result<()> {
            fsconfig_set_fd(&fs, "lowerdir+", lower.as_fd())?;
            fsconfig_set_fd(&fs, "upperdir", upper_fd.as_fd())?;
            fsconfig_set_fd(&fs, "workdir", work_fd.as_fd())?;
            if private_xattrs().user {
                fsconfig_set_flag(&fs, "userxattr")?;
            }
            for (key, value) in [
                ("redirect_dir", "nofollow"),
                ("metacopy", "off"),
                ("index", "off"),
            ] {
                fsconfig_set_string(&fs, key, value)?;
            }
            fsconfig_create(&fs)
        };
        configure().map_err(|err| {
            ChangeError::Overlay(format!(
                "{}{}",
                std::io::Error::from(err),
                kernel_message(&fs)
            ))
        })?;
        let merged = fsmount(
            &fs,
            FsMountFlags::FSMOUNT_CLOEXEC,
            MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
        )
        .map_err(|err| overlay("cannot mount the overlay (fsmount)", err))?;
        Ok(Overlay { merged, upper })
    }

    /// The merged view's root: the workspace as the call sees it.
    pub fn root(&self) -> BorrowedFd<'_> {
        self.merged.as_fd()
    }

    /// The upper layer, while the overlay is still in use.
    pub fn upper(&self) -> &Upper {
        &self.upper
    }

    /// Lets go of the merged view; what is left is the record of the call's changes.
    pub fn finish(self) -> Upper {
        drop(self.merged);
        self.upper
    }
}

/// What the kernel logged on the filesystem context, for an error message.
fn kernel_message(fs: &OwnedFd) -> String {
    let mut buf = [0u8; 512];
    let mut lines = Vec::new();
    while let Ok(n) = rustix::io::read(fs, &mut buf) {
        if n == 0 {
            break;
        }
        lines.push(String::from_utf8_lossy(&buf[..n]).trim().to_owned());
    }
    if lines.is_empty() {
        String::new()
    } else {
        format!(" ({})", lines.join("; "))
    }
}

/// `mount_setattr` on the detached tree `fd` (rustix does not wrap it).
pub fn set_attributes(
    fd: BorrowedFd<'_>,
    flags: u64,
    userns: Option<BorrowedFd<'_>>,
) -> std::io::Result<()> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let attr = MountAttr {
        attr_set: flags,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.map_or(0, |fd| fd.as_raw_fd() as u64),
    };
    // SAFETY: an empty path with AT_EMPTY_PATH names `fd`, which is open; `attr` is a valid
    // mount_attr of the size passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
