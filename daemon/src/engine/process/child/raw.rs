//! The system calls the first process makes, each wrapped once, with the constants they
//! pass: raw calls only (no libc, so no other thread's `errno`), no allocation, nothing that
//! can panic — the rules `child.rs` states. A failure comes back as the [`Stage`] it
//! belongs to with its errno ([`Outcome`]), for the plan's report.

use std::ffi::{CStr, c_long};
use std::os::fd::RawFd;

use super::super::limits::Rlimit;
use super::super::sys::{
    self, CapData, CapHeader, KernelSigaction, LandlockPathBeneathAttr, MountAttr,
};
use super::shared::{Args, InsideRule, Stage, Step};

pub(super) const EMPTY: &[u8] = b"\0";

/// Written to a cgroup's `tasks` or `cgroup.procs`: the writing process.
pub(super) const SELF: &[u8] = b"0";

pub(super) const TMPFS: &[u8] = b"tmpfs\0";

pub(super) const SPARE_NAME: &[u8] = b"airlock-spare\0";

pub(super) const ROOT: &[u8] = b"/\0";

pub(super) const DOT: &[u8] = b".\0";

pub(super) type Outcome = Result<(), (Stage, u32, i32)>;

pub(super) fn ptr(bytes: &[u8]) -> usize {
    bytes.as_ptr() as usize
}

pub(super) fn check(stage: Stage, ret: isize) -> Outcome {
    check_at(stage, 0, ret)
}

pub(super) fn check_at(stage: Stage, index: u32, ret: isize) -> Outcome {
    match sys::result(ret) {
        Ok(_) => Ok(()),
        Err(errno) => Err((stage, index, errno)),
    }
}

/// Raw system call; see [`sys::syscall`].
///
/// # Safety
///
/// As for [`sys::syscall`].
pub(super) unsafe fn raw(nr: c_long, args: [usize; 6]) -> isize {
    // SAFETY: forwarded to the caller.
    unsafe { sys::syscall(nr, args) }
}

pub(super) fn exit_group(code: i32) -> ! {
    loop {
        // SAFETY: exit_group takes an int and does not return.
        unsafe {
            raw(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]);
        }
    }
}

/// A system call whose arguments are all integers (descriptor numbers, flags, ids).
pub(super) fn integer_call(nr: c_long, args: [usize; 3]) -> isize {
    // SAFETY: no argument is a pointer, so the kernel reads and writes no memory of ours;
    // every caller passes a call whose effects on this process are the point.
    unsafe { raw(nr, [args[0], args[1], args[2], 0, 0, 0]) }
}

pub(super) fn chdir(path: &CStr) -> isize {
    // SAFETY: a NUL-terminated string of the plan or a constant, alive for the call.
    unsafe { raw(libc::SYS_chdir, [path.as_ptr() as usize, 0, 0, 0, 0, 0]) }
}

/// Nothing mounted in this namespace propagates back to the daemon's, or the other way.
pub(super) fn make_mounts_private() -> Outcome {
    let flags = (libc::MS_REC | libc::MS_PRIVATE) as usize;
    // SAFETY: the target is a constant NUL-terminated string; the other pointers are null,
    // which a propagation change allows.
    let ret = unsafe { raw(libc::SYS_mount, [0, ptr(ROOT), 0, flags, 0, 0]) };
    check(Stage::PrivateMounts, ret)
}

/// Switches to the sandbox's unprivileged uid and gid, with no supplementary groups.
pub(super) fn become_sandbox_ids(uid: usize, gid: usize) -> Outcome {
    check(
        Stage::Identity,
        integer_call(libc::SYS_setgroups, [0, 0, 0]),
    )?;
    check(
        Stage::Identity,
        integer_call(libc::SYS_setresgid, [gid, gid, gid]),
    )?;
    check(
        Stage::Identity,
        integer_call(libc::SYS_setresuid, [uid, uid, uid]),
    )?;
    // The id change made the memory this process shares with the daemon undumpable.
    super::super::sys::restore_dumpable();
    Ok(())
}

/// Names the waiting process `airlock-spare` (its name was the launcher thread's), so that
/// `ps` and tests tell a spare from a sandbox that runs or is being built.
pub(super) fn name_spare() {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes, a constant.
    unsafe {
        raw(
            libc::SYS_prctl,
            [libc::PR_SET_NAME as usize, ptr(SPARE_NAME), 0, 0, 0, 0],
        );
    }
}

