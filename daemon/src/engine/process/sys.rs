//! Raw system calls and the pieces of the kernel ABI that `libc` does not spell out.
//!
//! The sandbox's first process starts as a `CLONE_VM` child of a daemon thread: it shares the
//! daemon's memory until it executes the tool, so it must not go through libc, whose wrappers
//! write the thread-local `errno` of the thread it was cloned from (and whose allocator it
//! must never reach). [`syscall`] is the one entry point it uses: a bare `syscall`/`svc`
//! instruction that returns `-errno` instead of touching any memory.

use std::ffi::c_long;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the daemon's memory was dumpable when the engine started (see [`note_dumpable`]).
static DUMPABLE: AtomicBool = AtomicBool::new(false);

/// Records whether the daemon is dumpable, as the engine starts.
///
/// A sandbox's first process shares the daemon's memory (`CLONE_VM`), and the kernel keeps
/// the dumpable flag with the memory: when that process takes the sandbox's ids, the daemon
/// itself turns undumpable, and its children's `/proc` files then belong to root. A daemon
/// that is root does not notice; one that is not (the packaged service's user, holding the
/// capabilities the engine needs and no others) can then no longer write the next sandbox's
/// id maps. So the first process restores the flag once it has its ids
/// ([`restore_dumpable`]), and the launcher, which may find it cleared by another sandbox
/// in between, restores it before it tries again. Only a flag that was set at start is
/// restored: a daemon made undumpable on purpose stays so.
pub fn note_dumpable() {
    // SAFETY: PR_GET_DUMPABLE takes no pointer; it only reads the flag.
    let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) } == 1;
    DUMPABLE.store(dumpable, Ordering::Relaxed);
}

/// Sets the daemon's dumpable flag again if it was set at start (see [`note_dumpable`]).
/// Callable from the first process: one atomic load and one raw system call.
pub fn restore_dumpable() {
    if DUMPABLE.load(Ordering::Relaxed) {
        // SAFETY: PR_SET_DUMPABLE takes an integer, no pointer.
        unsafe {
            syscall(
                libc::SYS_prctl,
                [libc::PR_SET_DUMPABLE as usize, 1, 0, 0, 0, 0],
            );
        }
    }
}

/// An errno value, positive.
pub type Errno = i32;

/// Performs system call `nr` with up to six arguments; a result in `-4095..0` is `-errno`.
///
/// # Safety
///
/// The arguments must be what the kernel expects for `nr` (valid pointers for as long as the
/// call reads or writes them); the call itself may do anything a system call can.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn syscall(nr: c_long, args: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller vouches for the arguments; the instruction clobbers only rcx and r11
    // besides rax, and needs no stack.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// See the x86_64 version.
///
/// # Safety
///
/// As for the x86_64 version.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub unsafe fn syscall(nr: c_long, args: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller vouches for the arguments; `svc 0` clobbers nothing but x0.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") nr as usize,
            inlateout("x0") args[0] => ret,
            in("x1") args[1],
            in("x2") args[2],
            in("x3") args[3],
            in("x4") args[4],
            in("x5") args[5],
            options(nostack),
        );
    }
    ret
}

/// Splits a raw result into the value or the errno.
#[inline(always)]
pub fn result(ret: isize) -> Result<usize, Errno> {
    if (-4095..0).contains(&ret) {
        Err(ret.wrapping_neg() as Errno)
    } else {
        Ok(ret as usize)
    }
}

/// Converts a raw result in the daemon (not in the child) into an `io::Error`.
pub fn io_result(ret: isize) -> std::io::Result<usize> {
    result(ret).map_err(std::io::Error::from_raw_os_error)
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct MountAttr {
    pub attr_set: u64,
    pub attr_clr: u64,
    pub propagation: u64,
    pub userns_fd: u64,
}

pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;
pub const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

pub const OPEN_TREE_CLONE: u32 = 0x1;
pub const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;

/// `struct landlock_path_beneath_attr` (packed in the kernel's header), for the rules the
/// sandbox's first process adds itself (the `landlock` crate builds the others).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
pub struct LandlockPathBeneathAttr {
    pub allowed_access: u64,
    pub parent_fd: i32,
}

pub const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
pub const LANDLOCK_RULE_PATH_BENEATH: u32 = 1;

/// `struct __user_cap_header_struct` and `__user_cap_data_struct` for `capset(2)`, version 3.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CapHeader {
    pub version: u32,
    pub pid: i32,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct CapData {
    pub effective: u32,
    pub permitted: u32,
    pub inheritable: u32,
}

pub const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// The kernel's `struct sigaction` for `rt_sigaction(2)` (not libc's, which differs).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct KernelSigaction {
    pub handler: usize,
    pub flags: u64,
    pub restorer: usize,
    pub mask: u64,
}

/// The size of the kernel's signal set, as `rt_sigaction` and `rt_sigprocmask` want it.
pub const KERNEL_SIGSET_SIZE: usize = 8;

/// The highest signal number.
pub const MAX_SIGNAL: usize = 64;

pub const PR_CAP_AMBIENT: i32 = 47;
pub const PR_CAP_AMBIENT_CLEAR_ALL: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_results_split_into_values_and_errnos() {
        assert_eq!(result(0), Ok(0));
        assert_eq!(result(42), Ok(42));
        assert_eq!(result(-(libc::EPERM as isize)), Err(libc::EPERM));
        assert_eq!(result(-4095), Err(4095));
    }

    #[test]
    fn the_raw_entry_point_reaches_the_kernel() {
        // SAFETY: getpid takes no arguments.
        let pid = unsafe { syscall(libc::SYS_getpid, [0; 6]) };
        assert_eq!(pid, std::process::id() as isize);
        // SAFETY: close of an fd that cannot exist touches nothing.
        let bad = unsafe { syscall(libc::SYS_close, [usize::MAX >> 1, 0, 0, 0, 0, 0]) };
        assert_eq!(result(bad), Err(libc::EBADF));
    }

    #[test]
    fn packed_layouts_match_the_kernel_headers() {
        assert_eq!(std::mem::size_of::<LandlockPathBeneathAttr>(), 12);
        assert_eq!(std::mem::size_of::<MountAttr>(), 32);
        assert_eq!(std::mem::size_of::<KernelSigaction>(), 32);
    }
}
