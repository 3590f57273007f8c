//! The descriptors and paths a plan is made of: detached copies of host trees, the
//! workspace and its sub-grants opened beneath their root with no symlink followed, pipes
//! numbered above the standard streams, and guest paths as the child's steps name them.

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::super::sys::{self, MountAttr};

/// A detached, private copy of the mount tree at `fd`, with `flags` set on every mount of it,
/// idmapped through `userns` when given.
pub(super) fn clone_tree(
    fd: BorrowedFd<'_>,
    recursive: bool,
    flags: u64,
    userns: Option<BorrowedFd<'_>>,
) -> std::io::Result<OwnedFd> {
    let recursive_flag = if recursive {
        libc::AT_RECURSIVE as usize
    } else {
        0
    };
    // SAFETY: an empty path with AT_EMPTY_PATH names `fd` itself, which is open.
    let tree = unsafe {
        sys::syscall(
            libc::SYS_open_tree,
            [
                fd.as_raw_fd() as usize,
                c"".as_ptr() as usize,
                sys::OPEN_TREE_CLONE as usize
                    | libc::O_CLOEXEC as usize
                    | libc::AT_EMPTY_PATH as usize
                    | recursive_flag,
                0,
                0,
                0,
            ],
        )
    };
    let tree = sys::io_result(tree)?;
    // SAFETY: open_tree returned a new descriptor nothing else owns.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as RawFd) };
    let attr = MountAttr {
        attr_set: if userns.is_some() {
            flags | sys::MOUNT_ATTR_IDMAP
        } else {
            flags
        },
        attr_clr: 0,
        propagation: libc::MS_PRIVATE,
        userns_fd: userns.map_or(0, |fd| fd.as_raw_fd() as u64),
    };
    // SAFETY: `attr` is a valid mount_attr of the size passed; the path names `tree`.
    let ret = unsafe {
        sys::syscall(
            libc::SYS_mount_setattr,
            [
                tree.as_raw_fd() as usize,
                c"".as_ptr() as usize,
                libc::AT_EMPTY_PATH as usize | recursive_flag,
                &attr as *const MountAttr as usize,
                std::mem::size_of::<MountAttr>(),
                0,
            ],
        )
    };
    sys::io_result(ret)?;
    Ok(tree)
}

/// Opens the workspace directory; its path is canonical, so any symlink in it now means it
/// was swapped since it was checked.
pub(super) fn open_workspace(path: &Path) -> Result<OwnedFd, String> {
    let c_path = cstring(path)?;
    openat2(
        libc::AT_FDCWD,
        &c_path,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        libc::RESOLVE_NO_SYMLINKS,
    )
    .map_err(|err| format!("cannot open the workspace {}: {err}", path.display()))
}

/// Opens `sub` beneath `root` without ever leaving it; `None` when it does not exist.
pub(super) fn open_beneath(root: BorrowedFd<'_>, sub: &Path) -> Result<Option<OwnedFd>, String> {
    let c_sub = cstring(sub)?;
    match openat2(
        root.as_raw_fd(),
        &c_sub,
        libc::O_PATH | libc::O_CLOEXEC,
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) if err.raw_os_error() == Some(libc::EXDEV) => {
            Err("it leads outside the workspace (a symlink or `..`)".into())
        }
        Err(err) => Err(err.to_string()),
    }
}

/// `openat2(2)`; also the wasm engine's, for opening workspace preopens without symlinks.
pub fn openat2(dir: RawFd, path: &CString, flags: i32, resolve: u64) -> std::io::Result<OwnedFd> {
    // SAFETY: open_how is plain integers; all zero is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = resolve;
    // SAFETY: `path` is NUL-terminated and `how` is a valid open_how of the size passed.
    let fd = unsafe {
        sys::syscall(
            libc::SYS_openat2,
            [
                dir as usize,
                path.as_ptr() as usize,
                &how as *const libc::open_how as usize,
                std::mem::size_of::<libc::open_how>(),
                0,
                0,
            ],
        )
    };
    let fd = sys::io_result(fd)?;
    // SAFETY: openat2 returned a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

pub(super) fn fstat(fd: BorrowedFd<'_>) -> std::io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open (O_PATH descriptors can be fstat'ed) and `stat` is writable.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stat)
}

pub(super) fn dup(fd: BorrowedFd<'_>) -> Result<OwnedFd, String> {
    fd.try_clone_to_owned()
        .map_err(|err| format!("cannot duplicate a descriptor: {err}"))
}

/// A pipe (read end, write end), both close-on-exec and numbered above the standard
/// streams, so that the child's `dup3` onto 0, 1 and 2 can never clobber one of them.
pub(super) fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot create a pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: pipe2 returned two new descriptors nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(read)?, above_stdio(write)?))
}

pub(super) fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, String> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on an open descriptor returns a new one nothing else owns.
    let high = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if high < 0 {
        return Err(format!(
            "cannot move a descriptor: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(high) })
}

pub(super) fn relative(guest: &Path) -> PathBuf {
    guest.strip_prefix("/").unwrap_or(guest).to_owned()
}

/// `a`, `a/b` for `a/b/c`.
pub(super) fn ancestors(relative: &Path) -> Vec<PathBuf> {
    let mut ancestors: Vec<PathBuf> = relative
        .ancestors()
        .skip(1)
        .filter(|ancestor| !ancestor.as_os_str().is_empty())
        .map(Path::to_owned)
        .collect();
    ancestors.reverse();
    ancestors
}

pub(super) fn cstring(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} contains a NUL byte", path.display()))
}