/// Makes the working directory (the built root) the root, detaches the old one, and moves
/// to the new `/`.
pub(super) fn pivot_into_working_directory() -> Outcome {
    // SAFETY: constant NUL-terminated paths.
    let pivoted = unsafe { raw(libc::SYS_pivot_root, [ptr(DOT), ptr(DOT), 0, 0, 0, 0]) };
    check(Stage::PivotRoot, pivoted)?;
    let detach = libc::MNT_DETACH as usize;
    // SAFETY: a constant NUL-terminated path.
    let unmounted = unsafe { raw(libc::SYS_umount2, [ptr(DOT), detach, 0, 0, 0, 0]) };
    check(Stage::PivotRoot, unmounted)?;
    check(Stage::PivotRoot, chdir(c"/"))
}

/// Makes the mount at `target` (a NUL-terminated path) read-only.
pub(super) fn make_read_only(target: &[u8]) -> isize {
    let attr = MountAttr {
        attr_set: sys::MOUNT_ATTR_RDONLY,
        ..MountAttr::default()
    };
    // SAFETY: the path is NUL-terminated (a constant or the plan's) and `attr` is a local
    // of the size passed, which the kernel only reads.
    unsafe {
        raw(
            libc::SYS_mount_setattr,
            [
                libc::AT_FDCWD as usize,
                ptr(target),
                0,
                &attr as *const MountAttr as usize,
                std::mem::size_of::<MountAttr>(),
                0,
            ],
        )
    }
}

pub(super) fn set_hostname(name: &CStr) -> isize {
    let length = name.to_bytes().len();
    // SAFETY: the plan's string, of the length passed.
    unsafe {
        raw(
            libc::SYS_sethostname,
            [name.as_ptr() as usize, length, 0, 0, 0, 0],
        )
    }
}

pub(super) fn set_rlimit(limit: &Rlimit) -> isize {
    let value = libc::rlimit64 {
        rlim_cur: limit.soft,
        rlim_max: limit.hard,
    };
    // SAFETY: `value` is a local the kernel only reads; the old value is not asked for.
    unsafe {
        raw(
            libc::SYS_prlimit64,
            [
                0,
                limit.resource as usize,
                &value as *const libc::rlimit64 as usize,
                0,
                0,
                0,
            ],
        )
    }
}

/// Empties the capability bounding and ambient sets and locks the securebits, so that even
/// a uid 0 inside could never gain a capability by exec or setuid.
pub(super) fn drop_capability_bounds(cap_last: u32) -> Outcome {
    for cap in 0..=cap_last as usize {
        check(
            Stage::Capabilities,
            integer_call(libc::SYS_prctl, [libc::PR_CAPBSET_DROP as usize, cap, 0]),
        )?;
    }
    check(
        Stage::Capabilities,
        integer_call(
            libc::SYS_prctl,
            [
                sys::PR_CAP_AMBIENT as usize,
                sys::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
            ],
        ),
    )?;
    let securebits = libc::SECBIT_NOROOT
        | libc::SECBIT_NOROOT_LOCKED
        | libc::SECBIT_NO_SETUID_FIXUP
        | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
        | libc::SECBIT_KEEP_CAPS_LOCKED
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    check(
        Stage::Capabilities,
        integer_call(
            libc::SYS_prctl,
            [libc::PR_SET_SECUREBITS as usize, securebits as usize, 0],
        ),
    )
}

/// Empties the permitted, effective and inheritable sets.
pub(super) fn clear_capabilities() -> isize {
    let header = CapHeader {
        version: sys::LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: a version-3 header and the two data structures it calls for, locals the kernel
    // only reads.
    unsafe {
        raw(
            libc::SYS_capset,
            [
                &header as *const CapHeader as usize,
                data.as_ptr() as usize,
                0,
                0,
                0,
                0,
            ],
        )
    }
}

/// Installs one seccomp program on top of those already installed.
pub(super) fn install_filter(program: &[libc::sock_filter]) -> isize {
    let program = libc::sock_fprog {
        // The launcher compiled it under the kernel's limit of 4096 instructions.
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `program` points at the plan's instructions, which outlive the call; the
    // kernel copies them.
    unsafe {
        raw(
            libc::SYS_seccomp,
            [
                libc::SECCOMP_SET_MODE_FILTER as usize,
                0,
                &program as *const libc::sock_fprog as usize,
                0,
                0,
                0,
            ],
        )
    }
}

pub(super) fn unblock_signals() -> isize {
    let empty: u64 = 0;
    // SAFETY: an empty kernel signal set of the size passed, a local the kernel only reads.
    unsafe {
        raw(
            libc::SYS_rt_sigprocmask,
            [
                libc::SIG_SETMASK as usize,
                &empty as *const u64 as usize,
                0,
                sys::KERNEL_SIGSET_SIZE,
                0,
                0,
            ],
        )
    }
}

/// Executes the program; returns only on failure.
pub(super) fn execute(program: &CStr, args: &Args) -> isize {
    // SAFETY: the program path is NUL-terminated, and `argv` and `envp` are null-terminated
    // arrays of pointers into strings `args` owns.
    unsafe {
        raw(
            libc::SYS_execve,
            [
                program.as_ptr() as usize,
                args.argv.as_ptr() as usize,
                args.envp.as_ptr() as usize,
                0,
                0,
                0,
            ],
        )
    }
}

/// Every handler back to the default, so a signal can never run daemon code on this stack
/// (the mask keeps them blocked until just before `execve` anyway).
pub(super) fn reset_signal_handlers() {
    let default = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for signal in 1..=sys::MAX_SIGNAL {
        if signal == libc::SIGKILL as usize || signal == libc::SIGSTOP as usize {
            continue;
        }
        // SAFETY: `default` is a valid kernel sigaction; failures (for numbers the kernel
        // reserves) leave that handler as it was, which the mask keeps from running.
        unsafe {
            raw(
                libc::SYS_rt_sigaction,
                [
                    signal,
                    &default as *const KernelSigaction as usize,
                    0,
                    sys::KERNEL_SIGSET_SIZE,
                    0,
                    0,
                ],
            );
        }
    }
}

pub(super) fn run_step(step: &Step) -> Result<(), i32> {
    // SAFETY: every pointer is a NUL-terminated string of the plan or a constant.
    let ret = unsafe {
        match step {
            Step::Mkdir(path) => {
                let ret = raw(
                    libc::SYS_mkdirat,
                    [
                        libc::AT_FDCWD as usize,
                        path.as_ptr() as usize,
                        0o755,
                        0,
                        0,
                        0,
                    ],
                );
                if sys::result(ret) == Err(libc::EEXIST) {
                    0
                } else {
                    ret
                }
            }
            Step::Touch(path) => {
                // mknod rather than open(O_CREAT): a file that already exists (inside a
                // directory granted too) is fine as it is, and opening it for writing would
                // be refused.
                let ret = raw(
                    libc::SYS_mknodat,
                    [
                        libc::AT_FDCWD as usize,
                        path.as_ptr() as usize,
                        (libc::S_IFREG | 0o644) as usize,
                        0,
                        0,
                        0,
                    ],
                );
                if sys::result(ret) == Err(libc::EEXIST) {
                    0
                } else {
                    ret
                }
            }
            Step::Symlink { target, link } => raw(
                libc::SYS_symlinkat,
                [
                    target.as_ptr() as usize,
                    libc::AT_FDCWD as usize,
                    link.as_ptr() as usize,
                    0,
                    0,
                    0,
                ],
            ),
            Step::Attach { tree, target } => raw(
                libc::SYS_move_mount,
                [
                    *tree as usize,
                    ptr(EMPTY),
                    libc::AT_FDCWD as usize,
                    target.as_ptr() as usize,
                    sys::MOVE_MOUNT_F_EMPTY_PATH as usize,
                    0,
                ],
            ),
            Step::Mount {
                fstype,
                target,
                flags,
                data,
            } => raw(
                libc::SYS_mount,
                [
                    fstype.as_ptr() as usize,
                    target.as_ptr() as usize,
                    fstype.as_ptr() as usize,
                    *flags as usize,
                    data.as_ptr() as usize,
                    0,
                ],
            ),
            Step::ReadOnly(target) => make_read_only(target.as_bytes_with_nul()),
        }
    };
    sys::result(ret).map(|_| ())
}

pub(super) fn add_inside_rule(ruleset: RawFd, rule: &InsideRule) -> Result<(), i32> {
    // SAFETY: the path is NUL-terminated; the descriptor is closed before returning.
    unsafe {
        let fd = raw(
            libc::SYS_openat,
            [
                libc::AT_FDCWD as usize,
                rule.path.as_ptr() as usize,
                (libc::O_PATH | libc::O_CLOEXEC) as usize,
                0,
                0,
                0,
            ],
        );
        let fd = sys::result(fd)?;
        let attr = LandlockPathBeneathAttr {
            allowed_access: rule.rights,
            parent_fd: fd as i32,
        };
        let ret = raw(
            libc::SYS_landlock_add_rule,
            [
                ruleset as usize,
                sys::LANDLOCK_RULE_PATH_BENEATH as usize,
                &attr as *const LandlockPathBeneathAttr as usize,
                0,
                0,
                0,
            ],
        );
        raw(libc::SYS_close, [fd, 0, 0, 0, 0, 0]);
        sys::result(ret).map(|_| ())
    }
}
